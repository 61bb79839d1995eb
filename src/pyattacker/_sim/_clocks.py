"""Clocks that own a simulation loop for the length of one ``run(coro)``.

:class:`VirtualClock` and :class:`ScaledClock` are :class:`~pyattacker.clock.Clock`\\ s:
``now()`` and ``sleep()`` read and use the loop they own (so they work only inside
``run``). After the coroutine ends they cancel leftover tasks, close async generators and
close the loop, without "Task was destroyed" noise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

from pyattacker._sim._loops import (
    ScaledEventLoop,
    VirtualEventLoop,
    _SimulationLoop,
    _validate,
)
from pyattacker.errors import ConfigError, SimulationError

__all__ = ["ScaledClock", "VirtualClock", "run_virtual"]

_T = TypeVar("_T")
_CLEANUP_WALL_BUDGET_S = 1.0  # real seconds cancelled tasks get to finish after a run

_L = TypeVar("_L", bound=_SimulationLoop)


class _LoopOwner(Generic[_L]):
    """A Clock that owns a fresh simulation loop for the length of each ``run``."""

    def __init__(self, start: float, wall_budget_s: float | None, speedup: float = 1.0) -> None:
        _validate(start=start, wall_budget_s=wall_budget_s, speedup=speedup)
        self._start = start
        self._wall_budget_s = wall_budget_s
        self._loop: _L | None = None

    def _new_loop(self) -> _L:
        raise NotImplementedError

    @property
    def loop(self) -> _L:
        """The loop of the current ``run``; :class:`RuntimeError` outside ``run``."""
        if self._loop is None:
            raise RuntimeError(f"{type(self).__name__} is only running inside its run()")
        return self._loop

    def now(self) -> float:
        """The loop's time, inside ``run`` only (:class:`RuntimeError` otherwise)."""
        return self.loop.time()

    def reader(self) -> Callable[[], float]:
        """The loop's ``time``: what :meth:`now` returns, valid for the current ``run``
        (:class:`RuntimeError` outside ``run``)."""
        return self.loop.time

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` of this clock's time on the running loop (``<= 0`` yields)."""
        await asyncio.sleep(max(0.0, seconds))

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run ``coro`` on a fresh loop; return its result or raise its exception.

        Leftover tasks are then cancelled and get one real second to finish (their timers
        still run); if some never do (they swallow cancellation), raises
        :class:`SimulationError` unless the run is already raising something else.
        Raises :class:`RuntimeError` when called from a running event loop (any loop).
        """
        if asyncio._get_running_loop() is not None:  # public get_running_loop() raises
            coro.close()  # never started: closing it avoids a "never awaited" warning
            raise RuntimeError(f"{self!r}.run() called from a running loop: await instead")
        try:
            loop = self._loop = self._new_loop()
        except BaseException:  # Ctrl-C while the loop is built: coro never started
            coro.close()
            raise
        try:
            task = loop.create_task(coro)
            try:
                result = loop.run_until_complete(task)
            except BaseException:
                _shut_down(loop, strict=False)
                raise
            _shut_down(loop, strict=True)
            return result
        finally:
            self._loop = None
            loop.close()

    def _describe(self) -> str:
        state = "idle" if self._loop is None else f"now={self._loop.time()!r}"
        return f"start={self._start!r} wall_budget_s={self._wall_budget_s!r} {state}"


def _shut_down(loop: _SimulationLoop, *, strict: bool) -> None:
    """Cancel leftover tasks and close async generators, ending a stall or budget overrun."""
    leftovers = asyncio.all_tasks(loop)
    for task in leftovers:
        task.cancel()
    loop._budget.restart(_CLEANUP_WALL_BUDGET_S)
    try:
        if leftovers:
            loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    except SimulationError as exc:
        stuck = asyncio.all_tasks(loop)
        for task in stuck:  # they can never finish: don't let asyncio log each one at GC
            task._log_destroy_pending = False  # type: ignore[attr-defined]
        if strict:
            raise SimulationError(
                "leftover tasks did not finish after cancellation", tasks=len(stuck)
            ) from exc
        return
    for task in leftovers:
        if not task.cancelled() and task.exception() is not None:
            loop.call_exception_handler(
                {
                    "message": "unhandled exception in a task cancelled after the run",
                    "exception": task.exception(),
                    "task": task,
                }
            )


class VirtualClock(_LoopOwner[VirtualEventLoop]):
    """A :class:`~pyattacker.clock.Clock` on virtual time; ``run(coro)`` on a fresh loop.

    ``now()``, ``sleep()`` and ``loop`` work only inside ``run``. Raises
    :class:`ConfigError` for a non-finite ``start`` or a non-positive ``wall_budget_s``.
    """

    def __init__(self, *, start: float = 0.0, wall_budget_s: float | None = None) -> None:
        super().__init__(start, wall_budget_s)

    def _new_loop(self) -> VirtualEventLoop:
        return VirtualEventLoop(start=self._start, wall_budget_s=self._wall_budget_s)

    def __repr__(self) -> str:
        return f"<VirtualClock {self._describe()}>"


class ScaledClock(_LoopOwner[ScaledEventLoop]):
    """A :class:`~pyattacker.clock.Clock` on real time sped up ``speedup`` times.

    The differential check for :class:`VirtualClock`: the same code on real timers and
    I/O. Raises :class:`ConfigError` for ``speedup <= 0`` and what VirtualClock refuses.
    """

    def __init__(
        self, speedup: float = 10.0, *, start: float = 0.0, wall_budget_s: float | None = None
    ) -> None:
        super().__init__(start, wall_budget_s, speedup)
        self._speedup = speedup

    @property
    def speedup(self) -> float:
        return self._speedup

    def _new_loop(self) -> ScaledEventLoop:
        return ScaledEventLoop(self._speedup, start=self._start, wall_budget_s=self._wall_budget_s)

    def __repr__(self) -> str:
        return f"<ScaledClock speedup={self._speedup!r} {self._describe()}>"


def run_virtual(
    coro: Coroutine[Any, Any, _T], *, start: float = 0.0, wall_budget_s: float | None = None
) -> _T:
    """``VirtualClock(start=start, wall_budget_s=wall_budget_s).run(coro)``."""
    try:
        clock = VirtualClock(start=start, wall_budget_s=wall_budget_s)
    except ConfigError:
        coro.close()  # never started: closing it avoids a "never awaited" warning
        raise
    return clock.run(coro)
