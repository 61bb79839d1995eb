"""The highest open-model rate one generator process sustains cleanly, against Locust's.

Usage: ``.venv/bin/python benchmarks/scale.py [--levels 1000,2000,...] [--hold 5]
[--tries 3] [--out scale.json] [--no-pin] [--no-peer] [--peer-seconds 10] [--cold]
[--workers N] [--poll-below-us N] [--connections 256]``

One echo server process (``--delay fixed:1ms``) serves every level. Each level is a fresh
attack from this process (the public API, uvloop, constant arrivals, default plan: 256
connections, one attempt per request) at a rising rate for ``--hold`` seconds. Its 256
connections are opened before its first arrival (``preconnect``, as wrk opens its
connections first): the level measures the generator's steady state. Opened as requests
need them (``--cold``), the first 20-30 ms of a level go to connecting, and the backlog
they leave costs about 1,500 late requests at 33,000/s (measured), close to 1 % of a 5 s
level on its own.
A level is *clean* (``pyattacker.selftest.level_problems``, shared with ``pyattacker
selftest scale``) when:

- nothing was dropped;
- the achieved rate is within 2 % of plan: first attempts sent, divided by the time from
  the first arrival to the last send (plus one period), so falling behind shows;
- fewer than 0.1 % of the requests did not end OK;
- the p99 scheduling lag (dispatch delay: sent minus scheduled) is under 10 ms.

A level is tried up to ``--tries`` times (default 3) and counts as clean if one try is; every
try is printed, with how many it took. Why: this VM's host takes our vCPUs away now and then
(the speed probe below drifts by 1.5x within minutes; a stall of 30-100 ms was seen even with a
bare 20-line asyncio client, far below its capacity), and one such stall inside a 5 s level puts
more than 1 % of its requests past 10 ms on its own. The peer gets the same allowance: it runs
before and after, and the faster run counts. It stops at the first level that is not clean in
any try and prints the highest clean one with the CPU count. The peer, ``bash locust_closed.sh
URL SECONDS`` (a script kept outside this repository: Locust's FastHttpUser, closed loop, the
script's 32 users, for 10 s by default; a black box whose last line is ``peer_locust_rps N``),
runs against the same server before and after the levels, since
the machine's speed drifts; the ratio of our highest clean level to the faster of the two
peer runs is judged against the budget of 5x.

Pinning: with two or more CPUs the server runs on CPU 0, and both this process and the
peer on CPU 1 (``os.sched_setaffinity``, and ``taskset -c`` for the peer), so the generator
and the peer get the same one core. ``--no-pin`` leaves everything to the scheduler.

Each level also prints the generator's CPU time per request (``getrusage`` around
``run_attack``, and in brackets the report's own ``cpu.per_request_s``, the engine's run
alone; before issue 21 the scheduler polled for each arrival's instant, so at levels below
its capacity this was mostly polling),
the share of a CPU other processes (and hypervisor steal) used meanwhile, and a speed
probe (see :func:`speed_probe`). A measurement, not a test: run it on an idle machine.

``--poll-below-us N`` sets the open model's ``POLL_BELOW_S`` for this run (waits shorter
than N µs are polled by loop turns, longer ones sleep on the kernel timer; 0 puts every wait
on the timer): the two ways of waiting compared near capacity. Wrap the run in ``perf stat
-e syscalls:sys_enter_epoll_pwait`` to count the loop turns.

``--connections N`` opens N connections per level instead of the plan's default 256: to
see whether a level's lag comes from every connection being busy (a server that answers
late) or from the generator itself.

``--workers N`` runs each level on N worker processes (``run_workers``) instead, forked
from this process and so pinned to the same one CPU: beside a one-process run it shows
what splitting the schedule costs where it matters, at the core's capacity (N workers on
one core clean at about one process's highest level means their CPU per request is about
one process's, so N free cores give about N times the rate). The CPU per request then
counts every worker (this process's children, reaped at the end of each level).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from accuracy import Cpus, Neighbours, cpu_pair, pin_generator, pin_server

from pyattacker.attack import AttackPlan, OpenModel, run_attack, run_workers
from pyattacker.clock import wall_time
from pyattacker.measure import Outcome
from pyattacker.selftest import level_problems
from pyattacker.servers import EchoServerProcess

LEVELS = (
    1_000,
    2_000,
    5_000,
    10_000,
    12_500,
    15_000,
    17_500,
    20_000,
    25_000,
    30_000,
    40_000,
    60_000,
    80_000,
)
BUDGET = 5.0  # x the peer's closed-loop rate
CONNECTIONS = 256  # the plan's default
# PEERS_BENCH names the directory holding it (a worktree sits elsewhere than the checkout)
PEER_SCRIPT = (
    Path(os.environ.get("PEERS_BENCH") or Path(__file__).resolve().parents[2] / "shared" / "bench")
    / "locust_closed.sh"
)


@dataclass
class Level:
    """What one level measured (seconds, requests/s); ``problems()`` judges it."""

    rate: float
    schedule_s: float
    scheduled: int
    sent: int
    requests: int
    dropped: int
    not_ok: int
    late: int
    achieved_rate: float
    lag_p50: float
    lag_p99: float
    latency_p99: float
    service_p99: float
    server_count: int
    cpu_us_per_request: float
    neighbours: float | None  # CPUs' worth of other processes' work meanwhile
    # the report's own figure (cpu.per_request_s: the engine's run, not run_attack's set-up
    # and tear-down); None from a tree before it existed
    report_cpu_us_per_request: float | None = None

    def problems(self) -> list[str]:
        """Why the level is not clean (empty when it is): ``pyattacker.selftest``'s rule."""
        return level_problems(
            rate=self.rate,
            achieved_rate=self.achieved_rate,
            requests=self.requests,
            dropped=self.dropped,
            not_ok=self.not_ok,
            lag_p99=self.lag_p99,
        )


