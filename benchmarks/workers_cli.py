"""CPU per request of ``attack --workers N`` against one process, as a user measures it.

Usage: ``.venv/bin/python benchmarks/workers_cli.py [--rates 2000,5000,10000,20000]
[--delay 0] [--arrival constant] [--duration 8] [--rounds 3] [--workers 2] [--alone]
[--pin] [--run R[,R]] [--control]``

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
then share one core, the harder case for them. ``--run R`` has the workers deal Poisson
arrivals in runs of R instead of the package's ``arrival_run`` (a measurement's knob,
set by a ``sitecustomize`` in the attack's process); ``--run A,B`` runs both in every
round, beside one process (the order rotating), and says in how many rounds B cost less
than A: two run lengths compared in the same minutes, which this host needs.
``--control`` adds a third run to every round: one process at one worker's rate (``rate /
workers``, for as long): what a process costs a request at the rate each worker carries,
with none of the workers' machinery. The workers costing what it costs says their excess
over one process at the whole rate is the thinner rate each process runs at (a process that
sleeps longer between its wake-ups pays more for each), not the sharing.
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
from echo_server import cpu_seconds_here

from pyattacker.servers import EchoServerProcess

BUDGET = 1.10


class Run(NamedTuple):
    """One ``attack`` command's CPU seconds per request (every process of it), its
    driver's CPU seconds (None for one process), and the echo server's CPU seconds per
    request it served meanwhile."""

    per_request: float
    driver: float | None
    server_per_request: float


class Ratios(NamedTuple):
    """One round's figures for one run length: the workers' CPU per request over one
    process's, the server's CPU per request while it served them over while it served one
    process, and (``--control``) the workers' over one process's at a worker's rate."""

    ours: float
    server: float
    over_control: float | None


def pin_to(cores: set[int] | None) -> Callable[[], None] | None:
    """What a child process runs before it starts, to keep it (and what it forks) on
    ``cores``; None: nothing (anywhere)."""
    if cores is None:
        return None
    return lambda: os.sched_setaffinity(0, cores)


#: The ``sitecustomize`` that ``--run`` puts first on the attack's ``PYTHONPATH``: every
#: run the package would deal in more than one arrival at a time is dealt in the given one.
RUN_PATCH = """import os
from pyattacker.attack import _workers
_made, _run = _workers.arrival_run, int(os.environ["WORKERS_CLI_RUN"])
_workers.arrival_run = lambda plan, n: _run if _made(plan, n) > 1 else 1
"""


