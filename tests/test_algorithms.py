"""The acquire algorithms, their resolution from specs, and the conformance check.

Every timeline is virtual: a blocker is released with ``loop.call_at(t, lease.release_now)``
and the test asserts the simulated instant the algorithm got its lease or gave up.
"""

from __future__ import annotations

import asyncio
import gc
import random
import time
import weakref
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import now, res, run
from pyattacker.errors import AcquireTimeout, ConfigError, PoolNotFound, ResourceUnavailable
from pyattacker.pool import (
    ALGORITHMS,
    AcquireAlgorithm,
    AcquireRequest,
    Adaptive,
    Backoff,
    Failover,
    Immediate,
    Lease,
    LeastBusy,
    Pool,
    PoolEvent,
    QuotaAware,
    Resource,
    Selector,
    Sticky,
    TaskContext,
    Wait,
    resolve_algorithm,
)
from pyattacker.testing import check_algorithm


def fill(pool: Pool) -> list[Lease]:
    held = []
    while (lease := pool.try_acquire()) is not None:
        held.append(lease)
    return held


def release_at(t: float, lease: Lease) -> None:
    asyncio.get_running_loop().call_at(t, lease.release_now)


class RecordingClock:
    """The loop's clock, noting every sleep as ``(at, seconds)``."""

    def __init__(self) -> None:
        self.sleeps: list[tuple[float, float]] = []

    def now(self) -> float:
        return now()

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append((now(), seconds))
        await asyncio.sleep(seconds)


def limit_changes(pool: Pool) -> list[tuple[Any, ...]]:
    changes: list[tuple[Any, ...]] = []

    def on_event(event: PoolEvent) -> None:
        if event.kind == "resource.limit":
            changes.append((event.resource, event.data["from"], event.data["to"]))

    pool.subscribe(on_event)
    return changes


# -- backoff ------------------------------------------------------------------------------


def test_backoff_without_jitter_retries_at_exact_doubling_delays() -> None:
    async def main() -> None:
        pool = Pool("p", [res("a")])
        release_at(0.6, fill(pool)[0])
        clock = RecordingClock()
        ctx = TaskContext([pool], clock=clock, algorithm=Backoff(jitter="none"))
        lease = await ctx.acquire_lease()
        assert [s for _, s in clock.sleeps] == [0.05, 0.1, 0.2, 0.4]
        assert [at for at, _ in clock.sleeps] == pytest.approx([0.0, 0.05, 0.15, 0.35])
        assert now() == pytest.approx(0.75)  # the first try after the release at 0.6
        assert lease.resource.id == "a"

    run(main)


def test_backoff_is_not_woken_by_a_release_but_wait_is() -> None:
    async def seconds_to_lease(algorithm: Any) -> float:
        pool = Pool("p", [res("a")])
        started = now()
        release_at(started + 0.06, fill(pool)[0])
        await TaskContext([pool]).acquire_lease(algorithm=algorithm)
        return now() - started

    async def main() -> None:
        assert await seconds_to_lease("wait") == pytest.approx(0.06)
        assert await seconds_to_lease(Backoff(jitter="none")) == pytest.approx(0.15)

    run(main)


def test_backoff_gives_up_at_max_wait_exactly_with_a_last_try_there() -> None:
    async def main() -> None:
        pool = Pool("p", [res("a")])
        fill(pool)
        clock = RecordingClock()
        ctx = TaskContext([pool], clock=clock)
        with pytest.raises(AcquireTimeout) as caught:
            await ctx.acquire_lease(algorithm=Backoff(jitter="none", max_wait=0.3))
        assert now() == pytest.approx(0.3)
        assert [s for _, s in clock.sleeps] == pytest.approx([0.05, 0.1, 0.15])
        assert caught.value.timeout_s == 0.3
        assert caught.value.reasons == {"a": "full (1/1)"}
        assert pool.active == 1

    run(main)


def test_backoff_obeys_the_call_timeout_when_it_is_tighter() -> None:
    async def main() -> None:
        pool = Pool("p", [res("a")])
        fill(pool)
        ctx = TaskContext([pool], algorithm=Backoff(max_wait=10.0))
        with pytest.raises(AcquireTimeout):
            await ctx.acquire_lease(timeout=0.25)
        assert now() == pytest.approx(0.25)

    run(main)


