"""The one time seam.

Library code never reads ``time.monotonic()`` or calls ``asyncio.sleep()`` directly; it asks
a :class:`Clock`. The default, :class:`LoopClock`, reads the running event loop, so the same
code runs in real time under asyncio/uvloop and in simulated time under the virtual loop of
:mod:`pyattacker.testing`. ``wall_time()`` is the one deliberate exception: the real
seconds a piece of work *cost* (named so, never used to decide anything). ``epoch_time()``
is calendar time, for report labels, HTTP dates and the age of a stored heartbeat.
``block_for()`` blocks a thread for a moment, for synchronous code only.
"""

from __future__ import annotations

import asyncio
import time
from asyncio import _get_running_loop
from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = [
    "TIMER_SLACK_S",
    "Clock",
    "LoopClock",
    "block_for",
    "epoch_time",
    "is_simulated",
    "wall_time",
]

#: How far a real loop's timer is trusted (see :meth:`LoopClock.sleep_until`).
TIMER_SLACK_S = 0.002


@runtime_checkable
class Clock(Protocol):
    """Monotonic seconds and a sleep that honours them."""

    def now(self) -> float:
        """Monotonic seconds; only differences are meaningful."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Suspend the caller for ``seconds`` of this clock's time (``<= 0`` just yields)."""
        ...

    def reader(self) -> Callable[[], float]:
        """A zero-argument function returning what :meth:`now` returns, as cheap as this
        clock can make it: for code that reads the time once per request.

        Made inside a running loop, it is valid while that loop runs (a clock may decide
        once what ``now()`` decides on every call). A clock with nothing to decide returns
        its ``now``.
        """
        ...


class LoopClock:
    """The default clock: the running event loop's timers, and its time when it is simulated.

    Under a loop of :mod:`pyattacker.testing` (a class with ``simulated_time = True``) ``now()``
    is that loop's ``time()``: virtual or scaled. On any other loop it is
    ``time.monotonic()`` (nanosecond resolution on Linux), never ``loop.time()``: uvloop's
    ``time()`` is libuv's millisecond counter, cached once per loop iteration, which would
    put every timestamp of a measurement on a 1 ms grid. asyncio's own loops read
    ``time.monotonic()`` too, so timers and timestamps agree on every loop we run.
    """

    __slots__ = ("_last",)

    def __init__(self) -> None:
        # The class of the last loop `now()` ran on, and whether it is simulated: one tuple,
        # replaced whole, so that a clock shared by threads never pairs a class with
        # another's answer. No reference to the loop itself (it may close and go).
        self._last: tuple[type, bool] = (type(None), False)

    def now(self) -> float:
        loop = _get_running_loop()
        if loop is None:
            return time.monotonic()
        kind, simulated = self._last
        if loop.__class__ is not kind:  # the usual case skips this: one loop class a run
            simulated = is_simulated(loop)
            self._last = (loop.__class__, simulated)
        return loop.time() if simulated else time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    async def sleep_until(self, deadline: float) -> None:
        """Return at ``deadline`` (a ``now()`` reading), never before it.

        On a simulated loop this is one exact sleep. On a real loop the loop's timer is
        trusted only to within :data:`TIMER_SLACK_S` (uvloop's timers were measured firing
        up to ~1.04 ms early, and late by a few hundred microseconds): it sleeps until
        that much before the deadline, then yields to the loop (which keeps serving I/O)
        until the deadline has passed. So a caller is late only by one loop iteration.
        """
        loop = asyncio.get_running_loop()
        if is_simulated(loop):
            remaining = deadline - loop.time()
            if remaining > 0:
                await asyncio.sleep(remaining)
            return
        remaining = deadline - time.monotonic()
        if remaining > TIMER_SLACK_S:
            await asyncio.sleep(remaining - TIMER_SLACK_S)
        # Polling is the point: no event marks an instant more precisely than the timer
        # we just declined to trust, and each yield lets the loop serve I/O meanwhile.
        while time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0)

    def reader(self) -> Callable[[], float]:
        """What ``now()`` returns, with the running loop looked up once, not per reading:
        the loop's ``time`` on a simulated loop, else ``time.monotonic`` (outside any loop
        too). Valid while the loop that was running when it was made runs."""
        loop = asyncio._get_running_loop()
        if loop is not None and is_simulated(loop):
            return loop.time
        return time.monotonic

    def __repr__(self) -> str:
        return "LoopClock()"


_SIMULATED: dict[type, bool] = {}


def is_simulated(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop``'s ``time()`` is a simulation's (a loop class of
    :mod:`pyattacker.testing`, whose class attribute ``simulated_time`` is true).

    Asked once per loop class: on uvloop's loop, which has no such attribute, looking it
    up raises and catches an ``AttributeError`` inside ``getattr``, and ``LoopClock.now()``
    asks on every call (the pool reads it once per lease).
    """
    kind = type(loop)
    found = _SIMULATED.get(kind)
    if found is None:
        found = _SIMULATED[kind] = bool(getattr(kind, "simulated_time", False))
    return found


def wall_time() -> float:
    """Real monotonic seconds, for measuring what work cost. Never for deciding anything."""
    return time.perf_counter()


def epoch_time() -> float:
    """Seconds since the Unix epoch: for labels and HTTP dates, never for durations."""
    return time.time()


def block_for(seconds: float) -> None:
    """Block the calling thread for ``seconds`` of real time. Only for synchronous code
    that waits out another process for a moment (a store's lock being probed by a
    reader), never inside a task or on a loop's hot path."""
    time.sleep(max(0.0, seconds))
