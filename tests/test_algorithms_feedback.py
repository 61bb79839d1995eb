"""The acquire algorithms that follow what leases report: ``quota_aware`` (usage against a
declared quota) and ``adaptive`` (AIMD on rate limits)."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import fill, now, release_at, res, run
from pyattacker.errors import ConfigError, ResourceUnavailable
from pyattacker.pool import Adaptive, Pool, PoolEvent, QuotaAware, Resource, TaskContext


def limit_changes(pool: Pool) -> list[tuple[Any, ...]]:
    changes: list[tuple[Any, ...]] = []

    def on_event(event: PoolEvent) -> None:
        if event.kind == "resource.limit":
            changes.append((event.resource, event.data["from"], event.data["to"]))

    pool.subscribe(on_event)
    return changes


# -- quota_aware --------------------------------------------------------------------------


def quota(rid: str, tokens: float | None, capacity: int = 1) -> Resource:
    options = {} if tokens is None else {"quota": {"tokens": tokens}}
    return res(rid, capacity, options=options)


def test_quota_aware_ranks_by_declared_quota_minus_reported_usage() -> None:
    async def main() -> None:
        pool = Pool("p", [quota("a", 100, 4), quota("b", 300, 4)])
        ctx = TaskContext([pool], algorithm="quota_aware")
        async with ctx.acquire() as lease:
            assert lease.resource.id == "b"  # 300 left against 100
            lease.report(ok=True, usage={"tokens": 250})
        async with ctx.acquire() as lease:
            assert lease.resource.id == "a"  # 100 left against 50

    run(main)


def test_quota_aware_ranks_unknown_quotas_last_yet_still_leases_them() -> None:
    async def main() -> None:
        pool = Pool("p", [quota("none", None, 4), quota("spent", 10)])
        ctx = TaskContext([pool], algorithm=QuotaAware())
        first = await ctx.acquire_lease()
        first.report(ok=True, usage={"tokens": 50})  # exhausted: -40 still beats unknown
        first.release_now()
        again = await ctx.acquire_lease()
        after = await ctx.acquire_lease()
        assert (first.resource.id, again.resource.id, after.resource.id) == (
            "spent",
            "spent",
            "none",
        )

    run(main)


def test_quota_aware_waits_like_its_then() -> None:
    async def main() -> None:
        pool = Pool("p", [quota("a", 100)])
        release_at(1.0, fill(pool)[0])
        await TaskContext([pool]).acquire_lease(algorithm={"name": "quota_aware"})
        assert now() == 1.0

    run(main)


def test_quota_aware_counts_only_its_own_unit() -> None:
    pool = Pool("p", [quota("a", 100)])
    fill(pool)[0].report(ok=True, usage={"tokens": 30, "requests": 1})
    resource = pool.resources[0]
    assert QuotaAware().remaining_quota(pool, resource) == 70
    assert QuotaAware(unit="requests").remaining_quota(pool, resource) is None


# -- adaptive -----------------------------------------------------------------------------


def test_adaptive_halves_on_a_rate_limit_and_grows_back_one_per_window() -> None:
    async def main() -> None:
        pool = Pool("p", [res("a", capacity=4)])
        changes = limit_changes(pool)
        ctx = TaskContext([pool], algorithm="adaptive")

        async def report(**outcome: Any) -> None:
            async with ctx.acquire() as lease:
                lease.report(**outcome)

        await report(ok=False, retry_after=0.0)
        assert changes == [("a", 4, 2)]
        for _ in range(2):  # one window at limit 2
            await report(ok=True)
        assert changes[-1] == ("a", 2, 3)
        for _ in range(3):  # one window at limit 3
            await report(ok=True)
        assert changes[-1] == ("a", 3, 4)
        for _ in range(12):  # at capacity: no growth, no event
            await report(ok=True)
        await report(ok=False, error=ValueError("a bug, not a refusal"))
        assert changes == [("a", 4, 2), ("a", 2, 3), ("a", 3, 4)]
        assert pool.limit_of("a") == 4

    run(main)


def test_adaptive_never_goes_below_min_limit_and_says_why_it_changed() -> None:
    async def main() -> None:
        pool = Pool("p", [res("a", capacity=8)])
        reasons: list[str] = []
        pool.subscribe(
            lambda e: reasons.append(e.data["reason"]) if e.kind == "resource.limit" else None
        )
        ctx = TaskContext([pool], algorithm=Adaptive(min_limit=2))
        for _ in range(4):
            async with ctx.acquire() as lease:
                lease.report(ok=False, retry_after=0.0)
        assert pool.limit_of("a") == 2
        assert reasons == ["adaptive: rate limited, x0.5"] * 2

    run(main)


def test_adaptive_limits_what_later_acquisitions_can_get() -> None:
    async def main() -> None:
        pool = Pool("p", [res("a", capacity=4)])
        ctx = TaskContext([pool], algorithm=Adaptive(then="immediate"))
        first = await ctx.acquire_lease()
        first.report(ok=False, retry_after=0.0)  # limit 4 -> 2
        await ctx.acquire_lease()
        with pytest.raises(ResourceUnavailable) as caught:
            await ctx.acquire_lease()
        assert caught.value.reasons == {"a": "full (2/2)"}

    run(main)


def test_adaptive_state_is_shared_between_acquire_calls_on_one_pool() -> None:
    async def main() -> None:
        pool = Pool("p", [res("a", capacity=4)])
        ctx = TaskContext([pool])
        async with ctx.acquire(algorithm="adaptive") as lease:
            lease.report(ok=False, retry_after=0.0)
        assert pool.limit_of("a") == 2
        async with ctx.acquire(algorithm={"name": "adaptive"}) as lease:
            lease.report(ok=True)
        async with pool.acquire(algorithm="adaptive") as lease:  # a fresh context too
            lease.report(ok=True)
        assert pool.limit_of("a") == 3
        async with ctx.acquire(algorithm=Adaptive()) as lease:  # a fresh, equal instance
            for _ in range(3):
                lease.report(ok=True)
        assert pool.limit_of("a") == 4  # the state lives with the pool, not the instance

    run(main)


def test_a_second_adaptive_configuration_on_the_same_pool_is_refused() -> None:
    async def main() -> None:
        pool = Pool("p", [res("a", capacity=4)])
        await TaskContext([pool]).acquire_lease(algorithm="adaptive")
        with pytest.raises(ConfigError, match="already governed"):
            await TaskContext([pool]).acquire_lease(algorithm=Adaptive(decrease=0.25))
        assert pool.active == 1

    run(main)


def test_adaptive_state_does_not_keep_a_pool_alive() -> None:
    async def main() -> weakref.ref[Pool]:
        pool = Pool("p", [res("a", capacity=4)])
        async with pool.acquire(algorithm="adaptive") as lease:
            lease.report(ok=False, retry_after=0.0)
        assert pool.limit_of("a") == 2
        return weakref.ref(pool)

    ref = run(main)
    gc.collect()
    assert ref() is None


@given(
    capacity=st.integers(1, 12),
    min_limit=st.integers(1, 12),
    outcomes=st.lists(st.sampled_from(["ok", "refused", "failed"]), max_size=60),
)
@settings(max_examples=50, deadline=None)
def test_adaptive_keeps_every_limit_between_min_limit_and_capacity(
    capacity: int, min_limit: int, outcomes: list[str]
) -> None:
    async def main() -> None:
        # Failures never degrade it here: only the limit is under test.
        pool = Pool("p", [res("a", capacity, degrade_after=100, dead_after=100)])
        ctx = TaskContext([pool], algorithm=Adaptive(min_limit=min_limit))
        for outcome in outcomes:
            async with ctx.acquire() as lease:
                if outcome == "ok":
                    lease.report(ok=True)
                else:
                    lease.report(ok=False, retry_after=0.0 if outcome == "refused" else None)
            assert min(min_limit, capacity) <= pool.limit_of("a") <= capacity

    run(main)


def test_adaptive_step_is_the_aimd_formula() -> None:
    aimd = Adaptive(increase=1.0, decrease=0.5)
    assert aimd.step(5, 0.4, ok=False, rate_limited=True) == (2, 0.0)
    assert aimd.step(5, 0.4, ok=False, rate_limited=False) == (5, 0.4)
    assert aimd.step(4, 0.5, ok=True, rate_limited=False) == (4, 0.75)
    limit, credit = 3, 0.0
    for _ in range(3):
        limit, credit = aimd.step(limit, credit, ok=True, rate_limited=False)
    assert (limit, credit) == (4, 0.0)
    assert Adaptive(increase=2.5).step(2, 0.0, ok=True, rate_limited=False) == (3, 0.25)
