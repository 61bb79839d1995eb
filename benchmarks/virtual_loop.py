"""How many timer events per second the virtual loop processes.

Usage: ``.venv/bin/python benchmarks/virtual_loop.py [--tasks 12] [--sleeps 20000] [--repeat 3]``

Each of ``--tasks`` tasks awaits ``asyncio.sleep(random delay)`` ``--sleeps`` times; one
timer event is one such sleep ending. The same workload is also timed with the plain
``asyncio.sleep(0)`` loop on a stock event loop, as the floor any asyncio loop pays per
task switch. Reports the best of ``--repeat`` runs, in real (``time.perf_counter``) and CPU
(``time.process_time``) seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from collections.abc import Callable

from pyattacker.testing import VirtualClock


async def _sleeper(rng: random.Random, sleeps: int) -> None:
    for _ in range(sleeps):
        await asyncio.sleep(rng.uniform(0.001, 1.0))


async def _workload(tasks: int, sleeps: int, seed: int) -> float:
    rng = random.Random(seed)
    await asyncio.gather(*(_sleeper(random.Random(rng.random()), sleeps) for _ in range(tasks)))
    return asyncio.get_running_loop().time()


async def _yields(tasks: int, sleeps: int) -> None:
    async def spin() -> None:
        for _ in range(sleeps):
            await asyncio.sleep(0)

    await asyncio.gather(*(spin() for _ in range(tasks)))


def _best_of(repeat: int, run: Callable[[], object]) -> tuple[float, float]:
    """Best real and best CPU seconds of ``repeat`` runs (CPU is steadier on a busy box)."""
    best_real = best_cpu = float("inf")
    for _ in range(repeat):
        real, cpu = time.perf_counter(), time.process_time()
        run()
        best_real = min(best_real, time.perf_counter() - real)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return best_real, best_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=12)
    parser.add_argument("--sleeps", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    events = args.tasks * args.sleeps

    final = VirtualClock().run(_workload(args.tasks, args.sleeps, seed=1))
    virtual_s, virtual_cpu = _best_of(
        args.repeat, lambda: VirtualClock().run(_workload(args.tasks, args.sleeps, seed=1))
    )
    stock_s, stock_cpu = _best_of(
        args.repeat, lambda: asyncio.run(_yields(args.tasks, args.sleeps))
    )
    print(f"{events:,} timer events ({args.tasks} tasks x {args.sleeps:,} sleeps)")
    print(
        f"virtual loop: {events / virtual_s:,.0f} events/s real "
        f"({virtual_s:.3f} s), {events / virtual_cpu:,.0f} events/s CPU"
    )
    print(f"  simulated {final:,.1f} s of virtual time ({final / virtual_s:,.0f}x real time)")
    print(
        f"stock loop, sleep(0) only: {events / stock_s:,.0f} switches/s real, "
        f"{events / stock_cpu:,.0f} switches/s CPU"
    )


if __name__ == "__main__":
    main()