def test_backoff_delays_come_from_the_request_rng_alone() -> None:
    def delays(seed: int) -> list[float]:
        async def main() -> list[float]:
            pool = Pool("p", [res("a")])
            fill(pool)
            clock = RecordingClock()
            ctx = TaskContext([pool], clock=clock, rng=random.Random(seed))
            with pytest.raises(AcquireTimeout):
                await ctx.acquire_lease(algorithm=Backoff(max_wait=3.0))
            return [s for _, s in clock.sleeps]

        return run(main)

    policy, rng = Backoff(), random.Random(7)
    expected = [policy.delay(n, rng) for n in range(6)]
    assert delays(7)[:6] == expected
    assert delays(7) == delays(7)
    assert delays(8)[:6] != expected


@given(
    base=st.floats(0.001, 5.0),
    factor=st.floats(1.0, 10.0),
    extra=st.floats(0.0, 60.0),
    jitter=st.sampled_from(["full", "equal", "none"]),
    attempt=st.integers(0, 10_000),
    seed=st.integers(0, 2**32),
)
def test_backoff_delays_always_lie_within_zero_and_cap(
    base: float, factor: float, extra: float, jitter: str, attempt: int, seed: int
) -> None:
    policy = Backoff(base=base, factor=factor, cap=base + extra, jitter=jitter)
    delay = policy.delay(attempt, random.Random(seed))
    ceiling = policy.ceiling(attempt)
    assert 0.0 <= delay <= ceiling <= policy.cap
    if jitter == "none":
        assert delay == ceiling
    if jitter == "equal":
        assert delay >= ceiling / 2


# -- wait and immediate -------------------------------------------------------------------


def test_wait_times_out_at_exactly_the_simulated_timeout() -> None:
    async def main() -> None:
        pool = Pool("p", [res("a")])
        fill(pool)
        with pytest.raises(AcquireTimeout) as caught:
            await TaskContext([pool]).acquire_lease(algorithm=Wait(timeout=2.5))
        assert now() == 2.5
        assert caught.value.timeout_s == 2.5
        assert caught.value.reasons == {"a": "full (1/1)"}

    run(main)


@pytest.mark.parametrize("algorithm", ["wait", "backoff", "least_busy", "sticky"])
@pytest.mark.parametrize("timeout", [0.1, 0.3, 0.5, 1.0])
def test_a_timeout_that_starts_at_an_awkward_instant_still_ends(
    algorithm: str, timeout: float
) -> None:
    """``timeout - (now - started)`` can leave a crumb like 5.6e-17 that no timer can wait
    out (``now + crumb == now``): on virtual time that was a livelock. The deadline is
    absolute, so the wait ends at it."""

    async def main() -> None:
        pool = Pool("p", [res("a")])
        fill(pool)
        await asyncio.sleep(0.4449829481589869)  # virtual time
        started = now()
        with pytest.raises(AcquireTimeout):
            await TaskContext([pool]).acquire_lease(algorithm=algorithm, timeout=timeout)
        assert now() == pytest.approx(started + timeout, abs=1e-12)

    run(main)


def test_wait_takes_the_resource_in_the_instant_it_is_released() -> None:
    async def main() -> None:
        pool = Pool("p", [res("a")])
        release_at(1.25, fill(pool)[0])
        await TaskContext([pool]).acquire_lease(algorithm="wait")
        assert now() == 1.25

    run(main)


def test_immediate_refuses_a_full_pool_at_once_with_every_reason() -> None:
    async def main() -> None:
        pool = Pool("p", [res("a"), res("b")])
        fill(pool)
        with pytest.raises(ResourceUnavailable) as caught:
            await TaskContext([pool]).acquire_lease(algorithm="immediate")
        assert not isinstance(caught.value, AcquireTimeout)
        assert caught.value.reasons == {"a": "full (1/1)", "b": "full (1/1)"}
        assert now() == 0.0

    run(main)


# -- least_busy ---------------------------------------------------------------------------


