"""``attack --ray``: Ray's start-up, the cost of starting actors, and CPU per request of
2 Ray actors against 2 worker processes and one process, at the same load.

Usage: ``.venv/bin/python benchmarks/ray_attack.py [--rate 1000] [--duration 4]
[--rounds 3] [--clients 8] [--delay fixed:1ms]``

It starts a local Ray of 2 CPUs (timed: ``ray.init``), then per round, in rotating order,
runs the same closed-model plan (``--clients``, ``--rate`` x ``--duration`` requests in
all; no schedule to poll for) against one echo server process three ways: one process
(:func:`pyattacker.attack.run_attack`), 2 worker processes
(:func:`pyattacker.attack.run_workers`) and 2 Ray actors
(:func:`pyattacker.attack.run_ray_workers`). For each it prints the CPU per request
(every worker's CPU from its start to its count's hand-over, plus the driver's own; an
actor's CPU includes its Ray threads while it ran), the wall time beyond the attack itself
(for Ray: placing the actors, starting their processes, measuring their clocks, the
start margin, collecting), and the clock uncertainty of the actors.

The generator and the server share this machine's cores: costs, not the highest rate.
Run it several times beside the same load and read ranges.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import ray

from pyattacker.attack import (
    AttackPlan,
    AttackResult,
    ClosedModel,
    WorkersResult,
    run_attack,
    run_ray_workers,
    run_workers,
)
from pyattacker.clock import wall_time
from pyattacker.servers import EchoServerProcess


def one_run(server: EchoServerProcess, plan: AttackPlan, how: str) -> dict[str, Any]:
    server.reset()
    cpu0, wall0 = time.process_time(), wall_time()
    if how == "process":
        result: AttackResult = run_attack(plan, stop_on_signals=False)
    elif how == "workers":
        result = run_workers(plan, 2, per_worker=True)
    else:
        result = run_ray_workers(plan, 2, per_worker=True)
    driver = time.process_time() - cpu0
    wall = wall_time() - wall0
    each = result.workers if isinstance(result, WorkersResult) else []
    cpu = driver + sum(w.cpu_s for w in each)
    uncertainty = [w.clock_uncertainty_s for w in each if w.clock_uncertainty_s is not None]
    return {
        "how": how,
        "sent": result.sent,
        "served": server.stats()["count"],
        "cpu_us_per_request": cpu / max(result.sent, 1) * 1e6,
        "driver_cpu_s": driver,
        "overhead_s": wall - result.elapsed,
        "clock_uncertainty_ms": max(uncertainty) * 1000 if uncertainty else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="requests per second")
    parser.add_argument("--duration", type=float, default=4.0, help="seconds of requests")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (each: all three ways)")
    parser.add_argument("--clients", type=int, default=8, help="closed-model clients")
    parser.add_argument("--delay", default="fixed:1ms", help="the echo server's delay")
    args = parser.parse_args()
    print(f"cores {len(os.sched_getaffinity(0))}; load average {os.getloadavg()[0]:.1f}")
    started = wall_time()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)  # fmt: skip
    print(f"ray.init (local, 2 CPUs): {wall_time() - started:.1f} s", flush=True)
    ways = ["process", "workers", "ray"]
    with EchoServerProcess(delay=args.delay) as server:
        plan = AttackPlan.build(
            [server.url + "/"], ClosedModel(args.clients), requests=int(args.rate * args.duration)
        )
        for round_ in range(args.rounds):
            order = ways[round_ % 3 :] + ways[: round_ % 3]
            runs = {how: one_run(server, plan, how) for how in order}
            for how in ways:
                run = runs[how]
                print(
                    f"round {round_ + 1} {how:8}: sent {run['sent']} (server {run['served']}), "
                    f"CPU {run['cpu_us_per_request']:.1f} us/request (driver "
                    f"{run['driver_cpu_s']:.2f} s), wall beyond the attack "
                    f"{run['overhead_s']:.2f} s, clock uncertainty "
                    f"{run['clock_uncertainty_ms'] and round(run['clock_uncertainty_ms'], 3)} ms",
                    flush=True,
                )
            one = runs["process"]["cpu_us_per_request"]
            print(f"round {round_ + 1}: CPU per request / one process: workers "
                  f"{runs['workers']['cpu_us_per_request'] / one:.2f}, ray "
                  f"{runs['ray']['cpu_us_per_request'] / one:.2f}", flush=True)  # fmt: skip
    ray.shutdown()


if __name__ == "__main__":
    main()
