"""Scenario files: a :class:`~pyattacker.world.Scenario` from TOML, JSON or YAML, and back.

The file mirrors the dataclasses, one table per dataclass, keys named like their fields::

    name = "my_provider"            # required without `base`; with it, see below
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

A file with ``base`` and no ``name`` is named after itself and its base
(``my_provider.toml`` -> ``my_provider (from bursty_provider)``): its endpoints may differ
from the shipped scenario's, so it must not be reported under the shipped name. A JSON
report of ``pyattacker bench`` is read too: its ``scenario.definition`` is the scenario it
ran (that is what makes a run repeatable from its report).

A key given twice in one table is a mistake in every format (TOML's parser says so; for
JSON and YAML this module does). YAML is read with YAML 1.2's core schema, not PyYAML's
1.1 defaults: ``true``/``false`` only, ``010`` is ten (decimal; ``0o``/``0x`` prefixes for
octal and hex), no sexagesimal ``1:30``, no timestamps.

Every mistake is one :class:`~pyattacker.errors.ConfigError` whose ``field`` is the full
path (``endpoints[1].latency.median_s``) and whose message names the file. Nothing here
writes anything.

Why not pydantic (the usual choice for validating configuration): the world's dataclasses
already check every value in ``__post_init__`` with a ``ConfigError`` naming the field, so
a pydantic model would state each rule a second time, in a schema that could drift. This
module only walks the dataclasses' type hints (tables into dataclasses, lists into
tuples) and prefixes the field a dataclass names with the path that led to it; the world
package stays stdlib-only, so the benchmark needs nothing beyond the standard library.
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
    """The scenario in ``path`` (``.toml``, ``.json``, ``.yaml`` or ``.yml``), or the one a
    JSON report of ``pyattacker bench`` ran (its ``scenario.definition``).

    Raises ``ConfigError`` naming the file for an unknown suffix, an unreadable file, bad
    syntax (with line and column), nesting too deep to read, or any mistake
    :func:`scenario_from_mapping` finds. A file-level error has no ``field``; a mistake
    inside (a duplicate key too) has the path of the key.
    """
    path = Path(path)
    parse = _PARSERS.get(path.suffix.lower())
    if parse is None:
        raise ConfigError(
            f"cannot tell the format of {path} from its suffix {path.suffix or '(none)'!r}",
            hint=f"name it *{', *'.join(_PARSERS)}",
        )
    text = _read(path)
    try:
        data, source = _report_definition(parse(text, path), path)
        return scenario_from_mapping(_named_after(data, path), source=source)
    except RecursionError:  # the parsers recurse per level: `[` x 200000 exhausts the stack
        raise ConfigError(
            f"{path} is nested too deeply to read", hint="a scenario is a few levels deep"
        ) from None


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror or exc}", hint="check the path"
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8: {exc.reason}", hint="save it as UTF-8") from None


def _report_definition(data: Any, path: Path) -> tuple[Any, str]:
    """``data`` and how to name it, or, when ``data`` is a bench report (a table whose
    ``scenario`` holds a ``definition``), that definition, named as such."""
    scenario = data.get("scenario") if isinstance(data, Mapping) else None
    if not isinstance(scenario, Mapping) or "definition" not in scenario:
        return data, str(path)
    if scenario["definition"] is None:
        raise ConfigError(
            f"the report {path} has no scenario definition: its retry policy names an "
            "exception type, which a file cannot",
            hint="write the scenario as a file, naming error classes",
        )
    return scenario["definition"], f"{path}, scenario.definition"


def _named_after(data: Any, path: Path) -> Any:
    """A file that starts from a shipped scenario and names none of its own is called
    after itself: ``mine.toml`` with ``base = "bursty_provider"`` is
    ``mine (from bursty_provider)``, never ``bursty_provider`` (its endpoints may differ)."""
    if not isinstance(data, Mapping) or "name" in data or not isinstance(data.get("base"), str):
        return data
    return {**data, "name": f"{path.stem} (from {data['base']})"}


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
        return _unique_keys(json.loads(text, object_pairs_hook=_Pairs), "")
    except json.JSONDecodeError as exc:
        raise _syntax(
            path, "JSON", f"{exc.msg} (at line {exc.lineno}, column {exc.colno})"
        ) from None
    except _DuplicateKey as exc:
        raise exc.in_file(path) from None


class _Pairs(list[tuple[str, Any]]):
    """A JSON object as parsed: its pairs, before its keys are known to be unique."""


def _unique_keys(value: Any, path: str) -> Any:
    """``value`` with every ``_Pairs`` made a dict; ``_DuplicateKey`` at a repeated key."""
    if isinstance(value, _Pairs):
        table: dict[str, Any] = {}
        for key, item in value:
            at = _join(path, key)
            if key in table:
                raise _DuplicateKey(key, at)
            table[key] = _unique_keys(item, at)
        return table
    if isinstance(value, list):
        return [_unique_keys(item, f"{path}[{i}]") for i, item in enumerate(value)]
    return value


class _DuplicateKey(Exception):
    """A key given twice in one table, at ``field``; ``line`` (1-based) when known."""

    def __init__(self, key: str, field: str, line: int | None = None) -> None:
        super().__init__(key, field, line)
        self.key, self.field, self.line = key, field, line

    def in_file(self, path: Path) -> ConfigError:
        where = "" if self.line is None else f", line {self.line}"
        return ConfigError(
            f"duplicate key {self.key!r} (in {path}{where})",
            field=self.field,
            hint="give each key once per table",
        )


def _parse_yaml(text: str, path: Path) -> Any:
    import yaml  # here, not at the top: the benchmark package imports only the stdlib

    try:
        return yaml.load(text, Loader=_yaml_loader())  # a SafeLoader (subclass)
    except _DuplicateKey as exc:
        raise exc.in_file(path) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = "" if mark is None else f" (at line {mark.line + 1}, column {mark.column + 1})"
        raise _syntax(path, "YAML", f"{exc.problem or exc.context}{where}") from None
    except yaml.YAMLError as exc:
        raise _syntax(path, "YAML", " ".join(str(exc).split())) from None


@functools.cache
def _yaml_loader() -> Any:
    """PyYAML's ``SafeLoader`` reading plain scalars as YAML 1.2's core schema does, and
    refusing a key given twice in one mapping (``_DuplicateKey``).

    YAML 1.1 reads ``on``/``off``/``yes``/``no`` as booleans, so ``retry: {on: [timeout]}``
    would have a key ``True``; ``1e3`` as a string; ``010`` as eight and ``1:30`` as
    ninety; ``2024-01-01`` as a date. 1.2 reads only ``true``/``false`` as booleans,
    ``1e3`` as a float, ``010`` as ten, and the other two as strings. PyYAML itself keeps
    the last of two equal keys.
    """
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_document(self, node: Any) -> Any:
            _check_yaml_keys(node, "", set())
            return super().construct_document(node)

        def construct_yaml_int(self, node: Any) -> int:
            text = str(self.construct_scalar(node))
            if not _YAML_INT.match(text):
                raise yaml.constructor.ConstructorError(
                    None, None, f"{text!r} is not a YAML 1.2 integer", node.start_mark
                )
            return int(text, 0) if text[:2] in ("0o", "0x") else int(text, 10)

    replaced = {f"tag:yaml.org,2002:{t}" for t in ("bool", "int", "float", "timestamp")}
    Loader.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag not in replaced]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    Loader.add_implicit_resolver("tag:yaml.org,2002:bool", _YAML_BOOL, list("tTfF"))
    # int before float: a resolver list is tried in order, and the float pattern matches 10
    Loader.add_implicit_resolver("tag:yaml.org,2002:int", _YAML_INT, list("-+0123456789"))
    Loader.add_implicit_resolver("tag:yaml.org,2002:float", _YAML_FLOAT, list("-+.0123456789"))
    Loader.add_constructor("tag:yaml.org,2002:int", Loader.construct_yaml_int)
    return Loader


def _check_yaml_keys(node: Any, path: str, seen: set[int]) -> None:
    """``_DuplicateKey`` at the first plain key given twice in one mapping of the node
    graph (a ``<<`` merge may repeat a key: that is what merging is for). ``seen`` holds
    the nodes visited, so an alias is walked once and a recursive one ends."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if node.id == "sequence":
        for index, item in enumerate(node.value):
            _check_yaml_keys(item, f"{path}[{index}]", seen)
    elif node.id == "mapping":
        keys: set[tuple[str, str]] = set()
        for key, value in node.value:
            at = _join(path, str(key.value) if key.id == "scalar" else "?")
            if key.id == "scalar" and key.tag != "tag:yaml.org,2002:merge":
                if (key.tag, key.value) in keys:
                    raise _DuplicateKey(key.value, at, key.start_mark.line + 1)
                keys.add((key.tag, key.value))
            _check_yaml_keys(value, at, seen)


_YAML_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_YAML_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
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
