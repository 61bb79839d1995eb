"""The attack engine: turns a plan into timed attempts and honest records.

Contract (DESIGN.md §5):

- Every request has a ``scheduled`` time from the load model *before* anything else
  happens; the wait for a lease, the connection and the send all come after it and are
  visible (``acquired``, ``sent``). Latency is reported from ``scheduled`` (what a user
  sees, coordinated-omission corrected) and from ``sent`` (service time).
- The open model keeps its schedule whatever the server does. An arrival that finds
  ``max_in_flight`` requests in progress is *dropped and counted*; any other arrival is
  sent, late if it must be, and its lateness is recorded. None is skipped silently.
- Attempts follow the plan's :class:`~pyattacker.retry.Retrying`; each decision is counted
  by reason. A retry waits inside its request (holding no lease); its ``scheduled`` is when
  the delay ended, and the request's latency spans every attempt.
- ``stop()`` (Ctrl-C) stops scheduling, cancels what is in flight and records it as
  ``cancelled``; ``run()`` then returns the result of what happened so far.
- An attempt's ``error`` is one line of its exception, scrubbed of the plan's keys and
  secret header values *before* it is cut to 300 characters (a cut could leave half a key),
  so that no report, sample row or event can quote a key an error message carried.

Waits use :meth:`LoopClock.sleep_until` on real loops: uvloop's timers fire up to a
millisecond early or late, which would otherwise become dispatch delay (or, worse,
requests sent *before* their scheduled time). On a simulated loop they are exact.
"""

from __future__ import annotations

import asyncio
import random
import types
from collections import Counter, deque
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from itertools import count, islice

from pyattacker._secrets import is_secret_key, scrub
from pyattacker.attack._engine_parts import EngineTime, no_loop, p, returns
from pyattacker.attack._lag import LagProbe
from pyattacker.attack._load import ClosedModel, OpenModel
from pyattacker.attack._overrun import bound_wall_time, drop_rest, schedule_end
from pyattacker.attack._plan import AttackPlan, Target
from pyattacker.attack._result import AttackResult
from pyattacker.attack._send import HttpSender, Sender
from pyattacker.attack._tally import Tally
from pyattacker.clock import TIMER_SLACK_S, Clock, LoopClock, epoch_time, is_simulated
from pyattacker.errors import ErrorClass, error_class_of, retry_after_of
from pyattacker.measure import (
    Attempt,
    Outcome,
    RequestRecord,
    RequestStats,
)
from pyattacker.pool import (
    ANY,
    AcquireRequest,
    Immediate,
    Lease,
    Pool,
    Resource,
    Wait,
    resolve_algorithm,
)

__all__ = ["Engine", "Progress"]

_YIELD_EVERY = 64  # overdue arrivals dispatched between two yields to the loop


@types.coroutine
def _turn() -> Generator[None, None, None]:
    """Let the loop run one turn (``asyncio.sleep(0)``, with one object less)."""
    yield


@dataclass(frozen=True, slots=True)
class Progress:
    """A live view of a running attack (cheap enough to take a few times a second)."""

    elapsed: float
    planned: float | None  # arrivals the plan expected by now (open model)
    scheduled: int
    sent: int
    completed: int
    in_flight: int
    dropped: int
    failed: int
    throttled: int
    latency_p50: float | None
    latency_p99: float | None
    service_p50: float | None
    service_p99: float | None
    # LLM attacks: time to first token on the sent clock, and tokens generated so far
    ttft_p50: float | None = None
    ttft_p99: float | None = None
    completion_tokens: int | None = None


