"""The same open-model workload through every load tool installed here, against one truth.

Usage: ``.venv/bin/python benchmarks/compare.py [--rate 200] [--duration 5] [--stall 1]
[--delay SPEC] [--tools ours,wrk,...] [--rounds 1] [--locust PATH] [--out compare.json]``

Every setting is checked before anything starts (a bad one exits 2 naming its flag), so a
run cannot end in a traceback and lose its tables. Locust is ``--locust``, else ``locust``
on ``PATH``, else ``$PEERS_DIR/locust/bin/locust``: ``PEERS_DIR`` (default
``/tmp/pyattacker-peers``) is the folder the peers' ``peers.sh`` (in ``shared/bench``,
beside the checkout) installs them into. No other variable is read.

About a minute per round with every tool (5 s per tool and case, plus start-up);
``--rounds N`` repeats everything and ends with each error's range over the rounds.

One echo server process serves every tool in turn. Each tool gets the same workload, as
near as its model allows: ``--rate`` requests/s for ``--duration`` seconds. The server's
exact hold times (``/stats``) are reset before each tool and read after it, so each tool is
judged against the truth of its own run. Tools are black boxes: their command lines are
run and their printed output parsed; a tool that is not installed is reported as such.

What each tool can run (its model) and where it starts its clock:

- ``ours`` (``pyattacker attack --rate``): open model; its latency counts from the
  *scheduled* time (a row for the *sent* clock too);
- ``wrk``: closed loop, N connections, no rate option; N is the nearest equivalent
  (Little's law: N = rate x mean delay); counts from the send, yet its percentiles show
  a stall its own requests mostly did not meet: its printed distribution is adjusted
  for requests it did not send (observed in the stall case; we did not look how). Its
  clock reads "sent, adjusted (see stall)", with a footnote under the table;
- ``hey``: closed loop, N workers, each rate-limited to rate/N (``-q``); counts from the send;
- ``locust``: closed loop, N users paced by ``constant_throughput(rate/N)``; counts from
  the send; it prints percentiles in whole milliseconds;
- ``k6``, ``vegeta``, ``siege``: measured only where installed and a runner exists; else
  reported, never guessed.

Two cases. ``steady``: the server holds each request for a draw from ``--delay``; every
percentile is compared with the server's truth of that run. ``stall`` (``--stall S``;
``--stall 0`` runs no stall case): a fixed 10 ms delay, and half way through the tool's
traffic the server writes no response for S seconds (``POST /stall``). A user arriving at
the planned rate during the stall waits until it ends, so the truth here is the open
model's: the latencies of ``rate x duration`` arrivals evenly spread, each held 10 ms or
until the stall ends (computed, see :func:`stalled_truth`), while the server's own count
shows how many requests the tool kept sending. A tool that stops sending while its
connections are held (a closed loop) records only a few slow requests and hides the stall:
coordinated omission. A measurement, not a test: nothing is pinned; run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pyattacker import __version__
from pyattacker._atomic import check_output
from pyattacker.clock import wall_time
from pyattacker.errors import ConfigError
from pyattacker.servers import Delay, EchoServerProcess

TOOLS = ("ours", "wrk", "hey", "locust", "k6", "vegeta", "siege")
DEFAULT_DELAY = "lognormal:median=20ms,sigma=0.5"
#: wrk's clock, and the footnote printed under a table that shows it.
WRK_CLOCK = "sent, adjusted (see stall)"
CLOCK_NOTES = {
    WRK_CLOCK: "wrk times from the send, yet its percentiles show a stall its own "
    "requests mostly did not meet: adjusted for requests it did not send",
}
QUANTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0))
STALL_DELAY_S = 0.010
LOCUSTFILE = """\
from locust import FastHttpUser, constant_throughput, task


class Paced(FastHttpUser):
    wait_time = constant_throughput({per_user!r})

    @task
    def get(self):
        self.client.get("/")
"""


@dataclass
class Case:
    name: str
    delay: str
    rate: float
    duration: float
    stall: float = 0.0  # seconds the server stalls half way through the traffic

    @property
    def mean_delay(self) -> float:
        """The delay's mean (seconds, from its quantiles): sizes the closed tools' N."""
        delay = Delay.parse(self.delay)
        return sum(delay.quantile((i + 0.5) / 1000) for i in range(1000)) / 1000


@dataclass
class Run:
    """One tool's figures (seconds) on one case, and the truth they are judged against."""

    tool: str
    version: str
    model: str
    clock: str
    command: str
    reported: int | None
    server_count: int | None
    figures: dict[str, float | None]
    truth: dict[str, float]
    note: str = ""


