"""The run demo: the real Runner, pools and retry policy against simulated endpoints.

A few hundred pipelines of ``fetch → ask → judge → score`` run on the real event loop, in
real (short) time, through two pools:

- ``retrieval`` (for ``fetch``): ``search-a`` (quick, reliable) and ``search-b`` (slower,
  fails now and then);
- ``llm`` (for ``ask`` and ``judge``): ``flaky`` (quick, answers 503 often), ``metered``
  (a token bucket: past its rate it refuses with 429 and a ``Retry-After``; its resource
  declares that rate, ``rpm`` and ``burst``, so the pool paces its leases to it and it never
  has to refuse) and ``slow`` (steady and slow).

``score`` is a plain local function: no pool. About one document in a hundred comes back
empty, and ``ask`` refuses it with a ``ValueError`` — an ``invalid`` error that no retry
policy retries — so a realistic handful of pipelines fails and the report shows why,
beside the retries that did save the others.

Each endpoint is what a lease hands out (``lease.client``, built by the resource's
factory), so the tasks read like tasks against a real API. Randomness is drawn from
``Random(f"{seed}:{endpoint}:{n}")`` for an endpoint's ``n``-th call, as the world model draws: the
same seed gives every endpoint the same dice. Which pipeline makes the ``n``-th call
depends on real timing, so counts vary a little from run to run; the empty documents
depend on the seed alone. All waiting goes through the ``Clock``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pyattacker.clock import Clock, LoopClock, epoch_time
from pyattacker.pool import Pool, Resource, TaskContext
from pyattacker.retry import Retrying
from pyattacker.run import PipelineSpecs, PipelineTemplate, Runner, pipeline, task

__all__ = [
    "DEMO",
    "DEMO_POOLS",
    "EMPTY_DOCUMENT_RATE",
    "EndpointError",
    "EndpointProfile",
    "SimulatedEndpoint",
    "default_store_path",
    "demo_pools",
    "demo_runner",
    "demo_specs",
]

EMPTY_DOCUMENT_RATE = 0.01


class EndpointError(Exception):
    """What a vendor SDK raises: a status and a parsed Retry-After, classified by
    ``error_class_of`` (429 → rate_limit, 5xx → upstream)."""

    def __init__(self, status: int, endpoint: str, retry_after: float | None = None) -> None:
        reason = {429: "Too Many Requests", 503: "Service Unavailable"}.get(status, "Error")
        super().__init__(f"HTTP {status} {reason} from {endpoint}")
        self.status_code = status
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class EndpointProfile:
    """One simulated endpoint: log-normal latency around ``median_s``, an independent 503
    rate, and optionally a token bucket of ``rate_per_s`` with room for ``burst`` calls."""

    id: str
    capacity: int
    median_s: float
    sigma: float = 0.4
    error_rate: float = 0.0
    rate_per_s: float | None = None
    burst: float = 1.0


DEMO_POOLS: dict[str, tuple[EndpointProfile, ...]] = {
    "retrieval": (
        EndpointProfile("search-a", capacity=8, median_s=0.012),
        EndpointProfile("search-b", capacity=4, median_s=0.03, error_rate=0.05),
    ),
    "llm": (
        EndpointProfile("flaky", capacity=6, median_s=0.04, error_rate=0.2),
        EndpointProfile("metered", capacity=6, median_s=0.05, rate_per_s=30.0, burst=6.0),
        EndpointProfile("slow", capacity=8, median_s=0.25, sigma=0.25, error_rate=0.005),
    ),
}


class SimulatedEndpoint:
    """The provider side of one endpoint; the tasks only see ``call``'s result or error."""

    def __init__(self, profile: EndpointProfile, *, seed: int, clock: Clock) -> None:
        self.profile = profile
        self.seed = seed
        self.clock = clock
        self.calls = 0
        self._tokens = profile.burst
        self._refilled_at: float | None = None

    async def call(self, work: float = 1.0) -> float:
        """Serve one request of ``work`` units; returns the simulated latency (seconds).

        Raises ``EndpointError`` 429 (with ``retry_after``) when the token bucket is empty,
        at once, and 503 after the latency when the dice say so."""
        profile = self.profile
        self.calls += 1
        dice = random.Random(f"{self.seed}:{profile.id}:{self.calls}")
        wait = self._take_token()
        if wait > 0:
            raise EndpointError(429, profile.id, retry_after=wait)
        latency = work * profile.median_s * math.exp(profile.sigma * dice.gauss(0.0, 1.0))
        await self.clock.sleep(latency)
        if dice.random() < profile.error_rate:
            raise EndpointError(503, profile.id)
        return latency

    def document_words(self, item: int) -> int:
        """The length of document ``item``: the same on every endpoint for one seed, and 0
        (empty) for about :data:`EMPTY_DOCUMENT_RATE` of them."""
        dice = random.Random(f"{self.seed}:document:{item}")
        return 0 if dice.random() < EMPTY_DOCUMENT_RATE else dice.randint(80, 480)

    def _take_token(self) -> float:
        """Seconds until a token is free (0.0: one was taken)."""
        rate = self.profile.rate_per_s
        if rate is None:
            return 0.0
        now = self.clock.now()
        elapsed = 0.0 if self._refilled_at is None else now - self._refilled_at
        self._tokens = min(self.profile.burst, self._tokens + elapsed * rate)
        self._refilled_at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) / rate

    def __repr__(self) -> str:
        return f"<SimulatedEndpoint {self.profile.id} calls={self.calls}>"