def cpu_seconds() -> float:
    """This process's CPU seconds and its reaped children's (``--workers``' processes,
    joined by the end of their level; the server is reaped only at the very end)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def run_level(
    server: EchoServerProcess,
    rate: float,
    hold: float,
    preconnect: int,
    workers: int = 1,
    connections: int = CONNECTIONS,
) -> Level:
    """One fresh attack at ``rate`` for ``hold`` seconds against ``server``.

    The achieved rate is ``AttackResult.achieved_rate``: sends over the planned span, or
    over the span until the last send when sending ran past it (a generator that fell
    behind). No ``on_record`` callback: it would cost the generator a record per request.
    """
    server.reset()
    plan = AttackPlan.build(
        [server.url + "/"], OpenModel(rate=rate), duration=hold, preconnect=preconnect,
        connections=connections,
    )  # fmt: skip
    neighbours = Neighbours(server.pid)
    neighbours.start()
    cpu = cpu_seconds()
    if workers == 1:
        result = run_attack(plan, stop_on_signals=False)
    else:  # forked: the workers keep this process's CPU (the generator's core)
        result = run_workers(plan, workers)
    cpu = cpu_seconds() - cpu
    neighbours.stop()
    total = result.total
    return Level(
        rate=rate,
        schedule_s=result.schedule_s,
        scheduled=result.scheduled,
        sent=result.sent,
        requests=total.requests,
        dropped=result.dropped,
        not_ok=total.requests - total.by_outcome[Outcome.OK.value],
        late=result.late,
        achieved_rate=result.achieved_rate,
        lag_p50=total.dispatch_delay.percentile(50),
        lag_p99=total.dispatch_delay.percentile(99),
        latency_p99=total.latency.percentile(99),
        service_p99=total.service_time.percentile(99),
        server_count=server.stats()["count"],
        cpu_us_per_request=cpu / max(total.requests, 1) * 1e6,
        neighbours=neighbours.share,
        report_cpu_us_per_request=report_cpu(result),
    )


def report_cpu(result: object) -> float | None:
    """The result's ``cpu.per_request_s`` in microseconds, None where it has none."""
    cpu_dict = getattr(result, "cpu_dict", None)
    per = None if cpu_dict is None else cpu_dict()["per_request_s"]
    return None if per is None else per * 1e6