def test_least_busy_takes_the_least_loaded_resource_across_pools() -> None:
    async def main() -> None:
        p = Pool("p", [res("a", capacity=2)])
        q = Pool("q", [res("b", capacity=4)])
        p.try_acquire()  # p/a at 1/2
        q.try_acquire()  # q/b at 1/4
        ctx = TaskContext([p, q], pool="p", algorithm=LeastBusy(pools=("q",)))
        first = await ctx.acquire_lease()
        assert (first.pool.name, first.resource.id) == ("q", "b")
        q.try_acquire()  # q/b 3/4 now: p/a at 1/2 wins
        second = await ctx.acquire_lease()
        assert (second.pool.name, second.resource.id) == ("p", "a")

    run(main)


def test_least_busy_breaks_a_tie_for_the_requests_own_pool() -> None:
    async def main() -> None:
        p, q = Pool("p", [res("a")]), Pool("q", [res("b")])
        lease = await TaskContext([p, q], pool="q").acquire_lease(
            algorithm={"name": "least_busy", "pools": ["p"]}
        )
        assert lease.pool is q

    run(main)


def test_least_busy_parks_on_every_pool_and_the_first_release_wins() -> None:
    async def main() -> None:
        p, q = Pool("p", [res("a")]), Pool("q", [res("b")])
        release_at(5.0, fill(p)[0])
        release_at(2.0, fill(q)[0])
        ctx = TaskContext([p, q], pool="p", algorithm=LeastBusy(pools=("q",)))
        lease = await ctx.acquire_lease()
        assert (now(), lease.pool.name) == (2.0, "q")
        assert (p.waiting, q.waiting) == (0, 0)  # the wait on p was cancelled and awaited
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert others == []

    run(main)


def test_least_busy_does_not_miss_a_release_while_it_starts_parking() -> None:
    class ReleasingClock(RecordingClock):
        """Releases ``lease`` from the first look's deadline check, before the waits run."""

        def __init__(self, lease: Lease) -> None:
            super().__init__()
            self.calls, self.lease = 0, lease

        def now(self) -> float:
            self.calls += 1
            if self.calls == 2:  # 1: the call starts; 2: the first look found nothing
                asyncio.get_running_loop().call_soon(self.lease.release_now)
            return now()

    async def main() -> None:
        p, q = Pool("p", [res("a")]), Pool("q", [res("b")])
        fill(q)
        ctx = TaskContext([p, q], pool="p", clock=ReleasingClock(fill(p)[0]))
        lease = await asyncio.wait_for(
            ctx.acquire_lease(algorithm=LeastBusy(pools=("q",)), timeout=100.0), 10.0
        )
        assert (now(), lease.pool.name) == (0.0, "p")

    run(main)


def test_least_busy_times_out_with_the_reasons_of_every_pool() -> None:
    async def main() -> None:
        p, q = Pool("p", [res("a")]), Pool("q", [res("b")])
        fill(p)
        fill(q)
        ctx = TaskContext([p, q], pool="p")
        with pytest.raises(AcquireTimeout) as caught:
            await ctx.acquire_lease(algorithm=LeastBusy(pools=("q",), timeout=1.5))
        assert now() == 1.5
        assert caught.value.reasons == {"p/a": "full (1/1)", "q/b": "full (1/1)"}

    run(main)


def test_least_busy_with_an_unknown_pool_raises_pool_not_found() -> None:
    async def main() -> None:
        ctx = TaskContext([Pool("p", [res("a")])])
        with pytest.raises(PoolNotFound, match="nope"):
            await ctx.acquire_lease(algorithm=LeastBusy(pools=("nope",)))

    run(main)


# -- failover -----------------------------------------------------------------------------


def failover_world() -> tuple[Pool, Pool, TaskContext]:
    primary = Pool("primary", [res("x", capacity=2)])
    backup = Pool("backup", [res("y")])
    return primary, backup, TaskContext([primary, backup], pool="primary")


def test_failover_takes_the_backup_when_the_primary_is_full() -> None:
    async def main() -> None:
        primary, _, ctx = failover_world()
        fill(primary)
        lease = await ctx.acquire_lease(algorithm=Failover(pools=("backup",)))
        assert (now(), lease.pool.name, lease.resource.id) == (0.0, "backup", "y")

    run(main)


def test_failover_falls_back_on_the_first_pool_with_then() -> None:
    async def main() -> None:
        primary, backup, ctx = failover_world()
        release_at(3.0, fill(primary)[0])
        release_at(1.0, fill(backup)[0])  # not watched: the fallback waits on the first pool
        lease = await ctx.acquire_lease(algorithm=Failover(pools=("primary", "backup")))
        assert (now(), lease.pool.name) == (3.0, "primary")

    run(main)


