"""The attack engine: turns a plan into timed attempts and honest records.

Contract (``docs/attack.md``):

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

How a run flows: :class:`~pyattacker.attack._mode.Mode` is decided once from the plan; a
schedule (``_schedule.py``) makes arrivals and admits each (``admit``); a dispatcher
(``_dispatch.py``: a task per request, or sent directly from a callback) starts it;
:class:`~pyattacker.attack._requests.Requests` settles every attempt in one place and
counts each request in the :class:`~pyattacker.attack._tally.Tally`; at the end
:meth:`AttackResult.build` assembles the result from the tally and the run's times.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

from pyattacker.attack._dispatch import DirectDispatcher, Dispatcher, TaskDispatcher
from pyattacker.attack._flow_stats import FlowTally
from pyattacker.attack._flows import FlowDispatcher, flow_mode, steps_for
from pyattacker.attack._lag import LagProbe
from pyattacker.attack._load import OpenModel
from pyattacker.attack._mode import Flight, Mode
from pyattacker.attack._overrun import bound_wall_time
from pyattacker.attack._plan import AttackPlan, Target
from pyattacker.attack._requests import Requests, report
from pyattacker.attack._result import AttackResult, RunTimes, schedule_span
from pyattacker.attack._schedule import ClosedSchedule, OpenSchedule
from pyattacker.attack._send import HttpSender, Sender
from pyattacker.attack._tally import Tally
from pyattacker.attack._time import PoolTime, RunTime
from pyattacker.attack._warmup import WarmupTally, without_warmup
from pyattacker.clock import Clock, LoopClock, cpu_time, epoch_time
from pyattacker.measure import Histogram, Outcome, RequestRecord, RequestStats
from pyattacker.pool import Pool, Resource, resolve_algorithm

__all__ = ["Engine", "Progress"]


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
    # each target's leases now: (target id, leases held, most it may hold)
    leases: tuple[tuple[str, int, int], ...] = ()
    # a worker's (attack --workers): its loop's largest lag since its previous progress,
    # and the CPU seconds it has spent (None in one process, and in the workers' whole)
    loop_lag_s: float | None = None
    cpu_s: float | None = None


class Engine:
    """Runs one :class:`AttackPlan` through a :class:`Sender` (see the module docstring)."""

    def __init__(
        self,
        plan: AttackPlan,
        sender: Sender,
        *,
        clock: Clock | None = None,
        on_record: Callable[[RequestRecord], None] | None = None,
        part: tuple[int, int] = (0, 1),
        run: int = 1,
        start_at: float | None = None,
    ) -> None:
        self.plan = plan
        # One worker of several (attack/_workers.py): its share of the open model's
        # arrivals (OpenModel.numbered, runs of ``run`` in turn), all from one instant on
        # the clock the workers share.
        self._part, self._run, self._start_at = part, run, start_at
        self.sender = sender
        self.clock: Clock = clock if clock is not None else LoopClock()
        self.on_record = on_record
        self._targets = [target.id for target in plan.resolved_targets()]
        self.algorithm = resolve_algorithm(plan.algorithm)
        self._mode = flow_mode(plan, Mode.of(plan, self.algorithm, sender))
        self._pool_time = PoolTime(self.clock)
        self.pool = Pool(
            "targets",
            [
                # The lease's client is the target itself: the direct path reads it as is.
                Resource.create(
                    "http", id=target.id, capacity=plan.connections, factory=_gives(target)
                )
                for target in plan.resolved_targets()
            ],
            clock=self._pool_time,
            deadlock_warn_s=None,
        )
        self.decisions: Counter[str] = Counter()
        self._flight = Flight(plan.connections * len(self._targets))
        self._tally = self._new_tally(0.0)
        self._start = self._started_at = 0.0
        self._schedule_end: float | None = None
        self._schedule: OpenSchedule | ClosedSchedule | None = None
        self._schedule_task: asyncio.Task[None] | None = None
        self._dispatcher: Dispatcher | None = None
        self._flows: FlowDispatcher | None = None  # a scenario's flows (plan.scenario)
        self._requests: Requests | None = None
        self._lag: LagProbe | None = None
        self._cpu_start: float | None = None

    def _new_tally(self, origin: float) -> Tally:
        plan = self.plan
        if plan.warmup is not None:  # the warmup's requests are counted apart
            return WarmupTally(plan.warmup, origin=origin, part=self._part, run=self._run,
                               window=plan.window, late_after=plan.late_after,
                               per_target=len(self._targets) > 1,
                               on_record=self.on_record)  # fmt: skip
        return Tally(
            origin=origin,
            window=plan.window,
            late_after=plan.late_after,
            per_target=len(self._targets) > 1,
            on_record=self.on_record,
        )

    @property
    def total(self) -> RequestStats:
        """Every finished request so far (safe to read while running)."""
        return self._counted().total

    def statistics(self) -> dict[str, int]:
        """The requests in progress now, by where they are: ``in_flight`` (admitted, not
        counted yet), ``queued`` for a connection, ``leased`` (holding one), ``unstarted``
        (handed to a task that has not run), in ``tasks``, sent ``direct``."""
        return self._flight.statistics()

    # -- driving --------------------------------------------------------------------------

    async def run(self) -> AttackResult:
        """Run the plan to its end (or until :meth:`stop`) and return what was measured."""
        loop = asyncio.get_running_loop()
        if self._start_at is not None and self._flight.stopping is None:
            await self.clock.sleep(max(0.0, self._start_at - self.clock.now()))
        time, schedule, dispatcher, requests = self._begin(loop)
        watchdog = bound_wall_time(self.plan, self._start, time.wait_until, self.stop)
        # On a real loop, watch how late our own loop runs (a simulated one is never late).
        if time.precise is not None:
            self._lag = LagProbe(time.call_at, time.now)
            self._lag.start()
        try:
            await self._run_to_end(schedule, dispatcher, requests)
        except asyncio.CancelledError:
            # Cancelled from outside (wait_for, a task group): stop like Ctrl-C, leave no
            # request task behind, then let the cancellation go on.
            self.stop("cancelled")
            await asyncio.gather(*self._flight.tasks, return_exceptions=True)
            raise
        finally:
            watchdog.cancel()
            time.close()
            if self._lag is not None:
                self._lag.stop()
        return self._result()

    def _begin(
        self, loop: asyncio.AbstractEventLoop
    ) -> tuple[RunTime, asyncio.Task[None], Dispatcher, Requests]:
        """The run's clock, tally, requests, dispatcher and schedule; the schedule starts."""
        time = RunTime(self.clock, loop)
        # CPU spent is a fact of a real run only: on simulated time it would vary with
        # the machine and make a reproducible run's report differ.
        self._cpu_start = cpu_time() if time.precise is not None else None
        self._pool_time.now = time.now
        self._started_at = epoch_time()
        self._start = self.clock.now() if self._start_at is None else self._start_at
        self._tally = self._new_tally(self._start)
        plan, mode, flight = self.plan, self._mode, self._flight
        requests = self._requests = Requests(
            plan,
            self.sender,
            pool=self.pool,
            algorithm=self.algorithm,
            try_first=mode.try_first,
            flight=flight,
            tally=self._tally,
            clock=self.clock,
            now=time.now,
            wait_until=time.wait_until,
            decisions=self.decisions,
        )
        dispatcher = self._dispatcher = self._dispatcher_for(requests, time)
        requests.admit_queued = dispatcher.admit_queued
        self._schedule = (
            OpenSchedule(
                plan, self._start, time, flight, requests, dispatcher,
                queue_when_full=mode.queue_when_full, part=self._part, run=self._run,
            )
            if mode.open
            else ClosedSchedule(plan, self._start, time, flight, requests, part=self._part,
                                one=None if self._flows is None else self._flows.run)
        )  # fmt: skip
        self._schedule_task = loop.create_task(self._schedule.run())
        return time, self._schedule_task, dispatcher, requests

    def _dispatcher_for(self, requests: Requests, time: RunTime) -> Dispatcher:
        sender, scenario = self.sender, self.plan.scenario
        if scenario is not None:
            steps = steps_for(sender)
            self._flows = FlowDispatcher(self.plan, scenario, requests, self._flight, steps, time,
                                         part=self._part)  # fmt: skip
            return self._flows
        if self._mode.direct and isinstance(sender, HttpSender):
            # Units of the one target rather than a Lease each, unless the plan reports
            # outcomes to the pool (feedback needs the lease).
            units = time.now if not self.plan.feedback and len(self._targets) == 1 else None
            return DirectDispatcher(
                requests, self._flight, self.pool, self.algorithm.name, sender, units
            )
        return TaskDispatcher(requests, self._flight)

    async def _run_to_end(
        self, schedule: asyncio.Task[None], dispatcher: Dispatcher, requests: Requests
    ) -> None:
        flight = self._flight
        try:
            await schedule
        except asyncio.CancelledError:
            if flight.stopping is None:
                raise
        self._schedule_end = self.clock.now()
        while True:
            if flight.tasks or flight.live:
                await dispatcher.wait()
            elif flight.backlog and flight.stopping is None and flight.has_room():
                # Nothing runs, yet arrivals are queued (the schedule ended in the turn the
                # last request did): admit them now. Each turn admits at least one.
                dispatcher.admit_queued()
            else:
                break
            if flight.stopping is not None:
                requests.cancel_unstarted()
        if flight.stopping is not None:
            # A stop in the very turn that spawned tasks cancels them before their first
            # step: they end without an await here, so record them now.
            requests.cancel_unstarted()
        # Queued arrivals are admitted as leases come back, and a stop cancels them, so
        # none is left here unless the bookkeeping is wrong: then say so, do not hang.
        requests.cancel_queued()

    def stop(self, reason: str = "interrupted") -> None:
        """Stop scheduling and cancel what is in flight; ``run()`` returns soon after."""
        if self._flight.stopping is not None:
            return
        self._flight.stopping = reason
        if self._schedule_task is not None:
            self._schedule_task.cancel()
        if self._dispatcher is not None:
            self._dispatcher.stop()
        if self._requests is not None:
            self._requests.cancel_queued()

    # -- what it measured -------------------------------------------------------------------

    def _counted(self) -> Tally:
        """The tally with every finished request counted (its batch flushed): what the
        readers (:attr:`total`, :meth:`progress`, the result) read. A request it refuses
        is reported as a failed count is, never raised at the reader."""
        try:
            self._tally.flush()
        except Exception as exc:
            report(exc, "counting a finished request failed")
        return self._tally

    def progress(self) -> Progress:
        """What has happened so far (safe to call while running)."""
        elapsed = self.clock.now() - self._start
        load = self.plan.load
        total = self.total
        outcomes = total.by_outcome
        latency, service = total.latency, total.service_time  # each a merge: read once
        llm = self.plan.llm is not None
        return Progress(
            elapsed=elapsed,
            planned=load.planned(elapsed) if isinstance(load, OpenModel) else None,
            scheduled=self._tally.scheduled,
            sent=self._counted().sent,
            completed=total.requests,
            in_flight=self._flight.in_flight,
            dropped=outcomes[Outcome.DROPPED.value],
            failed=outcomes[Outcome.FAILED.value],
            throttled=outcomes[Outcome.THROTTLED.value],
            latency_p50=_p(latency, 50),
            latency_p99=_p(latency, 99),
            service_p50=_p(service, 50),
            service_p99=_p(service, 99),
            ttft_p50=_p(total.ttft, 50) if llm else None,
            ttft_p99=_p(total.ttft, 99) if llm else None,
            completion_tokens=total.completion_tokens if llm else None,
            leases=tuple((s.id, s.active, s.capacity) for s in self.pool.snapshot()),
        )

    def snapshot(self) -> AttackResult:
        """What has been measured so far, as a result (safe to call while running, once
        :meth:`run` has begun): built from the tally when asked, never per request. While
        the schedule runs, it covers the time so far (so the planned and achieved rates are
        of that time), not the planned span the final result counts. Its counters and
        histograms are the tally's own, still counting: read it at once (``to_dict()``)."""
        result = self._result()
        if self._schedule_end is None and self._flight.stopping is None:
            result = replace(result, schedule_s=result.elapsed)
        return result

    def counted(self) -> tuple[Tally, RunTimes]:
        """The tally with every finished request counted, and the run's times so far: what
        a worker process hands back to be merged (attack/_merge.py)."""
        return self._counted(), self._times()

    @property
    def flows(self) -> FlowTally | None:
        """The flows counted so far (a plan with a scenario, once :meth:`run` began), else
        None: what a worker hands back beside its tally."""
        return None if self._flows is None else self._flows.tally

    def _times(self) -> RunTimes:
        now = self.clock.now()
        return RunTimes(
            started_at=self._started_at,
            start=self._start,
            schedule_end=self._schedule_end if self._schedule_end is not None else now,
            end=now,
            last_offset=0.0 if self._schedule is None else self._schedule.last_offset,
        )

    def _result(self) -> AttackResult:
        tally, times = self.counted()
        result = AttackResult.build(
            self.plan,
            tally,
            times,
            decisions=self.decisions,
            stop_reason=self._flight.stopping,
            loop_lag=None if self._lag is None else self._lag.lag,
        )
        if self._flows is not None:
            result.flows = self._flows.tally.stats(tally.scheduled)
        if self._cpu_start is not None:
            result.cpu_s = cpu_time() - self._cpu_start
        if not isinstance(tally, WarmupTally):
            return result
        full = schedule_span(self.plan, times, tally.scheduled + tally.warm_scheduled,
                             stopped=self._flight.stopping is not None)  # fmt: skip
        return without_warmup(result, tally, full)


def _gives(target: Target) -> Callable[[Resource], Target]:
    """A resource factory that gives ``target``: the lease's client is then the target."""

    def factory(_: Resource) -> Target:
        return target

    return factory


def _p(histogram: Histogram, q: float) -> float | None:
    """The ``q``-th percentile of ``histogram``, or None when it is empty."""
    return histogram.percentile(q) if histogram.count else None
