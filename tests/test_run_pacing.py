"""The Runner against limits: a paced key never earns a 429, and a pool of dead keys ends
the run instead of hanging it. Virtual time, in-memory store."""

from __future__ import annotations

import asyncio
import random
from collections import deque

from pyattacker._run_demo import demo_pools, demo_specs
from pyattacker.errors import ErrorClass, NoUsableResource
from pyattacker.pool import Pool, Resource, TaskContext
from pyattacker.report._run import pacing_lines, summarize
from pyattacker.retry import Retrying
from pyattacker.run import pipeline, task
from pyattacker.store import MemoryStore, RowKind, RunState
from run_helpers import now, rows, run_virtually, runner, virtual

LATENCY_S = 0.2


class Refused(Exception):
    """What the fake endpoint raises above its limit: an HTTP 429."""

    status_code = 429


class RollingMinute:
    """A fake endpoint that answers 429 to a request beyond ``limit`` in any rolling
    minute (the requests it served in ``(now - 60, now]``), else serves it in 0.2 s."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.served: deque[float] = deque()
        self.refused = 0
        self.calls = 0

    async def call(self) -> None:
        self.calls += 1
        t = now()
        while self.served and self.served[0] <= t - 60.0:
            self.served.popleft()
        if len(self.served) >= self.limit:
            self.refused += 1
            raise Refused("429 Too Many Requests")
        self.served.append(t)
        await asyncio.sleep(LATENCY_S)


def metered_pool(endpoint: RollingMinute, **limits: float) -> Pool:
    key = Resource.create("llm", id="key-1", capacity=64, factory=lambda r: endpoint, **limits)
    return Pool("llm", [key])


@task(resource="llm", retry=Retrying(max_attempts=5, base=0.5, cap=8.0))
async def ask(n: int, ctx: TaskContext) -> int:
    async with ctx.acquire() as lease:
        endpoint = lease.client
        assert isinstance(endpoint, RollingMinute)
        try:
            await endpoint.call()
        except Refused as exc:
            lease.report(ok=False, error=exc)
            raise
        lease.report(ok=True)
    return n


def run_300(pool: Pool, store: MemoryStore) -> tuple[RunState, float]:
    async def main() -> tuple[RunState, float]:
        report = await runner(store, pools=[pool], concurrency=64).run_async(
            pipeline("p", ask).map(range(300))
        )
        return report.state, now()

    return virtual(main)


def test_300_items_through_a_120_rpm_key_never_earn_a_429_and_take_two_and_a_half_minutes() -> None:
    endpoint = RollingMinute(120)
    store = MemoryStore()
    state, elapsed = run_300(metered_pool(endpoint, rpm=120), store)
    assert state is RunState.SUCCEEDED
    assert (endpoint.calls, endpoint.refused) == (300, 0)
    # The n-th lease goes at n * 0.5 s: the last at 299 * 0.5 = 149.5 s, answered 0.2 s
    # later. Exactly 149.7 simulated seconds (the store's commits take no virtual time).
    assert 149.5 + LATENCY_S <= elapsed <= 149.5 + LATENCY_S + 0.01
    assert all(a["outcome"] == "ok" for a in rows(store, RowKind.ATTEMPTS))
    unpaced = RollingMinute(120)  # the same endpoint and run, the key's rpm undeclared
    run_300(metered_pool(unpaced), MemoryStore())
    assert unpaced.refused > 100


def test_the_run_records_how_each_paced_key_was_paced() -> None:
    store = MemoryStore()
    run_300(metered_pool(RollingMinute(120), rpm=120), store)
    (event,) = rows(store, RowKind.EVENTS, kind="pool.pacing")
    data = event["data"]
    assert (data["pool"], data["resource"], data["rpm"], data["burst"]) == ("llm", "key-1", 120, 1)
    assert (data["leases"], data["paced"]) == (300, 300)
    assert data["paced_s"] == 150.0


# -- every key dead -----------------------------------------------------------------------


@task(resource="llm", retry=Retrying(max_attempts=5, base=0.5, cap=8.0))
async def ask_dead(n: int, ctx: TaskContext) -> int:
    async with ctx.acquire() as lease:
        lease.report(ok=False, error=ConnectionResetError("gone"))
        raise ConnectionResetError("gone")


def test_a_run_whose_keys_are_all_dead_ends_with_a_clear_error_and_exit_1() -> None:
    pool = Pool(
        "llm",
        [
            Resource.create("llm", id=f"key-{i}", capacity=4, degrade_after=2, dead_after=2)
            for i in (1, 2)
        ],
    )
    store = MemoryStore()

    async def main() -> tuple[object, float]:
        r = runner(store, pools=[pool], concurrency=16)
        report = await r.run_async(pipeline("p", ask_dead).map(range(64)))
        return report, now()

    report, elapsed = virtual(main)
    assert report.state is RunState.FAILED  # type: ignore[attr-defined]
    assert report.exit_code == 1  # type: ignore[attr-defined]
    assert report.by_state == {"failed": 64}  # type: ignore[attr-defined]
    assert elapsed < 60.0  # it ended: it did not wait for a key that never comes back
    failed = rows(store, RowKind.TASKS, state="failed")
    classes = {row["error_class"] for row in failed}
    assert ErrorClass.NO_USABLE_RESOURCE.value in classes
    (example,) = {row["error"] for row in failed if row["error_class"] == "no_usable_resource"} or {
        None
    }
    assert example is not None
    assert "no usable resource in pool llm: key-1 dead" in example
    assert "key-2 dead" in example


def test_no_default_retry_policy_retries_a_dead_end() -> None:
    error = NoUsableResource("no usable resource in pool llm: key-1 revoked", pool="llm")
    for policy in (Retrying(), Retrying(max_attempts=10, retry_unknown=True)):
        decision = policy.decide(error, attempts_used=1, rng=random.Random(0))
        assert decision.retry is False
        assert decision.error_class == "no_usable_resource"


# -- the demo ------------------------------------------------------------------------------


def test_the_demo_paces_its_metered_endpoint_and_its_report_says_so() -> None:
    store = MemoryStore()
    r = runner(store, pools=demo_pools(1), concurrency=32)
    run_virtually(r, demo_specs(200))
    summary = summarize(store)
    (line,) = pacing_lines(summary["pacing"])
    assert line.startswith("Paced llm/metered (rpm 1620, burst 6): ")
    metered = summary["attempts"]["by_resource"]["llm/metered"]
    assert metered["attempts"] > 0
    assert metered["throttled"] == 0
