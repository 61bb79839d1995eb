"""One benchmark run: a scenario's workload, one acquire algorithm, one seed.

``scenario -> simulated provider -> closed-loop workers -> metrics``. ``concurrency``
workers claim jobs in order; a job is ``steps_per_job`` sequential steps, a step
``calls_per_step`` leases through ``ctx.acquire_lease`` with the algorithm under test, each
followed by one request to the provider. A failed step attempt (a refusal, an error, an
acquisition that gave up) goes to the scenario's ``Retrying``, and a retry repeats the whole
step. The pool, ``TaskContext``, the algorithms, ``Retrying`` and ``error_class_of`` are the
real ones; the Runner is not used (its storing and checkpointing are the same for every
algorithm and would only cost time).

What the algorithm is handed is a ``TaskContext`` with the pools and nothing else: the
provider model is private to this module. Client randomness follows the logical identity —
``acquire_stream(job, step, attempt)`` and ``retry_stream(...)`` — never the worker, so
scheduling order cannot change a draw. A job's affinity (what ``sticky`` remembers) lives as
long as the job, across its steps and retries, as a pipeline's would in a real run.

Time is the event loop's: on the virtual loop (default) every sleep, cooldown timer and
acquisition timeout happens at its simulated instant and the run costs only the CPU it
needs; ``clock="real"`` runs the same code on a :class:`~pyattacker.testing.ScaledClock`
as the differential check. A run that cannot finish raises: :class:`BenchmarkTimeout` when
the wall budget runs out, :class:`BenchmarkStalled` when nothing can ever move again (every
endpoint retired and the workers parked) — never partial metrics. A worker the pool tells
that no endpoint it may use can serve again (``NoUsableResource``) parks for good, as it
would have before the pool said so: such a world is a stall, not a score.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any, Literal

from pyattacker._checks import check_number
from pyattacker._gc import quiet_gc
from pyattacker._rng import LazyRandom
from pyattacker._sim import ScaledClock, VirtualClock
from pyattacker.benchmark._metrics import METRICS
from pyattacker.benchmark._result import RunResult
from pyattacker.benchmark._tally import Tally
from pyattacker.benchmark._tally import metrics as compute_metrics
from pyattacker.clock import Clock, wall_time
from pyattacker.errors import (
    ConfigError,
    NoUsableResource,
    SimulationStalled,
    WallBudgetExceeded,
)
from pyattacker.pool import (
    AcquireAlgorithm,
    AlgorithmSpec,
    Health,
    Pool,
    Resource,
    TaskContext,
    resolve_algorithm,
)
from pyattacker.world import ProviderModel, Scenario

__all__ = ["BenchmarkStalled", "BenchmarkTimeout", "Harness", "algorithm_spec"]

#: The benchmark's names for the kernel's two ways a simulation cannot finish.
BenchmarkTimeout = WallBudgetExceeded
BenchmarkStalled = SimulationStalled

ClockKind = Literal["virtual", "real"]
_SUPERVISOR_TICK_S = 0.05  # real seconds between the real-clock supervisor's looks
_QUIET_S = 60.0  # simulated seconds without a lease before the supervisor calls a stall
_RETIRED = (Health.DEAD, Health.REVOKED)


def algorithm_spec(name: str, scenario: Scenario) -> AlgorithmSpec:
    """The spec ``name`` runs with in ``scenario``: the multi-pool algorithms are handed
    every pool of the world in order, the others their defaults."""
    if name in ("failover", "least_busy"):
        return {"name": name, "pools": list(scenario.vendors)}
    return name


class Harness:
    """Run ``algorithm`` through ``scenario`` once, with ``seed`` (default: the scenario's).

    ``run()`` returns a :class:`RunResult` whose ``metrics`` has exactly the keys of
    ``METRICS``; the same scenario, algorithm and seed give the same numbers, ``wall_s``
    aside. ``wall_budget_s`` (default: the scenario's) bounds the real seconds a run may
    take. ``trace=True`` keeps every decided request in ``RunResult.trace``.
    """

    def __init__(
        self,
        scenario: Scenario,
        algorithm: str,
        *,
        seed: int | None = None,
        clock: ClockKind = "virtual",
        speedup: float = 10.0,
        wall_budget_s: float | None = None,
        trace: bool = False,
    ) -> None:
        if clock not in ("virtual", "real"):
            raise ConfigError(f"must be 'virtual' or 'real', got {clock!r}", field="clock")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ConfigError(f"must be a whole number, got {seed!r}", field="seed")
        if wall_budget_s is not None:
            check_number(wall_budget_s, "wall_budget_s", above=0.0)
        self.scenario = scenario
        self.algorithm = algorithm
        self.seed = scenario.seed if seed is None else seed
        self.clock_kind: ClockKind = clock
        self.speedup = speedup
        self.wall_budget_s = scenario.wall_budget_s if wall_budget_s is None else wall_budget_s
        self.trace = trace
        self._spec = algorithm_spec(algorithm, scenario)
        resolve_algorithm(self._spec)  # a typo fails here, before any loop exists
        if clock == "real":
            ScaledClock(speedup)  # validates the speedup now

    # -- client randomness: by logical identity ------------------------------------------

    def acquire_stream(self, job: int, step: int, attempt: int) -> random.Random:
        """The acquire algorithm's randomness for one step attempt (seeded on first draw)."""
        return LazyRandom(f"{self.seed}:acquire:{job}:{step}:{attempt}")

    def retry_stream(self, job: int, step: int, attempt: int) -> random.Random:
        """The retry policy's randomness after one failed step attempt."""
        return LazyRandom(f"{self.seed}:retry:{job}:{step}:{attempt}")

    # -- running ----------------------------------------------------------------------

    def run(self) -> RunResult:
        """Simulate the run; raise :data:`BenchmarkTimeout` or :data:`BenchmarkStalled`
        rather than return numbers from a run that could not finish."""
        started = wall_time()
        runner: VirtualClock | ScaledClock
        if self.clock_kind == "virtual":
            runner = VirtualClock(wall_budget_s=self.wall_budget_s)
        else:
            runner = ScaledClock(self.speedup, wall_budget_s=self.wall_budget_s)
        simulation = _Simulation(self)
        try:
            with quiet_gc(), _pool_warnings_muted():
                runner.run(simulation.main())
        except WallBudgetExceeded as exc:
            raise simulation.timed_out(exc, wall_time() - started) from exc
        except SimulationStalled as exc:
            raise simulation.stalled(exc) from exc
        return simulation.result(wall_time() - started)


@contextlib.contextmanager
def _pool_warnings_muted() -> Iterator[None]:
    """A simulated endpoint going DEAD is the world doing its job, not news for the log."""
    logger = logging.getLogger("pyattacker.pool")
    quiet = logging.Filter("pyattacker.pool.never")  # passes nothing from pyattacker.pool
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


class _LoopTime:
    """The running simulation loop's time as a :class:`~pyattacker.clock.Clock`.

    What ``LoopClock`` returns on a simulated loop, without looking the loop up on every
    reading: the pool asks for the time several times per lease.
    """

    __slots__ = ("now",)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.now = loop.time

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))  # noqa: TID251 - the simulated loop's timer

    def reader(self) -> Callable[[], float]:
        return self.now