def render(level: Level) -> str:
    problems = level.problems()
    return (
        f"{level.rate:>8,.0f}/s  achieved {level.achieved_rate:>9,.1f}/s  "
        f"sent {level.sent:>7,}  dropped {level.dropped}  not ok {level.not_ok - level.dropped}  "
        f"late {level.late:>6,}  lag p50 {level.lag_p50 * 1e3:6.3f} ms  "
        f"p99 {level.lag_p99 * 1e3:7.3f} ms  latency p99 sched {level.latency_p99 * 1e3:7.3f} "
        f"sent {level.service_p99 * 1e3:6.3f} ms  server {level.server_count:,}  "
        f"cpu {level.cpu_us_per_request:5.1f} us/req  "
        + (
            ""
            if level.report_cpu_us_per_request is None
            else f"(report {level.report_cpu_us_per_request:5.1f})  "
        )
        + ("" if level.neighbours is None else f"others {level.neighbours * 100:3.0f} %  ")
        + ("clean" if not problems else "NOT clean: " + "; ".join(problems))
    )


def run_peer(url: str, seconds: int, prefix: list[str]) -> float | None:
    """Locust's closed-loop rate against ``url`` (the script's last line), or None."""
    if not PEER_SCRIPT.exists():
        print(f"peer: {PEER_SCRIPT} is missing; not run")
        return None
    command = [*prefix, "bash", str(PEER_SCRIPT), url, str(seconds)]
    print(f"peer: {' '.join(command)}", flush=True)
    done = subprocess.run(command, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    for line in lines[-5:]:
        print(f"  | {line}")
    found = re.fullmatch(r"peer_locust_rps\s+([0-9.]+)", lines[-1].strip()) if lines else None
    if done.returncode != 0 or found is None:
        print(f"peer failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
        return None
    rate = float(found.group(1))
    if rate <= 0:
        print("peer measured 0 req/s: not a valid run")
        return None
    return rate


def speed_probe() -> float:
    """Milliseconds this CPU takes for a fixed pure-Python loop (1M additions, best of 3).

    Printed beside each level: the hypervisor here lends our vCPUs more or less of a host
    CPU from minute to minute (the same loop took 42-70 ms within one minute), which no
    per-process counter shows.
    """
    best = math.inf
    for _ in range(3):
        start, total = wall_time(), 0
        for i in range(1_000_000):
            total += i
        best = min(best, wall_time() - start)
    return best * 1e3


def peer_prefix(cpus: Cpus | None) -> list[str]:
    """``taskset -c CPU`` for the peer: the generator's CPU, when pinning and available."""
    taskset = shutil.which("taskset")
    if cpus is None or taskset is None:
        return []
    return [taskset, "-c", str(cpus[1])]


def climb(
    server: EchoServerProcess,
    levels: list[float],
    hold: float,
    tries: int,
    preconnect: int,
    workers: int = 1,
    connections: int = CONNECTIONS,
) -> list[Level]:
    """Run the levels in order up to and including the first one that is not clean in
    any of ``tries`` tries; every try is in the result."""
    results: list[Level] = []
    for rate in levels:
        for attempt in range(1, tries + 1):
            probe = speed_probe()
            level = run_level(server, rate, hold, preconnect, workers, connections)
            results.append(level)
            print(f"{render(level)}  (try {attempt}, probe {probe:.0f} ms)", flush=True)
            if not level.problems():
                break
        else:
            break
    return results


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default=",".join(map(str, LEVELS)), help="rates, req/s")
    parser.add_argument("--hold", type=float, default=5.0, help="seconds per level")
    parser.add_argument(
        "--tries", type=int, default=3, help="tries per level (one clean is enough)"
    )
    parser.add_argument("--out", help="write the results as JSON to this path")
    parser.add_argument("--no-pin", action="store_true", help="do not pin to CPUs")
    parser.add_argument(
        "--cold",
        action="store_true",
        help="open connections as requests need them, not before each level (preconnect 0)",
    )
    parser.add_argument("--no-peer", action="store_true", help="skip the Locust runs")
    parser.add_argument(
        "--connections",
        type=int,
        default=CONNECTIONS,
        help="connections per level (the plan's default: 256), all opened first unless --cold",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="run each level on N worker processes (run_workers), all on the generator's CPU",
    )
    parser.add_argument(
        "--poll-below-us",
        type=float,
        help="set the schedule's POLL_BELOW_S (waits shorter than this are polled, longer "
        "ones sleep on the timer; 0: the timer for every wait), to compare the two",
    )
    parser.add_argument(
        "--peer-seconds",
        type=int,
        default=10,
        help="how long each Locust run lasts (the script's second argument; it runs 32 users)",
    )
    return parser.parse_args()


def print_verdict(best: float, peers: list[float | None]) -> None:
    """The highest clean level against the faster of the two peer runs (the conservative
    ratio: the machine's speed drifts between them)."""
    measured = [rate for rate in peers if rate]
    if not measured:
        return
    peer = max(measured)
    ratio = best / peer
    verdict = "meets" if ratio >= BUDGET else "falls SHORT of"
    runs = ", ".join(f"{rate:,.1f}" if rate else "failed" for rate in peers)
    print(
        f"peer_locust_rps before/after: {runs}; ratio {best:,.0f} / {peer:,.1f} = "
        f"{ratio:.2f}x: {verdict} the budget of {BUDGET:g}x"
    )


def main() -> None:
    args = parse_args()
    if args.poll_below_us is not None:
        from pyattacker.attack import _schedule

        _schedule.POLL_BELOW_S = args.poll_below_us / 1e6
    preconnect = 0 if args.cold else args.connections
    levels = [float(text) for text in args.levels.split(",") if text.strip()]
    cpus = None if args.no_pin else cpu_pair()
    if cpus is not None:
        pin_generator(cpus)
    layout = f"server CPU {cpus[0]}, generator and peer CPU {cpus[1]}" if cpus else "none"
    print(f"cpus {os.cpu_count()}; pinning: {layout}")
    peers: list[float | None] = []
    with EchoServerProcess(delay="fixed:1ms") as server:
        where = pin_server(server.pid, cpus) if cpus is not None else "any CPU"
        print(f"echo server {server.url} (fixed:1ms) on CPU {where}, {args.hold:g} s per level")
        opened = "as requests need them" if args.cold else "before each level's first arrival"
        print(f"{args.connections} connections, opened {opened}")
        # The peer runs before and after our levels: the machine's speed drifts.
        # The script wants the bare origin: with a trailing slash it measured 0 req/s here.
        if not args.no_peer:
            server.reset()
            peers.append(run_peer(server.url, args.peer_seconds, peer_prefix(cpus)))
        results = climb(server, levels, args.hold, max(1, args.tries), preconnect, args.workers,
                        args.connections)  # fmt: skip
        if not args.no_peer:
            server.reset()
            peers.append(run_peer(server.url, args.peer_seconds, peer_prefix(cpus)))
    clean = [level.rate for level in results if not level.problems()]
    best = max(clean) if clean else 0.0
    print(f"highest clean level: {best:,.0f} req/s on {os.cpu_count()} CPUs")
    print_verdict(best, peers)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            data = {"cpus": os.cpu_count(), "levels": [asdict(level) for level in results]}
            data.update({"highest_clean": best, "peer_locust_rps": peers})
            json.dump(data, out, indent=2)


if __name__ == "__main__":
    main()
