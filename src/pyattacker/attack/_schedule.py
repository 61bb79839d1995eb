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
from itertools import count, islice

from pyattacker.attack._dispatch import Dispatcher
from pyattacker.attack._load import ClosedModel, OpenModel
from pyattacker.attack._mode import Admit, Flight, admit
from pyattacker.attack._overrun import drop_rest, schedule_end
from pyattacker.attack._plan import AttackPlan
from pyattacker.attack._requests import Requests
from pyattacker.attack._time import RunTime

__all__ = ["ClosedSchedule", "OpenSchedule"]

_YIELD_EVERY = 64  # overdue arrivals dispatched between two yields to the loop


class OpenSchedule:
    """The open model's arrivals from ``start``; ``last_offset`` is the last one's offset."""

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
    ) -> None:
        assert isinstance(plan.load, OpenModel)
        self.part = part  # (index, n): this worker's arrivals are k with k mod n == index
        self.plan, self.load, self.start, self.time = plan, plan.load, start, time
        self.flight, self.requests, self.dispatcher = flight, requests, dispatcher
        self.capacity = flight.capacity if queue_when_full else math.inf
        self.last_offset = 0.0

    async def run(self) -> None:
        plan, start, flight, time = self.plan, self.start, self.flight, self.time
        arrivals: Iterator[float] = self.load.arrivals(seed=plan.seed, duration=plan.duration)
        if plan.requests is not None:
            arrivals = islice(arrivals, plan.requests)
        numbered: Iterator[tuple[int, float]] = enumerate(arrivals)
        if self.part[1] > 1:  # one draw stream for all workers: each takes its share
            numbered = islice(numbered, self.part[0], None, self.part[1])
        over = start + schedule_end(plan)
        now, at, behind = time.now, time.at, 0
        tally, backlog, start_request = self.requests.tally, flight.backlog, self.dispatcher.start
        most, capacity = self.load.max_in_flight, self.capacity
        for n, offset in numbered:
            if flight.stopping is not None:  # stopped from inside this step (an on_record)
                return
            self.last_offset = offset
            scheduled = start + offset
            if now() < scheduled:
                behind = 0
                # Asleep until the instant (the kernel's timer, awaited directly: no chain
                # of coroutines). Woken late, every arrival due by then goes out in the
                # loop below at once, each on its own scheduled time: a late wake-up is
                # dispatch delay, measured and reported, never a shifted schedule.
                if at is not None:
                    await at(scheduled)
                else:
                    await time.wait_until(scheduled)
            else:
                # Late: dispatch at once, but let the loop breathe now and then (sends,
                # answers, the progress ticker and Ctrl-C all wait while we run).
                behind += 1
                if behind % _YIELD_EVERY == 0:
                    if now() >= over:  # past the schedule's end: the rest cannot start in time
                        drop_rest(tally, plan, n, offset, start, part=self.part)
                        return
                    await time.clock.sleep(0)
            busy = flight.leased + len(flight.unstarted)
            verdict = admit(flight.in_flight, most, len(backlog), busy, capacity)
            if verdict is Admit.DROP:
                tally.arrival(scheduled, flight.in_flight)
                self.requests.drop(n, scheduled)
                continue
            # Counted with the new request in: in-flight only rises here, so the window's
            # peak is at one of its arrivals (or carried from before it).
            flight.in_flight += 1
            tally.arrival(scheduled, flight.in_flight)
            if verdict is Admit.QUEUE:
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
