"""The engine's clock for one run: how it reads the time and how it waits for an instant."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from pyattacker.clock import Clock, LoopClock, PreciseTimer, is_simulated

__all__ = ["CallAt", "Cancellable", "PoolTime", "RunTime", "loop_call_at"]


class Cancellable(Protocol):
    def cancel(self) -> object: ...


CallAt = Callable[[float, Callable[[], object]], Cancellable]
"""Calls a callback at an instant and returns what cancels the call."""


def loop_call_at(loop: asyncio.AbstractEventLoop, now: Callable[[], float]) -> CallAt:
    """A :data:`CallAt` on ``loop``'s own timer, for instants read on ``now``'s clock
    (which need not be the loop's)."""

    def call_at(deadline: float, callback: Callable[[], object]) -> Cancellable:
        return loop.call_at(loop.time() + (deadline - now()), callback)

    return call_at


class RunTime:
    """The run's clock, decided once when the run starts on ``loop``.

    ``now`` is the clock's :meth:`~pyattacker.clock.Clock.reader`. ``precise`` is the
    clock when its time is the loop's real time (a :class:`LoopClock` on a loop that is
    not simulated), else None: the one place the engine asks which clock it has, because
    only real timers fire early or late (by up to a millisecond on uvloop), so only they
    need :meth:`LoopClock.sleep_until`'s finish by polling, and only a real loop's lag is
    worth probing. A simulated loop's timers, and any other clock's sleep, are exact.

    ``timer`` is a :class:`~pyattacker.clock.PreciseTimer` when the clock is ``precise``
    and the platform has one (Linux): waits then sleep to the instant, with no polling
    (the open model's schedule has the timer call it back directly). Elsewhere
    ``sleep_until`` polls its last moments. ``call_at(deadline, callback)`` calls back at
    an instant of the clock: on the timer when there is one, else on the loop's own.
    :meth:`close` when the run ends.
    """

    __slots__ = ("call_at", "clock", "now", "precise", "timer")

    def __init__(self, clock: Clock, loop: asyncio.AbstractEventLoop) -> None:
        self.clock = clock
        self.now: Callable[[], float] = clock.reader()
        self.precise: LoopClock | None = (
            clock if isinstance(clock, LoopClock) and not is_simulated(loop) else None
        )
        self.timer = PreciseTimer.open(loop) if self.precise is not None else None
        self.call_at: CallAt = (
            loop_call_at(loop, self.now) if self.timer is None else self.timer.call_at
        )

    async def wait_until(self, deadline: float) -> None:
        """Return at ``deadline`` on this clock, never before it."""
        if self.now() >= deadline:
            return
        if self.timer is not None:
            await self.timer.at(deadline)
        elif self.precise is not None:
            await self.precise.sleep_until(deadline)
        else:
            await self.clock.sleep(deadline - self.clock.now())

    def close(self) -> None:
        """Release the run's timer (waiters still pending are cancelled)."""
        if self.timer is not None:
            self.timer.close()


class PoolTime:
    """The engine's clock as its pool reads it: ``now`` is the run's reader (set when the
    run starts), so the pool's readings, several per lease, cost what the engine's do.
    The pool is built before the run, when no reader can be taken yet."""

    __slots__ = ("_clock", "now")

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.now: Callable[[], float] = clock.now

    async def sleep(self, seconds: float) -> None:
        await self._clock.sleep(seconds)

    def reader(self) -> Callable[[], float]:
        return self.now