class Engine:
    """Runs one :class:`AttackPlan` through a :class:`Sender` (see the module docstring)."""

    def __init__(
        self,
        plan: AttackPlan,
        sender: Sender,
        *,
        clock: Clock | None = None,
        on_record: Callable[[RequestRecord], None] | None = None,
    ) -> None:
        self.plan = plan
        self.sender = sender
        self.clock: Clock = clock if clock is not None else LoopClock()
        self.on_record = on_record
        self._targets: dict[str, Target] = {t.id: t for t in plan.resolved_targets()}
        self._secrets = secrets_of(plan.keys, self._targets.values())
        self.algorithm = resolve_algorithm(plan.algorithm)
        self._name = self.algorithm.name
        # `wait` and `immediate` begin with a plain try_acquire on the pool: take that step
        # here, synchronously, and enter the algorithm only when it found nothing free.
        self._try_first = type(self.algorithm) in (Wait, Immediate)
        # Open-model arrivals that find every connection busy wait here, as (ordinal,
        # scheduled) pairs, rather than as thousands of tasks parked in the pool: a parked
        # task costs ~15 us more per request, which made a generator that fell behind once
        # fall further behind (measured: 12.5-16k req/s steady, then 6.5-11k/s). Only for
        # `wait` without a timeout, whose waiters would be served in this same FIFO order.
        self._queue_when_full = (
            isinstance(plan.load, OpenModel)
            and type(self.algorithm) is Wait
            and self.algorithm.timeout is None
        )
        self._backlog: deque[tuple[int, float]] = deque()
        # Direct requests that ended, waiting for _finish_direct (scheduled when true).
        self._ended: deque[tuple[Attempt, BaseException | None]] = deque()
        self._finish_soon = False
        # Open-model requests that need no retry are sent straight from the scheduler on an
        # idle connection, with no task and no coroutine (see _dispatch): their leases, and
        # the functions that abandon them, by request number, while they run.
        self._direct = (
            isinstance(plan.load, OpenModel)
            and self._try_first
            and plan.retry.max_attempts == 1
            and type(sender) is HttpSender
        )
        self._start_direct = sender.start if isinstance(sender, HttpSender) else None
        self._on_end = self._end_direct  # bound once: the direct path passes it per request
        self._live: dict[int, tuple[Lease, Callable[[], None] | None]] = {}
        self._drained: asyncio.Future[None] | None = None
        self._capacity = plan.connections * len(self._targets)
        self._leased = 0  # leases this engine holds now
        # Requests spawned whose task has not run yet: a stop that cancels such a task
        # before its first step never enters `_request`, so they are recorded from here.
        self._unstarted: dict[int, float] = {}
        self._pool_time = EngineTime(self.clock)
        self.pool = Pool(
            "targets",
            [
                # The lease's client is the target itself: the direct path reads it as is.
                Resource.create(
                    "http", id=target.id, capacity=plan.connections, factory=returns(target)
                )
                for target in self._targets.values()
            ],
            clock=self._pool_time,
            deadlock_warn_s=None,
        )
        self._rng = random.Random(plan.seed)
        self._affinity: dict[str, str] = {}
        self._tally = self._new_tally(0.0)
        self.decisions: Counter[str] = Counter()
        self._tasks: set[asyncio.Task[None]] = set()
        self._in_flight = 0
        self._start = 0.0
        self._stopping: str | None = None
        self._schedule_task: asyncio.Task[None] | None = None
        self._loop_clock: LoopClock | None = None
        self._call_soon: Callable[[Callable[[], None]], object] = no_loop
        self._now: Callable[[], float] = self.clock.now
        self._started_at = 0.0
        self._schedule_end: float | None = None
        self._last_offset = 0.0
        self._lag: LagProbe | None = None

    def _new_tally(self, origin: float) -> Tally:
        return Tally(
            origin=origin,
            window=self.plan.window,
            late_after=self.plan.late_after,
            per_target=len(self._targets) > 1,
            on_record=self.on_record,
        )

    @property
    def total(self) -> RequestStats:
        """Every finished request so far (safe to read while running)."""
        return self._counted().total

    # -- driving --------------------------------------------------------------------------

    async def run(self) -> AttackResult:
        """Run the plan to its end (or until :meth:`stop`) and return what was measured."""
        loop = asyncio.get_running_loop()
        self._call_soon = loop.call_soon
        clock = self.clock
        self._loop_clock = clock if isinstance(clock, LoopClock) else None
        self._now = clock.reader() if isinstance(clock, LoopClock) else clock.now
        self._pool_time.now = self._now
        self._started_at = epoch_time()
        self._start = self.clock.now()
        self._tally = self._new_tally(self._start)
        schedule = self._open() if isinstance(self.plan.load, OpenModel) else self._closed()
        self._schedule_task = loop.create_task(schedule)
        watchdog = bound_wall_time(self.plan, self._start, self._wait_until, self.stop)
        # On a real loop, watch how late our own loop runs (a simulated one is never late).
        real = self._loop_clock is not None and not is_simulated(loop)
        self._lag = LagProbe(loop, self._now) if real else None
        if self._lag is not None:
            self._lag.start()
        try:
            await self._run_to_end()
        except asyncio.CancelledError:
            # Cancelled from outside (wait_for, a task group): stop like Ctrl-C, leave no
            # request task behind, then let the cancellation go on.
            self.stop("cancelled")
            await asyncio.gather(*self._tasks, return_exceptions=True)
            raise
        finally:
            watchdog.cancel()
            if self._lag is not None:
                self._lag.stop()
        return self._result()

    async def _run_to_end(self) -> None:
        assert self._schedule_task is not None
        try:
            await self._schedule_task
        except asyncio.CancelledError:
            if self._stopping is None:
                raise
        self._schedule_end = self.clock.now()
        while True:
            if self._tasks:
                await asyncio.wait(set(self._tasks))
            elif self._live:  # only direct requests run: _finish_direct says when they ended
                self._drained = asyncio.get_running_loop().create_future()
                await self._drained
            elif self._backlog and self._stopping is None and self._has_room():
                # Nothing runs, yet arrivals are queued (the schedule ended in the turn the
                # last request did): admit them now. Each turn admits at least one.
                self._admit_backlog()
            else:
                break
            if self._stopping is not None:
                self._cancel_unstarted()
        if self._stopping is not None:
            # A stop in the very turn that spawned tasks cancels them before their first
            # step: they end without an await here, so record them now.
            self._cancel_unstarted()
        # Queued arrivals are admitted as leases come back, and a stop cancels them, so
        # none is left here unless the bookkeeping is wrong: then say so, do not hang.
        self._cancel_backlog()

    def stop(self, reason: str = "interrupted") -> None:
        """Stop scheduling and cancel what is in flight; ``run()`` returns soon after."""
        if self._stopping is not None:
            return
        self._stopping = reason
        if self._schedule_task is not None:
            self._schedule_task.cancel()
        for task in self._tasks:
            task.cancel()
        for _, abandon in list(self._live.values()):
            if abandon is not None:
                abandon()  # each ends at once (cancelled) ...
        self._finish_direct()  # ... and is recorded now
        self._cancel_backlog()

    def _cancel_unstarted(self) -> None:
        """Record requests whose task was cancelled before it ever ran as cancelled."""
        for n, scheduled in sorted(self._unstarted.items()):
            self._in_flight -= 1
            self._cancelled_unsent(n, scheduled)
        self._unstarted.clear()

    def _cancelled_unsent(self, n: int, scheduled: float) -> None:
        attempt = Attempt(request=n, attempt=1, scheduled=scheduled)
        attempt.outcome = Outcome.CANCELLED
        attempt.error_class = ErrorClass.CANCELLED.value
        self._count([attempt])

    def _cancel_backlog(self) -> None:
        """Record every queued arrival as cancelled: scheduled, never sent."""
        while self._backlog:
            n, scheduled = self._backlog.popleft()
            self._in_flight -= 1
            self._cancelled_unsent(n, scheduled)

    async def _wait_until(self, deadline: float) -> None:
        if self._now() >= deadline:
            return
        if self._loop_clock is not None:
            await self._loop_clock.sleep_until(deadline)
        else:
            await self.clock.sleep(deadline - self.clock.now())

    async def _open(self) -> None:
        load = self.plan.load
        assert isinstance(load, OpenModel)
        arrivals: Iterator[float] = load.arrivals(seed=self.plan.seed, duration=self.plan.duration)
        if self.plan.requests is not None:
            arrivals = islice(arrivals, self.plan.requests)
        cap = load.max_in_flight
        start = self._start
        behind = 0
        now = self._now
        # LoopClock.sleep_until's polling, inlined for arrivals due within TIMER_SLACK_S
        # (nearly all of them at high rates): one loop turn per poll, without the chain of
        # coroutines around each.
        poll = self._loop_clock is not None and not is_simulated(asyncio.get_running_loop())
        over = start + schedule_end(self.plan)
        for n, offset in enumerate(arrivals):
            if self._stopping is not None:  # stopped from inside this step (an on_record)
                return
            self._last_offset = offset
            scheduled = start + offset
            if now() < scheduled:
                behind = 0
                if poll and scheduled - now() <= TIMER_SLACK_S:
                    while now() < scheduled:  # polling is the point
                        await _turn()
                else:
                    await self._wait_until(scheduled)
            else:
                # Late: dispatch at once, but let the loop breathe now and then (sends,
                # answers, the progress ticker and Ctrl-C all wait while we run).
                behind += 1
                if behind % _YIELD_EVERY == 0:
                    if now() >= over:  # past the schedule's end: the rest cannot start in time
                        drop_rest(self._tally, self.plan, n, offset, start)
                        return
                    await self.clock.sleep(0)
            if self._in_flight >= cap:
                self._tally.arrival(scheduled, self._in_flight)
                self._drop(n, scheduled)
                continue
            # Counted with the new request in: in-flight only rises here, so the
            # window's peak is at one of its arrivals (or carried from before it).
            self._in_flight += 1
            self._tally.arrival(scheduled, self._in_flight)
            if self._queue_when_full and (
                self._backlog  # _has_room(), inlined below: once per arrival
                or self._leased + len(self._unstarted) >= self._capacity
            ):
                self._backlog.append((n, scheduled))  # in progress: waiting for a connection
            elif self._direct:
                self._dispatch(n, scheduled)
            else:
                self._spawn(n, scheduled)

    def _admit_backlog(self) -> None:
        """Start queued arrivals, oldest first, while a connection is free."""
        backlog = self._backlog
        start = self._dispatch if self._direct else self._spawn
        while backlog and self._stopping is None and self._has_room():
            start(*backlog.popleft())

    def _has_room(self) -> bool:
        """A connection is free for one more request: counting the requests spawned but
        not started yet, which the pool cannot see (without them, a whole backlog was
        admitted at once and parked in the pool: measured, it halved throughput)."""
        return self._leased + len(self._unstarted) < self._capacity

    async def _closed(self) -> None:
        load = self.plan.load
        assert isinstance(load, ClosedModel)
        ordinals = count()
        deadline = None if self.plan.duration is None else self._start + self.plan.duration
        limit = self.plan.requests
        await asyncio.gather(
            *(self._client(ordinals, deadline, limit, load.think_time) for _ in range(load.clients))
        )

    async def _client(
        self, ordinals: Iterator[int], deadline: float | None, limit: int | None, think: float
    ) -> None:
        scheduled = self._now()
        while self._stopping is None:
            if deadline is not None and scheduled >= deadline:
                return
            n = next(ordinals)
            if limit is not None and n >= limit:
                return
            self._in_flight += 1
            self._tally.arrival(scheduled, self._in_flight)
            await self._request(n, scheduled)
            # The next request is due one think time after this one ended: a late wake-up
            # from that pause is dispatch delay, not hidden.
            scheduled = self._now() + think
            await self._wait_until(scheduled)

    def _spawn(self, n: int, scheduled: float) -> None:
        self._unstarted[n] = scheduled
        task = asyncio.get_running_loop().create_task(self._request(n, scheduled, spawned=True))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- one request, sent directly -------------------------------------------------------

    def _dispatch(self, n: int, scheduled: float) -> None:
        """Send request ``n`` now, from this callback, if a lease and an idle connection
        are at hand; else leave it to a task (:meth:`_spawn`).

        The direct path does what :meth:`_request` does for a one-attempt request (the
        same records, decisions, lease and backlog handling: the engine tests run both),
        without the task and the chain of coroutines, which cost about a third of a
        request's CPU time: the difference between keeping and missing the open model's
        rate at tens of thousands of requests a second.
        """
        lease = self.pool.try_acquire(algorithm=self._name)
        if lease is None:
            self._spawn(n, scheduled)
            return
        target: Target = lease.client  # type: ignore[assignment]  # see the pool's factory
        # Positional: half the cost of keywords for a dataclass of 19 fields (~0.4 us).
        attempt = Attempt(n, 1, scheduled, lease.acquired_at)
        attempt.resource = target.id
        self._leased += 1
        # Noted as live once start() returns: an end it reports meanwhile (a connection
        # found closed) is only queued, and counted in a later callback, never before.
        try:
            assert self._start_direct is not None  # _direct says so
            abandon = self._start_direct(target, attempt, self._on_end)
        except Exception as exc:  # invalid input, a closed client: failed before sending
            self._live[n] = (lease, None)
            self._end_direct(attempt, exc)
            return
        if abandon is None:  # no idle connection (the first ones, or one closed): a task
            lease.release_now()
            self._leased -= 1
            self._spawn(n, scheduled)
        else:  # (it may have ended already, queued for _finish_direct: abandoning is a no-op)
            self._live[n] = (lease, abandon)

    def _end_direct(self, attempt: Attempt, error: BaseException | None) -> None:
        """A direct request ended (its waiter says so, from inside the connection's
        callbacks): note it, and count it at the end of this loop turn.

        Not here: the loop reads the other sockets that are ready in this turn after this
        callback returns, and each read is stamped when it runs. Counting a request here
        (~10 us) made the last reads of a busy turn late by that much per answer before
        them (measured: p99 +1.1 ms at 10,000 requests/s, against +0.05 ms when the
        counting came after the reads, as a task's wake-up does).
        """
        self._ended.append((attempt, error))
        if not self._finish_soon:
            self._finish_soon = True
            # The loop run() runs on: direct requests exist only inside it.
            self._call_soon(self._finish_direct)

    def _finish_direct(self) -> None:
        """Count the direct requests that ended, admit queued arrivals (safe here: not
        inside a connection's callbacks), and wake ``_run_to_end`` when none runs."""
        self._finish_soon = False
        ended, live, tally = self._ended, self._live, self._tally
        plain = not self.plan.feedback
        while ended:  # one at a time: whatever escapes leaves the rest queued
            attempt, error = ended.popleft()
            if error is not None or not plain:
                self._finish_one(attempt, error)
                continue
            # _finish_one's usual case, inlined: an answer, no feedback to give.
            held = live.pop(attempt.request, None)
            if held is None:  # ended twice (start() raised, then its connection failed too)
                continue
            attempt.outcome = Outcome.OK
            held[0].release_now()
            self._leased -= 1
            self._in_flight -= 1
            try:
                tally.finished_one(attempt)
            except Exception as exc:  # as _count reports it
                self._report(exc, "counting a finished request (or on_record) failed")
        if self._backlog:
            self._admit_backlog()
        if not self._live and self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def _finish_one(self, attempt: Attempt, error: BaseException | None) -> None:
        """As :meth:`_attempt`, :meth:`_attempts` and :meth:`_request` would end a
        one-attempt request."""
        n = attempt.request
        live = self._live.pop(n, None)
        if live is None:  # ended twice (start() raised, then its connection failed too)
            return
        lease = live[0]
        if error is None:
            attempt.outcome = Outcome.OK
            if self.plan.feedback:
                lease.report(ok=True, headers=attempt.headers)
        elif isinstance(error, asyncio.CancelledError):  # abandoned by stop()
            attempt.outcome = Outcome.CANCELLED
            attempt.error_class = ErrorClass.CANCELLED.value
        else:
            self._failed(attempt, error)
            if self.plan.feedback:
                lease.report(ok=False, error=error, headers=attempt.headers)
            decision = self.plan.retry.decide(
                error,
                attempts_used=1,
                rng=self._rng,
                elapsed=self.clock.now() - attempt.scheduled,
                now=epoch_time(),
            )
            self.decisions[decision.reason.value] += 1
        lease.release_now()
        self._leased -= 1
        self._in_flight -= 1
        self._count([attempt])

    # -- one request ----------------------------------------------------------------------

    async def _request(self, n: int, scheduled: float, *, spawned: bool = False) -> None:
        """One request, every attempt of it, counted however it ends.

        Cancelled by :meth:`stop`, it is counted and ends quietly; cancelled by anyone
        else, it is counted and the cancellation goes on.
        """
        attempts: list[Attempt] = []
        if spawned:
            del self._unstarted[n]  # it tries for a lease now, with no await before
        try:
            await self._attempts(n, scheduled, attempts)
        except asyncio.CancelledError:
            last = attempts[-1] if attempts else None
            if last is not None and last.end is None and last.outcome is not Outcome.DROPPED:
                # Cut off mid-attempt. An attempt that had ended (throttled, say, with the
                # stop coming during its backoff) keeps its outcome.
                last.outcome = Outcome.CANCELLED
                last.error_class = ErrorClass.CANCELLED.value
            if self._stopping is None:
                raise
        finally:
            self._in_flight -= 1
            if attempts:
                self._count(attempts)

    async def _attempts(self, n: int, scheduled: float, attempts: list[Attempt]) -> None:
        number = 1
        while True:
            attempt = Attempt(request=n, attempt=number, scheduled=scheduled)
            attempts.append(attempt)
            error = await self._attempt(attempt)
            if error is None:
                return
            decision = self.plan.retry.decide(
                error,
                attempts_used=number,
                rng=self._rng,
                elapsed=self.clock.now() - attempts[0].scheduled,
                now=epoch_time(),
            )
            self.decisions[decision.reason.value] += 1
            if not decision.retry or self._stopping is not None:
                return
            scheduled = self.clock.now() + decision.delay_s
            await self._wait_until(scheduled)
            number += 1

    async def _attempt(self, attempt: Attempt) -> BaseException | None:
        """One attempt: lease, send, classify, release. Returns the error, or None if ok."""
        lease = self.pool.try_acquire(algorithm=self._name) if self._try_first else None
        if lease is None:
            lease_or_error = await self._acquire(attempt)
            if isinstance(lease_or_error, BaseException):
                return lease_or_error
            lease = lease_or_error
        attempt.acquired = lease.acquired_at
        self._leased += 1
        resource_id = lease.resource.id
        attempt.resource = resource_id
        try:
            await self.sender.send(self._targets[resource_id], attempt)
        except asyncio.CancelledError:
            self._release(lease)
            # Cut off before its outcome was known, even if its answer had arrived (its
            # end is set): not a failure.
            attempt.outcome = Outcome.CANCELLED
            attempt.error_class = ErrorClass.CANCELLED.value
            raise
        except Exception as exc:
            self._failed(attempt, exc)
            if self.plan.feedback:
                lease.report(ok=False, error=exc, headers=attempt.headers)
            self._release(lease)
            return exc
        attempt.outcome = Outcome.OK
        if self.plan.feedback:
            lease.report(ok=True, headers=attempt.headers)
        self._release(lease)
        return None

    def _release(self, lease: Lease) -> None:
        """Give the lease back and let the oldest queued arrival have the connection."""
        lease.release_now()
        self._leased -= 1
        if self._backlog:
            self._admit_backlog()

    async def _acquire(self, attempt: Attempt) -> Lease | BaseException:
        """A lease through the algorithm, or the error that ended the attempt without one."""
        clock = self.clock
        request = AcquireRequest(
            pool=self.pool,
            selector=ANY,
            timeout=None,
            rng=self._rng,
            clock=clock,
            pools={"targets": self.pool},
            affinity=self._affinity,
            owner=None,
            algorithm=self._name,
            started=clock.now(),
        )
        try:
            return await self.algorithm.acquire(request)
        except Exception as exc:  # no lease: the algorithm gave up (immediate, timeouts)
            # Never sent, so no latency: the endpoint did not answer, we did not ask.
            attempt.outcome = Outcome.DROPPED
            attempt.error_class = error_class_of(exc).value
            attempt.error = one_line(exc, self._secrets)
            return exc

    def _failed(self, attempt: Attempt, exc: BaseException) -> BaseException:
        error_class = error_class_of(exc)
        attempt.error_class = error_class.value
        attempt.outcome = Outcome.of(attempt.status, error_class.value)
        attempt.retry_after = retry_after_of(exc)
        status = getattr(exc, "status", None)
        if attempt.status is None and isinstance(status, int):
            attempt.status = status
        attempt.error = one_line(exc, self._secrets)
        if attempt.end is None:
            attempt.end = self._now()
        return exc

    # -- bookkeeping --------------------------------------------------------------------

    def _count(self, attempts: list[Attempt]) -> None:
        """Count a finished request. The tally counts it before it calls the user's
        ``on_record``; if that raises (``--samples`` on a full disk), the error goes to the
        loop's exception handler, as a callback's would, and the run goes on: one failed
        write must not lose the other requests' records or the result. So does a request
        the tally refuses (a time from another clock than the engine's)."""
        try:
            self._tally.finished(attempts)
        except Exception as exc:
            self._report(exc, "counting a finished request (or on_record) failed")

    def _counted(self) -> Tally:
        """The tally with every finished request counted (its batch flushed): what the
        readers (:attr:`total`, :meth:`progress`, the result) read. A request it refuses
        is reported as :meth:`_count` reports one, never raised at the reader."""
        try:
            self._tally.flush()
        except Exception as exc:
            self._report(exc, "counting a finished request failed")
        return self._tally

    def _report(self, exc: Exception, message: str) -> None:
        loop = asyncio._get_running_loop()
        if loop is None:
            raise exc
        loop.call_exception_handler({"message": message, "exception": exc})

    def _drop(self, n: int, scheduled: float) -> None:
        attempt = Attempt(request=n, attempt=1, scheduled=scheduled, outcome=Outcome.DROPPED)
        attempt.error = "dropped: --max-in-flight requests were already in progress"
        self._count([attempt])

    def progress(self) -> Progress:
        """What has happened so far (safe to call while running)."""
        elapsed = self.clock.now() - self._start
        load = self.plan.load
        planned = load.planned(elapsed) if isinstance(load, OpenModel) else None
        total = self.total
        outcomes = total.by_outcome
        latency, service = total.latency, total.service_time  # each a merge: read once
        llm = self.plan.llm is not None
        return Progress(
            elapsed=elapsed,
            planned=planned,
            scheduled=self._tally.scheduled,
            sent=self._counted().sent,
            completed=total.requests,
            in_flight=self._in_flight,
            dropped=outcomes[Outcome.DROPPED.value],
            failed=outcomes[Outcome.FAILED.value],
            throttled=outcomes[Outcome.THROTTLED.value],
            latency_p50=p(latency, 50),
            latency_p99=p(latency, 99),
            service_p50=p(service, 50),
            service_p99=p(service, 99),
            ttft_p50=p(total.ttft, 50) if llm else None,
            ttft_p99=p(total.ttft, 99) if llm else None,
            completion_tokens=total.completion_tokens if llm else None,
        )

    def _schedule_span(self) -> float:
        """Seconds of plan the schedule covered: the planned span when it ran to its end
        (so 1,500 arrivals at 500/s cover 3 s, not the 2.998 s to the last arrival)."""
        end = self._schedule_end if self._schedule_end is not None else self.clock.now()
        ran = end - self._start
        plan, load = self.plan, self.plan.load
        if self._stopping is not None:
            return ran
        if isinstance(load, OpenModel):
            bounds = [b for b in (plan.duration, load.duration) if b is not None]
            if plan.requests is not None and self._tally.scheduled >= plan.requests:
                rate = load.rate_at(self._last_offset)
                return self._last_offset + (1 / rate if rate > 0 else 0.0)
            return min(bounds) if bounds else ran
        if plan.duration is not None and (
            plan.requests is None or self._tally.scheduled < plan.requests
        ):
            return plan.duration
        return ran

    def _result(self) -> AttackResult:
        tally = self._counted()
        return AttackResult(
            plan=self.plan,
            started_at=self._started_at,
            schedule_s=self._schedule_span(),
            elapsed=self.clock.now() - self._start,
            send_span_s=max(0.0, tally.last_sent - self._start),
            scheduled=tally.scheduled,
            sent=tally.sent,
            late=tally.late,
            total=tally.total,
            by_target=dict(tally.by_target)
            if len(self._targets) > 1
            else {next(iter(self._targets)): tally.total},
            windows=tally.windows.windows(),
            errors=tally.errors.groups(),
            decisions=dict(self.decisions),
            stop_reason=self._stopping,
            loop_lag=None if self._lag is None else self._lag.lag,
        )


def one_line(exc: BaseException, secrets: set[str]) -> str:
    """``Type: first line of the message``, scrubbed of ``secrets``, then cut to 300
    characters (scrubbed first: a cut through a key would leave its start unscrubbed)."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return scrub(f"{type(exc).__name__}: {first}", secrets)[:300]


def secrets_of(keys: Iterable[str], targets: Iterable[Target]) -> set[str]:
    """The plan's keys and every secret-looking header value of its targets (the whole
    value and, after a scheme word such as ``Bearer``, the credential alone)."""
    found = {key for key in keys if key}
    for target in targets:
        for name, value in target.headers:
            if is_secret_key(name) and value.strip():
                found.add(value.strip())
                _, _, credential = value.strip().partition(" ")
                if credential.strip():
                    found.add(credential.strip())
    return found
