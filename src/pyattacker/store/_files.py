"""Opening a SQLite store file: the checks made before anything is created, the connection
settings, and the translation of ``sqlite3`` errors into ours.

Checks come first so that a wrong path costs nothing: ``sqlite3.connect`` creates a
missing file, and a writer in WAL mode creates ``-wal``/``-shm`` files beside it, so a
writer needs a writable folder, not only a writable file.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

from pyattacker.errors import ConfigError, StoreError

__all__ = ["check_path", "connect", "mapped"]

# What sqlite3 raises that means "the record could not be read or written". Overflow and
# Unicode errors come from binding a value SQLite cannot hold (an int beyond 64 bits, a
# lone surrogate).
_FOREIGN = (sqlite3.Error, OverflowError, UnicodeError)


def check_path(path: Path, *, read_only: bool) -> None:
    """Refuse, with ``ConfigError`` (field ``store``) and a hint, a path that cannot be
    opened the way asked. Creates nothing."""
    folder = path.absolute().parent
    if path.is_dir():
        raise _bad_path(f"{path} is a folder, not a store file", "name a file inside it")
    if not folder.is_dir():
        raise _bad_path(
            f"the folder {folder} does not exist", "create it first, or choose another path"
        )
    if read_only:
        if not path.is_file():
            raise _bad_path(f"there is no store at {path}", "check the path; a run creates it")
        if not os.access(path, os.R_OK):
            raise _bad_path(f"{path} is not readable", "check its permissions")
        return
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise _bad_path(
            f"{path} is not writable", "make it writable, or open it read-only to read it"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise _bad_path(
            f"cannot write in the folder {folder}",
            "choose a writable folder: SQLite keeps its -wal and -shm files beside the store",
        )


def connect(path: Path, *, read_only: bool, busy_timeout_s: float) -> sqlite3.Connection:
    """A connection in autocommit mode (we issue ``BEGIN``/``COMMIT`` ourselves).

    A reader opens ``file:PATH?mode=ro``: SQLite itself then refuses every write, and the
    reader works beside a live writer thanks to WAL.
    """
    _identity_adapters()
    target = f"file:{urllib.parse.quote(str(path.absolute()))}?mode=ro" if read_only else str(path)
    try:
        # check_same_thread=False: the Runner may hand writes to a worker thread; the store
        # is used by one thread at a time, which is what the check really protects.
        conn = sqlite3.connect(target, uri=read_only, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise _bad_path(f"cannot open {path}: {exc}", "check the path and its permissions") from exc
    conn.execute(f"PRAGMA busy_timeout = {max(0, int(busy_timeout_s * 1000))}")
    return conn


@functools.cache
def _identity_adapters() -> None:
    """Register ``sqlite3`` adapters that return ``None`` and ``bytes`` values unchanged.

    sqlite3 binds int, float and str directly but looks an adapter up for every other
    value, and a miss asks its protocol *type* for ``__adapt__``, which raises and formats
    an AttributeError each time: for every NULL column and every blob a run writes, which
    showed plainly in a durable run's profile. With these two registered
    the lookup hits, and the adapters are C functions that hand the value back. They change
    nothing sqlite3 stores, for us or anyone else in the process.
    """
    none = cast(Callable[[None], None], {}.get)  # {}.get(None) is None
    registered = sqlite3.adapters  # never replace an adapter someone else registered
    if (type(None), sqlite3.PrepareProtocol) not in registered:
        sqlite3.register_adapter(type(None), none)
    if (bytes, sqlite3.PrepareProtocol) not in registered:
        sqlite3.register_adapter(bytes, bytes)  # bytes(b) is b for an exact bytes object


@contextmanager
def mapped(location: str, what: str, *, not_a_database: bool = False) -> Iterator[None]:
    """Translate ``sqlite3`` errors raised inside into ``StoreError`` (``what``: "could not
    write", ...). With ``not_a_database``, a file that is not a SQLite database is the
    user's mistake: ``ConfigError`` (field ``store``)."""
    try:
        yield
    except _FOREIGN as exc:
        if not_a_database and getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_NOTADB:
            raise _bad_path(
                f"{location} is not a SQLite database", "choose another path for the store"
            ) from exc
        raise StoreError(f"{what}: {exc}", location=location) from exc


def _bad_path(message: str, hint: str) -> ConfigError:
    return ConfigError(message, field="store", hint=hint)
