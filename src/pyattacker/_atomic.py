"""Output files that appear whole or not at all: check the path, stage, rename.

Every report and export is written the same way: the bytes go to a hidden temporary file
beside the target, are flushed to disk, and ``os.replace`` moves the file over the target.
A Ctrl-C, a full disk or a crash therefore leaves the old file or the whole new one, never
a truncated one, and no temporary file behind.

- :func:`check_output` refuses, before any work, a path that could not be written this way.
  What must be writable is the *folder* (the rename happens there), whether or not the file
  exists.
- :func:`stage` creates the temporary file and lets a writer fill it; :func:`replace`
  renames it over the target. They are separate so a caller can stage several files and
  rename them only once every one is written (``pyattacker bench``).
- :func:`write_atomically` is both in one call.

The new file's mode is the existing target's, else what the umask leaves of 0666 (as
``open()`` would make it): a report is an ordinary file, not a private 0600 one.

Not handled here: symlinks (``os.replace`` replaces a link itself; callers that mean the
file behind it resolve the path first) and fsync of the folder after the rename.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pyattacker.errors import ConfigError

__all__ = ["check_output", "create_beside", "fill", "replace", "stage", "write_atomically"]

T = TypeVar("T")


def check_output(path: Path, field: str, given: str | None = None) -> None:
    """Refuse ``path`` as an output with a ``ConfigError`` naming ``field`` (and a hint)
    when it is a folder, its folder does not exist, or its folder is not writable.

    ``given`` is how the user wrote the path, for the messages (default: ``path``). Passing
    the check is no promise: the disk may still fill up or the folder change later.
    """
    shown = str(path) if given is None else given
    parent = path.absolute().parent
    if path.is_dir():
        raise ConfigError(f"{shown} is a folder", field=field, hint="name a file in it")
    if not parent.is_dir():
        raise ConfigError(
            f"the folder {parent} does not exist",
            field=field,
            hint="create it, or write elsewhere",
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(
            f"cannot write {shown}: the folder {parent} is not writable",
            field=field,
            hint="check its permissions, or write elsewhere",
        )


def create_beside(path: Path) -> Path:
    """A fresh, empty, hidden file in ``path``'s folder, named after it.

    Created with 0666 so the kernel applies the umask (``mkstemp`` would make it 0600).
    Raises ``OSError`` when it cannot be created.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    for _ in range(16):
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            os.close(os.open(temporary, flags, 0o666))
        except FileExistsError:
            continue
        return temporary
    raise FileExistsError(f"no free temporary name beside {path}")


def fill(temporary: Path, path: Path, write: Callable[[Path], T]) -> T:
    """``write(temporary)``, then flush it to disk and give it ``path``'s mode if ``path``
    exists; return what ``write`` returned.

    On any failure, ``BaseException`` included, ``temporary`` is removed and the error
    propagates; ``path`` is never touched.
    """
    try:
        result = write(temporary)
        _fsync(temporary)
        if path.exists():
            temporary.chmod(stat.S_IMODE(path.stat().st_mode))
    except BaseException:  # Ctrl-C mid-write too: leave no half-written file behind
        temporary.unlink(missing_ok=True)
        raise
    return result


def stage(path: Path, write: Callable[[Path], T]) -> tuple[Path, T]:
    """A temporary file beside ``path``, filled by ``write`` (see :func:`fill`), and what
    ``write`` returned. ``path`` is untouched until :func:`replace`. Raises ``OSError``
    (no temporary left) when the file cannot be created or written."""
    temporary = create_beside(path)
    return temporary, fill(temporary, path, write)


def replace(temporary: Path, path: Path) -> None:
    """Move ``temporary`` over ``path`` in one step; if that fails, remove ``temporary``
    and let the error propagate (``path`` is then unchanged)."""
    try:
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_atomically(path: Path, write: Callable[[Path], T]) -> T:
    """:func:`stage` then :func:`replace`: ``path`` becomes the whole file ``write`` wrote,
    or stays as it was (no temporary left). Returns what ``write`` returned."""
    temporary, result = stage(path, write)
    replace(temporary, path)
    return result


def _fsync(path: Path) -> None:
    """Flush the file's bytes to disk before the rename makes it visible: after a crash,
    the target is the old file or the whole new one."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
