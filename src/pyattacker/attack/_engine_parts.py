"""Small pieces of the attack engine that need none of its state."""

from __future__ import annotations

from collections.abc import Callable

from pyattacker.attack._plan import Target
from pyattacker.clock import Clock
from pyattacker.measure import Histogram
from pyattacker.pool import Resource

__all__ = ["EngineTime", "no_loop", "p", "returns"]


class EngineTime:
    """The engine's clock as its pool reads it, once per lease: ``now`` is the engine's
    own reader (decided once per run, see ``run()``), called as is, not
    ``LoopClock.now()``, which looks up the running loop on every call (a getpid() system
    call on Python 3.11)."""

    __slots__ = ("_clock", "now")

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.now: Callable[[], float] = clock.now  # run() sets the reader

    async def sleep(self, seconds: float) -> None:
        await self._clock.sleep(seconds)

    def reader(self) -> Callable[[], float]:
        return self.now


def no_loop(callback: Callable[[], None]) -> object:
    raise RuntimeError("the engine is not running: run() has not started")


def returns(target: Target) -> Callable[[Resource], Target]:
    """A resource factory that gives ``target``: the lease's client is then the target."""

    def factory(_: Resource) -> Target:
        return target

    return factory


def p(histogram: Histogram, q: float) -> float | None:
    """The ``q``-th percentile of ``histogram``, or None when it is empty."""
    return histogram.percentile(q) if histogram.count else None
