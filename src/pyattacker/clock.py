"""The one time seam.

Library code never reads ``time.monotonic()`` or calls ``asyncio.sleep()`` directly; it asks
a :class:`Clock`. The default, :class:`LoopClock`, reads the running event loop, so the same
code runs in real time under asyncio/uvloop and in simulated time under the virtual loop of
:mod:`pyattacker.testing`. ``wall_time()`` is the one deliberate exception: the real
seconds a piece of work *cost* (named so, never used to decide anything; ``cpu_time()``,
its CPU seconds, likewise). ``epoch_time()``
is calendar time, for report labels, HTTP dates and the age of a stored heartbeat.
``block_for()`` blocks a thread for a moment, for synchronous code only.
:class:`PreciseTimer` wakes a real loop's waiters at exact instants without polling.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import os
import sys
import time
from asyncio import _get_running_loop
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "TIMER_SLACK_S",
    "Clock",
    "LoopClock",
    "PreciseTimer",
    "TimerEntry",
    "block_for",
    "cpu_time",
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

        On a simulated loop this is one exact sleep. On a real loop (where no
        :class:`PreciseTimer` can be had: the engine uses one when it can) the loop's timer is
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


class PreciseTimer:
    """Wakes awaiters at ``time.monotonic()`` instants on a real loop, precisely and
    without polling: one Linux ``timerfd`` (``CLOCK_MONOTONIC``, the clock
    ``time.monotonic()`` reads) armed for the earliest pending instant, read by the loop.

    A loop's own timers cannot do this: uvloop's count whole milliseconds and fire up to
    about one early, so :meth:`LoopClock.sleep_until` trusts them only to within
    :data:`TIMER_SLACK_S` and polls for the rest, which at a few hundred arrivals a second
    keeps a core busy whatever the rate. The kernel's timer never fires early; it fires
    late by the kernel's wake-up and the loop's turn (tens of microseconds on an idle
    machine). :meth:`open` gives one for a running real loop on Linux, else None (then
    ``sleep_until`` it is). :meth:`close` when done: it cancels whatever still waits.
    """

    __slots__ = ("_arm_at", "_armed", "_fd", "_heap", "_loop", "_order", "_ref", "_set")

    _TFD_TIMER_ABSTIME = 1
    _CLOCK_MONOTONIC = 1

    def __init__(
        self, loop: asyncio.AbstractEventLoop, fd: int, settime: Any, spec: Any, ref: Any
    ) -> None:
        # ``spec`` is the struct itimerspec handed to the kernel (through ``ref``, made
        # once): only its ``it_value`` changes, set on every arming.
        self._loop, self._fd, self._set, self._ref = loop, fd, settime, ref
        self._arm_at: Any = spec.it_value
        self._heap: list[tuple[float, int, TimerEntry]] = []
        self._order = itertools.count()  # ties broken by arrival, never by the entries
        self._armed = math.inf  # the instant the kernel timer is set for
        loop.add_reader(fd, self._fire)

    @classmethod
    def open(cls, loop: asyncio.AbstractEventLoop) -> PreciseTimer | None:
        """A timer on ``loop``, or None: not Linux, no ``timerfd``, or a simulated loop."""
        if not sys.platform.startswith("linux") or is_simulated(loop):
            return None
        import ctypes  # here, not at import: the kernel loads only when a run needs it

        class Timespec(ctypes.Structure):
            _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]

        class Itimerspec(ctypes.Structure):
            _fields_ = [("it_interval", Timespec), ("it_value", Timespec)]

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            create, settime = libc.timerfd_create, libc.timerfd_settime
        except (OSError, AttributeError):
            return None
        fd = create(cls._CLOCK_MONOTONIC, os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            return None
        settime.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        spec = Itimerspec()
        try:
            return cls(loop, fd, settime, spec, ctypes.byref(spec))
        except Exception:  # a loop that cannot watch the descriptor
            os.close(fd)
            return None

    def at(self, deadline: float) -> asyncio.Future[None]:
        """A future done at ``deadline`` (a ``time.monotonic()`` reading), never before."""
        future: asyncio.Future[None] = self._loop.create_future()
        self.call_at(deadline, _Wake(future))
        return future

    def call_at(self, deadline: float, callback: Callable[[], object]) -> TimerEntry:
        """Call ``callback()`` from the loop at ``deadline``, never before; the returned
        entry's ``cancel()`` forgets it. The cheap way for a loop's own callbacks (the
        open model's schedule): no future, and no task to resume a loop turn later."""
        entry = TimerEntry(callback)
        heapq.heappush(self._heap, (deadline, next(self._order), entry))
        if deadline < self._armed:
            self._arm(deadline)
        return entry

    def _arm(self, deadline: float) -> None:
        # An all-zero value disarms a timerfd: an instant is never that, but say so.
        self._arm_at.tv_sec, self._arm_at.tv_nsec = divmod(max(1, int(deadline * 1e9)), 10**9)
        if self._set(self._fd, self._TFD_TIMER_ABSTIME, self._ref, None) != 0:
            raise OSError(_ctypes_errno(), "timerfd_settime failed")
        self._armed = deadline

    def _fire(self) -> None:
        now, heap = time.monotonic(), self._heap
        self._armed = math.inf  # it has expired: armed for nothing until set again
        while heap and heap[0][0] <= now:
            entry = heapq.heappop(heap)[2]
            callback, entry.callback = entry.callback, None
            if callback is not None:  # (a cancelled entry leaves with its instant)
                try:
                    callback()
                except Exception as exc:  # one waiter's bug must not stop the others'
                    self._loop.call_exception_handler(
                        {"message": "a PreciseTimer callback failed", "exception": exc}
                    )
        if heap:
            if heap[0][0] < self._armed:  # (a callback may have armed it already)
                self._arm(heap[0][0])
            # Setting the timer clears its expiry, so the descriptor is no longer ready:
            # no read needed (each system call costs a wake-up here).
            return
        try:  # noqa: SIM105  (no context manager on a path taken once per arrival)
            os.read(self._fd, 8)  # the expiry count: read, so the descriptor is not ready
        except (BlockingIOError, InterruptedError):
            pass  # a wake-up the timer's re-arming made stale

    def close(self) -> None:
        """Stop watching the timer, close it, cancel every waiter (idempotent)."""
        if self._fd < 0:
            return
        self._loop.remove_reader(self._fd)
        os.close(self._fd)
        self._fd = -1
        for _, _, entry in self._heap:
            callback, entry.callback = entry.callback, None
            if isinstance(callback, _Wake):  # an ``at`` future: its waiter must not hang
                callback.future.cancel()
        self._heap.clear()


class TimerEntry:
    """A call :meth:`PreciseTimer.call_at` will make; :meth:`cancel` forgets it."""

    __slots__ = ("callback",)

    def __init__(self, callback: Callable[[], object]) -> None:
        self.callback: Callable[[], object] | None = callback

    def cancel(self) -> None:
        """Forget the call (a no-op once made)."""
        self.callback = None


class _Wake:
    """What ``at`` asks the timer to call: done the future, unless cancelled meanwhile."""

    __slots__ = ("future",)

    def __init__(self, future: asyncio.Future[None]) -> None:
        self.future = future

    def __call__(self) -> None:
        if not self.future.done():
            self.future.set_result(None)


def _ctypes_errno() -> int:
    import ctypes

    return ctypes.get_errno()


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


def cpu_time() -> float:
    """This process's user + system CPU seconds (every thread), for measuring what work
    cost. Never for deciding anything."""
    return time.process_time()


def epoch_time() -> float:
    """Seconds since the Unix epoch: for labels and HTTP dates, never for durations."""
    return time.time()


def block_for(seconds: float) -> None:
    """Block the calling thread for ``seconds`` of real time. Only for synchronous code
    that waits out another process for a moment (a store's lock being probed by a
    reader), never inside a task or on a loop's hot path."""
    time.sleep(max(0.0, seconds))
