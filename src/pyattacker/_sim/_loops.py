"""Event loops on simulated time: virtual (jumps to the next timer) and scaled (real, faster).

:class:`VirtualEventLoop` is a selector event loop whose ``time()`` is a float counter and
whose selector never blocks. While anything is runnable, time stands still; when nothing
is, the counter jumps to the earliest timer, which is then due *exactly* (``now = when``,
no float drift), however far away. Timers due at the same instant run in the order
they were scheduled (asyncio leaves that undefined). Every asyncio timer is simulated this
way (sleeps, ``wait_for``/``timeout()`` deadlines, ``call_at``) with nothing to register.

Raised out of ``run_until_complete``/``run_forever``:

- :class:`~pyattacker.errors.SimulationStalled` when nothing is runnable and no timer is
  pending (or only timers at infinity), so the run could never end (context: ``tasks``,
  ``timers``, ``now`` and ``waiting``, the first five pending tasks);
- :class:`~pyattacker.errors.WallBudgetExceeded` when ``wall_budget_s`` real seconds have
  passed since the loop was made (checked every 256 iterations: a callback that never
  yields is not interrupted);
- :class:`~pyattacker.errors.SimulationError` when code asks for real I/O (sockets, name
  resolution, pipes, subprocesses, ``add_reader``) or threads (``run_in_executor``,
  ``asyncio.to_thread``): their progress is invisible to virtual time.

It is *not* thread-aware: ``call_soon_threadsafe`` works but nothing waits for a thread, so a
run that waits only on one stalls. :class:`ScaledEventLoop` is the opposite trade: real time
times ``speedup``, real I/O allowed, no stall detection.

:class:`~pyattacker.testing.VirtualClock` and :class:`~pyattacker.testing.ScaledClock`
(``_clocks.py``) own such a loop for the length of ``run(coro)``.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import heapq
import itertools
import math
import selectors
import time
from collections.abc import Callable, Mapping
from typing import Any, NoReturn, TypeVar, TypeVarTuple, Unpack

from pyattacker._checks import check_number
from pyattacker.errors import SimulationError, SimulationStalled, WallBudgetExceeded

__all__ = ["ScaledEventLoop", "VirtualEventLoop"]

_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")
_Events = list[tuple[selectors.SelectorKey, int]]

_HOUSEKEEPING_EVERY = 256  # iterations between wall-budget/signal checks: cheap, still prompt
_MIN_CANCELLED = 50  # asyncio's _MIN_SCHEDULED_TIMER_HANDLES / 2
_INF = math.inf


def _no_real_io(what: str) -> SimulationError:
    return SimulationError(
        f"a simulation opens no sockets, files, pipes or processes: {what} is refused",
        hint="fake the endpoint in-process, or run real I/O under ScaledClock or a real loop",
    )


def _no_threads(what: str) -> SimulationError:
    return SimulationError(
        f"a simulation runs no threads: {what} is refused (threads are invisible to virtual time)",
        hint="make the work a coroutine that awaits the clock for as long as it should take",
    )


def _refused_io(name: str) -> Callable[..., Any]:
    """An ``async`` loop method that raises :func:`_no_real_io` when awaited."""

    async def refuse(self: asyncio.AbstractEventLoop, *args: Any, **kwargs: Any) -> NoReturn:
        raise _no_real_io(f"loop.{name}()")

    refuse.__name__ = refuse.__qualname__ = name
    return refuse


def _validate(*, start: float, wall_budget_s: float | None, speedup: float = 1.0) -> None:
    """Raise :class:`ConfigError` naming the bad argument (NaN and infinities are bad)."""
    check_number(start, "start")
    if wall_budget_s is not None:
        check_number(
            wall_budget_s, "wall_budget_s", above=0, hint="pass None for no real-time limit"
        )
    check_number(
        speedup,
        "speedup",
        above=0,
        hint="speedup=10.0 runs ten seconds of loop time per real second",
    )


class _WallBudget:
    """Real seconds a loop may run for; ``deadline`` is ``inf`` without a budget."""

    __slots__ = ("deadline", "limit_s", "started")

    def __init__(self, limit_s: float | None) -> None:
        self.restart(limit_s)

    def restart(self, limit_s: float | None) -> None:
        self.limit_s = limit_s
        self.started = time.monotonic()
        self.deadline = _INF if limit_s is None else self.started + limit_s

    def exceeded(self, now: float, frozen_s: float | None = None) -> WallBudgetExceeded:
        """``frozen_s``: real seconds the loop's time had stood still when the budget ran
        out (a livelock: work keeps being scheduled at one instant), when it knows."""
        return WallBudgetExceeded(
            "the simulation ran out of real time before it finished",
            wall_budget_s=self.limit_s,
            real_s=round(time.monotonic() - self.started, 3),
            now=now,
            frozen_s=None if frozen_s is None else round(frozen_s, 3),
        )


class _SelectorWrapper(selectors.BaseSelector):
    """Delegates to a real selector; once ``sealed``, refuses every new registration."""

    def __init__(self) -> None:
        self._real = selectors.DefaultSelector()
        self.sealed = False

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        if self.sealed:
            raise _no_real_io(f"watching file descriptor {fileobj!r}")
        return self._real.register(fileobj, events, data)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        if self.sealed:
            raise _no_real_io(f"watching file descriptor {fileobj!r}")
        return self._real.modify(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()


class _VirtualSelector(_SelectorWrapper):
    """Holds the self-pipe and nothing else; polled (never waited on) for signals."""

    def select(self, timeout: float | None = None) -> _Events:
        return self._real.select(0)


class _ScaledSelector(_SelectorWrapper):
    """Waits for real, ``timeout / speedup`` seconds, but never past the wall budget."""

    def __init__(self, loop: ScaledEventLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> _Events:
        loop = self._loop
        if timeout is not None:
            timeout /= loop.speedup
        if loop._budget.deadline != _INF:
            remaining = loop._budget.deadline - time.monotonic()
            if remaining <= 0:
                raise loop._budget.exceeded(loop.time())
            timeout = remaining if timeout is None else min(timeout, remaining)
        return self._real.select(timeout)


class _SimulationLoop(asyncio.SelectorEventLoop):
    """What both loops share: validated arguments, a start time and a wall budget."""

    _closed: bool
    _clock_resolution: float
    _signal_handlers: dict[int, asyncio.Handle]

    # Read by `pyattacker.clock.LoopClock`: this loop's `time()` *is* the simulation's time.
    simulated_time = True

    def __init__(
        self, selector: _SelectorWrapper, start: float, wall_budget_s: float | None
    ) -> None:
        self._start = float(start)
        self._budget = _WallBudget(wall_budget_s)
        try:
            super().__init__(selector)
        except BaseException:  # e.g. Ctrl-C half-way: no close() on a half-built loop later
            self._closed = True
            selector.close()
            raise

    def __repr__(self) -> str:
        state = "closed" if self.is_closed() else f"now={self.time()!r}"
        return f"<{type(self).__name__} {state} running={self.is_running()}>"


class VirtualEventLoop(_SimulationLoop):
    """A selector event loop on a virtual clock starting at ``start`` (see the module doc).

    It replaces asyncio's ``_run_once`` (one loop iteration) and keeps its own timer heap
    of ``(when, sequence, handle)`` tuples: ties are broken by scheduling order in C, not
    by a Python ``__lt__``, and no selector is consulted when nothing can arrive. The
    iteration keeps asyncio's order of events exactly: timers due now join the ready queue
    behind the callbacks already there, and each iteration runs what was ready when it
    began. Debug-mode slow-callback logging is not done (there is no real time to be slow
    in). Raises :class:`ConfigError` for a non-finite ``start`` or a non-positive budget.
    """

    _ready: collections.deque[asyncio.Handle]  # asyncio's ready queue (CPython 3.11-3.13)
    _selector: _VirtualSelector
    _stopping: bool
    _timer_cancelled_count: int

    def __init__(self, *, start: float = 0.0, wall_budget_s: float | None = None) -> None:
        self._closed = True  # BaseEventLoop.__del__ reads it even if validation raises
        _validate(start=start, wall_budget_s=wall_budget_s)
        self._now = float(start)
        self._timers: list[tuple[float, int, asyncio.TimerHandle]] = []
        self._timer_seq = itertools.count()
        self._countdown = _HOUSEKEEPING_EVERY
        self._seen_now = self._now  # the time at the last housekeeping that saw it move
        self._seen_moving = time.monotonic()  # ... and the real time of that look
        selector = _VirtualSelector()
        super().__init__(selector, start, wall_budget_s)
        selector.sealed = True  # the self-pipe is in; nothing else may be

    def time(self) -> float:
        return self._now

    def call_at(
        self,
        when: float,
        callback: Callable[[Unpack[_Ts]], object],
        *args: *_Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        if self._closed:
            raise RuntimeError("Event loop is closed")
        timer = asyncio.TimerHandle(when, callback, args, self, context)
        heapq.heappush(self._timers, (when, next(self._timer_seq), timer))
        timer._scheduled = True  # type: ignore[attr-defined]
        return timer

    def _run_once(self) -> None:
        """One iteration: if nothing is runnable, jump to the next timer; run what is due."""
        ready, timers = self._ready, self._timers
        if self._timer_cancelled_count > _MIN_CANCELLED and (
            self._timer_cancelled_count * 2 > len(timers)
        ):
            self._drop_cancelled_timers()
        if not ready and not self._stopping:
            self._advance()
        self._countdown -= 1
        if not self._countdown:
            self._housekeeping()
        now = self._now
        while timers and timers[0][0] <= now:
            timer = heapq.heappop(timers)[2]
            timer._scheduled = False  # type: ignore[attr-defined]
            if timer._cancelled:
                self._timer_cancelled_count -= 1
            else:
                ready.append(timer)
        for _ in range(len(ready)):
            handle = ready.popleft()
            if not handle._cancelled:
                handle._run()

    def _advance(self) -> None:
        """Move the clock to the earliest live timer, or fail: nothing could ever happen."""
        timers = self._timers
        while timers and timers[0][2]._cancelled:
            heapq.heappop(timers)[2]._scheduled = False  # type: ignore[attr-defined]
            self._timer_cancelled_count -= 1
        if not timers or timers[0][0] == _INF:  # e.g. sleep(math.inf): it never ends
            if events := self._selector.select(0):  # a signal is all that can still come
                self._process_events(events)  # type: ignore[attr-defined]
                return
            raise self._stalled()
        self._now = max(self._now, timers[0][0])

    def _drop_cancelled_timers(self) -> None:
        """asyncio's rule: rebuild the heap once more than half of it is cancelled."""
        live = []
        for entry in self._timers:
            if entry[2]._cancelled:
                entry[2]._scheduled = False  # type: ignore[attr-defined]
            else:
                live.append(entry)
        heapq.heapify(live)
        self._timers = live
        self._timer_cancelled_count = 0

    def _housekeeping(self) -> None:
        self._countdown = _HOUSEKEEPING_EVERY
        real = time.monotonic()
        if self._now != self._seen_now:  # time moved since the last look
            self._seen_now, self._seen_moving = self._now, real
        if real > self._budget.deadline:
            raise self._budget.exceeded(self._now, frozen_s=real - self._seen_moving)
        # Only a signal handler writes to the self-pipe here (_write_to_self is a no-op).
        if self._signal_handlers and (events := self._selector.select(0)):
            self._process_events(events)  # type: ignore[attr-defined]

    def _write_to_self(self) -> None:
        """Nothing to wake: this loop never blocks, so call_soon_threadsafe needs no write."""

    def _stalled(self) -> SimulationStalled:
        waiting = asyncio.all_tasks(self)
        names = sorted(
            f"{t.get_name()} {getattr(t.get_coro(), '__qualname__', '?')}" for t in waiting
        )
        return SimulationStalled(
            "nothing is runnable and no timer will ever fire, so virtual time cannot move on",
            tasks=len(waiting),
            timers=sum(not entry[2].cancelled() for entry in self._timers),  # all at infinity
            now=self._now,
            waiting=names[:5],
        )

    def run_in_executor(
        self,
        executor: concurrent.futures.Executor | None,
        func: Callable[[Unpack[_Ts]], _T],
        *args: *_Ts,
    ) -> asyncio.Future[_T]:
        raise _no_threads("loop.run_in_executor() (so asyncio.to_thread())")

    def set_default_executor(self, executor: concurrent.futures.Executor) -> None:
        raise _no_threads("loop.set_default_executor()")

    # add_reader/add_writer and transports end at the sealed selector; these fail earlier.
    getaddrinfo = _refused_io("getaddrinfo")
    getnameinfo = _refused_io("getnameinfo")
    create_connection = _refused_io("create_connection")
    create_server = _refused_io("create_server")
    create_datagram_endpoint = _refused_io("create_datagram_endpoint")
    create_unix_connection = _refused_io("create_unix_connection")
    create_unix_server = _refused_io("create_unix_server")
    connect_accepted_socket = _refused_io("connect_accepted_socket")
    connect_read_pipe = _refused_io("connect_read_pipe")
    connect_write_pipe = _refused_io("connect_write_pipe")
    subprocess_exec = _refused_io("subprocess_exec")
    subprocess_shell = _refused_io("subprocess_shell")
    sock_connect = _refused_io("sock_connect")
    sock_accept = _refused_io("sock_accept")
    sock_recv = _refused_io("sock_recv")
    sock_recv_into = _refused_io("sock_recv_into")
    sock_recvfrom = _refused_io("sock_recvfrom")
    sock_recvfrom_into = _refused_io("sock_recvfrom_into")
    sock_sendall = _refused_io("sock_sendall")
    sock_sendto = _refused_io("sock_sendto")
    sock_sendfile = _refused_io("sock_sendfile")


class ScaledEventLoop(_SimulationLoop):
    """Real time sped up: ``time() = start + real_elapsed * speedup``; real I/O allowed.

    Raises :class:`ConfigError` for ``speedup <= 0`` and what :class:`VirtualEventLoop`
    refuses; :class:`WallBudgetExceeded` once ``wall_budget_s`` real seconds are spent.
    """

    def __init__(
        self, speedup: float = 10.0, *, start: float = 0.0, wall_budget_s: float | None = None
    ) -> None:
        self._closed = True  # BaseEventLoop.__del__ reads it even if validation raises
        _validate(start=start, wall_budget_s=wall_budget_s, speedup=speedup)
        self._speedup = float(speedup)
        self._real_start = time.monotonic()
        super().__init__(_ScaledSelector(self), start, wall_budget_s)
        self._clock_resolution = time.get_clock_info("monotonic").resolution * self._speedup

    @property
    def speedup(self) -> float:
        return self._speedup

    def time(self) -> float:
        return self._start + (time.monotonic() - self._real_start) * self._speedup
