"""Any interleaving of acquire, release, cancel, report, revoke, publish and clock advance
keeps ``0 <= active <= capacity``, loses no lease, leaves no waiter parked that could
proceed, and none parked that nothing can ever serve (it fails with ``NoUsableResource``).

The machine drives a real ``Pool`` on a ``VirtualEventLoop`` it steps by hand; each rule
ends by letting every runnable task run (``settle``) without moving time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from pyattacker.errors import NoUsableResource
from pyattacker.pool import Lease, Pool, Resource, Selector, TaskContext
from pyattacker.testing import VirtualEventLoop

IDS = ["a", "b", "c"]
SELECTORS = [{}, {"id": "a"}, {"id": "b"}, {"tags": "fast"}]


def make(rid: str, capacity: int) -> Resource:
    tags = ["fast"] if rid != "c" else []
    return Resource.create(
        "llm", id=rid, capacity=capacity, tags=tags, degrade_after=2, dead_after=4, cooldown_s=3.0
    )


class PoolMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = VirtualEventLoop(wall_budget_s=30.0)
        self.pool = Pool("p", [make("a", 2), make("b", 1), make("c", 1)], deadlock_warn_s=None)
        self.ctx = TaskContext([self.pool])
        self.held: list[Lease] = []
        self.waiters: list[tuple[asyncio.Task[Lease], dict[str, Any]]] = []
        self.granted = 0
        self.released = 0
        self.refused = 0

    def teardown(self) -> None:
        for task, _ in self.waiters:
            task.cancel()
        self.settle()
        for lease in self.held:
            self.inside(lease.release_now)
        self.loop.close()

    def inside(self, action: Callable[[], object]) -> None:
        """Run ``action`` as the loop's own code (the pool reads the loop's virtual time)."""

        async def step() -> None:
            action()

        self.loop.run_until_complete(step())
        self.settle()

    def settle(self) -> None:
        for _ in range(8):
            self.loop.run_until_complete(asyncio.sleep(0))
        still_waiting = []
        for task, selector in self.waiters:
            if not task.done():
                still_waiting.append((task, selector))
            elif not task.cancelled() and isinstance(task.exception(), NoUsableResource):
                self.refused += 1
            elif not task.cancelled():
                self.held.append(task.result())
                self.granted += 1
        self.waiters = still_waiting

    @rule(selector=st.sampled_from(SELECTORS))
    def acquire(self, selector: dict[str, Any]) -> None:
        async def go() -> Lease:
            return await self.ctx.acquire_lease(**selector)

        self.waiters.append((self.loop.create_task(go()), selector))
        self.settle()

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        lease = self.held.pop(data.draw(st.integers(0, len(self.held) - 1)))
        self.inside(lease.release_now)
        assert lease.released
        self.released += 1

    @precondition(lambda self: self.waiters)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        task, _ = self.waiters[data.draw(st.integers(0, len(self.waiters) - 1))]
        task.cancel()
        self.settle()

    @precondition(lambda self: self.held)
    @rule(data=st.data(), outcome=st.sampled_from(["ok", "fail", "throttle", "degrade"]))
    def report(self, data: st.DataObject, outcome: str) -> None:
        lease = self.held[data.draw(st.integers(0, len(self.held) - 1))]
        actions: dict[str, Callable[[], None]] = {
            "ok": lambda: lease.report(ok=True),
            "fail": lambda: lease.report(ok=False),
            "throttle": lambda: lease.report(ok=False, retry_after=2.0),
            "degrade": lambda: lease.degrade("test"),
        }
        self.inside(actions[outcome])

    @rule(rid=st.sampled_from(IDS))
    def revoke(self, rid: str) -> None:
        self.inside(lambda: self.pool.revoke(rid))

    @rule(rid=st.sampled_from(IDS), capacity=st.integers(1, 3))
    def publish(self, rid: str, capacity: int) -> None:
        snap = {s.id: s for s in self.pool.snapshot()}
        if snap[rid].state == "revoked" and snap[rid].active == 0:
            self.inside(lambda: self.pool.publish(make(rid, capacity)))

    @rule(dt=st.sampled_from([0.5, 1.0, 2.5, 4.0]))
    def advance(self, dt: float) -> None:
        self.loop.run_until_complete(asyncio.sleep(dt))
        self.settle()

    def free_for(self, selector: dict[str, Any]) -> Resource | None:
        found: list[Resource | None] = []
        self.inside(lambda: found.append(self.pool.select(Selector.build(**selector))))
        return found[0]

    @invariant()
    def active_stays_within_capacity(self) -> None:
        for snap in self.pool.snapshot():
            assert 0 <= snap.active <= snap.capacity, snap

    @invariant()
    def no_lease_is_lost(self) -> None:
        assert self.pool.statistics().active == len(self.held)
        assert self.granted - self.released == len(self.held)
        assert set(self.ctx.held) == set(self.held)

    @invariant()
    def no_waiter_waits_on_dead_ends(self) -> None:
        for _, selector in self.waiters:
            self.pool.check_usable(Selector.build(**selector))  # raises for a dead end

    @invariant()
    def every_waiter_that_can_proceed_has_been_woken(self) -> None:
        for _, selector in self.waiters:
            free = self.free_for(selector)
            assert free is None, f"{selector} waits while {free} is free: {self.pool.reasons()}"


PoolMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
test_pool_invariants_hold_under_any_interleaving = PoolMachine.TestCase
