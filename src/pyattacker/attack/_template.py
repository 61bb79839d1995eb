"""Templated request parts: ``{field}`` in a URL, a header value or a body, filled from a row.

A field is ``{`` + a name (a letter or ``_``, then letters, digits, ``_``) + ``}``; every
other brace is text, so a JSON body (``{"id": {id}}``) needs no escaping. ``{key}`` is
never a field: it belongs to ``--key`` (see ``KEY_PLACEHOLDER``). A template is split into
its literal parts and field names once; filling it is a join, the only per-request cost.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

__all__ = ["FIELD", "Template", "as_text", "url_text"]

FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_RESERVED = frozenset({"key"})  # --key's placeholder, filled per target, not per row


def as_text(value: Any) -> str:
    """A row's value as text: a string as is, anything else as JSON (``1``, ``true``,
    ``null``, ``[1, 2]``)."""
    kind = type(value)
    if kind is str:
        return value  # type: ignore[no-any-return]
    if kind is int:  # the usual id: str() is its JSON, at a fraction of json.dumps's cost
        return str(value)
    return json.dumps(value)


def url_text(value: Any) -> str:
    """A row's value in a URL: :func:`as_text`, percent-encoded (``/`` too)."""
    text = as_text(value)
    if text.isascii() and text.isalnum():  # nothing to encode: skip quote()'s cost
        return text
    return quote(text, safe="")


class Template:
    """``text`` split into literals and field names; :meth:`fill` puts a row's values in.

    ``fields`` are the names it uses, in order of first use (empty: nothing to fill).
    """

    __slots__ = ("_parts", "fields", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        pieces = FIELD.split(text)  # literal, name, literal, name, ..., literal
        parts: list[str] = [pieces[0]]
        for i in range(1, len(pieces), 2):
            if pieces[i] in _RESERVED:  # left in the text as it was
                parts[-1] += "{" + pieces[i] + "}" + pieces[i + 1]
            else:
                parts += [pieces[i], pieces[i + 1]]
        self._parts = tuple(parts)
        self.fields = tuple(dict.fromkeys(parts[1::2]))

    def __repr__(self) -> str:
        return f"Template({self.text!r})"

    def fill(self, row: Mapping[str, Any], convert: Callable[[Any], str] = as_text) -> str:
        """The text with each field replaced by ``convert(row[field])``.

        Raises ``KeyError`` for a field ``row`` lacks (rows are checked up front, see
        :func:`missing`, so an attack never meets one)."""
        parts = self._parts
        out = [parts[0]]
        for i in range(1, len(parts), 2):
            out.append(convert(row[parts[i]]))
            out.append(parts[i + 1])
        return "".join(out)

    def missing(self, row: Mapping[str, Any]) -> str | None:
        """The first field ``row`` lacks, or None."""
        return next((name for name in self.fields if name not in row), None)
