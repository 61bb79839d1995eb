"""The writer lock of a SQLite store: proof that the process writing a run is alive.

A run's process holds an exclusive ``flock`` on ``<store>.lock`` (``eval.db.lock`` beside
``eval.db``) from ``begin_run`` until ``end_run`` or ``close``. The OS releases it when the
process dies, however it dies (SIGKILL, OOM, a power cut of the process); a paused process
(SIGSTOP, Ctrl-Z, a task blocking for minutes) keeps it. So "is the lock held?" answers
"is a writer alive?" without trusting a heartbeat's age.

Readers only *probe*: they open the lock file read-only if it exists (creating nothing),
try a shared lock without waiting and release it at once. A writer that meets such a probe
in its own instant of asking retries for a moment (``wait_s``) before concluding that
another writer is alive.

What the lock does not say: anything across machines (``flock`` on a network filesystem is
not reliably shared), and anything on a platform without ``fcntl`` (Windows): there
:func:`probe` answers None and the heartbeat rule of ``_lifecycle`` applies. The lock file
is left in place after a run (removing it could let two writers lock two different files).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from pyattacker.clock import block_for
from pyattacker.errors import StoreError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCKS", "WriterLock", "lock_path", "probe"]

#: Whether this platform has the lock (``fcntl.flock``); without it a store has no lock
#: to ask and liveness falls back to heartbeats.
LOCKS = fcntl is not None

_PAUSE_S = 0.01  # between two tries: far longer than a reader's probe holds its lock


def lock_path(store: Path) -> Path:
    """The lock file of the store file ``store``."""
    return Path(f"{store}.lock")


class WriterLock:
    """The exclusive lock on ``lock_path(store)``, held by one :class:`SQLiteStore`."""

    def __init__(self, store: Path) -> None:
        self.path = lock_path(store)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this instance holds the lock."""
        return self._fd is not None

    def acquire(self, *, wait_s: float = 0.5, pause: Callable[[float], None] = block_for) -> bool:
        """Take the lock: True when taken (or already held here), False when another
        process holds it for longer than ``wait_s`` (tried every 10 ms, ``pause`` waiting
        between tries). Creates the lock file if missing; ``StoreError`` if it cannot.
        Without ``fcntl`` there is no lock: True, and :func:`probe` says None."""
        if self._fd is not None or not LOCKS:
            return True
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise StoreError(f"cannot open the lock file {self.path}: {exc}") from exc
        tries = max(1, int(wait_s / _PAUSE_S) + 1)
        for attempt in range(tries):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if attempt + 1 < tries:
                    pause(_PAUSE_S)
                continue
            except OSError as exc:
                os.close(fd)
                raise StoreError(f"cannot lock {self.path}: {exc}") from exc
            self._fd = fd
            return True
        os.close(fd)
        return False

    def release(self) -> None:
        """Let go of the lock (closing the file releases it); idempotent."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __repr__(self) -> str:
        return f"<WriterLock {str(self.path)!r} {'held' if self.held else 'free'}>"


def probe(store: Path) -> bool | None:
    """Whether some process holds the writer lock of the store file ``store`` now.

    False when there is no lock file (no run has held it). None when it cannot be told:
    no ``fcntl``, or the lock file cannot be opened for reading. Creates and changes
    nothing: the file is opened read-only and the shared lock tried is released at once.
    """
    if not LOCKS:  # pragma: no cover - Windows
        return None
    try:
        fd = os.open(lock_path(store), os.O_RDONLY)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)  # closing releases the shared lock, if it was taken
    return False
