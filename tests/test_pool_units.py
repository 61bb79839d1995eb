"""``Pool.take_unit`` / ``give_unit``: a unit of a pool's only resource without a Lease
object (a load test's direct path), counted and heard as a lease is."""

from __future__ import annotations

import asyncio

from helpers import now, run, settle
from pyattacker.pool import Pool, PoolEvent, Resource


def one(capacity: int = 2) -> Resource:
    """A resource whose client is the string ``client-a``."""
    return Resource.create("http", id="a", capacity=capacity, factory=lambda r: "client-a")


def ready(pool: Pool) -> Pool:
    """``pool`` once its only resource's client is built (on its first lease)."""
    lease = pool.try_acquire()
    assert lease is not None
    lease.release_now()
    return pool


def test_a_unit_counts_as_a_lease_until_given_back_and_none_is_taken_past_the_limit() -> None:
    pool = ready(Pool("p", [one(capacity=2)]))
    assert pool.take_unit(0.0) == "client-a"
    assert pool.take_unit(0.0) == "client-a"
    assert pool.take_unit(0.0) is None  # full: as try_acquire would say
    assert pool.try_acquire() is None
    stats = pool.statistics()
    assert (stats.active, stats.leases) == (2, 3)  # the first lease built the client
    pool.give_unit(0.0)
    assert pool.statistics().active == 1
    assert pool.take_unit(0.0) == "client-a"


def test_no_unit_is_taken_where_a_lease_must_look_further() -> None:
    assert Pool("p", [one()]).take_unit(0.0) is None  # its client is built on a first lease
    two = ready(Pool("p", [one(), Resource.create("http", id="b", capacity=2)]))
    assert two.take_unit(0.0) is None  # a choice to make: try_acquire's
    revoked = ready(Pool("p", [one()]))
    revoked.revoke("a")
    assert revoked.take_unit(0.0) is None  # not ready
    assert revoked.try_acquire() is None


def test_taking_and_giving_back_a_unit_are_the_lease_events_with_the_time_it_was_held() -> None:
    events: list[PoolEvent] = []

    async def main() -> None:
        pool = ready(Pool("p", [one()]))
        pool.subscribe(events.append)
        taken_at = now()
        assert pool.take_unit(taken_at, algorithm="wait") == "client-a"
        await asyncio.sleep(1.5)
        pool.give_unit(taken_at)

    run(main)
    assert [(e.kind, e.resource) for e in events] == [
        ("lease.acquired", "a"),
        ("lease.released", "a"),
    ]
    assert events[0].data == {"active": 1, "algorithm": "wait"}
    assert events[1].data == {"held_s": 1.5}


def test_a_unit_given_back_is_handed_to_a_parked_waiter() -> None:
    async def main() -> None:
        pool = ready(Pool("p", [one(capacity=1)]))
        taken_at = now()
        assert pool.take_unit(taken_at) is not None
        waiting = asyncio.create_task(pool.wait_slot(timeout=10.0))
        await settle()
        assert pool.waiting == 1
        pool.give_unit(taken_at)
        await settle()
        assert waiting.done()
        assert await waiting is True
        assert pool.try_acquire() is not None  # the unit held for it, taken at once

    run(main)
