"""Reading what a user points us at, with an end: files of bounded size, JSON of bounded depth.

A flag that names a file may name one that never ends (``--body @/dev/zero``, a FIFO) or
a directory; a JSON line may nest 100,000 deep (Python's parser then raises
``RecursionError``). Each becomes a :class:`ConfigError` naming the flag (exit 2), never
a traceback or an exhausted memory. The limits, per flag, are in :data:`FILE_LIMITS`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyattacker.errors import ConfigError

__all__ = ["FILE_LIMITS", "MiB", "loads", "read_bounded"]

MiB = 1 << 20

#: the largest file each flag reads (bytes): far above real use, far below a machine's RAM
FILE_LIMITS = {
    "--body": 64 * MiB,  # one request body, kept in memory and sent with every request
    "--keys-file": 1 * MiB,  # API keys, one per line: tens of thousands of keys
    "--prompts": 256 * MiB,  # a JSON Lines prompt set, read whole and kept
}


def read_bounded(path: str | Path, field: str, limit: int | None = None) -> bytes:
    """The bytes of the file at ``path``, reading at most ``limit`` (default
    ``FILE_LIMITS[field]``) plus one, or a ``ConfigError(field=field)`` for a directory,
    an unreadable file, or one larger than the limit."""
    limit = FILE_LIMITS[field] if limit is None else limit
    where = Path(path)
    if where.is_dir():
        raise ConfigError(f"{str(path)!r} is a directory, not a file", field=field)
    try:
        with where.open("rb") as file:
            data = file.read(limit + 1)
    except OSError as exc:
        # A flag left without its value takes the next flag as one: say so.
        flag = isinstance(exc, FileNotFoundError) and str(path).startswith("-")
        raise ConfigError(
            f"cannot read {str(path)!r}: {exc.strerror or exc}",
            field=field,
            hint=f"{field} needs a file; {str(path)!r} looks like the next flag" if flag else None,
        ) from None
    if len(data) > limit:
        raise ConfigError(
            f"{str(path)!r} is larger than {_size(limit)}, the limit of {field}",
            field=field,
            hint="point it at a regular file of that size or less",
        )
    return data


def loads(text: str | bytes, field: str) -> Any:
    """``json.loads(text)``; a value nested too deeply for the parser (about 1,000 levels
    of arrays or objects) is a ``ConfigError(field=field)``. Other errors propagate as
    ``json.loads`` raises them (``ValueError``)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ConfigError(
            "the JSON is nested too deeply to read", field=field, hint="at most ~1,000 levels"
        ) from None


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n % MiB == 0 else f"{n:,} bytes"
