"""The flow dispatcher: each arrival runs one flow of a scenario; each step is a request.

:class:`FlowDispatcher` is a :class:`~pyattacker.attack._dispatch.Dispatcher` (the open
model's schedule starts a flow per arrival, in a task of its own) and the closed model's
per-client runner (:meth:`FlowDispatcher.run`, one flow after another). A flow counts as
one request in flight (``--max-in-flight`` bounds flows) and holds a connection only while
one of its steps is out. An arrival that finds every connection leased waits in the
engine's queue as a plain one does (its flow starts when a step gives one back; its first
step is still scheduled at the arrival), rather than as a task parked in the pool.

Each step is a request of the attack, named: a lease (:meth:`Requests.lease`), the step
sent through a :class:`~pyattacker.attack.StepSender`, settled where every attempt is
(:meth:`Requests.settle`), retried only as the plan's policy says, and counted in the
tally as it ends, so that every request a flow sends is counted, including the one a stop
cuts off (as cancelled). See ``_flow_client.py`` for what a step's scheduled time is, and
``_flow_stats.py`` for how flows are counted.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import replace

from pyattacker.attack._flow_client import (
    FlowClient,
    HttpSteps,
    Step,
    StepFailed,
    StepSender,
    hop_of,
    status_error,
    step_to,
)
from pyattacker.attack._flow_stats import FlowTally
from pyattacker.attack._mode import Flight, Mode
from pyattacker.attack._plan import AttackPlan, Target
from pyattacker.attack._redirects import Hop, next_hop
from pyattacker.attack._requests import Requests, one_line, secrets_of
from pyattacker.attack._scenario import Scenario
from pyattacker.attack._send import HttpSender, Sender
from pyattacker.attack._time import RunTime
from pyattacker.attack._warmup import WarmupTally
from pyattacker.errors import ConfigError, ErrorClass, RedirectError
from pyattacker.http import Response
from pyattacker.measure import Attempt, Outcome

__all__ = ["FlowDispatcher", "flow_mode", "steps_for"]


def flow_mode(plan: AttackPlan, mode: Mode) -> Mode:
    """``mode`` for a scenario's plan: no request goes out from a callback (a step runs in
    its flow's task)."""
    if plan.scenario is None:
        return mode
    return replace(mode, direct=False)


def steps_for(sender: Sender) -> StepSender:
    """How a scenario's steps are sent: by ``sender`` when it sends steps (a test's fake),
    over HTTP through an :class:`HttpSender`'s client otherwise."""
    if isinstance(sender, StepSender):
        return sender
    if isinstance(sender, HttpSender):
        return HttpSteps(sender.client)
    raise ConfigError(
        f"a scenario's steps need an HttpSender or a StepSender, got {type(sender).__name__}",
        field="sender",
    )


