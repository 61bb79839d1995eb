"""CPU per request of ``attack --workers N`` against one process, as a user measures it.

Usage: ``.venv/bin/python benchmarks/workers_cli.py [--rates 2000,5000,10000,20000]
[--delay 0] [--arrival constant] [--duration 8] [--rounds 3] [--workers 2] [--alone]
[--pin]``

``workers.py`` runs both sides in its own process, with its own probes. This runs the
command a user runs, ``pyattacker attack URL --rate R --duration D --workers W -q --json
FILE``, once with ``--workers 1`` and once with ``--workers N`` in each round (the order
alternating from round to round), against one echo server started with ``--delay``
(reset before each run), and reads the report's own figure: ``cpu.per_request_s``, every
process's CPU (the driver's and each worker's) over the requests sent. Per round it prints
both figures and their ratio (the budget: at most 1.10), the workers' driver's own CPU
seconds (the report's ``cpu.process_s`` less every worker's, ``--per-worker``), whether
each run sent what the server served, and the echo server's own CPU per request in both
runs and their ratio: the server does the same work in both, so a ratio above 1 there is
what the host did to every process (three busy processes on two cores contend where two
did not); per rate, the median ratios over the rounds. One round's ratio moves by a tenth
or more either way on a shared 2-core host: read medians of several rounds. ``--alone``
runs one process only and prints its CPU per request at each rate (what a request costs
as the arrivals thin out). ``--pin`` keeps the server on the last usable core and the
generator (one process, or the driver and every worker) on the others: the generator's
cores are its own, as on a machine with the server elsewhere; on two cores the workers
then share one core, the harder case for them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import NamedTuple

from accuracy import pin_server

from pyattacker.servers import EchoServerProcess

BUDGET = 1.10


class Run(NamedTuple):
    """One ``attack`` command's CPU seconds per request (every process of it), its
    driver's CPU seconds (None for one process), and the echo server's CPU seconds per
    request it served meanwhile."""

    per_request: float
    driver: float | None
    server_per_request: float


def cpu_seconds(pid: int) -> float:
    """The CPU time process ``pid`` has run (``/proc/PID/schedstat``: nanoseconds, finer
    than ``/proc/PID/stat``'s ticks)."""
    with open(f"/proc/{pid}/schedstat", encoding="ascii") as stat:
        return int(stat.read().split()[0]) / 1e9


def pin_to(cores: set[int] | None) -> Callable[[], None] | None:
    """What a child process runs before it starts, to keep it (and what it forks) on
    ``cores``; None: nothing (anywhere)."""
    if cores is None:
        return None
    return lambda: os.sched_setaffinity(0, cores)


def one_run(server: EchoServerProcess, args: argparse.Namespace, rate: float, workers: int) -> Run:
    """One ``attack`` command's figures (see :class:`Run`)."""
    server.reset()
    server_before = cpu_seconds(server.pid)
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "report.json")
        command = [sys.executable, "-m", "pyattacker", "attack", server.url,
                   "--rate", f"{rate:g}", "--duration", f"{args.duration:g}",
                   "--arrival", args.arrival, "--workers", str(workers),
                   *(["--per-worker"] if workers > 1 else []), "-q", "--json", out]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False,
                              preexec_fn=pin_to(args.generator_cores))  # fmt: skip
        if done.returncode != 0:
            sys.exit(f"attack exited {done.returncode}: {done.stderr.strip()}")
        with open(out, encoding="utf-8") as report:
            found = json.load(report)
    server_cpu = cpu_seconds(server.pid) - server_before
    served = int(server.stats()["count"])
    sent = int(found["summary"]["sent"])
    if served != sent:
        print(f"    counts differ: sent {sent}, the server served {served}")
    cpu = found["cpu"]
    each = found.get("workers", {}).get("each")
    driver = None if not each else cpu["process_s"] - sum(w["cpu_s"] for w in each)
    return Run(float(cpu["per_request_s"]), driver, server_cpu / max(served, 1))


