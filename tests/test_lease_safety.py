"""Leases are always returned: on success, exception, cancellation, timeout, and leaks.

The two cooldown tests carry the numbers of the reference world's cooldown story: a wait that
only a cooldown can end must end, and a cooldown that ends earlier than the armed one must
replace it (waiters woken at t=10, not t=30).
"""

from __future__ import annotations

import asyncio

import pytest

from helpers import now, run
from pyattacker.errors import LeaseLeakError
from pyattacker.pool import Pool, PoolEvent, Resource, Selector, TaskContext


def one_pool(capacity: int = 1, **kwargs: object) -> tuple[Pool, TaskContext]:
    pool = Pool("p", [Resource.create("llm", id="a", capacity=capacity, **kwargs)])  # type: ignore[arg-type]
    return pool, TaskContext([pool])


def test_lease_is_released_on_success() -> None:
    async def main() -> None:
        pool, ctx = one_pool()
        async with ctx.acquire() as lease:
            assert pool.statistics().active == 1
        assert lease.released
        assert pool.statistics().active == 0
        assert ctx.held == ()

    run(main)


def test_lease_is_released_on_exception() -> None:
    async def main() -> None:
        pool, ctx = one_pool()
        with pytest.raises(KeyError):
            async with ctx.acquire():
                raise KeyError("task bug")
        assert pool.statistics().active == 0

    run(main)


def test_lease_is_released_on_cancellation() -> None:
    async def main() -> None:
        pool, ctx = one_pool()

        async def holder() -> None:
            async with ctx.acquire():
                await asyncio.sleep(100)

        task = asyncio.create_task(holder())
        await asyncio.sleep(1)
        assert pool.statistics().active == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert pool.statistics().active == 0
        assert now() == 1.0

    run(main)


def test_lease_is_released_on_timeout() -> None:
    async def main() -> None:
        pool, ctx = one_pool()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(2.0), ctx.acquire():
                await asyncio.sleep(10)
        assert (pool.statistics().active, now()) == (0, 2.0)

    run(main)


def test_lease_is_released_in_an_acquire_release_loop() -> None:
    async def main() -> None:
        pool, ctx = one_pool(capacity=2)

        async def worker() -> None:
            for _ in range(50):
                async with ctx.acquire():
                    await asyncio.sleep(0.1)

        await asyncio.gather(*(worker() for _ in range(5)))
        stats = pool.statistics()
        assert (stats.active, stats.leases, stats.leaked) == (0, 250, 0)
        assert now() == pytest.approx(12.5)  # 250 leases x 0.1 s over 2 slots

    run(main)


def test_a_cancelled_waiter_holds_nothing_and_leaves_no_waiter_behind() -> None:
    async def main() -> None:
        pool, ctx = one_pool()
        held = await ctx.acquire_lease()
        task = asyncio.create_task(ctx.acquire_lease())
        await asyncio.sleep(1)
        assert pool.waiting == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        held.release_now()
        assert (pool.statistics().active, pool.waiting, ctx.held) == (0, 0, ())

    run(main)


def test_an_escaped_lease_is_force_reclaimed_and_recorded() -> None:
    events: list[PoolEvent] = []

    async def main() -> None:
        pool = Pool("p", [Resource.create("llm", id="a")], on_event=events.append)
        ctx = TaskContext([pool])
        escaped = await ctx.acquire_lease()
        assert ctx.reclaim_now() == (escaped,)
        assert escaped.released
        stats = pool.statistics()
        assert (stats.active, stats.leaked) == (0, 1)
        assert ctx.reclaim_now() == ()

    run(main)
    assert [e.kind for e in events if e.kind == "lease.leaked"] == ["lease.leaked"]


def test_strict_mode_turns_a_leak_into_lease_leak_error_after_reclaiming() -> None:
    async def main() -> None:
        pool = Pool("p", [Resource.create("llm", id="a")])
        ctx = TaskContext([pool], strict_leases=True)
        await ctx.acquire_lease()
        with pytest.raises(LeaseLeakError) as info:
            ctx.reclaim_now()
        assert (info.value.pool, info.value.resource) == ("p", "a")
        assert pool.statistics().active == 0

    run(main)