def test_failover_walks_the_named_order_when_it_names_the_requests_pool() -> None:
    async def main() -> None:
        _, _, ctx = failover_world()
        named_first = await ctx.acquire_lease(
            pool="backup", algorithm=Failover(pools=("primary", "backup"))
        )
        own_first = await ctx.acquire_lease(pool="backup", algorithm=Failover(pools=("primary",)))
        assert (named_first.pool.name, own_first.pool.name) == ("primary", "backup")

    run(main)


def test_failover_reports_every_pools_reasons_when_the_fallback_fails() -> None:
    async def main() -> None:
        primary, backup, ctx = failover_world()
        held = fill(primary) + fill(backup)
        spec = {
            "name": "failover",
            "pools": ["primary", "backup"],
            "then": {"name": "backoff", "max_wait": 0.5, "jitter": "none"},
        }
        with pytest.raises(AcquireTimeout) as caught:
            await ctx.acquire_lease(algorithm=spec)
        assert now() == pytest.approx(0.5)
        assert caught.value.reasons == {"primary/x": "full (2/2)", "backup/y": "full (1/1)"}
        assert isinstance(caught.value.__cause__, AcquireTimeout)
        assert primary.active + backup.active == len(held)

    run(main)


def test_failover_with_an_immediate_fallback_raises_resource_unavailable() -> None:
    async def main() -> None:
        primary, backup, ctx = failover_world()
        fill(primary)
        fill(backup)
        with pytest.raises(ResourceUnavailable) as caught:
            await ctx.acquire_lease(algorithm=Failover(pools=("backup",), then="immediate"))
        assert not isinstance(caught.value, AcquireTimeout)
        assert set(caught.value.reasons) == {"primary/x", "backup/y"}

    run(main)


def test_failover_naming_an_unknown_pool_raises_pool_not_found() -> None:
    async def main() -> None:
        _, _, ctx = failover_world()
        with pytest.raises(PoolNotFound) as caught:
            await ctx.acquire_lease(algorithm=Failover(pools=("elsewhere",)))
        assert caught.value.known == ("primary", "backup")

    run(main)


# -- sticky -------------------------------------------------------------------------------


def test_sticky_returns_to_the_same_resource_within_one_context() -> None:
    async def main() -> None:
        pool = Pool("p", [res("a", 2), res("b", 2), res("c", 2)])
        sticky, plain = TaskContext([pool], algorithm="sticky"), TaskContext([pool])
        got = []
        for _ in range(3):
            async with sticky.acquire() as lease:
                got.append(lease.resource.id)
            async with plain.acquire():  # moves the round-robin on between sticky calls
                pass
        assert got == ["a", "a", "a"]
        assert sticky.affinity == {"p": "a"}

    run(main)


def test_sticky_moves_when_its_resource_is_unavailable_and_remembers_the_new_one() -> None:
    async def main() -> None:
        pool = Pool("p", [res("a"), res("b")])
        ctx = TaskContext([pool], algorithm=Sticky())
        (await ctx.acquire_lease()).release_now()
        assert ctx.affinity == {"p": "a"}
        assert pool.try_acquire(Selector.build(id="a")) is not None  # someone else holds a
        moved = await ctx.acquire_lease()
        assert moved.resource.id == "b"
        assert ctx.affinity == {"p": "b"}

    run(main)


def test_sticky_never_overrides_the_callers_selector() -> None:
    async def main() -> None:
        pool = Pool("p", [res("a", 2), res("b", 2)])
        ctx = TaskContext([pool], algorithm="sticky")
        (await ctx.acquire_lease()).release_now()
        lease = await ctx.acquire_lease(id="b")
        assert (lease.resource.id, ctx.affinity) == ("b", {"p": "b"})

    run(main)


def test_sticky_affinity_lives_in_one_context_only() -> None:
    async def main() -> None:
        pool = Pool("p", [res("a", 2), res("b", 2)])
        first = TaskContext([pool], algorithm="sticky")
        (await first.acquire_lease()).release_now()
        second = TaskContext([pool], algorithm="sticky")
        lease = await second.acquire_lease()
        assert (first.affinity, second.affinity) == ({"p": "a"}, {"p": "b"})
        assert lease.resource.id == "b"  # round-robin, not first's affinity

    run(main)


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


