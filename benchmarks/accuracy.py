"""How close our percentiles are to the echo server's exact hold times.

Usage: ``.venv/bin/python benchmarks/accuracy.py [--quick] [--only NAME] [--rate 300]
[--duration 30] [--out results.json] [--no-pin] [--delay SPEC]
[--workers N] [--early-us N [--poll-share F]]``

For each case the calibrated echo server runs as its own process with one delay
distribution (``fixed``, ``uniform``, ``lognormal``, ``bimodal``); the attack engine drives
it from this process, on uvloop, at a constant arrival rate through the public API
(:func:`pyattacker.attack.run_attack`); then the server's exact p50/p95/p99 of the hold
times of that run (``/stats``, reset before the run) are compared with ours on both clocks:

- ``scheduled``: from when the load model meant the request to start (what a user sees);
- ``sent``: from when the request had left for the socket (service time).

A percentile passes the accuracy rule when ``|ours - truth| <= max(2 % of truth, 1 ms)``; our
goal (the budget in ``benchmarks/README.md``) is ``max(1 %, 0.5 ms)``. A case fails when any
percentile on either clock misses the accuracy rule, when anything was dropped, when a request
failed, or when our request count differs from the server's. The exit code is 1 when a case
fails, else 0.

The truth starts when the server has parsed the request and ends when the response left
its write buffer, so it leaves out both kernels' loopback work, the client's parse and the
event-loop wake-ups on both sides: all real latency a user sees, all counted against us
here (the comparison is conservative). To show where a difference comes from, each case
also prints the mean of each span: ``scheduled - truth`` splits into the dispatch delay
(``sent - scheduled``) and ``sent - truth`` (loopback plus both loops' overheads).

The ``flow`` case (issue 21) attacks with a scenario instead: each arrival runs a
three-step flow (``login``, ``browse``, ``checkout``), each step asking the server for a
delay drawn from a range of its own (``x-echo-delay``: 2-8 ms, 15-35 ms, 50-90 ms) and a
status of its own (``x-echo-status`` 201, 202, 203). The server's status counts are then
its count per step, and its hold times split by range into each step's truth, which
each step's percentiles on both clocks (the report's per-name figures) must meet, as a
plain case's do. ``--rate`` counts requests: flows arrive at a third of it.

Pinning: with two or more CPUs the server is pinned to CPU 0 and this process (the load
generator) to CPU 1 (``os.sched_setaffinity``; ``--no-pin`` leaves both to the scheduler).
``--workers N`` drives the attack from N worker processes (``run_workers``, as
``attack --workers N``); pinned, they share the generator's CPU, so give ``--no-pin`` to
let them spread. A measurement, not a test: run it on an otherwise idle machine.

The ``mix`` case sends a request mix (``--targets`` with ``--data``: three lines weighted
6, 3, 1, templated from 100 rows) against the lognormal server, each line asking the server
for its own status (200, 201, 202), so that the server's count per status is its count per
line: the case also fails when our count per name differs from it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from pyattacker.attack import (
    AttackPlan,
    AttackResult,
    FlowClient,
    OpenModel,
    Scenario,
    run_attack,
    run_workers,
)
from pyattacker.clock import wall_time
from pyattacker.measure import Histogram, Outcome, RequestStats, exact_percentile
from pyattacker.servers import EchoServerProcess

CASES: dict[str, str] = {
    "fixed": "fixed:20ms",
    "uniform": "uniform:min=10ms,max=30ms",
    "lognormal": "lognormal:median=20ms,sigma=0.5",
    # One request in ten takes the slow mode: p50 sits in the fast one, p95 and p99 in the
    # slow one, well away from the gap between them (where a rank is ill-conditioned).
    "bimodal": "bimodal:fast=5ms,slow=100ms,p_slow=0.1,sigma=0.1",
    "mix": "lognormal:median=20ms,sigma=0.5",  # a request mix: see the module doc
}
# The flow case's steps: (name, delay range in ms, status the server counts it under).
FLOW_STEPS: tuple[tuple[str, tuple[float, float], int], ...] = (
    ("login", (2.0, 8.0), 201),
    ("browse", (15.0, 35.0), 202),
    ("checkout", (50.0, 90.0), 203),
)
_DRAWS = random.Random(21)
# The mix case's lines, by name, and the status each asks the echo server for.
MIX_STATUSES = {"user": "200", "search": "201", "order": "202"}
QUANTILES: tuple[tuple[str, float], ...] = (("p50", 50.0), ("p95", 95.0), ("p99", 99.0))
CLOCKS = ("scheduled", "sent")


@dataclass(frozen=True)
class Rule:
    """``|ours - truth| <= max(relative * truth, floor)`` (seconds)."""

    name: str
    relative: float
    floor: float

    def tolerance(self, truth: float) -> float:
        return max(self.relative * truth, self.floor)

    def passes(self, ours: float, truth: float) -> bool:
        return abs(ours - truth) <= self.tolerance(truth)


ACCURACY_RULE = Rule("accuracy rule", 0.02, 0.001)
GOAL = Rule("goal", 0.01, 0.0005)


@dataclass
class CaseResult:
    """Everything one case measured, in seconds; ``failures()`` judges it."""

    name: str
    delay: str
    rate: float
    duration: float
    requests: int  # ours: requests the engine recorded (any outcome)
    server_count: int  # hold times the server recorded
    server_in_flight: int
    server_dropped: int
    dropped: int
    not_ok: int  # requests that did not end OK (failed, throttled, cancelled, dropped)
    achieved_rate: float
    truth: dict[str, float]
    ours: dict[str, dict[str, float]]  # clock -> percentile key -> seconds
    means: dict[str, float] = field(default_factory=dict)
    neighbours: float | None = None  # CPUs' worth of other processes' work meanwhile
    server_cpus: str = "any"  # where the server ran, read back after pinning
    names: dict[str, int] = field(default_factory=dict)  # the mix case: ours per name
    server_names: dict[str, int] = field(default_factory=dict)  # the server's, per name

    def failures(self, rule: Rule) -> list[str]:
        """Why this case fails ``rule`` (empty when it passes)."""
        problems = [
            f"{clock} {key}: |{ours[key] * 1e3:.3f} - {self.truth[key] * 1e3:.3f}| ms > "
            f"{rule.tolerance(self.truth[key]) * 1e3:.3f} ms"
            for clock, ours in self.ours.items()
            for key, _ in QUANTILES
            if not rule.passes(ours[key], self.truth[key])
        ]
        if self.dropped:
            problems.append(f"{self.dropped} arrivals dropped")
        if self.not_ok - self.dropped:
            problems.append(f"{self.not_ok - self.dropped} requests did not end OK")
        if self.requests != self.server_count:
            problems.append(f"we counted {self.requests}, the server {self.server_count}")
        if self.names != self.server_names:
            problems.append(f"per name we counted {self.names}, the server {self.server_names}")
        if self.server_in_flight or self.server_dropped:
            problems.append(
                f"server: {self.server_in_flight} still held, {self.server_dropped} dropped"
            )
        return problems


Cpus = tuple[int, int]  # (server CPU, generator CPU)


def cpu_pair() -> Cpus | None:
    """The first two CPUs this process may run on, or None when it has fewer.

    Read once, before anything is pinned: after :func:`pin_generator` this process sees
    only its own CPU.
    """
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    return (cpus[0], cpus[1]) if len(cpus) >= 2 else None


def pin_generator(cpus: Cpus) -> None:
    os.sched_setaffinity(0, {cpus[1]})


def pin_server(pid: int, cpus: Cpus) -> str:
    """Pin the server's threads to ``cpus[0]``; return where it runs, read back."""
    for thread in os.listdir(f"/proc/{pid}/task"):  # threads the child started already
        os.sched_setaffinity(int(thread), {cpus[0]})
    return ",".join(map(str, sorted(os.sched_getaffinity(pid))))


