"""When requests arrive: the open model's schedule, or the closed model's clients.

The open model keeps its schedule whatever the server does: an arrival is admitted
(:func:`admit`) and started by the dispatcher, late if it must be (its lateness recorded),
queued for a connection, or dropped and counted; none is skipped silently. A closed-model
client sends its next request one think time after the last one ended.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Iterator
from itertools import count

from pyattacker.attack._dispatch import Dispatcher
from pyattacker.attack._load import ClosedModel, OpenModel
from pyattacker.attack._mode import DROP, QUEUE, Flight, admit
from pyattacker.attack._overrun import drop_rest, schedule_end
from pyattacker.attack._plan import AttackPlan
from pyattacker.attack._requests import Requests
from pyattacker.attack._time import RunTime
from pyattacker.clock import TimerEntry

__all__ = ["ClosedSchedule", "OpenSchedule", "wake_early"]

_YIELD_EVERY = 64  # overdue arrivals dispatched between two yields to the loop
_YIELD = -math.inf  # what ``_advance`` returns to let the loop run before it goes on

#: A wait shorter than this polls (one loop turn at a time, serving I/O) rather than
#: sleeping on the kernel timer: setting the timer and being woken by it cost more CPU
#: than a turn of the loop, so a wait this short is cheaper spent turning it (and is not
#: late by the wake-up). See benchmarks/README.md, "a schedule driven by its timer".
POLL_BELOW_S = 40e-6
#: At most how long before an arrival the timer is set for, the rest polled: the kernel's
#: wake-up comes tens to hundreds of microseconds late (later the longer the CPU slept),
#: and waking early takes that out of the dispatch delay. Never more than
#: ``POLL_SHARE`` of the wait, so polling costs at most that share of a core at any rate.
#: A worker of ``n`` (``attack --workers``) waits ``n`` times as long between its
#: arrivals, so it polls ``POLL_SHARE / n`` of its waits: it wakes as early before an
#: arrival as one process would at the same total rate, and the workers together poll
#: what that process polls (each polling 5 % of its own waits, two workers polled twice
#: what one process polls, and more when the host delayed their timers:
#: benchmarks/README.md, "the workers' polling").
#: Both are read on every wait (a benchmark may change them).
WAKE_EARLY_S = 250e-6
POLL_SHARE = 0.05


def wake_early(wait: float, workers: int) -> float:
    """How long before an arrival ``wait`` seconds away one of ``workers`` processes sets
    its timer for, the rest polled (see ``WAKE_EARLY_S``)."""
    return min(WAKE_EARLY_S, POLL_SHARE / workers * wait)


class OpenSchedule:
    """The open model's arrivals from ``start``; ``last_offset`` is the last one's offset.

    :meth:`_advance` starts every arrival that is due and says what to wait for next. On a
    real loop with a :class:`~pyattacker.clock.PreciseTimer` the timer calls the schedule
    back at that instant (:meth:`_step`): no future and no task to resume, which would add
    a loop turn to every wake-up. Elsewhere (simulated time, no kernel timer) a coroutine
    awaits each instant (:meth:`_run_awaiting`).
    """

    def __init__(
        self,
        plan: AttackPlan,
        start: float,
        time: RunTime,
        flight: Flight,
        requests: Requests,
        dispatcher: Dispatcher,
        *,
        queue_when_full: bool,
        part: tuple[int, int] = (0, 1),
        run: int = 1,
    ) -> None:
        assert isinstance(plan.load, OpenModel)
        # (index, n): this worker's arrivals are OpenModel.numbered's, runs of ``run``
        self.part, self.arrival_run = part, run
        self.plan, self.load, self.start, self.time = plan, plan.load, start, time
        self.flight, self.requests, self.dispatcher = flight, requests, dispatcher
        self.capacity = flight.capacity if queue_when_full else math.inf
        self.last_offset = 0.0
        # this worker's share of the one schedule (OpenModel.numbered says how it is drawn)
        self._arrivals = self.load.numbered(
            seed=plan.seed, duration=plan.duration, requests=plan.requests, part=part, run=run
        )
        self._next: tuple[int, float] | None = None  # the arrival waited for, if any
        self._behind = 0  # arrivals dispatched late since the last wait
        self._over = start + schedule_end(plan)
        self._done: asyncio.Future[None] | None = None
        self._pending: asyncio.Handle | TimerEntry | None = None
        self._woken_for = math.nan  # the instant the timer was last set to wake us for

    async def run(self) -> None:
        timer = self.time.timer
        if timer is None:
            await self._run_awaiting()
            return
        loop = asyncio.get_running_loop()
        self._done = loop.create_future()
        self._call_soon, self._call_at = loop.call_soon, timer.call_at
        self._step()
        try:
            await self._done
        finally:  # cancelled (a stop): no step after this
            if self._pending is not None:
                self._pending.cancel()

    def _step(self) -> None:
        """Start what is due, then have the loop or the timer call again (on the timer's
        callback, or a loop turn's)."""
        done = self._done
        assert done is not None
        self._pending = None
        if done.done():
            return
        try:
            deadline = self._advance()
        except Exception as exc:  # the schedule's error is its run's, as a task's would be
            done.set_exception(exc)
            return
        if deadline is None:
            done.set_result(None)
            return
        wait = deadline - self.time.now()
        if wait < POLL_BELOW_S or deadline == self._woken_for:  # (or _YIELD: -inf)
            self._pending = self._call_soon(self._step)  # woken early: poll the rest
        else:
            self._woken_for = deadline
            self._pending = self._call_at(deadline - wake_early(wait, self.part[1]), self._step)

    async def _run_awaiting(self) -> None:
        time = self.time
        while (deadline := self._advance()) is not None:
            if deadline == _YIELD:
                await time.clock.sleep(0)
            else:
                await time.wait_until(deadline)

    def _advance(self) -> float | None:
        """Start every arrival due by now, each on its own scheduled time. Returns the next
        arrival's instant (not yet due), ``_YIELD`` after a run of late ones (sends,
        answers, the progress ticker and Ctrl-C wait while this runs), or None: the
        schedule is over, or the rest could not start in time (then counted as dropped).

        Woken late, every arrival due by then goes out at once: a late wake-up is dispatch
        delay, measured and reported, never a shifted schedule."""
        plan, start, flight, now = self.plan, self.start, self.flight, self.time.now
        tally, backlog, start_request = self.requests.tally, flight.backlog, self.dispatcher.start
        most, capacity, arrivals = self.load.max_in_flight, self.capacity, self._arrivals
        upcoming, self._next = self._next, None
        while True:
            if upcoming is None:
                upcoming = next(arrivals, None)
                if upcoming is None:
                    return None
            if flight.stopping is not None:  # stopped from inside this step (an on_record)
                return None
            n, offset = upcoming
            self.last_offset = offset
            scheduled = start + offset
            if now() < scheduled:
                self._next, self._behind = upcoming, 0
                return scheduled
            self._behind += 1
            if self._behind % _YIELD_EVERY == 0:
                if now() >= self._over:  # past the schedule's end: none can start in time
                    drop_rest(tally, plan, n, offset, start, part=self.part, run=self.arrival_run)
                    return None
                self._next = upcoming  # dispatched when the loop calls again
                return _YIELD
            upcoming = None
            busy = flight.leased + len(flight.unstarted)
            verdict = admit(flight.in_flight, most, len(backlog), busy, capacity)
            if verdict is DROP:
                tally.arrival(scheduled, flight.in_flight)
                self.requests.drop(n, scheduled)
                continue
            # Counted with the new request in: in-flight only rises here, so the window's
            # peak is at one of its arrivals (or carried from before it).
            flight.in_flight += 1
            tally.arrival(scheduled, flight.in_flight)
            if verdict is QUEUE:
                backlog.append((n, scheduled))  # in progress: waiting for a connection
            else:
                start_request(n, scheduled)


class ClosedSchedule:
    """The closed model's clients, each sending its next request when the last ended."""

    def __init__(
        self,
        plan: AttackPlan,
        start: float,
        time: RunTime,
        flight: Flight,
        requests: Requests,
        *,
        one: Callable[[int, float], Awaitable[None]] | None = None,
        part: tuple[int, int] = (0, 1),
    ) -> None:
        assert isinstance(plan.load, ClosedModel)
        # (index, n): this worker's requests are numbered index, index + n, ... so that the
        # workers' numbers (a request's row of data, a warmup's first N) are one process's
        self.part = part
        self.plan, self.load, self.start, self.time = plan, plan.load, start, time
        self.flight, self.requests = flight, requests
        # what one turn of a client runs: a request, or a scenario's flow
        self.one = requests.request if one is None else one
        self.last_offset = 0.0  # the open model's figure: unused here

    async def run(self) -> None:
        index, n = self.part
        ordinals = count(index, n)
        duration = self.plan.duration
        deadline = None if duration is None else self.start + duration
        clients = (self._client(ordinals, deadline) for _ in range(self.load.clients))
        await asyncio.gather(*clients)

    async def _client(self, ordinals: Iterator[int], deadline: float | None) -> None:
        flight, tally, limit = self.flight, self.requests.tally, self.plan.requests
        if limit is not None:  # a worker's plan holds its share k: its numbers index + i * n, i < k
            limit = self.part[0] + limit * self.part[1]
        now, think = self.time.now, self.load.think_time
        scheduled = now()
        while flight.stopping is None:
            if deadline is not None and scheduled >= deadline:
                return
            n = next(ordinals)
            if limit is not None and n >= limit:
                return
            flight.in_flight += 1
            tally.arrival(scheduled, flight.in_flight)
            await self.one(n, scheduled)
            # The next request is due one think time after this one ended: a late wake-up
            # from that pause is dispatch delay, not hidden.
            scheduled = now() + think
            await self.time.wait_until(scheduled)