# -- resolve_algorithm --------------------------------------------------------------------


def test_resolve_accepts_a_name_a_nested_dict_and_an_instance() -> None:
    assert resolve_algorithm(None) == Wait()
    assert resolve_algorithm("backoff") == Backoff()
    instance = Sticky(then="immediate")
    assert resolve_algorithm(instance) is instance
    nested = resolve_algorithm(
        {
            "name": "failover",
            "pools": ["primary", "backup"],
            "then": {"name": "backoff", "max_wait": 5},
        }
    )
    assert nested == Failover(pools=("primary", "backup"), then=Backoff(max_wait=5))
    assert isinstance(nested, Failover)
    assert nested.then == Backoff(max_wait=5)


def test_an_unknown_name_is_a_config_error_listing_the_known_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_algorithm("fastest")
    assert caught.value.field == "algorithm"
    assert caught.value.hint is not None
    for name in ALGORITHMS:
        assert name in caught.value.hint


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"name": "backoff", "base": 0}, "algorithm.base"),
        ({"name": "backoff", "factor": 0.5}, "algorithm.factor"),
        ({"name": "backoff", "base": 1.0, "cap": 0.5}, "algorithm.cap"),
        ({"name": "backoff", "jitter": "some"}, "algorithm.jitter"),
        ({"name": "backoff", "max_wait": -1}, "algorithm.max_wait"),
        ({"name": "backoff", "retries": 3}, "algorithm.retries"),
        ({"name": "least_busy", "pools": [""]}, "algorithm.pools[0]"),
        ({"name": "least_busy", "timeout": float("nan")}, "algorithm.timeout"),
        ({"name": "failover", "pools": ["a", "a"]}, "algorithm.pools"),
        ({"name": "failover", "then": "nope"}, "algorithm.then"),
        ({"name": "failover", "then": {"name": "nope"}}, "algorithm.then.name"),
        ({"name": "failover", "then": {"jitter": "full"}}, "algorithm.then.name"),
        ({"name": "sticky", "then": {"name": "backoff", "base": -1}}, "algorithm.then.base"),
        ({"name": "quota_aware", "unit": ""}, "algorithm.unit"),
        ({"name": "adaptive", "decrease": 1.0}, "algorithm.decrease"),
        ({"name": "adaptive", "increase": True}, "algorithm.increase"),
        ({"name": "adaptive", "min_limit": 0}, "algorithm.min_limit"),
        (
            {"name": "adaptive", "then": {"name": "sticky", "then": {"name": "wait", "x": 1}}},
            "algorithm.then.then.x",
        ),
        ({"backoff": {}}, "algorithm.name"),
        (42, "algorithm"),
    ],
)
def test_a_bad_spec_is_a_config_error_naming_the_field(spec: Any, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_algorithm(spec)
    assert caught.value.field == field


def test_an_algorithm_built_in_python_names_its_own_parameter() -> None:
    with pytest.raises(ConfigError) as caught:
        Backoff(base=-1.0)
    assert caught.value.field == "backoff.base"
    with pytest.raises(ConfigError) as caught:
        Failover(then={"name": "backoff", "cap": "long"})
    assert caught.value.field == "failover.then.cap"


@pytest.mark.parametrize(
    "algorithm",
    [
        Immediate(),
        Wait(timeout=3.0),
        Backoff(base=0.1, factor=3.0, cap=4.0, jitter="equal", max_wait=9.0),
        LeastBusy(pools=("q", "r"), timeout=2.0),
        Failover(pools=("q",), then=Backoff(jitter="none")),
        Sticky(then=Failover(pools=("q",), then="immediate")),
        QuotaAware(unit="requests", then=LeastBusy(pools=("q",))),
        Adaptive(increase=2.0, decrease=0.25, min_limit=2, then=Sticky()),
    ],
    ids=lambda a: a.name,
)
def test_describe_round_trips_through_resolve(algorithm: AcquireAlgorithm) -> None:
    described = algorithm.describe()
    assert described["name"] == algorithm.name
    assert resolve_algorithm(described) == algorithm
    assert resolve_algorithm(described).describe() == described


def test_precedence_is_call_then_task_then_pool_then_wait() -> None:
    async def main() -> list[str | None]:
        plain = Pool("plain", [res("a", capacity=9)])
        with_default = Pool("default", [res("a", capacity=9)], algorithm="backoff")
        leases = [
            await TaskContext([plain]).acquire_lease(),
            await TaskContext([with_default]).acquire_lease(),
            await TaskContext([with_default], algorithm="sticky").acquire_lease(),
            await TaskContext([with_default], algorithm="sticky").acquire_lease(
                algorithm="immediate"
            ),
        ]
        return [lease.algorithm for lease in leases]

    assert run(main) == ["wait", "backoff", "sticky", "immediate"]


# -- the conformance check ----------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        *sorted(ALGORITHMS),
        {"name": "failover", "pools": ["backup"]},
        {"name": "least_busy", "pools": ["other"]},
        {"name": "sticky", "then": "backoff"},
        {"name": "quota_aware", "then": {"name": "failover", "pools": ["x"], "then": "immediate"}},
        {"name": "adaptive", "then": {"name": "least_busy", "pools": ["y"]}},
    ],
    ids=str,
)
def test_every_builtin_algorithm_passes_the_conformance_check(spec: Any) -> None:
    check_algorithm(spec)