class Neighbours:
    """CPU time the rest of the machine used while a measurement ran (Linux ``/proc``).

    ``start()`` then ``stop()``; ``share`` is the others' CPU seconds per second of wall
    time (1.0 = one CPU busy all along), or None where ``/proc`` is missing. "Others" are
    user + system time of every process but this one and ``server_pid`` (and their
    children once reaped: ``--workers``' processes are ours), plus steal time
    (a hypervisor running someone else on our CPUs); interrupt time is left out, since
    loopback traffic is accounted there and it is ours.
    """

    def __init__(self, server_pid: int) -> None:
        self.pids = (os.getpid(), server_pid)
        self.share: float | None = None
        self._start: tuple[float, float] | None = None

    def _sample(self) -> tuple[float, float] | None:
        try:
            with open("/proc/stat") as stat:
                fields = [int(v) for v in stat.readline().split()[1:9]]
            user, nice, system, steal = fields[0], fields[1], fields[2], fields[7]
            ours = 0
            for pid in self.pids:
                with open(f"/proc/{pid}/stat") as stat:
                    process = stat.read().rsplit(")", 1)[1].split()
                # utime, stime, and the same of its children once reaped (the workers)
                ours += sum(int(v) for v in process[11:15])
        except OSError:
            return None
        ticks = os.sysconf("SC_CLK_TCK")
        return (user + nice + system + steal - ours) / ticks, wall_time()

    def start(self) -> None:
        self._start = self._sample()

    def stop(self) -> None:
        end = self._sample()
        if self._start is not None and end is not None and end[1] > self._start[1]:
            self.share = max(0.0, end[0] - self._start[0]) / (end[1] - self._start[1])


