"""Reading a config file: YAML, TOML or JSON by its suffix, then ``${VAR}`` substitution.

- ``.yaml``/``.yml`` (PyYAML's safe loader), ``.toml`` (``tomllib``), ``.json``; anything
  else, a file that does not parse, or a top level that is not a mapping is a
  ``ConfigError`` on ``-c``.
- YAML 1.1 reads ``on``, ``off``, ``yes`` and ``no`` as booleans, so a key written ``on:``
  arrives as ``True``: every key that is not a string is refused, naming where it is and
  what YAML did to it (quote the key: ``"on":``).
- In string values (never keys), ``${VAR}`` is the environment variable ``VAR`` and
  ``${VAR:-default}`` the same with a default when it is unset or empty; ``$${`` is a
  literal ``${``. An unset variable without a default becomes ``""`` and is reported (a
  warning), or, with ``strict_env``, refused naming the field.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pyattacker.errors import ConfigError

__all__ = ["SUFFIXES", "Substituted", "read_config", "substitute"]

SUFFIXES = {".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".json": "json"}
_VAR = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$\{[^}]*\}?")
_YAML_BOOLEANS = "on/off, yes/no, y/n and true/false"


def read_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The file's top-level mapping, every key checked to be a string."""
    where = Path(path)
    kind = SUFFIXES.get(where.suffix.lower())
    if kind is None:
        raise ConfigError(
            f"{where.name}: cannot tell the format from the suffix {where.suffix!r}",
            field="-c",
            hint="name the file .yaml, .yml, .toml or .json",
        )
    if not where.is_file():
        what = "is a directory" if where.is_dir() else "does not exist"
        raise ConfigError(f"{where} {what}", field="-c", hint="pass the config file's path")
    text = where.read_text(encoding="utf-8")
    data = _parse(text, kind, where)
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{where.name} holds a {type(data).__name__}, not a mapping of sections",
            field="-c",
            hint="the top level has the sections run, pools, pipeline, source",
        )
    _check_keys(data, "")
    return dict(data)


def _parse(text: str, kind: str, where: Path) -> Any:
    try:
        if kind == "yaml":
            return yaml.load(text, Loader=_UniqueKeys) or {}  # a SafeLoader: no Python objects
        if kind == "toml":
            return tomllib.loads(text)
        return json.loads(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError, ValueError) as exc:
        raise ConfigError(
            f"{where.name} is not valid {kind.upper()}: {_one_line(exc)}",
            field="-c",
            hint="fix the syntax at the place named",
        ) from None


class _UniqueKeys(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (PyYAML keeps the
    last silently, so a second `run:` section would erase the first)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, str | bool | int | float) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice (first on line {seen[key]})",
                    key_node.start_mark,
                )  # fmt: skip
            if isinstance(key, str | bool | int | float):
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _one_line(exc: Exception) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if isinstance(exc, yaml.MarkedYAMLError) and mark is not None and problem:
        return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
    return " ".join(str(exc).split())


def _check_keys(value: Any, path: str) -> None:
    """Refuse keys that are not strings (the YAML 1.1 boolean trap, numbers)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, bool):
                raise ConfigError(
                    f"a key was read as the boolean {str(key).lower()}: YAML 1.1 reads "
                    f"{_YAML_BOOLEANS} as booleans, so `on:` or `yes:` is not the word",
                    field=f"{path}.{str(key).lower()}" if path else str(key).lower(),
                    hint='quote the key ("on": ...) or use another name',
                )
            if not isinstance(key, str):
                raise ConfigError(
                    f"the key {key!r} is a {type(key).__name__}, not a name",
                    field=f"{path}.{key}".lstrip("."),
                    hint="quote it to make it a string",
                )
            _check_keys(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for n, item in enumerate(value):
            _check_keys(item, f"{path}[{n}]")


@dataclass
class Substituted:
    """A config after ``${VAR}`` substitution, and the variables it found unset."""

    data: Any
    unset: list[tuple[str, str]] = field(default_factory=list)  # (field path, VAR)


def substitute(
    data: Any, environ: Mapping[str, str], *, strict_env: bool, path: str = ""
) -> Substituted:
    """``data`` with ``${VAR}`` and ``${VAR:-default}`` filled in its string values.

    Raises ``ConfigError`` naming the field for a malformed ``${...}``, and with
    ``strict_env`` for the first unset variable that has no default."""
    found = Substituted(None)
    found.data = _walk(data, environ, path, found)
    if strict_env and found.unset:
        where, name = found.unset[0]
        raise ConfigError(
            f"${{{name}}} is not set in the environment",
            field=where,
            hint=f"export {name}=..., give a default (${{{name}:-value}}), or drop --strict-env",
        )
    return found


def _walk(value: Any, environ: Mapping[str, str], path: str, found: Substituted) -> Any:
    if isinstance(value, str):
        return _fill(value, environ, path, found) if "$" in value else value
    if isinstance(value, Mapping):
        return {k: _walk(v, environ, f"{path}.{k}" if path else k, found) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, environ, f"{path}[{n}]", found) for n, v in enumerate(value)]
    return value


def _fill(text: str, environ: Mapping[str, str], path: str, found: Substituted) -> str:
    def one(match: re.Match[str]) -> str:
        whole = match.group(0)
        if whole == "$${":
            return "${"
        name, default = match.group(1), match.group(2)
        if name is None:
            raise ConfigError(
                f"{whole!r} is not a variable reference",
                field=path,
                hint="write ${NAME} or ${NAME:-default} (NAME: letters, digits, _); $${ for ${",
            )
        value = environ.get(name, "")
        if value:
            return value
        if default is not None:
            return default
        if name not in environ:
            found.unset.append((path, name))
        return ""

    return _VAR.sub(one, text)
