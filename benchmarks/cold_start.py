"""What opening connections during the schedule costs a fast open-model level.

Usage: ``.venv/bin/python benchmarks/cold_start.py [--rate 33000] [--hold 2] [--pairs 4]``

One echo server process (``fixed:1ms``, CPU 0) and, from this process (CPU 1), pairs of
attacks at ``--rate`` for ``--hold`` seconds with the default 256 connections: *cold*
(``preconnect=0``: each of the first requests that finds no idle connection opens one, on
the task path, inside the schedule) and *warm* (``preconnect=256``: all opened before the
first arrival), alternating. Each prints its p99 dispatch delay and late requests (sent
more than 10 ms after their scheduled time), and the scheduled clock's p99 latency in the
first three 10 ms windows against the median window's: how late the start was, and
whether the rest of the level recovered. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics

from accuracy import cpu_pair, pin_generator, pin_server

from pyattacker.attack import AttackPlan, AttackResult, OpenModel, run_attack
from pyattacker.servers import EchoServerProcess

CONNECTIONS = 256


def level(url: str, rate: float, hold: float, preconnect: int) -> AttackResult:
    plan = AttackPlan.build(
        [url], OpenModel(rate=rate), duration=hold, window=0.01, preconnect=preconnect
    )
    return run_attack(plan, stop_on_signals=False)


def render(name: str, result: AttackResult) -> str:
    p99s = [w.latency.p99 for w in result.windows if w.latency.p99 is not None]
    first = " ".join(f"{p * 1e3:5.1f}" for p in p99s[:3])
    lag = result.total.dispatch_delay.percentile(99) * 1e3
    return (
        f"{name}  lag p99 {lag:7.2f} ms  late {result.late:6,}  latency p99 of the first "
        f"windows {first} ms, median window {statistics.median(p99s) * 1e3:5.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=33_000.0)
    parser.add_argument("--hold", type=float, default=2.0)
    parser.add_argument("--pairs", type=int, default=4)
    args = parser.parse_args()
    cpus = cpu_pair()
    if cpus is not None:
        pin_generator(cpus)
    with EchoServerProcess(delay="fixed:1ms") as server:
        where = pin_server(server.pid, cpus) if cpus is not None else "any CPU"
        print(
            f"cpus {os.cpu_count()}; echo server (fixed:1ms) on CPU {where}; "
            f"{args.rate:,.0f}/s for {args.hold:g} s, {CONNECTIONS} connections"
        )
        for _ in range(args.pairs):
            print(render("cold", level(server.url + "/", args.rate, args.hold, 0)))
            print(render("warm", level(server.url + "/", args.rate, args.hold, CONNECTIONS)))


if __name__ == "__main__":
    main()