class LeaksALease(AcquireAlgorithm):
    """Broken on purpose: takes a second lease as a 'probe' and forgets it."""

    name: ClassVar[str] = "leaks_a_lease"

    async def acquire(self, request: AcquireRequest) -> Lease:
        request.try_acquire()
        return await Wait().acquire(request)


class IgnoresTheSelector(AcquireAlgorithm):
    """Broken on purpose: leases whatever is least loaded, whatever the caller asked for."""

    name: ClassVar[str] = "ignores_the_selector"

    async def acquire(self, request: AcquireRequest) -> Lease:
        lease = request.pool.try_acquire(owner=request.owner)
        if lease is None:
            raise request.unavailable("nothing free")
        return lease


class ReadsTheWallClock(AcquireAlgorithm):
    """Broken on purpose: decides with real time instead of ``request.clock``."""

    name: ClassVar[str] = "reads_the_wall_clock"

    async def acquire(self, request: AcquireRequest) -> Lease:
        time.monotonic()
        return await Wait().acquire(request)


class UsesTheGlobalRandom(AcquireAlgorithm):
    """Broken on purpose: picks with the module-level random, not ``request.rng``."""

    name: ClassVar[str] = "uses_the_global_random"

    async def acquire(self, request: AcquireRequest) -> Lease:
        ids = sorted(r.id for r in request.pool.resources)
        lease = request.try_acquire(exclude=[random.choice(ids)])
        return lease or await Wait().acquire(request)


class SpinsOnAPacedResource(AcquireAlgorithm):
    """Broken on purpose: while a resource it accepts has room it polls without letting
    time pass, which never ends on a resource that has room but is paced out."""

    name: ClassVar[str] = "spins_on_a_paced_resource"

    async def acquire(self, request: AcquireRequest) -> Lease:
        pool = request.pool

        def room() -> bool:
            return any(
                pool.active_of(r.id) < r.capacity
                for r in pool.resources
                if request.selector.matches(r)
            )

        while room():
            lease = request.try_acquire()
            if lease is not None:
                return lease
            await asyncio.sleep(0)
        return await Wait().acquire(request)


@pytest.mark.parametrize(
    ("broken", "complaint"),
    [
        pytest.param(SpinsOnAPacedResource(), "waits out pacing.*spins", id="spins_on_pacing"),
        pytest.param(LeaksALease(), "holds 2 leases after granting one", id="leaks"),
        pytest.param(IgnoresTheSelector(), "ignored the selector", id="ignores_selector"),
        pytest.param(ReadsTheWallClock(), "read the wall clock", id="wall_clock"),
        pytest.param(UsesTheGlobalRandom(), "same seeds differ", id="global_random"),
    ],
)
def test_a_broken_algorithm_fails_the_conformance_check(
    broken: AcquireAlgorithm, complaint: str
) -> None:
    with pytest.raises(AssertionError, match=complaint):
        check_algorithm(broken)
