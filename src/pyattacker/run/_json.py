"""Canonical JSON and content digests: the vocabulary every codec and the Runner share.

``canonical_json`` makes equal values give equal bytes (sorted keys, no spaces, UTF-8, no
NaN); ``json_problem`` names what keeps a value from being that (a non-``str`` key, NaN,
a type JSON does not have) with its path; ``digest``/``artifact_digest`` address bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from pyattacker.errors import CodecError

__all__ = [
    "CANONICAL",
    "FIX",
    "MAX_DEPTH",
    "artifact_digest",
    "canonical_json",
    "digest",
    "is_jsonable",
    "json_problem",
    "loads",
    "type_name",
]

FIX = (
    "return JSON-able data, a dataclass or bytes, "
    "or register a codec with pyattacker.register_codec"
)
#: Deeper than this is refused: it is either a mistake or a value that refers to itself.
MAX_DEPTH = 200


def digest(data: bytes) -> str:
    """The content address of ``data``: BLAKE2b with a 16-byte digest, as 32 hex digits.

    BLAKE2b is faster than SHA-256 in CPython and needs no extra package; 128 bits make an
    accidental collision among the artifacts of one store (billions at most) negligible.
    It is not meant to resist someone crafting collisions on purpose.
    """
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def artifact_digest(codec: str, data: bytes) -> str:
    """The content address of ``data`` as decoded by ``codec``.

    The codec name is part of the address because the same bytes can mean two values:
    ``b'"a"'`` stored by the ``bytes`` codec is not the string ``"a"`` stored by ``json``.
    """
    name = codec.encode("utf-8")
    return digest(len(name).to_bytes(4, "big") + name + data)


# One encoder for every call: `json.dumps` with options builds a new one each time.
CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def canonical_json(value: Any) -> bytes:
    """``value`` as canonical JSON bytes: sorted keys, no spaces, UTF-8, no NaN.

    Raises ``TypeError``/``ValueError`` like ``json.dumps`` for what JSON cannot hold; it
    does not refuse non-``str`` keys (use :func:`is_jsonable` first for that).
    """
    text = CANONICAL.encode(value)
    # "surrogatepass": a lone surrogate in a str must round-trip, not crash the run.
    return text.encode("utf-8", "surrogatepass")


def is_jsonable(value: Any) -> bool:
    """Whether the ``json`` codec takes ``value`` as it is (see the module docstring)."""
    return _json_problem(value, "value", 0) is None


def json_problem(value: Any, where: str = "value") -> str | None:
    """What keeps ``value`` from being canonical JSON (``where[0]['k'] is a set``), if any."""
    return _json_problem(value, where, 0)


def _json_problem(value: Any, where: str, depth: int) -> str | None:
    """What keeps ``value`` from being canonical JSON, or ``None`` if nothing does."""
    found = _problem_at(value, depth)
    if found is None:
        return None
    path, reason = found
    return f"{where}{''.join(reversed(path))} {reason}"


def _problem_at(value: Any, depth: int) -> tuple[list[str], str] | None:
    """``(path from the problem up, in reverse; reason)``; paths are built only on failure,
    since most values have none."""
    if value is None or isinstance(value, bool | int | str):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else ([], f"is {value!r} (JSON has no NaN/inf)")
    if depth >= MAX_DEPTH:
        return [], f"is nested deeper than {MAX_DEPTH} levels (or contains itself)"
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _problem_at(item, depth + 1)
            if found is not None:
                found[0].append(f"[{index}]")
                return found
        return None
    if isinstance(value, dict):
        return _dict_problem(value, depth)
    return [], f"is a {type_name(type(value))}"


def _dict_problem(value: dict[Any, Any], depth: int) -> tuple[list[str], str] | None:
    for key, item in value.items():
        if not isinstance(key, str):
            return [], f"has the {type(key).__name__} key {key!r} (JSON keys are strings)"
        found = _problem_at(item, depth + 1)
        if found is not None:
            found[0].append(f"[{key!r}]")
            return found
    return None


def type_name(cls: type) -> str:
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )


def loads(data: bytes, codec: str) -> Any:
    try:
        return json.loads(data.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CodecError(f"{len(data)} bytes are not {codec} JSON: {exc}") from exc
