"""``stop_signals``: SIGINT and SIGTERM to a handler of one's own for a block, then back.

The drivers of workers (local processes, Ray actors) and a served attack's linger wait in
plain blocking calls, where a signal must set a flag rather than raise in the middle of
them. Python delivers signals to the main thread only, and refuses a handler set from
another: a caller that runs us on a thread of its own keeps its signals, so there the
block runs with the handlers as they were.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["stop_signals"]


@contextlib.contextmanager
def stop_signals(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """``handler`` for SIGINT and SIGTERM inside the block (on the main thread), the
    previous handlers after it."""
    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError):  # not the main thread: the caller's business
            previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, before in previous.items():
            signal.signal(signum, before)
