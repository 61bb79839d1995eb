"""Quieter garbage collection while a run or an attack keeps a loop busy."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["quiet_gc"]


@contextlib.contextmanager
def quiet_gc(gen0: int = 50_000) -> Iterator[None]:
    """Fewer, shorter garbage collections for the duration of the block.

    Objects alive on entry are frozen (``gc.freeze()``: never scanned again) and a
    collection of the youngest generation waits for ``gen0`` new objects instead of 700.
    An attack allocates a few small objects per request and few cycles, and each
    collection pauses the loop, which shows up as dispatch delay: at 15,000 requests/s
    here, the p99 scheduling lag fell from 30 ms to 1-7 ms. Restored on exit.
    """
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(gen0, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
