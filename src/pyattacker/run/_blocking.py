"""Running a run to its end from synchronous code, whatever thread or loop the caller has.

``Runner.run`` blocks: on a fast loop of its own (uvloop when installed) when the caller
has no running loop, else (a notebook) on a helper thread with a loop of its own, while
the caller's thread waits and passes each Ctrl-C on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from pyattacker._gc import quiet_gc

__all__ = ["on_loop_thread", "run_blocking"]

T = TypeVar("T")


def run_blocking(main: Coroutine[Any, Any, T], on_interrupt: Callable[[int], None]) -> T:
    """Run ``main`` to its end and return its result. On a helper thread (the caller's
    loop is running), a KeyboardInterrupt in the caller's thread does not end the wait: it
    calls ``on_interrupt`` with the number of interrupts so far."""
    if not _loop_running():
        # not inside the `except` that found no loop: the whole run would execute with that
        # RuntimeError as the context of every exception it raises (and a parser that tells
        # its own signal by `__context__`, as httptools' callers do, would misread them)
        return _run_on_fast_loop(main)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="pyattacker") as pool:
        running = pool.submit(_run_on_fast_loop, main)
        interrupts = 0
        while True:
            try:
                return running.result()
            except KeyboardInterrupt:
                interrupts += 1
                on_interrupt(interrupts)


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def on_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether the calling thread runs ``loop``."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _run_on_fast_loop(main: Coroutine[Any, Any, T]) -> T:
    with quiet_gc():
        try:
            import uvloop
        except ImportError:  # pragma: no cover - uvloop is a dependency except on Windows
            return asyncio.run(main)
        return uvloop.run(main)