def run_env(scratch: str, run: int | None) -> dict[str, str] | None:
    """The attack's environment: this one, or (``run``) with :data:`RUN_PATCH` loaded."""
    if run is None:
        return None
    with open(os.path.join(scratch, "sitecustomize.py"), "w", encoding="utf-8") as patch:
        patch.write(RUN_PATCH)
    path = os.pathsep.join(p for p in (scratch, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "WORKERS_CLI_RUN": str(run)}


def one_run(
    server: EchoServerProcess,
    args: argparse.Namespace,
    rate: float,
    workers: int,
    run: int | None = None,
) -> Run:
    """One ``attack`` command's figures (see :class:`Run`); ``run``: see ``--run``."""
    server.reset()
    server_before = cpu_seconds_here(server.pid, "workers_cli.py")
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "report.json")
        command = [sys.executable, "-m", "pyattacker", "attack", server.url,
                   "--rate", f"{rate:g}", "--duration", f"{args.duration:g}",
                   "--arrival", args.arrival, "--workers", str(workers),
                   *(["--per-worker"] if workers > 1 else []), "-q", "--json", out]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False,
                              env=run_env(scratch, run),
                              preexec_fn=pin_to(args.generator_cores))  # fmt: skip
        if done.returncode != 0:
            sys.exit(f"attack exited {done.returncode}: {done.stderr.strip()}")
        with open(out, encoding="utf-8") as report:
            found = json.load(report)
    server_cpu = cpu_seconds_here(server.pid, "workers_cli.py") - server_before
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
) -> list[list[Ratios]]:
    """Each round's :class:`Ratios` at ``rate``, one for each of ``--run``'s lengths (one
    without it); with ``--alone`` none: it prints one process's CPU per request in each
    round."""
    if args.alone:
        costs = [one_run(server, args, rate, 1).per_request for _ in range(args.rounds)]
        print(f"  {rate:>8g}/s  1 process: "
              f"{', '.join(f'{c * 1e6:.1f}' for c in costs)} us a request", flush=True)  # fmt: skip
        return []
    rounds = []
    # None: one process; "control": one process at a worker's rate; else the workers
    # with that run length
    kinds: list[int | str | None] = [None, *args.run, *(["control"] if args.control else [])]
    for round_no in range(args.rounds):
        turn = round_no % len(kinds)
        found = {kind: run_kind(server, args, rate, kind)
                 for kind in kinds[turn:] + kinds[:turn]}  # fmt: skip
        one, each = found[None], []
        control = found.get("control")
        for kind in args.run:
            split = found[kind]
            ratio = split.per_request / one.per_request
            server_ratio = split.server_per_request / one.server_per_request
            over_control = None if control is None else split.per_request / control.per_request
            each.append(Ratios(ratio, server_ratio, over_control))
            runs = f" (runs of {kind})" if kind else ""
            print(f"  {rate:>8g}/s round {round_no + 1}: 1 process "
                  f"{one.per_request * 1e6:6.1f} us, {args.workers} workers{runs} "
                  f"{split.per_request * 1e6:6.1f} us a request, "
                  f"ratio {ratio:.3f}; driver {split.driver or 0.0:.4f} s; the server "
                  f"{one.server_per_request * 1e6:.1f} and {split.server_per_request * 1e6:.1f} "
                  f"us a request, ratio {server_ratio:.3f}", flush=True)  # fmt: skip
        if control is not None:
            print(f"  {rate:>8g}/s round {round_no + 1}: 1 process at "
                  f"{rate / args.workers:g}/s {control.per_request * 1e6:6.1f} us a request; "
                  f"the workers over it: "
                  f"{', '.join(f'{r.over_control:.3f}' for r in each)}", flush=True)  # fmt: skip
        rounds.append(each)
    return rounds


def run_kind(
    server: EchoServerProcess, args: argparse.Namespace, rate: float, kind: int | str | None
) -> Run:
    """One run of a round (see ``run_rate``'s kinds)."""
    if kind is None:
        return one_run(server, args, rate, 1)
    if kind == "control":
        return one_run(server, args, rate / args.workers, 1)
    assert isinstance(kind, int)
    return one_run(server, args, rate, args.workers, kind or None)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="2000,5000,10000,20000", help="requests/s, commas")
    parser.add_argument("--delay", default="0", help="the echo server's --delay")
    parser.add_argument("--arrival", choices=("constant", "poisson"), default="constant")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (each: both ways)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--alone", action="store_true", help="one process only, no ratio")
    parser.add_argument("--run", default="0",
                        help="the workers' Poisson runs: R, or A,B to compare "
                             "(0: the package's)")  # fmt: skip
    parser.add_argument(
        "--control",
        action="store_true",
        help="also one process at one worker's rate, in every round",
    )
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
    try:
        args.run = [int(r) for r in args.run.split(",")]
    except ValueError:
        parser.error(f"--run: {args.run!r} is not run lengths separated by commas")
    if len(args.run) > 2 or len(set(args.run)) < len(args.run) or min(args.run) < 0:
        parser.error("--run: one or two different run lengths, 0 or more")
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
    for rate, rounds in summary:
        for at, kind in enumerate(args.run):
            ours = [each[at].ours for each in rounds]
            within = sum(r <= BUDGET for r in ours)
            runs = f" runs of {kind}:" if kind else ""
            print(f"  {rate:>8g}/s {runs} median of {len(ours)} rounds "
                  f"{statistics.median(ours):.3f} ({within} of {len(ours)} within "
                  f"{BUDGET:.2f}); the server's "
                  f"{statistics.median(each[at].server for each in rounds):.3f}")  # fmt: skip
            if args.control:
                controls = [each[at].over_control or 0.0 for each in rounds]
                print(f"  {rate:>8g}/s {runs} against one process at a worker's rate, "
                      f"median {statistics.median(controls):.3f}")  # fmt: skip
        if len(args.run) == 2:
            cheaper = sum(each[1].ours < each[0].ours for each in rounds)
            print(f"  {rate:>8g}/s  runs of {args.run[1]} cost less than runs of {args.run[0]} "
                  f"in {cheaper} of {len(rounds)} rounds")  # fmt: skip


if __name__ == "__main__":
    main()
