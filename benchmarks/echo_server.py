"""Requests per second the echo server answers with zero delay, measured with wrk.

Usage: ``.venv/bin/python benchmarks/echo_server.py [--duration 10] [--connections 64]
[--repeat 3] [--delay 0]``

Starts ``pyattacker echo-server --delay 0`` as its own process pinned to core 0 and runs
``wrk -t1 -cN -dDs URL`` pinned to core 1 (``taskset``, when it works here; unpinned
otherwise, and it says so). Prints wrk's req/s, the server's own count of held requests
(which must equal wrk's request count give or take the few in flight when wrk stopped),
the server's hold-time percentiles, and whether the issue's budget, >= 100,000 req/s on
one core, was met by the best run. A measurement, not a test: nothing here fails on speed.

On a shared machine wrk's figure drops whenever a neighbour takes either core, so it also
prints the server's CPU seconds per request (from ``/proc/PID/stat``, Linux only) and the
rate one core would sustain at that cost, and how busy the server was: a server busy well
under 100 % was not what limited wrk. The CPU figure is steadier than wrk's, not a
substitute for it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys

from pyattacker._units import format_duration
from pyattacker.servers import EchoServerProcess

BUDGET = 100_000


def pinning() -> tuple[list[str], list[str]]:
    """``taskset`` prefixes for the server and wrk, or none when taskset cannot pin."""
    taskset = shutil.which("taskset")
    if taskset is None:
        return [], []
    probe = subprocess.run([taskset, "-c", "1", "true"], capture_output=True)
    if probe.returncode != 0:
        return [], []
    return [taskset, "-c", "0"], [taskset, "-c", "1"]


def run_wrk(prefix: list[str], url: str, connections: int, seconds: int) -> tuple[float, int]:
    """wrk's ``Requests/sec`` and total request count."""
    command = [*prefix, "wrk", "-t1", f"-c{connections}", f"-d{seconds}s", url]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    rate = re.search(r"Requests/sec:\s*([0-9.]+)", out)
    total = re.search(r"([0-9]+) requests in", out)
    errors = re.search(r"(Socket errors:.*|Non-2xx or 3xx responses: \d+)", out)
    if rate is None or total is None:
        raise SystemExit(f"could not read wrk's output:\n{out}")
    if errors:
        print(f"  wrk: {errors.group(1)}")
    return float(rate.group(1)), int(total.group(1))


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` so far, or None where /proc is not there:
    the nanoseconds of ``/proc/PID/task/*/schedstat`` (each of its threads) where the
    kernel keeps them (a short run's CPU is then not rounded to clock ticks), else
    ``/proc/PID/stat``'s ticks. A thread that has ended is in the ticks only: the servers
    measured here keep theirs."""
    try:
        total = 0
        for thread in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{thread}/schedstat", encoding="ascii") as schedstat:
                total += int(schedstat.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds_here(pid: int, script: str) -> float:
    """:func:`cpu_seconds`, for a script that cannot go on without it: exits saying so
    where ``/proc`` is not there."""
    seconds = cpu_seconds(pid)
    if seconds is None:
        sys.exit(f"{script} reads the server's CPU from /proc: Linux only")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3, help="wrk runs; the best is judged")
    parser.add_argument("--delay", default="0", help="the server's --delay spec")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed; nothing measured")
    server_pin, wrk_pin = pinning()
    print(
        f"pinning: {'server on core 0, wrk on core 1' if server_pin else 'none (taskset failed)'}"
    )
    rates = []
    with EchoServerProcess(delay=args.delay, command_prefix=server_pin) as server:
        for run in range(1, args.repeat + 1):
            server.reset()
            cpu_before = cpu_seconds(server.pid)
            rate, total = run_wrk(wrk_pin, server.url, args.connections, args.duration)
            cpu_after = cpu_seconds(server.pid)
            stats = server.stats()
            rates.append(rate)
            held = stats["count"]
            print(
                f"run {run}: wrk {rate:,.0f} req/s ({total:,} requests in {args.duration} s, "
                f"-t1 -c{args.connections}); server held {held:,} "
                f"(wrk - server = {total - held:+,}), dropped {stats['dropped']}"
            )
            if cpu_before is not None and cpu_after is not None and held:
                per_request = (cpu_after - cpu_before) / held
                busy = (cpu_after - cpu_before) / args.duration
                print(
                    f"  server CPU {per_request * 1e6:.2f} us/request "
                    f"-> {1 / per_request:,.0f} req/s on one core at that cost; the server "
                    f"was busy {busy:.0%} of the run"
                    + ("" if busy > 0.9 else " (so something else limited this run)")
                )
            quantiles = ", ".join(
                f"{key} {format_duration(stats[key])}" for key in ("p50", "p99", "p99.9", "max")
            )
            print(f"  server hold times: {quantiles}")
    best = max(rates)
    verdict = "meets" if best >= BUDGET else "falls SHORT of"
    print(f"best {best:,.0f} req/s: {verdict} the budget of {BUDGET:,} req/s on one core")


if __name__ == "__main__":
    main()
