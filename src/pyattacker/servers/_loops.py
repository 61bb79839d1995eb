"""Running one of our servers as the whole of a process: uvloop, until a signal."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TypeVar

from pyattacker._gc import quiet_gc
from pyattacker.servers._parent import stop_when_parent_dies

__all__ = ["fastest_loop", "run_until_signalled"]

S = TypeVar("S", bound=AbstractAsyncContextManager[object])


def fastest_loop() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or ``None`` (asyncio's own loop) where uvloop is missing."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency except on Windows
        return None
    return uvloop.new_event_loop


def run_until_signalled(server: S, announce: Callable[[S], None]) -> None:
    """Run ``server`` (``async with`` starts and stops it) on the fastest loop until SIGINT
    or SIGTERM; ``announce(server)`` once it is started. Raises what starting raises.
    Started by ``ServerProcess``, it also stops when that parent dies (:mod:`._parent`)."""
    stop_when_parent_dies()
    with asyncio.Runner(loop_factory=fastest_loop()) as runner:
        runner.run(_serve(server, announce))


async def _serve(server: S, announce: Callable[[S], None]) -> None:
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    for signum in signals:
        loop.add_signal_handler(signum, stopped.set)
    try:
        async with server:
            announce(server)
            # What is alive now lives as long as the server: frozen, a full collection
            # does not scan it again, and collections come less often (its pauses would
            # show in every answer it holds: benchmarks/README.md, "the echo server's
            # pauses").
            with quiet_gc():
                await stopped.wait()
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
