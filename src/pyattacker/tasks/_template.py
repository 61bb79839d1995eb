"""``Template``: text with ``{field}`` slots filled from a row.

A slot names a field of the row (``{question}``) or a path into it (``{ask.text}``: the
``text`` of the mapping under ``ask``; a list is indexed by a number, ``{choices.0}``).
``{{`` and ``}}`` are literal braces. ``{input}`` is the whole value when the value is not
a mapping (or has no ``input`` field). Strings are put in as they are; other values as
compact JSON.

The text is parsed once, when the task is built, so a malformed template is a
``ConfigError`` before anything runs; a field missing from a row fails that row's attempt
with :class:`MissingField`, which is fatal (the same row fails the same way every time).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pyattacker.errors import ConfigError, FatalError

__all__ = ["MissingField", "Template", "render_value"]

_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_PATH = re.compile(r"^[A-Za-z_][\w-]*(\.[\w-]+)*$")


class MissingField(FatalError):
    """A template names a field the row does not have; never retried."""


class Template:
    """A parsed template; :meth:`render` fills it. ``fields`` are its slots, in order."""

    __slots__ = ("_parts", "fields", "text")

    def __init__(self, text: object, *, field: str = "template") -> None:
        if not isinstance(text, str):
            raise ConfigError(f"a template is a string, got {type(text).__name__}", field=field)
        self.text = text
        self._parts: list[str | tuple[str, ...]] = []
        last = 0
        for match in _TOKEN.finditer(text):
            self._parts.append(text[last : match.start()])
            last = match.end()
            token = match.group(0)
            if token in ("{{", "}}"):
                self._parts.append(token[0])
                continue
            name = match.group(1)
            if name is None or not _PATH.match(name.strip()):
                raise ConfigError(
                    f"bad slot {token!r} at character {match.start()} of {_short(text)}",
                    field=field,
                    hint="a slot is {field} or {field.sub}; write {{ and }} for braces",
                )
            self._parts.append(tuple(name.strip().split(".")))
        self._parts.append(text[last:])
        self.fields = tuple(".".join(p) for p in self._parts if isinstance(p, tuple))

    def render(self, value: Any) -> str:
        """The text with every slot filled from ``value``; :class:`MissingField` if one
        is not there."""
        out: list[str] = []
        for part in self._parts:
            out.append(part if isinstance(part, str) else render_value(_lookup(value, part)))
        return "".join(out)

    def __repr__(self) -> str:
        return f"Template({_short(self.text)})"


def render_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _lookup(value: Any, path: tuple[str, ...]) -> Any:
    if path == ("input",) and not (isinstance(value, Mapping) and "input" in value):
        return value
    found = value
    for depth, name in enumerate(path):
        try:
            found = _step(found, name)
        except (KeyError, IndexError, ValueError, TypeError):
            where = ".".join(path[: depth + 1])
            have = sorted(found) if isinstance(found, Mapping) else type(found).__name__
            raise MissingField(
                f"template field {where!r} is not in the row (it has {have})"
            ) from None
    return found


def _step(value: Any, name: str) -> Any:
    if isinstance(value, Mapping):
        return value[name]
    if isinstance(value, Sequence) and not isinstance(value, str):
        return value[int(name)]
    raise TypeError(name)


def _short(text: str) -> str:
    return repr(text) if len(text) <= 60 else repr(text[:57] + "...")
