"""Running one of our servers as the whole of a process: uvloop, until a signal."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TypeVar

from pyattacker._gc import quiet_gc
from pyattacker.servers._parent import stop_when_parent_dies

__all__ = ["fastest_loop", "run_until_signalled", "serve_until"]

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
            await serve_until(stopped)
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)


async def serve_until(stopped: asyncio.Event) -> None:
    """Serve (the loop runs the server's connections) until ``stopped`` is set, with the
    garbage collector quiet: what is alive now lives as long as the server, so it is
    frozen out of later collections, and collections come less often. A collection's
    pause shows in every answer the server holds (benchmarks/README.md, "the echo
    server's pauses"). Every way of running a server as a process waits here."""
    with quiet_gc():
        await stopped.wait()