# ------------------------------------------------------------------------------ parsing

_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}


def wrk_figures(out: str) -> tuple[dict[str, float | None], int | None]:
    """wrk ``--latency``'s 50/90/99 % lines and its ``N requests in`` count."""
    figures: dict[str, float | None] = {}
    for key, q in QUANTILES:
        found = re.search(rf"^\s*{q:g}%\s+([0-9.]+)(us|ms|s|m)\s*$", out, re.MULTILINE)
        figures[key] = float(found[1]) * _UNITS[found[2]] if found else None
    count = re.search(r"^\s*([0-9]+) requests in", out, re.MULTILINE)
    return figures, int(count[1]) if count else None


def hey_figures(out: str) -> tuple[dict[str, float | None], int | None]:
    """hey's ``Latency distribution`` lines (seconds) and its responses plus errors."""
    figures: dict[str, float | None] = {}
    for key, q in QUANTILES:
        found = re.search(rf"^\s*{q:g}% in ([0-9.]+) secs", out, re.MULTILINE)
        figures[key] = float(found[1]) if found else None
    statuses = re.findall(r"^\s*\[[0-9]+\]\s+([0-9]+) responses", out, re.MULTILINE)
    errors_part = out.partition("Error distribution:")[2]
    errors = re.findall(r"^\s*\[([0-9]+)\]\s", errors_part, re.MULTILINE)
    if not statuses and not errors:
        return figures, None
    return figures, sum(map(int, statuses)) + sum(map(int, errors))


def locust_figures(out: str) -> tuple[dict[str, float | None], int | None]:
    """The ``Aggregated`` row of the percentile table Locust prints at the end
    (milliseconds; its ``--csv`` file is written periodically and can miss the last
    seconds, so the printed summary is the one read)."""
    empty: dict[str, float | None] = dict.fromkeys(key for key, _ in QUANTILES)
    lines = out.splitlines()
    heads = [i for i, line in enumerate(lines) if "50%" in line and "99%" in line]
    if not heads:
        return empty, None
    columns = lines[heads[-1]].split("|")[0].split()[2:]  # after "Type Name"
    row = next((line for line in lines[heads[-1] :] if "Aggregated" in line), None)
    if row is None:
        return empty, None
    values = row.split("Aggregated", 1)[1].split()
    table = dict(zip(columns, values, strict=False))
    figures: dict[str, float | None] = {}
    for key, q in QUANTILES:
        text = table.get(f"{q:g}%", "")
        figures[key] = float(text) / 1e3 if re.fullmatch(r"[0-9.]+", text) else None
    count = table.get("#", "")
    return figures, int(count) if count.isdigit() else None


# ------------------------------------------------------------------------------ truth


def stalled_truth(case: Case) -> dict[str, float]:
    """The open model's truth of the stall case: ``rate x duration`` arrivals evenly
    spread, each answered ``STALL_DELAY_S`` after it arrives or, when that falls inside
    the stall (``case.stall`` seconds from the middle of the run), when the stall ends.
    Nearest-rank percentiles, as the server's ``/stats``.
    """
    start = case.duration / 2
    end = start + case.stall
    n = round(case.rate * case.duration)
    latencies = []
    for i in range(n):
        arrival = i / case.rate
        answer = arrival + STALL_DELAY_S
        latencies.append(end - arrival if start <= answer < end else STALL_DELAY_S)
    latencies.sort()
    return {key: latencies[max(0, math.ceil(q / 100 * n) - 1)] for key, q in QUANTILES}


def stall_halfway(server: EchoServerProcess, case: Case, done: threading.Event) -> None:
    """Wait for the tool's first request to reach the server, then half the duration,
    then stall the server for ``case.stall`` seconds (unless the tool is done)."""
    deadline = wall_time() + 30
    while not done.is_set() and wall_time() < deadline:
        stats = server.stats()
        if stats["count"] or stats["in_flight"]:
            break
        done.wait(0.02)
    if not done.wait(case.duration / 2):
        server.stall(case.stall)


# ------------------------------------------------------------------------------ tools


def run_command(command: list[str], timeout: float, cwd: str | None = None) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    return done.stdout + done.stderr


def version_of(command: list[str], pattern: str) -> str:
    try:
        found = re.search(pattern, run_command(command, 10))
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return found[1] if found else "unknown"


def closed_n(case: Case) -> int:
    """Connections a closed loop needs to offer ``rate`` at the mean delay (Little's law)."""
    return max(1, math.ceil(case.rate * case.mean_delay))


