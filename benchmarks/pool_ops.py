"""What one lease costs: acquire + report + release through ``TaskContext``.

Usage: ``.venv/bin/python benchmarks/pool_ops.py [--ops 50000] [--repeat 3]``

Two workloads on a stock asyncio loop: *uncontended* (one caller, 4 resources of capacity
64: the allocator, the algorithm and the bookkeeping, never a wait) and *contended* (64
callers on 8 slots, each holding its lease across one loop turn: parking, FIFO hand-over
and wake-ups). Prints microseconds per lease, best of ``--repeat``. No peer runs here: the
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for name, workload in (("uncontended", uncontended), ("contended", contended)):
        best = min(asyncio.run(workload(args.ops)) for _ in range(args.repeat))
        print(f"{name}_us_per_lease {best * 1e6:.2f}")


if __name__ == "__main__":
    main()
