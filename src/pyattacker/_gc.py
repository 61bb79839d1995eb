"""Quieter garbage collection while a run or an attack keeps a loop busy."""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["quiet_gc"]


_lock = threading.Lock()
_depth = 0
_saved: tuple[tuple[int, ...], bool] = ((700, 10, 10), False)


@contextlib.contextmanager
def quiet_gc(gen0: int = 50_000) -> Iterator[None]:
    """Fewer, shorter garbage collections for the duration of the block.

    Objects alive on entry are frozen (``gc.freeze()``: never scanned again) and a
    collection of the youngest generation waits for ``gen0`` new objects instead of 700.
    An attack allocates a few small objects per request and few cycles, and each
    collection pauses the loop, which shows up as dispatch delay (the effect on the p99
    scheduling lag is in ``benchmarks/README.md``). Restored on exit.

    The settings are the process's, so blocks nest and may overlap across threads: only
    the outermost entry changes them and only the last exit restores them. An application
    that froze objects itself keeps its freeze (nothing is frozen or unfrozen then).
    """
    global _depth, _saved
    with _lock:
        _depth += 1
        if _depth == 1:
            freeze = gc.get_freeze_count() == 0
            _saved = (gc.get_threshold(), freeze)
            if freeze:
                gc.freeze()
            gc.set_threshold(gen0, *_saved[0][1:])
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                thresholds, froze = _saved
                gc.set_threshold(*thresholds)
                if froze:
                    gc.unfreeze()