def run_ours(case: Case, url: str, workdir: Path) -> list[Run]:
    report = workdir / "ours.json"
    command = [sys.executable, "-m", "pyattacker", "attack", url + "/"]
    command += ["--rate", f"{case.rate:g}/s", "--duration", f"{case.duration:g}s"]
    command += ["--preconnect", "16", "--json", str(report)]
    out = run_command(command, case.duration + 60)
    if not report.exists():
        raise SystemExit(f"ours failed:\n{out[-2000:]}")
    total = json.loads(report.read_text())["total"]
    runs = []
    for clock in ("scheduled", "sent"):
        latency = total["latency_s"][clock]
        runs.append(
            Run(
                tool="ours" if clock == "scheduled" else "ours (sent clock)",
                version=__version__,
                model=f"open, {case.rate:g}/s",
                clock=clock,
                command=" ".join(["pyattacker", *command[3:-1], report.name]),
                reported=int(total["requests"]),
                server_count=None,
                figures={key: latency[key] for key, _ in QUANTILES},
                truth={},
            )
        )
    return runs


def run_wrk(case: Case, url: str, workdir: Path) -> list[Run]:
    n = closed_n(case)
    command = ["wrk", "-t1", f"-c{n}", f"-d{case.duration:g}s", "--latency", url + "/"]
    figures, count = wrk_figures(run_command(command, case.duration + 60))
    version = version_of(["wrk", "-v"], r"wrk (\S+)")
    model = f"closed, {n} connections (no open model)"
    # A closed loop has no schedule, so its clock starts at the send; yet wrk's printed
    # percentiles show a stall its requests mostly did not meet (the stall case): its
    # distribution is adjusted for what it did not send. Observed, not looked up.
    return [Run("wrk", version, model, WRK_CLOCK, " ".join(command), count, None, figures, {})]


def run_hey(case: Case, url: str, workdir: Path) -> list[Run]:
    n = closed_n(case)
    per_worker = case.rate / n
    command = ["hey", "-z", f"{case.duration:g}s", "-c", str(n), "-q", f"{per_worker:g}", url + "/"]
    figures, count = hey_figures(run_command(command, case.duration + 60))
    version = "unknown"
    if shutil.which("dpkg-query"):
        version = version_of(["dpkg-query", "-W", "-f", "${Version}\n", "hey"], r"(\S+)")
    model = f"closed, {n} workers at most {per_worker:g}/s each (no open model)"
    return [Run("hey", version, model, "sent", " ".join(command), count, None, figures, {})]


def make_locust(path: str) -> Callable[[Case, str, Path], list[Run]]:
    def run_locust(case: Case, url: str, workdir: Path) -> list[Run]:
        # Twice the closed loop's N: a paced user whose request runs long cannot catch up.
        users = 2 * closed_n(case)
        per_user = case.rate / users
        locustfile = workdir / "locustfile.py"
        locustfile.write_text(LOCUSTFILE.format(per_user=per_user), encoding="utf-8")
        command = [path, "-f", str(locustfile), "--headless", "-u", str(users), "-r"]
        command += [str(users), "-t", f"{case.duration:g}s", "--host", url, "--only-summary"]
        out = run_command(command, case.duration + 60, cwd=str(workdir))
        figures, count = locust_figures(out)
        version = version_of([path, "--version"], r"locust (\S+)")
        model = (
            f"closed, {users} FastHttpUsers, constant_throughput({per_user:g}) each (no open model)"
        )
        shown = " ".join(command).replace(str(workdir) + "/", "")
        return [Run("locust", version, model, "sent", shown, count, None, figures, {})]

    return run_locust


def peers_locust() -> Path:
    """Where ``peers.sh`` installs Locust: ``$PEERS_DIR/locust/bin/locust``."""
    return Path(os.environ.get("PEERS_DIR", "/tmp/pyattacker-peers")) / "locust/bin/locust"


def find_locust(given: str | None) -> str | None:
    """``given`` when it is executable (else None), or Locust on PATH, or the peers'."""
    if given:
        return given if os.access(given, os.X_OK) else None
    found = shutil.which("locust")
    if found:
        return found
    return str(peers_locust()) if os.access(peers_locust(), os.X_OK) else None


