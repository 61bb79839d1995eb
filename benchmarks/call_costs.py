"""Two costs this project's hot paths were shaped by, measured where they run.

Usage: ``.venv/bin/python benchmarks/call_costs.py [--connections 256] [--rounds 3]``

- ``asyncio.get_running_loop()`` on uvloop against the bound loop's ``is_running()``:
  on Python 3.11 the first makes a ``getpid()`` system call per call, which is why
  ``HttpClient.start`` and the engine no longer ask per request.
- ``HttpClient.preconnect(url, N)`` against the echo server (``fixed:1ms``, its own
  process): wall and CPU time per connection opened, what a cold start spends before its
  requests (``cold_start.py`` shows what that does to a fast level). Run here without
  ``quiet_gc``, so collections are included.

A measurement, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import timeit

import uvloop

from pyattacker.http import HttpClient
from pyattacker.servers import EchoServerProcess


async def loop_lookups() -> None:
    loop = asyncio.get_running_loop()
    for name, call in (
        ("asyncio.get_running_loop()", asyncio.get_running_loop),
        ("loop.is_running()", loop.is_running),
        ("os.getpid()", os.getpid),
    ):
        ns = min(timeit.repeat(call, number=200_000, repeat=5)) / 200_000 * 1e9
        print(f"{name:<28} {ns:7.1f} ns")


async def preconnects(url: str, connections: int, rounds: int) -> None:
    for _ in range(rounds):
        async with HttpClient(max_connections=connections) as client:
            wall, cpu = time.perf_counter(), time.process_time()
            opened = await client.preconnect(url, connections)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            print(
                f"preconnect {opened} connections: {wall * 1e3:.1f} ms wall, "
                f"{cpu * 1e3:.1f} ms CPU ({cpu / max(opened, 1) * 1e6:.0f} us each)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    uvloop.run(loop_lookups())
    with EchoServerProcess(delay="fixed:1ms") as server:
        uvloop.run(preconnects(server.url, args.connections, args.rounds))


if __name__ == "__main__":
    main()