def percentiles(histogram: Histogram) -> dict[str, float]:
    return {key: histogram.percentile(q) for key, q in QUANTILES}


def mix_options(name: str) -> dict[str, Any]:
    """The plan's mix for the ``mix`` case (none for the others; imported here, so that
    the other cases run against versions without mixes)."""
    if name != "mix":
        return {}
    from pyattacker.attack import DataRows, Mix, MixLine

    status = {line: (("x-echo-status", code),) for line, code in MIX_STATUSES.items()}
    lines = [
        MixLine(url="/users/{id}", weight=6, name="user", headers=status["user"]),
        MixLine(url="/search?q={id}", weight=3, name="search", headers=status["search"]),
        MixLine(url="/orders", method="POST", body=b'{"user": {id}}', weight=1, name="order",
                headers=status["order"]),
    ]  # fmt: skip
    return {"mix": Mix(lines, data=DataRows([{"id": i} for i in range(100)]))}


def run_case(
    name: str,
    rate: float,
    duration: float,
    *,
    cpus: Cpus | None,
    delay: str | None = None,
    workers: int = 1,
) -> CaseResult:
    """Start a server with ``delay`` (default ``CASES[name]``), attack it from ``workers``
    processes, and compare (see the module doc)."""
    delay = CASES[name] if delay is None else delay
    with EchoServerProcess(delay=delay) as server:
        where = pin_server(server.pid, cpus) if cpus is not None else "any"
        server.reset()
        plan = AttackPlan.build(
            [server.url + "/"], OpenModel(rate=rate), duration=duration, **mix_options(name)
        )
        neighbours = Neighbours(server.pid)
        neighbours.start()
        result = (
            run_attack(plan, stop_on_signals=False) if workers == 1 else run_workers(plan, workers)
        )
        neighbours.stop()
        stats = server.stats()
    total = result.total
    return CaseResult(
        name=name,
        delay=delay,
        rate=rate,
        duration=duration,
        requests=total.requests,
        server_count=stats["count"],
        server_in_flight=stats["in_flight"],
        server_dropped=stats["dropped"],
        dropped=result.dropped,
        not_ok=total.requests - total.by_outcome[Outcome.OK.value],
        achieved_rate=result.achieved_rate,
        truth={key: float(stats[key]) for key, _ in QUANTILES} if stats["count"] else {},
        ours={"scheduled": percentiles(total.latency), "sent": percentiles(total.service_time)},
        means=means(result, stats),
        neighbours=neighbours.share,
        server_cpus=where,
        names={n: stats_.requests for n, stats_ in result.by_name.items()},
        server_names={
            n: stats["statuses"].get(code, 0) for n, code in MIX_STATUSES.items()
        } if name == "mix" else {},
    )  # fmt: skip


async def flow(client: FlowClient) -> None:
    """The flow case's flow (see the module docstring)."""
    for name, (low, high), status in FLOW_STEPS:
        headers = {"x-echo-delay": f"{_DRAWS.uniform(low, high):.3f}ms"}
        headers["x-echo-status"] = str(status)
        await client.get(f"/{name}", name=name, headers=headers)


