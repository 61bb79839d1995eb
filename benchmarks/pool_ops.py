"""What one lease costs: acquire + report + release through ``TaskContext``.

Usage: ``.venv/bin/python benchmarks/pool_ops.py [--ops 50000] [--repeat 3]``

Three workloads on a stock asyncio loop: *uncontended* (one caller, 4 resources of capacity
64: the allocator, the algorithm and the bookkeeping, never a wait) and *contended* (64
callers on 8 slots, each holding its lease across one loop turn: parking, FIFO hand-over
and wake-ups), and *direct* (a load test's one target: ``Pool.try_acquire`` then
``release_now()``, against ``Pool.take_unit`` then ``give_unit()``, the attack's direct
path without feedback). Prints microseconds per lease, best of ``--repeat``. No peer runs here: the
kernel has no budget of its own; this is the reference the run and attack jobs build on.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from pyattacker import Pool, Resource, TaskContext


async def uncontended(ops: int) -> float:
    pool = Pool("p", [Resource.create("llm", id=f"k{i}", capacity=64) for i in range(4)])
    ctx = TaskContext([pool])
    start = time.perf_counter()
    for _ in range(ops):
        async with ctx.acquire() as lease:
            lease.report(ok=True, usage={"tokens": 1})
    return (time.perf_counter() - start) / ops


async def contended(ops: int, callers: int = 64) -> float:
    pool = Pool(
        "q",
        [Resource.create("llm", id=f"k{i}", capacity=2) for i in range(4)],
        deadlock_warn_s=None,
    )

    async def caller(n: int) -> None:
        ctx = TaskContext([pool])
        for _ in range(n):
            async with ctx.acquire():
                await asyncio.sleep(0)

    start = time.perf_counter()
    await asyncio.gather(*(caller(ops // callers) for _ in range(callers)))
    return (time.perf_counter() - start) / (ops // callers * callers)


async def direct_lease(ops: int) -> float:
    pool = _one_target()
    start = time.perf_counter()
    for _ in range(ops):
        lease = pool.try_acquire(algorithm="wait")
        assert lease is not None
        lease.release_now()
    return (time.perf_counter() - start) / ops


async def direct_unit(ops: int) -> float:
    pool = _one_target()
    take, give = pool.take_unit, pool.give_unit
    start = time.perf_counter()
    for _ in range(ops):
        assert take(0.0, "wait") is not None
        give(0.0)
    return (time.perf_counter() - start) / ops


def _one_target() -> Pool:
    """A pool of one target (capacity 256), its client built by a first lease."""
    pool = Pool(
        "t", [Resource.create("http", id="t", capacity=256, factory=lambda r: r.id)],
        deadlock_warn_s=None,
    )  # fmt: skip
    lease = pool.try_acquire()
    assert lease is not None
    lease.release_now()
    return pool


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    workloads = (
        ("uncontended", uncontended),
        ("contended", contended),
        ("direct_lease", direct_lease),
        ("direct_unit", direct_unit),
    )
    for name, workload in workloads:
        best = min(asyncio.run(workload(args.ops)) for _ in range(args.repeat))
        print(f"{name}_us_per_lease {best * 1e6:.2f}")


if __name__ == "__main__":
    main()
