"""A pool whose resources are all dead or revoked fails its waiters at once, in every
algorithm, instead of parking them forever; while anything could revive one, it waits."""

from __future__ import annotations

import asyncio

import pytest

from helpers import now, res, run, settle
from pyattacker.errors import NoUsableResource, ResourceUnavailable
from pyattacker.pool import Pool, Selector, TaskContext


def dead_pool() -> Pool:
    return Pool("llm", [res("key-1", degrade_after=1, dead_after=1), res("key-2")])


def kill(pool: Pool, rid: str) -> None:
    lease = pool.try_acquire(Selector.build(id=rid))
    assert lease is not None
    lease.report(ok=False, error=ConnectionResetError("gone"))
    lease.release_now()


def test_a_waiter_fails_at_once_when_every_resource_is_dead_or_revoked() -> None:
    async def main() -> tuple[NoUsableResource, float]:
        pool = dead_pool()
        kill(pool, "key-1")
        busy = pool.try_acquire(Selector.build(id="key-2"))
        assert busy is not None
        assert await pool.wait_slot(timeout=2.0) is False  # key-2 may come back: it waits
        pool.revoke("key-2")
        with pytest.raises(NoUsableResource) as caught:
            await pool.acquire()
        return caught.value, now()

    error, at = run(main)
    assert at == 2.0
    assert error.message == (
        "no usable resource in pool llm: key-1 dead (1 consecutive failures), key-2 revoked"
    )
    assert error.reasons == {"key-1": "dead (1 consecutive failures)", "key-2": "revoked"}
    assert isinstance(error, ResourceUnavailable)


def test_a_parked_waiter_fails_the_moment_the_last_resource_dies() -> None:
    async def main() -> tuple[str, float]:
        pool = dead_pool()
        held = [
            pool.try_acquire(Selector.build(id="key-1")),
            pool.try_acquire(Selector.build(id="key-2")),
        ]
        waiter = asyncio.ensure_future(pool.acquire())
        await asyncio.sleep(3.0)
        pool.revoke("key-2")
        assert held[0] is not None
        held[0].report(ok=False)  # key-1 dies, its lease still out: it could yet succeed
        await settle()
        assert not waiter.done()
        held[0].release_now()  # no: now nothing can bring either back
        with pytest.raises(NoUsableResource) as caught:
            await waiter
        return caught.value.message, now()

    message, at = run(main)
    assert at == 3.0
    assert message.startswith("no usable resource in pool llm: key-1 dead")


def test_a_dead_resource_is_waited_for_while_a_lease_on_it_could_still_revive_it() -> None:
    async def main() -> str:
        pool = Pool("llm", [res("key-1", capacity=2, degrade_after=1, dead_after=1)])
        late = pool.try_acquire()
        assert late is not None
        kill(pool, "key-1")
        waiter = asyncio.ensure_future(pool.acquire())
        await asyncio.sleep(1.0)
        late.report(ok=True)  # the call made before the death went well after all
        lease = await waiter
        late.release_now()
        lease.report(ok=False)  # dead again, and this time the last lease comes back
        lease.release_now()
        with pytest.raises(NoUsableResource):
            await pool.acquire()
        return lease.resource.id

    assert run(main) == "key-1"


@pytest.mark.parametrize(
    "algorithm",
    [
        "wait",
        "backoff",
        "least_busy",
        "sticky",
        "quota_aware",
        "adaptive",
        {"name": "failover", "pools": ["llm", "backup"]},
        {"name": "least_busy", "pools": ["backup"]},
    ],
    ids=str,
)
def test_every_waiting_algorithm_raises_no_usable_resource_without_waiting(
    algorithm: object,
) -> None:
    async def main() -> float:
        llm = dead_pool()
        backup = Pool("backup", [res("spare", degrade_after=1, dead_after=1)])
        for pool, rid in ((llm, "key-1"), (backup, "spare")):
            kill(pool, rid)
        llm.revoke("key-2")
        ctx = TaskContext([llm, backup], pool="llm")
        with pytest.raises(NoUsableResource):
            await ctx.acquire(algorithm=algorithm)  # type: ignore[arg-type]
        return now()

    assert run(main) == 0.0


def test_least_busy_keeps_waiting_on_the_pool_that_is_still_alive() -> None:
    async def main() -> tuple[str, float]:
        llm = dead_pool()
        backup = Pool("backup", [res("spare")])
        kill(llm, "key-1")
        llm.revoke("key-2")
        busy = backup.try_acquire()
        assert busy is not None
        asyncio.get_running_loop().call_later(2.0, busy.release_now)
        ctx = TaskContext([llm, backup], pool="llm")
        algorithm = {"name": "least_busy", "pools": ["backup"]}
        lease = await ctx.acquire(algorithm=algorithm)
        got = f"{lease.pool.name}/{lease.resource.id}", now()
        lease.release_now()
        backup.revoke("spare")
        with pytest.raises(NoUsableResource, match="in pools llm, backup"):
            await ctx.acquire(algorithm=algorithm)
        return got

    assert run(main) == ("backup/spare", 2.0)


def test_failover_waits_on_the_next_pool_when_the_first_is_a_dead_end() -> None:
    async def main() -> tuple[str, float]:
        llm = dead_pool()
        backup = Pool("backup", [res("spare")])
        kill(llm, "key-1")
        llm.revoke("key-2")
        busy = backup.try_acquire()
        assert busy is not None
        asyncio.get_running_loop().call_later(2.0, busy.release_now)
        ctx = TaskContext([llm, backup], pool="llm")
        lease = await ctx.acquire(algorithm={"name": "failover", "pools": ["llm", "backup"]})
        got = f"{lease.pool.name}/{lease.resource.id}", now()
        lease.release_now()
        return got

    assert run(main) == ("backup/spare", 2.0)
