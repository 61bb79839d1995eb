"""Reading a mix's lines: a targets file (JSON Lines or a plain-text format), or a list of
objects (a plan file's inline ``targets``).

JSON Lines, one request per line (blank lines and lines starting with ``#`` skipped)::

    {"method": "GET", "url": "/users/1", "weight": 3, "name": "user"}
    {"method": "POST", "url": "/orders", "headers": {"Content-Type": "application/json"},
     "body": {"item": 7}, "name": "order"}

Keys: ``url`` (required: a path, or an absolute URL on the attack's host), ``method``,
``headers`` (an object, or a list of ``"Name: value"``), ``body`` (a string, or any other
JSON value sent as compact JSON) or ``body_file`` (a path, relative to the targets file),
``weight`` (a number > 0, default 1), ``name`` (default ``METHOD path``).

The text format (any file whose first line starts with neither ``{`` nor ``[``), as
vegeta's: each request a ``METHOD URL`` line, then ``Name: value`` header lines, then an
optional ``@FILE`` body line, ended by a blank line or the next ``METHOD URL``; ``# name:
NAME`` and ``# weight: W`` lines set those; other ``#`` lines are comments.

Every mistake is a ConfigError naming the file, the line and the key (exit 2 from the
CLI), raised before any traffic.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pyattacker._inputs import MiB, loads, read_bounded
from pyattacker.attack._mix import MixLine
from pyattacker.attack._plan import METHODS
from pyattacker.errors import ConfigError

__all__ = ["KEYS", "TARGETS_LIMIT", "line_from_object", "read_targets"]

KEYS = ("method", "url", "headers", "body", "body_file", "weight", "name")
TARGETS_LIMIT = 64 * MiB
BODY_LIMIT = 64 * MiB  # as --body's
_FIELD = "--targets"


def read_targets(path: str) -> tuple[MixLine, ...]:
    """The lines of the targets file at ``path`` (JSONL or text, see the module doc)."""
    raw = read_bounded(path, _FIELD, TARGETS_LIMIT)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 ({exc.reason})", field=_FIELD) from None
    base = Path(path).parent
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    jsonl = first.startswith(("{", "["))  # (a JSON array is a line that is no object)
    lines = _jsonl(text, path, base) if jsonl else _text(text, path, base)
    if not lines:
        raise ConfigError(f"{path}: no requests in the file", field=_FIELD,
                          hint='e.g. {"method": "GET", "url": "/"}')  # fmt: skip
    return tuple(lines)


def _jsonl(text: str, path: str, base: Path) -> list[MixLine]:
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{path} line {number}"
        try:
            value = loads(line, _FIELD)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where}: not JSON ({exc.msg})", field=_FIELD) from None
        lines.append(line_from_object(value, where, base))
    return lines


def line_from_object(value: Any, where: str, base: Path) -> MixLine:
    """One request from a JSON object (a JSONL line, a plan file's inline target)."""
    if not isinstance(value, Mapping):
        raise _bad(where, None, f"a request must be an object, got {type(value).__name__}")
    for key in value:
        if key not in KEYS:
            close = difflib.get_close_matches(str(key), KEYS, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"keys: {', '.join(KEYS)}"
            raise _bad(where, key, "unknown key", hint)
    url = value.get("url")
    if url is not None and not isinstance(url, str):
        raise _bad(where, "url", f"must be a string, got {type(url).__name__}",
                   'e.g. "/users/1" or an absolute URL')  # fmt: skip
    if url is None or not url.strip():
        raise _bad(where, "url", "required: a path (/users/1) or an absolute URL")
    if "body" in value and "body_file" in value:
        raise _bad(where, "body_file", "give body or body_file, not both")
    headers = _headers(value.get("headers"), where)
    if value.get("body") is not None and not isinstance(value["body"], str):
        headers = _json_typed(headers)
    return MixLine(
        url=_url(url.strip(), where),
        method=_method(value.get("method"), where),
        headers=headers,
        body=_body(value, where, base),
        weight=_weight(value.get("weight", 1), where),
        name=_name(value.get("name"), where),
        where=where,
        body_file=str(base / value["body_file"]) if "body_file" in value else None,
    )


def _bad(where: str, key: str | None, message: str, hint: str | None = None) -> ConfigError:
    about = f"key {key!r}: " if key is not None else ""
    return ConfigError(f"{where}: {about}{message}", field=_FIELD, hint=hint)


def _url(url: str, where: str) -> str:
    if url.startswith("/") or url.lower().startswith(("http://", "https://")):
        if any(c.isspace() for c in url):
            raise _bad(where, "url", f"{url!r} has whitespace", "percent-encode it (%20)")
        return url
    raise _bad(where, "url", f"{url!r} is neither a path nor an http(s) URL", "e.g. /users/1")


def _method(method: Any, where: str) -> str | None:
    if method is None:
        return None
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise _bad(where, "method", f"unknown method {method!r}", f"one of {', '.join(METHODS)}")
    return method.upper()


def _headers(headers: Any, where: str) -> tuple[tuple[str, str], ...]:
    if headers is None:
        return ()
    if isinstance(headers, Mapping):
        pairs = list(headers.items())
    elif isinstance(headers, list) and all(isinstance(h, str) for h in headers):
        pairs = [tuple(p.strip() for p in h.partition(":")[::2]) for h in headers]
    else:
        raise _bad(where, "headers", 'an object {"Name": "value"} or a list of "Name: value"')
    out = []
    for name, value in pairs:
        if not isinstance(name, str) or not name or any(c in name for c in " \t\r\n:"):
            raise _bad(where, "headers", f"bad header name {name!r}")
        if not isinstance(value, str) or "\r" in value or "\n" in value:
            raise _bad(where, "headers", f"header {name!r}: a value is a string on one line")
        out.append((name, value.strip()))
    return tuple(out)


def _json_typed(headers: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """A body given as a JSON value is sent as JSON: say so, unless the line says what it is."""
    if any(name.lower() == "content-type" for name, _ in headers):
        return headers
    return (*headers, ("Content-Type", "application/json"))


def _body(value: Mapping[str, Any], where: str, base: Path) -> bytes | None:
    if "body_file" in value:
        name = value["body_file"]
        if not isinstance(name, str) or not name:
            raise _bad(where, "body_file", "a file name")
        try:
            return read_bounded(base / name, _FIELD, BODY_LIMIT)
        except ConfigError as exc:
            raise _bad(where, "body_file", exc.message) from None
    if "body" not in value or value["body"] is None:
        return None
    body = value["body"]
    if isinstance(body, str):
        return body.encode()
    return json.dumps(body, separators=(",", ":")).encode()


def _weight(weight: Any, where: str) -> float:
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        raise _bad(where, "weight", f"must be a number > 0, got {weight!r}")
    if not 0 < weight < float("inf"):
        raise _bad(where, "weight", f"must be a number > 0, got {weight!r}")
    return float(weight)


def _name(name: Any, where: str) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise _bad(where, "name", "a non-empty string of at most 200 characters")
    return name.strip()


def _text(text: str, path: str, base: Path) -> list[MixLine]:
    """The plain-text format: blocks of ``METHOD URL`` / headers / ``@FILE``, each ended by
    a blank line or by the next ``METHOD URL`` line (as vegeta's files run on); ``#``
    lines just before a ``METHOD URL`` line belong to the request it starts."""
    lines: list[MixLine] = []
    block: list[tuple[int, str]] = []  # the request being read, '#' lines included
    comments: list[tuple[int, str]] = []  # '#' lines not yet known to be whose
    for number, raw in enumerate([*text.splitlines(), ""], 1):
        line = raw.strip()
        if line.startswith("#"):
            comments.append((number, line))
            continue
        if not line or _starts_request(line):
            if not line:
                block += comments  # a blank line: the comments above it were this request's
                comments = []
            if any(not kept.startswith("#") for _, kept in block):
                lines.append(_text_block(block, path, base))
            block = []  # (a paragraph of comments alone is no request)
        if line:
            block += [*comments, (number, line)]
            comments = []
    return lines


def _starts_request(line: str) -> bool:
    """``METHOD URL``: an upper-case word and a space before any colon (a header's name
    has no space: ``GET http://h/`` is never a header)."""
    word, space, _ = line.partition(" ")
    return bool(space) and word.isalpha() and word.isupper() and ":" not in word


def _text_block(block: Sequence[tuple[int, str]], path: str, base: Path) -> MixLine:
    found: dict[str, Any] = {}
    headers: list[str] = []
    start = None
    for number, line in block:
        where = f"{path} line {number}"
        if line.startswith("#"):
            key, sep, value = line[1:].partition(":")
            if sep and key.strip() in ("name", "weight"):
                found[key.strip()] = _text_value(key.strip(), value.strip(), where)
        elif start is None:
            method, _, url = line.partition(" ")
            found.update(method=method, url=url.strip())
            start = where
        elif line.startswith("@"):
            found["body_file"] = line[1:].strip()
        elif "body_file" in found:
            raise _bad(
                where,
                "body_file",
                "the @FILE line ends a request",
                "add a blank line, or start the next request with METHOD URL",
            )
        else:
            headers.append(line)
    if start is None:
        raise _bad(f"{path} line {block[0][0]}", "url", "a request starts with METHOD URL")
    if headers:
        found["headers"] = headers
    return line_from_object(found, start, base)


def _text_value(key: str, value: str, where: str) -> Any:
    if key == "name":
        return value
    try:
        return float(value)
    except ValueError:
        raise _bad(where, "weight", f"must be a number > 0, got {value!r}") from None
