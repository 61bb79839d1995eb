"""One request's life in the engine: a lease, the attempts, how each ends, and its count.

:meth:`Requests.settle` is the one place an attempt ends, whichever dispatcher sent it:
its outcome, the pool's feedback, the lease given back. :meth:`Requests.request` is a
request as a task runs it (every attempt, with the plan's retries);
:meth:`Requests.finish_one` ends a one-attempt request sent from a callback.

An attempt's ``error`` is one line of its exception, scrubbed of the plan's keys and
secret header values *before* it is cut to 300 characters (a cut could leave half a key),
so that no report, sample row or event can quote a key an error message carried.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable

from pyattacker._secrets import is_secret_key, scrub
from pyattacker.attack._mode import Flight
from pyattacker.attack._plan import AttackPlan, Target
from pyattacker.attack._redirects import Hop, next_hop
from pyattacker.attack._send import DirectRequest, Sender
from pyattacker.attack._tally import Tally
from pyattacker.clock import Clock, epoch_time
from pyattacker.errors import ErrorClass, RedirectError, error_class_of, retry_after_of
from pyattacker.measure import Attempt, Outcome
from pyattacker.pool import ANY, AcquireAlgorithm, AcquireRequest, Lease, Pool
from pyattacker.retry import RetryDecision

__all__ = ["Requests", "one_line", "report", "secrets_of"]

_OK = Outcome.OK  # read per request: a module name costs less than an Enum member

DROPPED = "dropped: --max-in-flight requests were already in progress"


class Requests:
    """Every request of one run, from its lease to its count in ``tally``.

    ``admit_queued`` lets queued arrivals have the connections that came back (the
    dispatcher's, set once it exists).
    """

    def __init__(
        self,
        plan: AttackPlan,
        sender: Sender,
        *,
        pool: Pool,
        algorithm: AcquireAlgorithm,
        try_first: bool,
        flight: Flight,
        tally: Tally,
        clock: Clock,
        now: Callable[[], float],
        wait_until: Callable[[float], Awaitable[None]],
        decisions: Counter[str],
    ) -> None:
        self._retry, self._feedback = plan.retry, plan.feedback
        self._follow, self._method, self._body = plan.follow_redirects, plan.method, plan.body
        self._sender = sender
        self._targets = {t.id: t for t in plan.resolved_targets()}
        self._secrets = secrets_of(plan.keys, self._targets.values())
        self._pool, self._algorithm, self._name = pool, algorithm, algorithm.name
        self._try_first = try_first
        self._rng = random.Random(plan.seed)
        self._affinity: dict[str, str] = {}
        self._flight, self.tally = flight, tally
        # A plain OK answer is counted from its row unless the pool hears how it went or
        # someone wants its record (finish_direct).
        self._plain = not plan.feedback and tally.batching
        self._clock, self._now, self._wait_until = clock, now, wait_until
        self.decisions = decisions
        self.admit_queued: Callable[[], None] = _nothing

    # -- how an attempt ends ---------------------------------------------------------------

    def settle(self, attempt: Attempt, lease: Lease | None, error: BaseException | None) -> None:
        """End ``attempt``, sent on ``lease``: OK when ``error`` is None, cancelled when it
        is a ``CancelledError`` (cut off before its outcome was known, even if its answer
        had arrived: not a failure), else failed and classified. The pool hears how it
        went when the plan asks for feedback, and what the attempt held goes back
        (:meth:`give_back`). Queued arrivals are the caller's to let in: a task does at
        once, the direct path once a turn."""
        if error is None:
            attempt.outcome = _OK
            if self._feedback and lease is not None:
                lease.report(ok=True, headers=attempt.headers)
        elif isinstance(error, asyncio.CancelledError):
            attempt.outcome = Outcome.CANCELLED
            attempt.error_class = ErrorClass.CANCELLED.value
        else:
            self._failed(attempt, error)
            if self._feedback and lease is not None:
                lease.report(ok=False, error=error, headers=attempt.headers)
        self.give_back(lease, attempt.acquired)

    def give_back(self, lease: Lease | None, acquired: float | None) -> None:
        """A request lets go of its connection: its lease goes back, or (``lease`` None)
        the unit of the pool's one resource it took at ``acquired`` (``Pool.take_unit``:
        the direct path of a plan without feedback)."""
        if lease is not None:
            lease.release_now()
        else:
            assert acquired is not None  # set when the unit was taken
            self._pool.give_unit(acquired)
        self._flight.leased -= 1

    def finish_direct(self, request: DirectRequest) -> None:
        """End a request sent directly (the engine's direct path): counted from its fields
        when it ended a plain OK answer and nobody asks more of it (no feedback, no
        record), with no :class:`Attempt` built; else as :meth:`finish_one` does."""
        timing = request.timing
        if (
            request.error is None
            and self._plain
            and timing is not None
            and timing.sent is not None
            and timing.end is not None
        ):
            self.give_back(request.lease, request.acquired)
            self._flight.in_flight -= 1
            row = (
                request.request, request.scheduled, timing.sent, timing.first_byte,
                timing.end, request.status, request.bytes_sent, request.bytes_received,
                None, request.name,
            )  # fmt: skip
            try:
                self.tally.finished_plain(row)
            except Exception as exc:  # as count() reports it
                report(exc, "counting a finished request (or on_record) failed")
            return
        self.finish_one(request.attempt(), request.lease, request.error)

    def finish_one(
        self, attempt: Attempt, lease: Lease | None, error: BaseException | None
    ) -> None:
        """End a one-attempt request sent from a callback: settled, a failure's retry
        decision counted (the plan allows one attempt: it is never retried), counted."""
        self.settle(attempt, lease, error)
        if error is not None and not isinstance(error, asyncio.CancelledError):
            self.decide(error, 1, attempt.scheduled)
        self._flight.in_flight -= 1
        try:
            self.tally.finished_one(attempt)
        except Exception as exc:  # as count() reports it
            report(exc, "counting a finished request (or on_record) failed")

    def decide(self, error: BaseException, attempts_used: int, first: float) -> RetryDecision:
        """The plan's retry decision after a failed attempt, counted by its reason
        (``first``: when the request's first attempt was scheduled)."""
        decision = self._retry.decide(
            error,
            attempts_used=attempts_used,
            rng=self._rng,
            elapsed=self._clock.now() - first,
            now=epoch_time(),
        )
        self.decisions[decision.reason.value] += 1
        return decision

    def _failed(self, attempt: Attempt, exc: BaseException) -> None:
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

    # -- a request in a task ---------------------------------------------------------------

    async def request(self, n: int, scheduled: float, *, spawned: bool = False) -> None:
        """Request ``n``, every attempt of it, counted however it ends.

        Cancelled by a stop, it is counted and ends quietly; cancelled by anyone else, it
        is counted and the cancellation goes on.
        """
        attempts: list[Attempt] = []
        if spawned:
            del self._flight.unstarted[n]  # it tries for a lease now, with no await before
        try:
            await self._attempts(n, scheduled, attempts)
        except asyncio.CancelledError:
            last = attempts[-1] if attempts else None
            if last is not None and last.end is None and last.outcome is not Outcome.DROPPED:
                # Cut off mid-attempt. An attempt that had ended (throttled, say, with the
                # stop coming during its backoff) keeps its outcome.
                last.outcome = Outcome.CANCELLED
                last.error_class = ErrorClass.CANCELLED.value
            if self._flight.stopping is None:
                raise
        finally:
            self._flight.in_flight -= 1
            if attempts:
                self.count(attempts)

    async def _attempts(self, n: int, scheduled: float, attempts: list[Attempt]) -> None:
        number, hop, hops = 1, None, 0
        while True:
            attempt = Attempt(request=n, attempt=number, scheduled=scheduled)
            attempts.append(attempt)
            error = await self._attempt(attempt, hop)
            if error is None:
                return
            if isinstance(error, RedirectError) and hops < self._follow:
                # A hop is the next attempt, at once: not a retry (no decision, no delay).
                following = next_hop(error, hop or self._first_hop(attempt))
                if following is not None and self._flight.stopping is None:
                    hop = following
                    hops += 1
                    number += 1
                    scheduled = self._clock.now()
                    continue
            decision = self.decide(error, number, attempts[0].scheduled)
            if not decision.retry or self._flight.stopping is not None:
                return
            scheduled = self._clock.now() + decision.delay_s
            await self._wait_until(scheduled)
            number += 1

    def _first_hop(self, attempt: Attempt) -> Hop:
        """What ``attempt`` (not a hop) sent, as the hop a redirect starts from."""
        target = self._targets[attempt.resource or ""]
        return Hop(target, self._method, self._body)

    async def _attempt(self, attempt: Attempt, hop: Hop | None = None) -> BaseException | None:
        """One attempt (to ``hop``'s target if given, else to the lease's): lease, send,
        settle. Returns the error, or None if it went OK."""
        lease = await self.lease(attempt)
        if isinstance(lease, BaseException):
            return lease
        resource_id = lease.resource.id
        try:
            if hop is None:
                await self._sender.send(self._targets[resource_id], attempt)
            else:  # a redirect's next hop: counted under the target the request began at
                attempt.resource = hop.target.id
                await self._sender.send(hop.target, attempt, hop)  # type: ignore[call-arg]
        except asyncio.CancelledError as exc:
            self._settle_alone(attempt, lease, exc)
            raise
        except Exception as exc:
            self._settle_alone(attempt, lease, exc)
            return exc
        self._settle_alone(attempt, lease, None)
        return None

    def _settle_alone(self, attempt: Attempt, lease: Lease, error: BaseException | None) -> None:
        """:meth:`settle` an attempt a task ran, and give the connection it freed to the
        oldest queued arrival."""
        self.settle(attempt, lease, error)
        if self._flight.backlog:
            self.admit_queued()

    async def lease(self, attempt: Attempt) -> Lease | BaseException:
        """A lease for ``attempt``, noted on it (``acquired``, ``resource``) and held in the
        flight, or the error that ended it without one (then DROPPED): what a task's
        attempt does before it sends, for a sender of its own (a scenario's steps)."""
        lease = self._pool.try_acquire(algorithm=self._name) if self._try_first else None
        if lease is None:
            lease_or_error = await self._acquire(attempt)
            if isinstance(lease_or_error, BaseException):
                return lease_or_error
            lease = lease_or_error
        attempt.acquired = lease.acquired_at
        self._flight.leased += 1
        attempt.resource = lease.resource.id
        return lease

    async def _acquire(self, attempt: Attempt) -> Lease | BaseException:
        """A lease through the algorithm, or the error that ended the attempt without one."""
        clock = self._clock
        request = AcquireRequest(
            pool=self._pool,
            selector=ANY,
            timeout=None,
            rng=self._rng,
            clock=clock,
            pools={"targets": self._pool},
            affinity=self._affinity,
            owner=None,
            algorithm=self._name,
            started=clock.now(),
        )
        try:
            return await self._algorithm.acquire(request)
        except Exception as exc:  # no lease: the algorithm gave up (immediate, timeouts)
            # Never sent, so no latency: the endpoint did not answer, we did not ask.
            attempt.outcome = Outcome.DROPPED
            attempt.error_class = error_class_of(exc).value
            attempt.error = one_line(exc, self._secrets)
            return exc

    # -- requests that never ran -----------------------------------------------------------

    def drop(self, n: int, scheduled: float) -> None:
        """Count arrival ``n`` as dropped: ``max_in_flight`` requests were in progress."""
        attempt = Attempt(request=n, attempt=1, scheduled=scheduled, outcome=Outcome.DROPPED)
        attempt.error = DROPPED
        self.count([attempt])

    def cancel_queued(self) -> None:
        """Count every queued arrival as cancelled: scheduled, never sent."""
        backlog = self._flight.backlog
        while backlog:
            n, scheduled = backlog.popleft()
            self._flight.in_flight -= 1
            self._cancelled_unsent(n, scheduled)

    def cancel_unstarted(self) -> None:
        """Count requests whose task was cancelled before it ever ran as cancelled (a
        task cancelled before its first step never enters :meth:`request`)."""
        unstarted = self._flight.unstarted
        for n, scheduled in sorted(unstarted.items()):
            self._flight.in_flight -= 1
            self._cancelled_unsent(n, scheduled)
        unstarted.clear()

    def _cancelled_unsent(self, n: int, scheduled: float) -> None:
        attempt = Attempt(request=n, attempt=1, scheduled=scheduled)
        attempt.outcome = Outcome.CANCELLED
        attempt.error_class = ErrorClass.CANCELLED.value
        self.count([attempt])

    def count(self, attempts: list[Attempt], warm: bool | None = None) -> None:
        """Count a finished request (``warm``: whether it is the warmup's, when its caller
        judged it, as a scenario's flow does for its steps). The tally counts it before it
        calls the user's ``on_record``; if that raises (``--samples`` on a full disk), the
        error goes to the loop's exception handler, as a callback's would, and the run goes
        on: one failed write must not lose the other requests' records or the result. So
        does a request the tally refuses (a time from another clock than the engine's)."""
        try:
            if warm is None:
                self.tally.finished(attempts)
            else:
                self.tally.finished_as(attempts, warm=warm)
        except Exception as exc:
            report(exc, "counting a finished request (or on_record) failed")


def _nothing() -> None:
    """``admit_queued`` until a dispatcher exists: no arrival can be queued before."""


def report(exc: Exception, message: str) -> None:
    """Hand ``exc`` to the running loop's exception handler (raise it outside a loop)."""
    loop = asyncio._get_running_loop()
    if loop is None:
        raise exc
    loop.call_exception_handler({"message": message, "exception": exc})


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
