"""The kernel demo: the real pool, algorithms and retry policy against simulated endpoints.

Three endpoints of different character share one pool: ``fast-flaky`` (quick, fails now and
then), ``slow-steady`` (slow, reliable) and ``metered`` (a token bucket that refuses with 429
and a ``Retry-After``). Workers run jobs of two calls each; every call leases a resource
through the chosen acquire algorithm, reports the outcome, and a failed call is retried as
``Retrying`` decides. Everything runs on the virtual-time loop, so a few simulated minutes
cost a fraction of a real second and the same seed gives the same numbers.

This is a demonstration of the kernel, not the benchmark: the world here is deliberately
small. ``pyattacker bench`` (a later issue) is the measured comparison.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from pyattacker._sim import VirtualClock
from pyattacker.clock import Clock, LoopClock, wall_time
from pyattacker.errors import ResourceUnavailable, error_class_of
from pyattacker.pool import Pool, Resource, TaskContext
from pyattacker.retry import Retrying

__all__ = ["DEMO_ALGORITHMS", "DemoResult", "run_demo"]

DEMO_ALGORITHMS = ("immediate", "wait", "backoff", "least_busy", "sticky", "adaptive")
RETRY = Retrying(max_attempts=4, base=0.5, factor=2.0, cap=8.0, jitter="full")


class SimulatedHTTPError(Exception):
    """What a vendor SDK raises: a status and headers, classified by ``error_class_of``."""

    def __init__(self, status: int, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status
        self.retry_after = retry_after  # what an SDK exposes after parsing the header


@dataclass(frozen=True, slots=True)
class _Profile:
    id: str
    capacity: int
    median_s: float
    sigma: float
    error_rate: float
    bucket_per_s: float | None = None  # refill rate of the endpoint's token bucket
    burst: float = 0.0


PROFILES = (
    _Profile("fast-flaky", 6, 0.25, 0.5, error_rate=0.08),
    _Profile("slow-steady", 8, 1.2, 0.3, error_rate=0.005),
    _Profile("metered", 4, 0.5, 0.6, error_rate=0.01, bucket_per_s=2.0, burst=4.0),
)


class _World:
    """The provider: decides each call's latency and outcome; the client never sees it."""

    def __init__(self, seed: int, clock: Clock) -> None:
        self.seed = seed
        self.clock = clock
        self.ordinal = dict.fromkeys((p.id for p in PROFILES), 0)
        self.tokens = {p.id: p.burst for p in PROFILES}
        self.refilled_at = dict.fromkeys((p.id for p in PROFILES), 0.0)

    async def call(self, profile: _Profile) -> float:
        n = self.ordinal[profile.id] = self.ordinal[profile.id] + 1
        dice = random.Random(f"{self.seed}:{profile.id}:{n}")  # same dice for every algorithm
        if profile.bucket_per_s is not None:
            wait = self._take_token(profile)
            if wait > 0:
                raise SimulatedHTTPError(429, retry_after=wait)
        latency = profile.median_s * math.exp(profile.sigma * dice.gauss(0.0, 1.0))
        await self.clock.sleep(latency)
        if dice.random() < profile.error_rate:
            raise SimulatedHTTPError(503)
        return latency

    def _take_token(self, profile: _Profile) -> float:
        now = self.clock.now()
        rate = profile.bucket_per_s or 0.0
        elapsed = now - self.refilled_at[profile.id]
        self.tokens[profile.id] = min(profile.burst, self.tokens[profile.id] + elapsed * rate)
        self.refilled_at[profile.id] = now
        if self.tokens[profile.id] >= 1.0:
            self.tokens[profile.id] -= 1.0
            return 0.0
        return (1.0 - self.tokens[profile.id]) / rate


@dataclass(frozen=True, slots=True)
class DemoResult:
    algorithm: str
    jobs_done: int
    jobs_failed: int
    requests: int
    refusals: int
    errors: int
    unavailable: int
    retries: int
    makespan_s: float
    wait_p95_s: float
    leaked: int
    wall_s: float


async def _simulate(algorithm: str, *, jobs: int, workers: int, seed: int) -> DemoResult:
    clock = LoopClock()
    world = _World(seed, clock)
    by_id = {p.id: p for p in PROFILES}
    pool = Pool(
        "endpoints",
        [Resource.create("llm", id=p.id, capacity=p.capacity, cooldown_s=10.0) for p in PROFILES],
        deadlock_warn_s=None,
    )
    counts = dict.fromkeys(
        ("done", "failed", "requests", "refusals", "errors", "unavailable", "retries"), 0
    )
    queue = list(range(jobs))

    async def call(ctx: TaskContext, job: int, step: int) -> bool:
        started = clock.now()
        for attempt in range(1, RETRY.max_attempts + 1):
            try:
                async with ctx.acquire(algorithm=algorithm) as lease:
                    counts["requests"] += 1
                    try:
                        latency = await world.call(by_id[lease.resource.id])
                    except SimulatedHTTPError as exc:
                        lease.report(ok=False, error=exc)
                        raise
                    lease.report(ok=True, latency_ms=latency * 1000.0, usage={"tokens": 100})
                    return True
            except (SimulatedHTTPError, ResourceUnavailable) as exc:
                kind = error_class_of(exc)
                if isinstance(exc, ResourceUnavailable):
                    counts["unavailable"] += 1
                else:
                    counts["refusals" if kind == "rate_limit" else "errors"] += 1
                rng = random.Random(f"{seed}:retry:{job}:{step}:{attempt}")
                decision = RETRY.decide(
                    exc, attempts_used=attempt, rng=rng, elapsed=clock.now() - started
                )
                if not decision.retry:
                    return False
                counts["retries"] += 1
                await clock.sleep(decision.delay_s)
        return False

    async def worker() -> None:
        while queue:
            job = queue.pop(0)
            ctx = TaskContext([pool], rng=random.Random(f"{seed}:acquire:{job}"))
            ok = await call(ctx, job, 0) and await call(ctx, job, 1)
            ctx.reclaim_now()
            counts["done" if ok else "failed"] += 1

    started_wall = wall_time()
    await asyncio.gather(*(worker() for _ in range(workers)))
    stats = pool.statistics()
    return DemoResult(
        algorithm=algorithm,
        jobs_done=counts["done"],
        jobs_failed=counts["failed"],
        requests=counts["requests"],
        refusals=counts["refusals"],
        errors=counts["errors"],
        unavailable=counts["unavailable"],
        retries=counts["retries"],
        makespan_s=clock.now(),
        wait_p95_s=stats.wait_p95_s,
        leaked=stats.leaked,
        wall_s=wall_time() - started_wall,
    )


def run_demo(
    algorithms: Sequence[str] = DEMO_ALGORITHMS,
    *,
    jobs: int = 300,
    workers: int = 24,
    seed: int = 7,
) -> list[DemoResult]:
    """Simulate each algorithm on the same world and seed; one result per algorithm."""
    return [
        VirtualClock(wall_budget_s=60.0).run(_simulate(name, jobs=jobs, workers=workers, seed=seed))
        for name in algorithms
    ]
