"""Scenario files: a :class:`~pyattacker.world.Scenario` from TOML, JSON or YAML, and back.

The file mirrors the dataclasses, one table per dataclass, keys named like their fields::

    name = "my_provider"            # required, unless `base` names a shipped scenario
    base = "bursty_provider"        # optional: start from it, override what follows
    jobs = 500
    retry = { max_attempts = 3 }    # Retrying settings, over the scenario's policy
    unsuited = { failover = "one pool" }

    [cycle]
    period_s = 60

    [[endpoints]]                   # a list: it replaces the base's endpoints wholesale
    id = "fast"                     # required
    capacity = 4
    latency = { median_s = 0.2 }    # a table: over the defaults (or the base's value)
    rate_limit = { per_window = 300 }

    [[outages]]
    start_s = 60
    duration_s = 30

A table changes only the keys it names (over the base scenario's value when there is one,
else over the dataclass defaults); a list replaces. ``retry`` is a table of
:class:`~pyattacker.retry.Retrying` keywords or a preset name (``"exponential"``). Whole
numbers are accepted where a float is wanted, lists where a tuple is. A key left out that
may be ``None`` is ``None`` when its default is (TOML has no null: use JSON or YAML to
set ``retry_after_s`` to null).

Every mistake is one :class:`~pyattacker.errors.ConfigError` whose ``field`` is the full
path (``endpoints[1].latency.median_s``) and whose message names the file. Nothing here
writes anything.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import re
import tomllib
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

from pyattacker.benchmark._scenarios import get_scenario
from pyattacker.errors import ConfigError
from pyattacker.retry import Retrying, resolve_retry
from pyattacker.world import Scenario

__all__ = ["load_scenario_file", "scenario_from_mapping", "to_mapping"]


def load_scenario_file(path: str | Path) -> Scenario:
    """The scenario in ``path`` (``.toml``, ``.json``, ``.yaml`` or ``.yml``).

    Raises ``ConfigError`` naming the file for an unknown suffix, an unreadable file, bad
    syntax (with line and column), or any mistake :func:`scenario_from_mapping` finds. A
    file-level error has no ``field``; a mistake inside has the path of the key.
    """
    path = Path(path)
    parse = _PARSERS.get(path.suffix.lower())
    if parse is None:
        raise ConfigError(
            f"cannot tell the format of {path} from its suffix {path.suffix or '(none)'!r}",
            hint=f"name it *{', *'.join(_PARSERS)}",
        )
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror or exc}", hint="check the path"
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8: {exc.reason}", hint="save it as UTF-8") from None
    return scenario_from_mapping(parse(text, path), source=str(path))


def scenario_from_mapping(
    data: Mapping[str, Any], *, base: Scenario | None = None, source: str = "the mapping"
) -> Scenario:
    """A validated scenario from plain data (as a file parser returns it).

    ``base`` (or a ``base`` key naming a shipped scenario, which wins) is the starting
    point: a key given replaces the base's field, a table merges into it. Without one,
    ``name`` and ``endpoints`` are required. ``source`` names the data in messages.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{source} must hold one table of Scenario fields, got {_kind(data)}",
            hint='start with a name and [[endpoints]] tables, or base = "bursty_provider"',
        )
    fields = dict(data)
    if "base" in fields:
        base = _named_base(fields.pop("base"), source)
    scenario: Scenario = _Reader(source).build(Scenario, fields, "", base)
    return scenario


def to_mapping(scenario: Scenario) -> dict[str, Any]:
    """Plain data (str, int, float, bool, None, list, dict) that reads back as ``scenario``.

    Every field is written, except ``None`` where ``None`` is the default; an explicit
    ``None`` that is not the default (``retry_after_s``) stays, so such a mapping is JSON
    and YAML but not TOML. Raises ``ConfigError`` for a retry policy whose ``on`` names an
    exception type: a file can only name error classes.
    """
    plain = _plain(scenario, "")
    assert isinstance(plain, dict)
    return plain


# ------------------------------------------------------------------------------ parsing


def _parse_toml(text: str, path: Path) -> Any:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _syntax(path, "TOML", str(exc)) from None


def _parse_json(text: str, path: Path) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _syntax(
            path, "JSON", f"{exc.msg} (at line {exc.lineno}, column {exc.colno})"
        ) from None