def run_rate(
    server: EchoServerProcess, args: argparse.Namespace, rate: float
) -> list[tuple[float, float]]:
    """Each round's ratios at ``rate``: the workers' CPU per request over one process's,
    and the server's CPU per request while it served them over while it served one process
    (with ``--alone``: none; it prints one process's CPU per request in each round)."""
    if args.alone:
        costs = [one_run(server, args, rate, 1).per_request for _ in range(args.rounds)]
        print(f"  {rate:>8g}/s  1 process: "
              f"{', '.join(f'{c * 1e6:.1f}' for c in costs)} us a request", flush=True)  # fmt: skip
        return []
    ratios = []
    for round_no in range(args.rounds):
        order = (1, args.workers) if round_no % 2 == 0 else (args.workers, 1)
        runs = {workers: one_run(server, args, rate, workers) for workers in order}
        one, split = runs[1], runs[args.workers]
        ratio = split.per_request / one.per_request
        server_ratio = split.server_per_request / one.server_per_request
        ratios.append((ratio, server_ratio))
        print(f"  {rate:>8g}/s round {round_no + 1}: 1 process {one.per_request * 1e6:6.1f} us, "
              f"{args.workers} workers {split.per_request * 1e6:6.1f} us a request, "
              f"ratio {ratio:.3f}; driver {split.driver or 0.0:.4f} s; the server "
              f"{one.server_per_request * 1e6:.1f} and {split.server_per_request * 1e6:.1f} us "
              f"a request, ratio {server_ratio:.3f}", flush=True)  # fmt: skip
    return ratios


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="2000,5000,10000,20000", help="requests/s, commas")
    parser.add_argument("--delay", default="0", help="the echo server's --delay")
    parser.add_argument("--arrival", choices=("constant", "poisson"), default="constant")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (each: both ways)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--alone", action="store_true", help="one process only, no ratio")
    parser.add_argument("--pin", action="store_true",
                        help="the server on the last usable core, the generator (all its "
                             "processes) on the others")  # fmt: skip
    args = parser.parse_args()
    args.generator_cores = None
    if args.pin and len(os.sched_getaffinity(0)) < 2:
        parser.error("--pin needs at least two usable cores")
    try:
        args.rates = [float(r) for r in args.rates.split(",")]
    except ValueError:
        parser.error(f"--rates: {args.rates!r} is not rates separated by commas")
    if not all(r > 0 for r in args.rates) or args.duration <= 0:
        parser.error("--rates and --duration must be above 0")
    if args.rounds < 1 or args.workers < 2:
        parser.error("--rounds must be at least 1 and --workers at least 2")
    return args


def main() -> None:
    args = parse_args()
    print(f"cores {len(os.sched_getaffinity(0))}; echo server --delay {args.delay}; "
          f"{args.arrival} arrivals; {args.duration:g}s a run; cpu.per_request_s of "
          f"`attack --workers 1` and `--workers {args.workers}`")  # fmt: skip
    summary = []
    with EchoServerProcess(delay=args.delay) as server:
        if args.pin:
            cores = sorted(os.sched_getaffinity(0))
            args.generator_cores = set(cores[:-1])
            where = pin_server(server.pid, (cores[-1], cores[0]))  # (server, generator)
            print(f"the server on core {where}, the generator on {sorted(args.generator_cores)}")
        for rate in args.rates:
            summary.append((rate, run_rate(server, args, rate)))
    if args.alone:
        return
    print(f"\nCPU per request, {args.workers} workers / 1 process (budget {BUDGET:.2f}), and "
          "the server's own, whose work is the same in both runs:")  # fmt: skip
    for rate, each in summary:
        ours = [r for r, _ in each]
        within = sum(r <= BUDGET for r in ours)
        print(f"  {rate:>8g}/s  median of {len(each)} rounds {statistics.median(ours):.3f} "
              f"({within} of {len(each)} within {BUDGET:.2f}); the server's "
              f"{statistics.median(s for _, s in each):.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