def run_flow_case(rate: float, duration: float, *, cpus: Cpus | None) -> list[CaseResult]:
    """Attack with :func:`flow` at ``rate / 3`` flows a second; one result per step."""
    scenario = Scenario(flow, "accuracy.py:flow")
    with EchoServerProcess() as server:
        where = pin_server(server.pid, cpus) if cpus is not None else "any"
        server.reset()
        plan = AttackPlan.build(
            [server.url + "/"], OpenModel(rate=rate / 3), duration=duration, scenario=scenario
        )
        neighbours = Neighbours(server.pid)
        neighbours.start()
        result = run_attack(plan, stop_on_signals=False)
        neighbours.stop()
        stats = server.stats(samples=True)
    holds = sorted(stats["samples"])
    cases = []
    for i, (name, (low, high), status) in enumerate(FLOW_STEPS):
        # each step's holds: between the middles of the gaps around its range
        below = 0.0 if i == 0 else (FLOW_STEPS[i - 1][1][1] + low) / 2e3
        above = math.inf if i == len(FLOW_STEPS) - 1 else (high + FLOW_STEPS[i + 1][1][0]) / 2e3
        truth = [h for h in holds if below <= h < above]
        ours = result.by_name.get(name, RequestStats())
        cases.append(
            CaseResult(
                name=f"flow:{name}",
                delay=f"x-echo-delay uniform {low:g}-{high:g} ms",
                rate=rate / 3,
                duration=duration,
                requests=ours.requests,
                server_count=stats["statuses"].get(str(status), 0),
                server_in_flight=stats["in_flight"],
                server_dropped=stats["dropped"],
                dropped=result.dropped,
                not_ok=ours.requests - ours.by_outcome[Outcome.OK.value],
                achieved_rate=result.achieved_rate,
                truth={k: exact_percentile(truth, q) for k, q in QUANTILES} if truth else {},
                ours={
                    "scheduled": percentiles(ours.latency),
                    "sent": percentiles(ours.service_time),
                },
                means={
                    "truth": sum(truth) / len(truth) if truth else math.nan,
                    "scheduled": ours.latency.mean or math.nan,
                    "sent": ours.service_time.mean or math.nan,
                    "dispatch": ours.dispatch_delay.mean or math.nan,
                },
                neighbours=neighbours.share,
                server_cpus=where,
            )
        )
    flows = result.flows
    assert flows is not None
    took = flows.duration
    print(
        f"flows: scheduled {flows.scheduled}, completed {flows.completed}, failed "
        f"{sum(flows.failed.values())}, cancelled {flows.cancelled}; duration p50 "
        f"{took.percentile(50) * 1e3:.3f} ms, p99 {took.percentile(99) * 1e3:.3f} ms"
        if flows.completed
        else f"flows: none completed of {flows.scheduled}"
    )
    return cases


def means(result: AttackResult, stats: dict[str, Any]) -> dict[str, float]:
    """Mean spans, to locate a bias: scheduled = dispatch + sent; sent = truth + overhead."""
    total = result.total
    values = {
        "truth": stats["mean"],
        "scheduled": total.latency.mean,
        "sent": total.service_time.mean,
        "dispatch": total.dispatch_delay.mean,
    }
    return {key: math.nan if value is None else float(value) for key, value in values.items()}


def verdict(ours: float, truth: float) -> str:
    if GOAL.passes(ours, truth):
        return "goal"
    return "ok" if ACCURACY_RULE.passes(ours, truth) else "FAIL"