def _parse_yaml(text: str, path: Path) -> Any:
    import yaml  # here, not at the top: the benchmark package imports only the stdlib

    try:
        return yaml.load(text, Loader=_yaml_loader())  # a SafeLoader (subclass)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = "" if mark is None else f" (at line {mark.line + 1}, column {mark.column + 1})"
        raise _syntax(path, "YAML", f"{exc.problem or exc.context}{where}") from None
    except yaml.YAMLError as exc:
        raise _syntax(path, "YAML", " ".join(str(exc).split())) from None


@functools.cache
def _yaml_loader() -> Any:
    """PyYAML's ``SafeLoader`` reading booleans and floats as YAML 1.2 does.

    YAML 1.1 reads ``on``/``off``/``yes``/``no`` as booleans, so ``retry: {on: [timeout]}``
    would have a key ``True``, and ``1e3`` as a string; 1.2 reads only ``true``/``false``
    as booleans and ``1e3`` as a float.
    """
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    replaced = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:float"}
    Loader.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag not in replaced]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    Loader.add_implicit_resolver("tag:yaml.org,2002:bool", _YAML_BOOL, list("tTfF"))
    Loader.add_implicit_resolver("tag:yaml.org,2002:float", _YAML_FLOAT, list("-+.0123456789"))
    return Loader


_YAML_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_YAML_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)

_PARSERS: dict[str, Callable[[str, Path], Any]] = {
    ".toml": _parse_toml,
    ".json": _parse_json,
    ".yaml": _parse_yaml,
    ".yml": _parse_yaml,
}


def _syntax(path: Path, language: str, detail: str) -> ConfigError:
    return ConfigError(f"{path} is not valid {language}: {detail}", hint="fix the syntax there")


def _named_base(name: object, source: str) -> Scenario:
    if not isinstance(name, str):
        raise ConfigError(
            f"must be the name of a shipped scenario, got {_kind(name)} (in {source})",
            field="base",
        )
    try:
        return get_scenario(name)
    except ConfigError as exc:
        raise ConfigError(f"{exc.message} (in {source})", field="base", hint=exc.hint) from None


# ----------------------------------------------------------------------------- building