def test_release_is_idempotent() -> None:
    async def main() -> None:
        pool, ctx = one_pool(capacity=3)
        lease = await ctx.acquire_lease()
        assert lease.release_now() is True
        assert lease.release_now() is False
        async with lease:
            pass
        assert pool.statistics().active == 0

    run(main)


def test_a_wait_that_only_a_cooldown_can_end_actually_ends() -> None:
    """Every resource cooling down, nothing in flight: the notifier must wake us."""

    async def main() -> float:
        pool = Pool(
            "p",
            [Resource.create("llm", id="a", degrade_after=1, cooldown_s=30.0)],
            deadlock_warn_s=None,
        )
        ctx = TaskContext([pool])
        async with ctx.acquire() as lease:
            lease.report(ok=False)
        assert pool.statistics().active == 0  # nothing left to broadcast a release
        async with ctx.acquire():
            return now()

    assert run(main) == 30.0


def test_a_cooldown_that_ends_earlier_than_the_armed_one_replaces_it() -> None:
    """A cools until t=30; B breaks at t=5 for 5 s: waiters wake at t=10, not 30."""

    async def main() -> list[tuple[str, float]]:
        pool = Pool(
            "p",
            [
                Resource.create("llm", id="A", degrade_after=1, cooldown_s=30.0),
                Resource.create("llm", id="B", degrade_after=1, cooldown_s=5.0),
            ],
            deadlock_warn_s=None,
        )
        ctx = TaskContext([pool])
        a = await ctx.acquire_lease(id="A")
        a.report(ok=False)
        a.release_now()
        b = await ctx.acquire_lease(id="B")
        woken: list[tuple[str, float]] = []

        async def waiter(name: str) -> None:
            async with ctx.acquire() as lease:
                woken.append((f"{name}->{lease.resource.id}", now()))
                await asyncio.sleep(1)

        tasks = [asyncio.create_task(waiter(n)) for n in ("w1", "w2")]
        await asyncio.sleep(5)
        b.report(ok=False)
        b.release_now()
        await asyncio.gather(*tasks)
        return woken

    assert run(main) == [("w1->B", 10.0), ("w2->B", 11.0)]


def test_a_throttle_that_ends_earlier_than_the_armed_cooldown_replaces_the_timer() -> None:
    """No release, no health change: only the notifier's deadline can bring the waiter in."""

    async def main() -> float:
        pool = Pool(
            "p",
            [
                Resource.create("llm", id="A", degrade_after=1, cooldown_s=30.0),
                Resource.create("llm", id="B", capacity=2),
            ],
            deadlock_warn_s=None,
        )
        ctx = TaskContext([pool])
        a = await ctx.acquire_lease(id="A")
        a.report(ok=False)
        a.release_now()
        b1 = await ctx.acquire_lease(id="B")
        b2 = await ctx.acquire_lease(id="B")
        waiter = asyncio.create_task(ctx.acquire_lease())
        await asyncio.sleep(5)
        b1.report(ok=False, retry_after=3.0)  # B blocked until t=8; health untouched
        b1.release_now()  # wakes the waiter, which finds B throttled and parks again
        lease = await waiter
        b2.release_now()
        assert lease.resource.id == "B"
        return now()

    assert run(main) == 8.0


def test_expired_and_dead_slots_arm_no_timer_so_a_timeout_is_reached_without_spinning() -> None:
    """A zero-delay notifier would livelock virtual time; the wall budget would catch it."""

    async def main() -> tuple[bool, float]:
        pool = Pool(
            "p",
            [
                Resource.create("llm", id="dead", degrade_after=1, dead_after=1),
                Resource.create("llm", id="busy", degrade_after=1, cooldown_s=1.0),
            ],
            deadlock_warn_s=None,
        )
        dead = pool.try_acquire(Selector.build(id="dead"))
        busy = pool.try_acquire(Selector.build(id="busy"))
        assert dead
        assert busy
        dead.report(ok=False)
        dead.release_now()
        busy.report(ok=False)  # degraded until t=1, still held after that
        await asyncio.sleep(2)  # the cooldown has expired; the slot is just full
        woken = await pool.wait_slot(timeout=50.0)
        return woken, now()

    assert run(main) == (False, 52.0)