class _Simulation:
    """The state of one run: pools, provider, workers and their tally."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self.scenario = harness.scenario
        self.tally = Tally()
        self.next_job = 0
        self.makespan = 0.0
        self.workers_left = 0
        self.acquiring = 0  # workers inside an acquisition right now
        self.pools: dict[str, Pool] = {}
        self.leases_at_end = 0

    # -- set-up: the environment the algorithm may see ----------------------------------

    def _build_pools(self, clock: Clock) -> dict[str, Pool]:
        pools: dict[str, list[Resource]] = {}
        for endpoint in self.scenario.endpoints:
            options: dict[str, Any] = {}
            if endpoint.quota_units is not None:
                options["quota"] = {"tokens": endpoint.quota_units}
            resource = Resource.create(
                "endpoint",
                id=endpoint.id,
                capacity=max(1, round(endpoint.capacity * endpoint.weight)),
                options=options,
                quota_group=endpoint.rate_group,  # the client knows which keys share a limit
                degrade_after=self.scenario.degrade_after,
                dead_after=self.scenario.dead_after,
                cooldown_s=self.scenario.cooldown_s,
            )
            pools.setdefault(endpoint.vendor, []).append(resource)
        return {
            name: Pool(name, resources, clock=clock, deadlock_warn_s=None)
            for name, resources in pools.items()
        }

    def _context(self) -> TaskContext:
        """Everything the algorithm is handed: the pools, and (set per step attempt by
        ``_step``) its rng. One context per job, so the affinity lives as long as the job."""
        return TaskContext(
            self.pools, clock=self.clock, pool=self.primary, algorithm=self.algorithm
        )

    # -- the run ------------------------------------------------------------------------

    async def main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.clock: Clock = _LoopTime(self.loop)
        self.pools = self._build_pools(self.clock)
        self.primary = self.scenario.vendors[0]
        self.algorithm: AcquireAlgorithm = resolve_algorithm(self.harness._spec)
        self.provider = ProviderModel(self.scenario, self.harness.seed)
        workers = [asyncio.ensure_future(self._worker()) for _ in range(self.scenario.concurrency)]
        self.workers_left = len(workers)
        everyone = asyncio.gather(*workers)
        everyone.add_done_callback(_retrieved)  # torn down, it ends "cancelled": no log noise
        watched: set[asyncio.Future[Any]] = {everyone}
        if self.harness.clock_kind == "real":
            watched.add(asyncio.ensure_future(self._supervise()))
        interrupted: list[bool] = []

        def on_ctrl_c() -> None:  # in the signal handler: note it, act between callbacks
            interrupted.append(True)
            self.loop.call_soon_threadsafe(everyone.cancel)

        previous = _take_ctrl_c(on_ctrl_c)
        try:
            # the supervisor only ever ends by raising BenchmarkStalled
            done, _ = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
            if interrupted:
                raise KeyboardInterrupt  # here, between two callbacks: nothing half-done
            for finished in done:
                finished.result()
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
            for task in (*watched, *workers):
                task.cancel()
        if interrupted:  # it came after the last worker finished: stop the sweep all the same
            raise KeyboardInterrupt
        self.leases_at_end = sum(pool.active for pool in self.pools.values())

    async def _supervise(self) -> None:
        """Real clock only (the virtual loop sees a stall by itself). Raises when no lease
        can ever be handed out again: every endpoint retired for good with nothing in
        flight; or every worker waiting for a lease, nothing in flight, no endpoint coming
        back on a timer, and no lease granted for ``_QUIET_S`` simulated seconds (a pool
        the workers ask for is dead while another is alive)."""
        slots = [slot for pool in self.pools.values() for slot in pool._slots]
        granted, quiet_since = -1, self.loop.time()
        while True:
            await self.clock.sleep(_SUPERVISOR_TICK_S * self.harness.speedup)
            now = self.loop.time()
            busy = any(pool.active for pool in self.pools.values())
            if not busy and all(s.health.state in _RETIRED for s in slots):
                raise SimulationStalled(
                    "every endpoint is retired (DEAD or REVOKED) and nothing is in flight: "
                    "no lease can ever be handed out again",
                    workers=self.workers_left,
                    now=now,
                )
            leases = sum(s.leases for s in slots)
            waiting = 0 < self.workers_left == self.acquiring
            if (
                leases != granted
                or busy
                or not waiting
                or any(s.comes_back_at(now) is not None for s in slots)
            ):
                granted, quiet_since = leases, now
            elif now - quiet_since >= _QUIET_S:
                raise SimulationStalled(
                    f"every worker has waited for a lease for {now - quiet_since:.0f} "
                    "simulated s with nothing in flight and no endpoint coming back: the "
                    "endpoints they ask for are gone",
                    workers=self.workers_left,
                    now=now,
                )

    async def _worker(self) -> None:
        scenario = self.scenario
        loop = self.loop
        while loop.time() < scenario.horizon_s and self.next_job < scenario.jobs:
            job = self.next_job
            self.next_job = job + 1
            await self._job(job)
        # Not in a ``finally``: a run torn down by a stall or the wall budget reports how
        # many workers were still at it.
        self.workers_left -= 1
        self.makespan = max(self.makespan, loop.time())

    async def _job(self, job: int) -> None:
        tally = self.tally
        start = self.loop.time()
        ctx = self._context()
        for step in range(self.scenario.steps_per_job):
            if not await self._step(job, step, ctx):
                tally.jobs_failed += 1
                return
        tally.job_latencies.append(self.loop.time() - start)

    async def _step(self, job: int, step: int, ctx: TaskContext) -> bool:
        tally = self.tally
        tally.attempted_steps += 1
        retry = self.scenario.retry
        attempt = 1
        started = self.loop.time()  # the policy's max_total_s counts from the first attempt
        while True:
            tally.step_attempts += 1
            ctx.rng = self.harness.acquire_stream(job, step, attempt)
            ctx.attempt = attempt
            try:
                for _ in range(self.scenario.calls_per_step):
                    await self._call(ctx, job)
            except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
                raise
            except Exception as exc:
                tally.failed_attempts += 1
                decision = retry.decide(
                    exc,
                    attempts_used=attempt,
                    rng=self.harness.retry_stream(job, step, attempt),
                    elapsed=self.loop.time() - started,
                )
                if not decision.retry:
                    return False
                tally.retries += 1
                await self.clock.sleep(decision.delay_s)
                attempt += 1
                continue
            return True

    async def _call(self, ctx: TaskContext, job: int) -> None:
        """One lease and the request made with it (one function: this is the hot path)."""
        loop = self.loop
        tally = self.tally
        asked = loop.time()
        self.acquiring += 1
        try:
            lease = await ctx.acquire_lease(timeout=self.scenario.acquire_timeout_s)
        except NoUsableResource:
            await loop.create_future()  # parked for good, still acquiring: a stall
            raise
        except Exception:
            self.acquiring -= 1
            raise
        # (a cancelled acquisition stays counted: a torn-down run reports who was parked)
        self.acquiring -= 1
        try:
            now = loop.time()
            tally.acquire_waits.append(now - asked)
            endpoint = lease.resource.id
            verdict = self.provider.admit(endpoint, now, key=job)
            tally.sent[endpoint] = tally.sent.get(endpoint, 0) + 1
            if self.harness.trace:
                tally.trace.append(
                    (
                        endpoint,
                        verdict.ordinal,
                        now,
                        verdict.refused,
                        verdict.failure,
                        verdict.draws,
                    )
                )
            if verdict.refused:
                tally.refusal_times.append(now)
                self._count_error("rate_limit")
                # the Retry-After the 429 carries, as a client reads it off the response
                lease.report(ok=False, retry_after=verdict.seconds)
                raise verdict.error()  # type: ignore[misc]  # a refusal always has one
            if verdict.served:  # an outage turns a request away without serving it
                tally.admitted[endpoint] = tally.admitted.get(endpoint, 0) + 1
            served = loop.create_future()
            timer = loop.call_at(now + verdict.seconds, _wake, served)
            try:
                await served  # the request's service time, on the simulated loop's timer
            finally:
                timer.cancel()
                if verdict.served:
                    self.provider.finish(endpoint)
            if verdict.served:
                tally.served.append(verdict.seconds)
            if verdict.cache_hit:
                tally.cache_hits += 1
            if verdict.failure is not None:
                tally.errored += 1
                self._count_error(verdict.failure)  # the class error_class_of gives (tested)
                error = verdict.error()
                lease.report(ok=False, error=error)
                raise error  # type: ignore[misc]
            lease.report(
                ok=True, latency_ms=verdict.seconds * 1000.0, usage={"tokens": verdict.cost}
            )
        finally:
            lease.release_now()

    def _count_error(self, name: str) -> None:
        self.tally.error_classes[name] = self.tally.error_classes.get(name, 0) + 1

    # -- the outcome ---------------------------------------------------------------------

    def result(self, wall_s: float) -> RunResult:
        tally = self.tally
        scenario = self.scenario
        metrics = compute_metrics(
            tally, scenario, self.provider, self.makespan, self.leases_at_end, wall_s
        )
        assert metrics.keys() == METRICS.keys(), "the harness must emit exactly METRICS"
        return RunResult(
            scenario=scenario.name,
            algorithm=self.harness.algorithm,
            seed=self.harness.seed,
            metrics=metrics,
            error_classes=dict(sorted(tally.error_classes.items())),
            endpoint_admitted={e.id: tally.admitted.get(e.id, 0) for e in scenario.endpoints},
            endpoint_requests={e.id: tally.sent.get(e.id, 0) for e in scenario.endpoints},
            trace=tuple(tally.trace),
        )

    def _progress(self) -> str:
        return (
            f"{len(self.tally.job_latencies)} of {self.scenario.jobs} jobs done, "
            f"{sum(self.tally.sent.values())} requests"
        )

    def timed_out(self, exc: WallBudgetExceeded, wall_s: float) -> WallBudgetExceeded:
        simulated = float(exc.context.get("now", self._now()))
        frozen = exc.context.get("frozen_s")  # real seconds simulated time stood still
        who = f"{self.harness.algorithm} on {self.scenario.name}"
        if isinstance(frozen, float | int) and frozen >= min(1.0, 0.5 * wall_s):
            message = (
                f"{who}: stalled, not slow: simulated time stopped at {simulated:.3f} s and "
                f"stood still for the last {frozen:.1f} s of wall clock ({self._progress()}; "
                f"{self.workers_left} workers still running): something keeps scheduling "
                "work at one instant"
            )
        else:
            message = (
                f"{who}: the wall budget of {self.harness.wall_budget_s:g}s ran out after "
                f"{simulated:.1f} simulated s ({self._progress()}); try fewer --jobs or "
                "--seeds, a shorter --horizon, or a larger --wall-budget"
            )
        return BenchmarkTimeout(
            message,
            simulated_s=simulated,
            wall_s=wall_s,
            workers=self.workers_left,
            frozen_s=frozen,
        )

    def stalled(self, exc: SimulationStalled) -> SimulationStalled:
        parked = self.acquiring
        now = float(exc.context.get("now", self._now()))
        return BenchmarkStalled(
            f"{self.harness.algorithm} on {self.scenario.name}: the simulation can never "
            f"progress at {now:.1f} simulated s ({self._progress()}): "
            f"{self.workers_left} workers left, {parked} parked waiting for a lease, "
            f"no timer pending; {exc}",
            workers=self.workers_left,
            parked=parked,
            simulated_s=now,
        )

    def _now(self) -> float:
        loop = getattr(self, "loop", None)
        return 0.0 if loop is None or loop.is_closed() else float(loop.time())


def _take_ctrl_c(on_ctrl_c: Callable[[], None]) -> Any:
    """Turn Ctrl-C into ``on_ctrl_c()`` (which must only note it and schedule the stop)
    instead of a KeyboardInterrupt at whatever bytecode runs: a run torn in the middle of a
    pool update or of the loop's own clean-up leaves noise and unclosed objects behind.
    Returns the handler to restore, or None when it did not take over: outside the main
    thread, or where Ctrl-C would not raise anyway (a worker process that ignores it).

    A plain ``signal.signal`` handler rather than ``loop.add_signal_handler``: the virtual
    loop reads its signal pipe only every few hundred iterations, so a signal arriving just
    before a run ended was left in the pipe and lost when the handler was removed."""
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler:
        return None
    signal.signal(signal.SIGINT, lambda signum, frame: on_ctrl_c())
    return previous


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():  # cancelled meanwhile: nothing to wake
        future.set_result(None)