class _Reader:
    """Builds dataclasses from plain data, walking the field types; ``source`` names the
    data in every message."""

    def __init__(self, source: str) -> None:
        self.source = source

    def build(self, cls: type[Any], data: object, path: str, defaults: object) -> Any:
        """``cls`` from the table ``data``, each missing key taken from ``defaults`` (an
        instance of ``cls``, or ``None`` for the class defaults)."""
        if not isinstance(data, Mapping):
            raise self._wrong(path, "a table", data)
        known = {f.name: f for f in dataclasses.fields(cls)}
        self._check_keys(data, known, path)
        hints = get_type_hints(cls)
        values: dict[str, Any] = {}
        for name, spec in known.items():
            at = _join(path, name)
            given = getattr(defaults, name) if defaults is not None else _default(spec)
            if name in data:
                values[name] = self.convert(hints[name], data[name], at, given)
            elif defaults is not None:
                values[name] = given
            elif given is dataclasses.MISSING:
                raise ConfigError(
                    f"required, but missing (in {self.source})",
                    field=at,
                    hint=f"add `{name}` to {path or 'the top level'}",
                )
        try:
            return cls(**values)
        except ConfigError as exc:
            raise self._relocated(exc, known, path) from None

    def _check_keys(self, data: Mapping[Any, Any], known: Mapping[str, object], path: str) -> None:
        for key in data:
            if key not in known:
                raise ConfigError(
                    f"unknown key {key!r} (in {self.source})",
                    field=_join(path, str(key)),
                    hint=f"known keys: {', '.join(known)}",
                )

    def convert(self, hint: Any, value: object, path: str, default: object) -> Any:
        """``value`` as the type ``hint`` wants (``default``: what a table merges into)."""
        origin, args = get_origin(hint), get_args(hint)
        if origin in (Union, types.UnionType) and type(None) in args:
            if value is None:
                return None
            (inner,) = (a for a in args if a is not type(None))
            return self.convert(inner, value, path, default)
        if hint is Retrying:
            return self._retry(value, path, default)
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            return self.build(hint, value, path, default if isinstance(default, hint) else None)
        if origin is tuple:
            return self._tuple(args[0], value, path)
        if origin is Mapping:
            return self._table(args[1], value, path)
        return self._scalar(hint, value, path)

    def _scalar(self, hint: Any, value: object, path: str) -> Any:
        if hint is float:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise self._wrong(path, "a number", value)
            return _as_float(value)
        if hint is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise self._wrong(path, "a whole number", value)
            return value
        if hint is str or hint is bool:
            if not isinstance(value, hint):
                raise self._wrong(path, "a string" if hint is str else "true or false", value)
            return value
        raise TypeError(f"no reader for {hint!r} at {path}")  # a new field type: our bug

    def _tuple(self, item: Any, value: object, path: str) -> tuple[Any, ...]:
        if not isinstance(value, list | tuple):
            raise self._wrong(path, "a list", value)
        return tuple(self.convert(item, v, f"{path}[{i}]", None) for i, v in enumerate(value))

    def _table(self, item: Any, value: object, path: str) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise self._wrong(path, "a table", value)
        out = {}
        for key, v in value.items():
            if not isinstance(key, str):
                raise self._wrong(f"{path}.{key}", "a string key", key)
            out[key] = self.convert(item, v, f"{path}.{key}", None)
        return out

    def _retry(self, value: object, path: str, default: object) -> Retrying:
        names = {f.name: f for f in dataclasses.fields(Retrying)}
        spec: Mapping[str, Any] | str
        if isinstance(value, Mapping):
            self._check_keys(value, names, path)
            spec = dict(value)
            if isinstance(default, Retrying):
                spec = {name: getattr(default, name) for name in names} | spec
        elif isinstance(value, str):
            spec = value
        else:
            raise self._wrong(path, "a table of Retrying settings or a preset name", value)
        try:
            return resolve_retry(spec)
        except ConfigError as exc:
            raise self._relocated(exc, names, path) from None

    def _relocated(self, exc: ConfigError, names: Mapping[str, object], path: str) -> ConfigError:
        """``exc`` from a dataclass at ``path``, its field made the full path.

        A dataclass names its own field bare (``capacity``) or under its kind
        (``latency.median_s``); the scenario itself already names full paths.
        """
        field = exc.field or ""
        if path:
            tail = field.rsplit(".", 1)[-1]
            field = _join(path, tail) if tail in names else path
        return ConfigError(f"{exc.message} (in {self.source})", field=field or None, hint=exc.hint)

    def _wrong(self, path: str, wanted: str, value: object) -> ConfigError:
        shown = "" if isinstance(value, Mapping | list) else f" {value!r}"
        return ConfigError(
            f"must be {wanted}, got {_kind(value)}{shown} (in {self.source})", field=path or None
        )


def _default(spec: dataclasses.Field[Any]) -> object:
    if spec.default is not dataclasses.MISSING:
        return spec.default
    if spec.default_factory is not dataclasses.MISSING:
        return spec.default_factory()
    return dataclasses.MISSING


def _as_float(value: int | float) -> float | int:
    try:
        return float(value)
    except OverflowError:
        return value  # out of any range: the dataclass's own check says so


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


_KINDS: dict[type, str] = {
    bool: "true/false",
    int: "a whole number",
    float: "a number",
    str: "a string",
    list: "a list",
    dict: "a table",
    type(None): "null",
}


def _kind(value: object) -> str:
    return _KINDS.get(type(value), type(value).__name__)


# ------------------------------------------------------------------------------ writing


def _plain(value: object, path: str) -> object:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, type):
        raise ConfigError(
            f"{value.__qualname__} is an exception type, which a file cannot name",
            field=path,
            hint="name an error class instead, e.g. 'timeout'",
        )
    if dataclasses.is_dataclass(value):
        out: dict[str, object] = {}
        for spec in dataclasses.fields(value):
            item = getattr(value, spec.name)
            if item is None and spec.default is None:
                continue
            out[spec.name] = _plain(item, _join(path, spec.name))
        return out
    if isinstance(value, tuple | list):
        return [_plain(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        return {str(k): _plain(v, _join(path, str(k))) for k, v in value.items()}
    return value