def demo_pools(seed: int, *, clock: Clock | None = None) -> list[Pool]:
    """The two pools of simulated endpoints, for one seed."""
    clock = clock if clock is not None else LoopClock()
    return [
        Pool(
            name,
            [
                Resource.create(
                    name,
                    id=profile.id,
                    capacity=profile.capacity,
                    factory=_factory(profile, seed, clock),
                    cooldown_s=1.0,
                    **_declared_limits(profile),
                )
                for profile in profiles
            ],
            clock=clock,
            deadlock_warn_s=None,
        )
        for name, profiles in DEMO_POOLS.items()
    ]


#: The share of a metered endpoint's rate its resource declares: a call leaves a little
#: after its lease is granted, and a margin absorbs that jitter (as one would with a key).
DECLARED_SHARE = 0.9


def _declared_limits(profile: EndpointProfile) -> dict[str, Any]:
    """What the demo declares of a metered endpoint's published rate (``rpm``, ``burst``)."""
    if profile.rate_per_s is None:
        return {}
    return {"rpm": profile.rate_per_s * 60.0 * DECLARED_SHARE, "burst": int(profile.burst)}


def _factory(profile: EndpointProfile, seed: int, clock: Clock) -> Callable[[Resource], object]:
    return lambda resource: SimulatedEndpoint(profile, seed=seed, clock=clock)


async def _call(ctx: TaskContext, work: float) -> SimulatedEndpoint:
    """One call through a lease from the task's pool, its outcome reported to the pool;
    returns the endpoint that served it."""
    async with ctx.acquire() as lease:
        endpoint = lease.client
        assert isinstance(endpoint, SimulatedEndpoint)  # what this pool's factory builds
        try:
            latency = await endpoint.call(work)
        except EndpointError as exc:
            lease.report(ok=False, error=exc)
            raise
        lease.report(ok=True, latency_ms=latency * 1000.0, usage={"calls": 1})
        return endpoint


# -- the tasks -------------------------------------------------------------------------------

FETCH_RETRY = Retrying(max_attempts=3, base=0.02, factor=2.0, cap=0.2)
LLM_RETRY = Retrying(max_attempts=4, base=0.05, factor=2.0, cap=1.0)


@task("fetch", resource="retrieval", retry=FETCH_RETRY)
async def fetch(row: dict[str, Any], ctx: TaskContext) -> dict[str, Any]:
    """Retrieve the document the question is about."""
    endpoint = await _call(ctx, 1.0)
    return {**row, "words": endpoint.document_words(row["id"])}


@task("ask", resource="llm", retry=LLM_RETRY)
async def ask(doc: dict[str, Any], ctx: TaskContext) -> dict[str, Any]:
    """Ask the model the question about the document."""
    if not doc["words"]:
        raise ValueError("the document is empty: nothing to ask about")
    await _call(ctx, 0.5 + doc["words"] / 480)
    return {"id": doc["id"], "answer_words": 20 + doc["words"] % 60}


@task("judge", resource="llm", retry=LLM_RETRY)
async def judge(answer: dict[str, Any], ctx: TaskContext) -> dict[str, Any]:
    """Ask the model to grade the answer from 1 to 5."""
    await _call(ctx, 0.6)
    return {**answer, "grade": 1 + (answer["id"] * 7 + answer["answer_words"]) % 5}


@task("score")
def score(verdict: dict[str, Any]) -> dict[str, Any]:
    """Turn the grade into a score in [0, 1] (local, no pool)."""
    return {"id": verdict["id"], "score": (verdict["grade"] - 1) / 4}


DEMO: PipelineTemplate = pipeline("demo", fetch, ask, judge, score)


def demo_specs(pipelines: int) -> PipelineSpecs:
    """The demo's input: ``pipelines`` questions, one pipeline each."""
    return DEMO.map({"id": i, "question": f"question {i}"} for i in range(pipelines))


def demo_runner(
    store: str | Path, *, seed: int, concurrency: int, handle_signals: bool = True
) -> Runner:
    """A Runner over the demo's pools for ``seed``, recording to ``store``."""
    pools = demo_pools(seed)
    return Runner(
        store=store,
        pools=pools,
        concurrency=concurrency,
        handle_signals=handle_signals,
        grace_s=2.0,
    )


def default_store_path(directory: Path = Path("runs")) -> Path:
    """``runs/demo-<local timestamp>.db``, with ``-2``, ``-3``… if that file exists.

    Names only; creates nothing."""
    stamp = datetime.fromtimestamp(epoch_time()).strftime("%Y%m%d-%H%M%S")
    path = directory / f"demo-{stamp}.db"
    n = 1
    while path.exists():
        n += 1
        path = directory / f"demo-{stamp}-{n}.db"
    return path
