"""Dispatchers: how an admitted request starts, chosen once per run (see ``Mode.direct``).

:class:`TaskDispatcher` runs each request in a task (:meth:`Requests.request`): every
plan can. :class:`DirectDispatcher` sends a one-attempt request from the scheduler's own
callback on an idle keep-alive connection, with no task and no coroutine, and finishes it
from the connection's callbacks: the same records, decisions, lease and backlog handling
(:meth:`Requests.settle` ends an attempt on both, and :meth:`Requests.finish_direct`
counts a plain OK answer as settling its attempt would; the engine tests run both), at
less cost per request, which is what keeps the open model's rate at tens of thousands a
second. A request it cannot send that way (no idle connection) goes to a task.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Protocol

from pyattacker.attack._mode import Flight
from pyattacker.attack._plan import Target
from pyattacker.attack._requests import Requests
from pyattacker.attack._send import DirectRequest, HttpSender
from pyattacker.pool import Pool

__all__ = ["DirectDispatcher", "Dispatcher", "TaskDispatcher"]


class Dispatcher(Protocol):
    def start(self, n: int, scheduled: float) -> None:
        """Start request ``n`` (admitted, counted in flight) now."""
        ...

    def admit_queued(self) -> None:
        """Start queued arrivals, oldest first, while a connection is free."""
        ...

    def stop(self) -> None:
        """Cancel every request in progress; each is counted, now or as its task ends."""
        ...

    async def wait(self) -> None:
        """Wait until some request in progress has ended (``Flight.tasks`` or ``live``)."""
        ...


class TaskDispatcher:
    """Each request in a task of its own."""

    def __init__(self, requests: Requests, flight: Flight) -> None:
        self._requests, self._flight = requests, flight
        self._create_task = asyncio.get_running_loop().create_task

    def start(self, n: int, scheduled: float) -> None:
        self._flight.unstarted[n] = scheduled
        task = self._create_task(self._requests.request(n, scheduled, spawned=True))
        tasks = self._flight.tasks
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def admit_queued(self) -> None:
        _admit_queued(self._flight, self.start)

    def stop(self) -> None:
        for task in self._flight.tasks:
            task.cancel()

    async def wait(self) -> None:
        await asyncio.wait(set(self._flight.tasks))


class DirectDispatcher:
    """One-attempt requests sent from the caller's callback when a connection is idle;
    the others through ``tasks``."""

    def __init__(
        self,
        requests: Requests,
        flight: Flight,
        pool: Pool,
        algorithm: str,
        sender: HttpSender,
        units: Callable[[], float] | None = None,
    ) -> None:
        self._requests, self._flight, self._pool = requests, flight, pool
        self._tasks = TaskDispatcher(requests, flight)
        self._name = algorithm
        # With ``units`` (the pool's clock), a request holds a unit of the pool's one
        # resource rather than a Lease when one is at hand (Pool.take_unit): the plan asks
        # no feedback of it, and a Lease per request is a large share of its cost.
        self._now, self._take_unit = units, pool.take_unit
        self._send = sender.start
        self._on_end = self._end  # bound once: passed with every request
        self._call_soon = asyncio.get_running_loop().call_soon
        self._ended: deque[DirectRequest] = deque()
        self._finish_soon = False
        self._drained: asyncio.Future[None] | None = None

    def start(self, n: int, scheduled: float) -> None:
        now, lease = self._now, None
        acquired = 0.0 if now is None else now()
        client = None if now is None else self._take_unit(acquired, self._name)
        if client is None:  # no unit at hand (or units not asked for): a lease
            lease = self._pool.try_acquire(algorithm=self._name)
            if lease is None:
                self._tasks.start(n, scheduled)
                return
            client, acquired = lease.client, lease.acquired_at
        target: Target = client  # type: ignore[assignment]  # see the pool's factory
        request = DirectRequest(n, scheduled, acquired, lease, target.id, self._on_end)
        flight = self._flight
        flight.leased += 1
        # Noted as live once the send returns: an end it reports meanwhile (a connection
        # found closed) is only queued, and counted in a later callback, never before.
        try:
            abandon = self._send(target, request)
        except Exception as exc:  # invalid input, a closed client: failed before sending
            flight.live[n] = request
            request.end(exc)
            return
        if abandon is None:  # no idle connection (the first ones, or one closed): a task
            self._requests.give_back(lease, acquired)
            self._tasks.start(n, scheduled)
        else:  # (it may have ended already, queued for _finish: abandoning is a no-op)
            request.abandon = abandon
            flight.live[n] = request

    def _end(self, request: DirectRequest) -> None:
        """A direct request ended (it says so, from inside the connection's callbacks):
        note it, and count it at the end of this loop turn.

        Not here: the loop reads the other sockets that are ready in this turn after this
        callback returns, and each read is stamped when it runs; counting here would make
        the last reads of a busy turn late by the counting of every answer before them,
        where a task's wake-up comes after the reads.
        """
        self._ended.append(request)
        if not self._finish_soon:
            self._finish_soon = True
            self._call_soon(self._finish)

    def _finish(self) -> None:
        """End the direct requests that ended, admit queued arrivals (safe here: not
        inside a connection's callbacks), and wake :meth:`wait` when none runs."""
        self._finish_soon = False
        ended, live, finish = self._ended, self._flight.live, self._requests.finish_direct
        while ended:  # one at a time: whatever escapes leaves the rest queued
            request = ended.popleft()
            if live.pop(request.request, None) is None:
                continue  # ended twice (the send raised, then its connection failed too)
            finish(request)
        if self._flight.backlog:
            self.admit_queued()
        if not live and self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def admit_queued(self) -> None:
        _admit_queued(self._flight, self.start)

    def stop(self) -> None:
        self._tasks.stop()
        for request in list(self._flight.live.values()):
            if request.abandon is not None:
                request.abandon()  # each ends at once (cancelled) ...
        self._finish()  # ... and is counted now

    async def wait(self) -> None:
        if self._flight.tasks:
            await self._tasks.wait()
        elif self._flight.live:  # only direct requests run: _finish says when they ended
            self._drained = asyncio.get_running_loop().create_future()
            await self._drained


def _admit_queued(flight: Flight, start: Callable[[int, float], None]) -> None:
    backlog = flight.backlog
    while backlog and flight.stopping is None and flight.has_room():
        start(*backlog.popleft())
