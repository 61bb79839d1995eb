"""The acquire algorithms that pick and wait: backoff, wait, immediate, least_busy, failover
and sticky.

Every timeline is virtual: a blocker is released with ``loop.call_at(t, lease.release_now)``
and the test asserts the simulated instant the algorithm got its lease or gave up.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import fill, now, release_at, res, run
from pyattacker.errors import AcquireTimeout, PoolNotFound, ResourceUnavailable
from pyattacker.pool import (
    Backoff,
    Failover,
    Lease,
    LeastBusy,
    Pool,
    Selector,
    Sticky,
    TaskContext,
    Wait,
)


class RecordingClock:
    """The loop's clock, noting every sleep as ``(at, seconds)``."""

    def __init__(self) -> None:
        self.sleeps: list[tuple[float, float]] = []

    def now(self) -> float:
        return now()

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append((now(), seconds))
        await asyncio.sleep(seconds)


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