def runners(locust: str | None) -> dict[str, Callable[[Case, str, Path], list[Run]] | str]:
    """Tool -> its runner, or why it does not run."""
    found: dict[str, Callable[[Case, str, Path], list[Run]] | str] = {"ours": run_ours}
    found["wrk"] = run_wrk if shutil.which("wrk") else "not installed"
    found["hey"] = run_hey if shutil.which("hey") else "not installed"
    found["locust"] = (
        make_locust(locust)
        if locust
        else f"not installed (not on PATH, nor at {peers_locust()}: see PEERS_DIR)"
    )
    for tool in ("k6", "vegeta", "siege"):
        where = shutil.which(tool)
        found[tool] = (
            f"installed at {where}; no runner yet: not measured" if where else ("not installed")
        )
    return found


# ------------------------------------------------------------------------------ the cases


def run_case(case: Case, tools: list[str], locust: str | None) -> tuple[list[Run], list[str]]:
    table = runners(locust)
    runs: list[Run] = []
    absent = [f"{tool}: {table[tool]}" for tool in tools if isinstance(table[tool], str)]
    if len(absent) == len(tools):
        return runs, absent  # nothing to serve: no server started
    with EchoServerProcess(delay=case.delay) as server, tempfile.TemporaryDirectory() as tmp:
        for tool in tools:
            runner = table[tool]
            if isinstance(runner, str):
                continue
            server.reset()
            done = threading.Event()
            staller = threading.Thread(target=stall_halfway, args=(server, case, done))
            if case.stall:
                staller.start()
            try:
                found = runner(case, server.url, Path(tmp))
            finally:
                done.set()
                if case.stall:
                    staller.join()
            stats = server.stats()
            truth = stalled_truth(case) if case.stall else {k: stats[k] for k, _ in QUANTILES}
            for run in found:
                run.server_count = int(stats["count"])
                run.truth = truth
                if case.stall:
                    run.note = f"server p99 {stats['p99'] * 1e3:.1f} ms" if stats["count"] else ""
                print(render_run(run), flush=True)
            runs.extend(found)
    return runs, absent


def cell(ours: float | None, truth: float) -> str:
    if ours is None:
        return "n/a"
    error = ours - truth
    share = f"{error / truth * 100:+.1f} %" if truth else "-"
    return f"{ours * 1e3:.2f} ({error * 1e3:+.2f} ms, {share})"


def render_run(run: Run) -> str:
    counts = f"{run.reported if run.reported is not None else 'n/a'} / {run.server_count}"
    cells = " | ".join(cell(run.figures[key], run.truth[key]) for key, _ in QUANTILES)
    return f"| {run.tool} | {run.version} | {run.model} | {run.clock} | {counts} | {cells} |"


def header(case: Case, truth_words: str, load: float) -> str:
    stall = f", the server stalls {case.stall:g} s half way" if case.stall else ""
    return "\n".join(
        [
            f"case {case.name}: {case.delay}, {case.rate:g}/s for {case.duration:g} s{stall}; "
            f"load average {load:.1f}; truth: {truth_words}; cells: tool's ms (error ms, error %)",
            "",
            "| tool | version | model it ran | clock from | requests tool / server "
            "| p50 ms | p90 ms | p99 ms |",
            "|---|---|---|---|---|---|---|---|",
        ]
    )


def run_round(cases: list[Case], tools: list[str], locust: str | None) -> list[dict[str, Any]]:
    """Every case through every tool once, printing each case's table as it goes."""
    done = []
    for case in cases:
        words = (
            "the open model's (arrivals at the rate, held 10 ms or to the stall's end)"
            if case.stall
            else "the server's hold times of that tool's run"
        )
        print("\n" + header(case, words, os.getloadavg()[0]), flush=True)
        runs, absent = run_case(case, tools, locust)
        for line in clock_notes(runs) + absent:
            print(f"  {line}")
        if not runs:
            print("  no tool ran: none of --tools is installed here")
        elif case.stall:
            print("  server p99 per tool: " + ", ".join(f"{r.tool} {r.note}" for r in runs))
        done.append({"case": asdict(case), "runs": [asdict(run) for run in runs], "absent": absent})
    return done


def clock_notes(runs: list[Run]) -> list[str]:
    """A footnote for each clock label in ``runs`` that needs one, once each."""
    clocks = dict.fromkeys(run.clock for run in runs)
    return [f'clock "{clock}": {CLOCK_NOTES[clock]}' for clock in clocks if clock in CLOCK_NOTES]


