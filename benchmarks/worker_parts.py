"""What a worker's CPU per request is made of: its machinery, or the rate it runs at.

Usage: ``.venv/bin/python benchmarks/worker_parts.py [--rate 4000] [--duration 4]
[--rounds 6] [--arrival poisson] [--delay fixed:1ms]``

The echo server runs on one core, this process on the other (Linux, two usable cores at
least). Each round runs, in this process and one after the other:

- ``one``: one process at ``--rate`` (:func:`~pyattacker.attack.run_attack`);
- ``worker of 1``: the whole plan as a worker (``run_worker(plan, 0, 1)``): one process
  with the workers' machinery (its share, its progress and snapshots hooks, its start
  instant), what that machinery costs on its own;
- ``half rate``: one process at ``--rate / 2``;
- ``workers of 2, alone``: worker 0 of 2, then worker 1 of 2 (``run_worker(plan, i, 2)``),
  each alone on the generator's core: two workers' CPU without their sharing a core.

For each, per request the server served: user and system CPU µs (``os.times``) and the
voluntary context switches (``workers.switches``: the wake-ups the process waited for), and at
the end their medians over the rounds. If ``worker of 1`` costs what ``one`` costs, the
machinery is free; if ``workers of 2, alone`` cost about what ``half rate`` costs, two
workers pay what any process pays at the rate each runs at.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

from accuracy import pin_server
from workers import switches

from pyattacker.attack import AttackPlan, OpenModel, run_attack
from pyattacker.attack._workers import run_worker
from pyattacker.servers import EchoServerProcess

#: How far ahead of now a worker run here starts (as the driver sets its workers' start).
START_AHEAD_S = 0.2


def plan_at(url: str, rate: float, args: argparse.Namespace) -> AttackPlan:
    return AttackPlan.build([url], OpenModel(rate=rate, arrival=args.arrival),
                            duration=args.duration)  # fmt: skip


def runs(url: str, args: argparse.Namespace) -> dict[str, Callable[[], object]]:
    """The runs of a round (see the module docstring), by label."""
    whole, half = plan_at(url, args.rate, args), plan_at(url, args.rate / 2, args)

    def workers_alone() -> None:
        for index in range(2):
            run_worker(whole, index, 2, time.monotonic() + START_AHEAD_S)

    return {
        "one": lambda: run_attack(whole, stop_on_signals=False),
        "worker of 1": lambda: run_worker(whole, 0, 1, time.monotonic() + START_AHEAD_S),
        "half rate": lambda: run_attack(half, stop_on_signals=False),
        "workers of 2, alone": workers_alone,
    }


def measured(server: EchoServerProcess, run: Callable[[], object]) -> tuple[float, float, float]:
    """``run``'s user µs, system µs and voluntary context switches per request served."""
    server.reset()
    times0, (waited0, _) = os.times(), switches()
    run()
    times1, (waited1, _) = os.times(), switches()
    served = max(int(server.stats()["count"]), 1)
    return ((times1.user - times0.user) / served * 1e6,
            (times1.system - times0.system) / served * 1e6,
            (waited1 - waited0) / served)  # fmt: skip


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=4000.0, help="requests/s")
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per run")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--arrival", choices=("constant", "poisson"), default="poisson")
    parser.add_argument("--delay", default="fixed:1ms", help="the echo server's --delay")
    args = parser.parse_args()
    if args.rate <= 0 or args.duration <= 0 or args.rounds < 1:
        parser.error("--rate and --duration must be above 0, --rounds at least 1")
    if not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2:
        parser.error("needs Linux and at least two usable cores (server and generator apart)")
    return args


def main() -> None:
    args = parse_args()
    cores = sorted(os.sched_getaffinity(0))
    with EchoServerProcess(delay=args.delay) as server:
        pin_server(server.pid, (cores[-1], cores[0]))
        os.sched_setaffinity(0, {cores[0]})
        print(f"{args.arrival} arrivals at {args.rate:g}/s, {args.duration:g} s a run, the "
              f"server (--delay {args.delay}) on core {cores[-1]}, this process on "
              f"core {cores[0]}; per request served: user + system µs, wake-ups")  # fmt: skip
        found: dict[str, list[tuple[float, float, float]]] = {}
        for round_no in range(args.rounds):
            line = []
            for label, run in runs(server.url, args).items():
                user, system, wakes = measured(server, run)
                found.setdefault(label, []).append((user, system, wakes))
                line.append(f"{label} {user:.1f} + {system:.1f} us, {wakes:.2f}")
            print(f"round {round_no + 1}: " + "; ".join(line), flush=True)
    print("\nmedians over the rounds:")
    one = statistics.median(u + s for u, s, _ in found["one"])
    for label, rows in found.items():
        user = statistics.median(u for u, _, _ in rows)
        system = statistics.median(s for _, s, _ in rows)
        total = statistics.median(u + s for u, s, _ in rows)
        wakes = statistics.median(w for _, _, w in rows)
        print(f"  {label:20s} user {user:6.1f} system {system:6.1f} total {total:6.1f} µs "
              f"({total / one:.3f}x one), wake-ups {wakes:.2f} a request")  # fmt: skip


if __name__ == "__main__":
    main()