def render(case: CaseResult) -> str:
    """The case's table: truth, then ours on each clock with the error and a verdict."""
    head = (
        f"{case.name}: {case.delay}  ({case.rate:g}/s for {case.duration:g} s, "
        f"achieved {case.achieved_rate:.1f}/s; server on CPU {case.server_cpus})"
    )
    lines = [head, f"  {'clock from':<12}" + "".join(f"{k + ' ms':>24}" for k, _ in QUANTILES)]
    if not case.truth:
        return "\n".join([*lines, "  the server recorded no hold time"])
    lines.append(
        f"  {'truth':<12}" + "".join(f"{case.truth[k] * 1e3:>24.3f}" for k, _ in QUANTILES)
    )
    for clock in CLOCKS:
        cells = []
        for key, _ in QUANTILES:
            ours, truth = case.ours[clock][key], case.truth[key]
            error = (ours - truth) * 1e3
            cells.append(f"{ours * 1e3:9.3f} {error:+7.3f} {verdict(ours, truth):>5}")
        lines.append(f"  {clock:<12}" + "".join(f"{cell:>24}" for cell in cells))
    m = {key: value * 1e3 for key, value in case.means.items()}
    lines.append(
        f"  means ms: truth {m['truth']:.3f}, sent {m['sent']:.3f} "
        f"(sent - truth {m['sent'] - m['truth']:+.3f}), dispatch {m['dispatch']:.3f}, "
        f"scheduled {m['scheduled']:.3f} (scheduled - truth {m['scheduled'] - m['truth']:+.3f})"
    )
    lines.append(
        f"  requests: ours {case.requests}, server {case.server_count}; dropped {case.dropped}; "
        f"not ok {case.not_ok}; server still holding {case.server_in_flight}, "
        f"server dropped {case.server_dropped}"
    )
    if case.names:
        lines.append(f"  requests per name: ours {case.names}, server {case.server_names}")
    if case.neighbours is not None:
        lines.append(
            f"  others (processes, steal) used {case.neighbours * 100:.0f} % of a CPU meanwhile"
        )
    broken = case.failures(ACCURACY_RULE)
    goal = case.failures(GOAL)
    lines.append(
        "  PASS (the accuracy rule)"
        if not broken
        else "  FAIL (the accuracy rule): " + "; ".join(broken)
    )
    lines.append("  meets our goal" if not goal else "  misses our goal: " + "; ".join(goal))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5-second cases")
    parser.add_argument("--only", choices=[*sorted(CASES), "flow"], help="run one case")
    parser.add_argument("--rate", type=float, default=300.0, help="arrivals per second")
    parser.add_argument("--duration", type=float, help="seconds per case (default 30, quick 5)")
    parser.add_argument("--out", help="write the results as JSON to this path")
    parser.add_argument("--no-pin", action="store_true", help="do not pin server and generator")
    parser.add_argument("--delay", help="the server's delay for --only's case (e.g. fixed:10ms)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--early-us", type=float, help="wake (at most) N us early, poll the rest")
    parser.add_argument(
        "--poll-share", type=float, help="with --early-us: poll at most this share of a wait"
    )
    args = parser.parse_args()
    if args.early_us is not None:
        from _early_wake import wake_early  # only then: the script runs against older trees

        wake_early(args.early_us, args.poll_share)
    duration = args.duration if args.duration is not None else 5.0 if args.quick else 30.0
    cpus = None if args.no_pin else cpu_pair()
    if cpus is not None:
        pin_generator(cpus)
    layout = f"server CPU {cpus[0]}, generator CPU {cpus[1]}" if cpus else "none"
    print(f"cpus {os.cpu_count()}; pinning: {layout}; workers {args.workers}")
    print(
        "rules: accuracy |ours - truth| <= max(2 %, 1 ms); goal max(1 %, 0.5 ms); "
        "error = ours - truth (ms); verdict goal / ok (accuracy rule only) / FAIL\n"
    )
    results = []
    for name in [args.only] if args.only else [*CASES, "flow"]:
        if name == "flow":
            cases = run_flow_case(args.rate, duration, cpus=cpus)
        else:
            cases = [run_case(name, args.rate, duration, cpus=cpus, delay=args.delay,
                              workers=args.workers)]  # fmt: skip
        for case in cases:
            results.append(case)
            print(render(case) + "\n", flush=True)
    failed = [case.name for case in results if case.failures(ACCURACY_RULE)]
    missed = [case.name for case in results if case.failures(GOAL)]
    print(f"the accuracy rule: {'FAILED by ' + ', '.join(failed) if failed else 'all cases pass'}")
    print(f"our goal: {'missed by ' + ', '.join(missed) if missed else 'met by every case'}")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            json.dump([asdict(case) for case in results], out, indent=2)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