def print_ranges(rounds: list[list[dict[str, Any]]]) -> None:
    """Per case and tool, the range of each percentile's error (ms) over the rounds."""
    errors: dict[tuple[str, str], dict[str, list[float]]] = {}
    for done in rounds:
        for case in done:
            for run in case["runs"]:
                row = errors.setdefault((case["case"]["name"], run["tool"]), {})
                for key, _ in QUANTILES:
                    ours = run["figures"][key]
                    if ours is not None:
                        row.setdefault(key, []).append((ours - run["truth"][key]) * 1e3)
    print(f"\nerror against the truth over {len(rounds)} rounds, ms (min .. max)\n")
    print("| case | tool | " + " | ".join(key for key, _ in QUANTILES) + " |")
    print("|---|---|" + "---|" * len(QUANTILES))
    for (name, tool), row in errors.items():
        cells = [
            f"{min(row[key]):+.2f} .. {max(row[key]):+.2f}" if row.get(key) else "n/a"
            for key, _ in QUANTILES
        ]
        print(f"| {name} | {tool} | " + " | ".join(cells) + " |")


@dataclass(frozen=True)
class Settings:
    """A run's settings, every one checked (``parse_args``)."""

    rate: float
    duration: float
    delay: str
    stall: float
    tools: list[str]
    rounds: int
    locust: str | None
    out: Path | None

    def cases(self) -> list[Case]:
        cases = [Case("steady", self.delay, self.rate, self.duration)]
        if self.stall:
            stall_delay = f"fixed:{STALL_DELAY_S * 1e3:g}ms"
            cases.append(Case("stall", stall_delay, self.rate, self.duration, self.stall))
        return cases


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--rate", type=float, default=200.0, help="requests/s, above 0 (default %(default)g)")
    add(
        "--duration",
        type=float,
        default=5.0,
        help="seconds per tool, above 0 (default %(default)g)",
    )
    add("--delay", default=DEFAULT_DELAY, help="steady case's server delay (default %(default)s)")
    add(
        "--stall",
        type=float,
        default=1.0,
        help="stall case: seconds; 0: no stall case (default %(default)g)",
    )
    add("--tools", default=",".join(TOOLS), help="which tools, in order (default %(default)s)")
    add(
        "--rounds",
        type=int,
        default=1,
        help="repeat everything, 1 or more; ranges if 2+ (default %(default)s)",
    )
    add(
        "--locust",
        help="the locust executable (default: locust on PATH, then "
        "$PEERS_DIR/locust/bin/locust; PEERS_DIR defaults to /tmp/pyattacker-peers)",
    )
    add("--out", help="write every run as JSON to this path (its folder must exist)")
    return parser


def parse_args(argv: list[str] | None = None) -> Settings:
    """The checked settings; any bad one exits 2 naming its flag, before anything runs."""
    parser = make_parser()
    args = parser.parse_args(argv)
    for flag, value in (("--rate", args.rate), ("--duration", args.duration)):
        if not (math.isfinite(value) and value > 0):
            parser.error(f"{flag} must be above 0, not {value:g}")
    if not (math.isfinite(args.stall) and args.stall >= 0):
        parser.error(f"--stall must be 0 (no stall case) or more seconds, not {args.stall:g}")
    if args.rounds < 1:
        parser.error(f"--rounds must be 1 or more, not {args.rounds}")
    try:
        Delay.parse(args.delay, field="--delay")
        if args.out is not None:
            check_output(Path(args.out), "--out", args.out)
    except ConfigError as exc:
        parser.error(str(exc))
    tools = [tool.strip() for tool in args.tools.split(",") if tool.strip()]
    unknown = sorted(set(tools) - set(TOOLS))
    if unknown or not tools:
        parser.error(f"--tools has {unknown or 'none'}: choose from {', '.join(TOOLS)}")
    locust = find_locust(args.locust)
    if args.locust and locust is None:
        parser.error(f"--locust {args.locust} is not an executable file")
    out = None if args.out is None else Path(args.out)
    return Settings(
        args.rate, args.duration, args.delay, args.stall, tools, args.rounds, locust, out
    )


def main(argv: list[str] | None = None) -> None:
    settings = parse_args(argv)
    print(f"cpus {os.cpu_count()}, Python {sys.version.split()[0]}, pyattacker {__version__}")
    print("load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    cases = settings.cases()
    rounds = [run_round(cases, settings.tools, settings.locust) for _ in range(settings.rounds)]
    ran = any(case["runs"] for case in rounds[0])
    if len(rounds) > 1 and ran:
        print_ranges(rounds)
    print("\ncommands:")
    for case in rounds[0]:
        for command in dict.fromkeys(run["command"] for run in case["runs"]):
            print(f"  {case['case']['name']}: {command}")
    if not ran:
        print("  none: no tool ran")
    if settings.out is not None:
        results = {"cpus": os.cpu_count(), "rounds": rounds}
        settings.out.write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