class FlowDispatcher:
    """Flows of ``scenario``, their steps sent through ``steps`` (see the module docstring).

    ``tally`` counts the flows; the requests' own tally (``requests.tally``) counts the
    steps, by name. ``part``: this worker's (index, n), whose steps are numbered apart
    from the other workers'."""

    def __init__(
        self,
        plan: AttackPlan,
        scenario: Scenario,
        requests: Requests,
        flight: Flight,
        steps: StepSender,
        time: RunTime,
        *,
        part: tuple[int, int] = (0, 1),
    ) -> None:
        self._scenario, self._requests, self._flight, self._steps = (
            scenario,
            requests,
            flight,
            steps,
        )
        self._now, self._wait_until = time.now, time.wait_until
        self._follow = plan.follow_redirects  # hops a step follows, as a plain request
        self._secrets = secrets_of(plan.keys, plan.resolved_targets())
        self._create_task = asyncio.get_running_loop().create_task
        # Steps are numbered apart from arrivals; a worker's (index, n) as index + k * n,
        # so that no two workers give one number (a sample row's ``request``).
        self._numbers = itertools.count(*part)
        self.tally = FlowTally(scenario.label)
        # A warmup's flows are counted apart, in a tally nobody reports: its arrivals are
        # in no figure, and its flows must not be either (FlowStats.warmup says how many).
        self._apart = FlowTally(scenario.label)
        counted = requests.tally
        self._warm = counted.warm_arrival if isinstance(counted, WarmupTally) else None
        self._warm_flows: set[int] = set()  # the warmup's flows in progress: their steps too

    # -- the Dispatcher protocol (open model) -----------------------------------------------

    def start(self, n: int, scheduled: float) -> None:
        self._flight.unstarted[n] = scheduled  # a connection is promised to it
        task = self._create_task(self.run(n, scheduled, spawned=True))
        tasks = self._flight.tasks
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def admit_queued(self) -> None:
        flight = self._flight
        while flight.backlog and flight.stopping is None and flight.has_room():
            self.start(*flight.backlog.popleft())

    def stop(self) -> None:
        """Cancel every flow; the ones that never began (queued, or a task that has not
        run, which a cancel ends before its first line) are counted as cancelled here:
        they sent nothing, so no request is counted for them."""
        flight = self._flight
        for task in flight.tasks:
            task.cancel()
        never = len(flight.unstarted) + len(flight.backlog)
        flight.unstarted.clear()
        flight.backlog.clear()
        flight.in_flight -= never
        self.tally.admitted += never
        self.tally.cancelled += never

    async def wait(self) -> None:
        await asyncio.wait(set(self._flight.tasks))

    # -- one flow ---------------------------------------------------------------------------

    async def run(self, n: int, scheduled: float, *, spawned: bool = False) -> None:
        """Flow ``n``, scheduled at ``scheduled``, counted however it ends. Cancelled by a
        stop, it is counted and ends quietly; by anyone else, the cancellation goes on."""
        if spawned:
            del self._flight.unstarted[n]  # it runs now: it asks for its own connections
        tally, scenario = self.tally, self._scenario
        if self._warm is not None and self._warm(n, scheduled):
            tally.warm += 1
            tally = self._apart
            self._warm_flows.add(n)
        tally.admitted += 1
        tally.started += 1
        client = FlowClient(self._step, (self._now, self._wait_until), n, scheduled, None)
        try:
            client.row = scenario.row(n)
            if scenario.takes_row:
                await scenario.function(client, client.row)
            else:
                await scenario.function(client)
        except asyncio.CancelledError:
            tally.cancelled += 1
            if self._flight.stopping is None:
                raise
        except StepFailed as exc:
            self._failed(tally, client, exc.step, None)
        except Exception as exc:  # the flow's own code: counted, the attack goes on
            self._failed(tally, client, None, exc)
        else:
            if client.cancelled:  # its code caught the stop's cancellation, then returned
                tally.cancelled += 1
            else:
                tally.finished(self._now() - scheduled)
        finally:
            self._flight.in_flight -= 1
            self._warm_flows.discard(n)

    def _failed(
        self, tally: FlowTally, client: FlowClient, step: str | None, error: Exception | None
    ) -> None:
        if client.cancelled:  # the stop's cancellation, turned into an error by its code
            tally.cancelled += 1
        elif step is not None:
            tally.failed_at(step)
        else:
            tally.failed_in_code(one_line(error or Exception(), self._secrets))

    # -- one step ---------------------------------------------------------------------------

    async def _step(self, client: FlowClient, step: Step) -> Response:
        """One step of ``client``'s flow, counted however it ends; the stop's cancellation
        goes on to the flow (after the step is counted as cancelled)."""
        if self._flight.stopping is not None:  # no new step once the attack is stopping
            client.cancelled = True
            raise asyncio.CancelledError
        scheduled = client.scheduled()
        attempts: list[Attempt] = []
        try:
            return await self._attempts(step, next(self._numbers), scheduled, attempts)
        except asyncio.CancelledError:
            client.cancelled = True
            last = attempts[-1] if attempts else None
            if last is not None and last.end is None and last.outcome is not Outcome.DROPPED:
                last.outcome = Outcome.CANCELLED
                last.error_class = ErrorClass.CANCELLED.value
            raise
        finally:
            if attempts:  # a warmup's flow's steps are the warmup's, whatever their time
                warm = None if self._warm is None else client.flow in self._warm_flows
                self._requests.count(attempts, warm)

    async def _attempts(
        self, step: Step, n: int, scheduled: float, attempts: list[Attempt]
    ) -> Response:
        """Every attempt of a step: a redirect's hops (``follow_redirects``, each hop one
        more attempt, at once, as on the plain path: ``Requests._attempts``), then retries
        as the plan's policy decides; raises :class:`StepFailed` when the last one failed."""
        number, hop, hops = 1, None, 0
        while True:
            attempt = Attempt(n, number, scheduled)
            attempt.name = step.name
            attempts.append(attempt)
            response, error, sent_to = await self._attempt(step, attempt, hop, hops < self._follow)
            if error is None:
                assert response is not None
                return response
            if isinstance(error, RedirectError) and hops < self._follow:
                assert sent_to is not None  # a redirect is an answer: it went somewhere
                following = next_hop(error, hop or hop_of(sent_to, step))
                if following is not None and self._flight.stopping is None:
                    hop, hops, number = following, hops + 1, number + 1
                    scheduled = self._now()
                    continue
            decision = self._requests.decide(error, number, attempts[0].scheduled)
            if not decision.retry or self._flight.stopping is not None:
                raise StepFailed(step.name, error, response) from error
            scheduled = self._now() + decision.delay_s
            await self._wait_until(scheduled)
            number += 1

    async def _attempt(
        self, step: Step, attempt: Attempt, hop: Hop | None, follow: bool
    ) -> tuple[Response | None, BaseException | None, Target | None]:
        """One attempt (to ``hop``'s URL if given, else the step's on the lease's target):
        lease, send, settle. Returns the answer (if any), the error that failed it (None
        if it went OK; a redirect to follow when ``follow``) and the target it went to."""
        requests = self._requests
        lease = await requests.lease(attempt)
        if isinstance(lease, BaseException):
            return None, lease, None
        target: Target = lease.client  # type: ignore[assignment]  # see the engine's pool
        sent = step
        if hop is not None:  # counted under the target the step began at, as a plain hop
            target, sent = hop.target, step_to(hop, step)
            attempt.resource = target.id
        response: Response | None = None
        error: BaseException | None
        try:
            response = await self._steps.send_step(target, sent, attempt)
            error = status_error(sent, response, follow=follow)
        except asyncio.CancelledError as exc:
            requests.settle(attempt, lease, exc)
            raise
        except Exception as exc:
            error = exc
        requests.settle(attempt, lease, error)
        if self._flight.backlog:  # the connection it gave back starts a queued flow
            self.admit_queued()
        return response, error, target
