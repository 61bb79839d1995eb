"""CPU per request with ``--workers N`` against one process, at the same rate.

Usage: ``.venv/bin/python benchmarks/workers.py [--rates 2000,8000,16000] [--duration 5]
[--rounds 3] [--workers 2] [--delay fixed:1ms] [--clients N] [--out results.json] [--probe-every S]
[--snapshot-every S] [--own-polling] [--poll-share F] [--no-control]``

Each round runs the same open-model plan against one echo server process (started once,
reset before each run) twice, in alternating order: from this process
(:func:`pyattacker.attack.run_attack`) and from ``--workers`` worker processes
(:func:`pyattacker.attack.run_workers`). For each run it prints:

- CPU per request, in µs: one process, its own CPU time (``time.process_time``) over the
  run; with workers, every worker's CPU time (from its start to its count's hand-over)
  plus the driver's (forking, reading snapshots, merging), over the requests sent;
- context switches per request (``getrusage``: this process, and the workers once
  joined): how often the kernel switched away from the generator, each a wake-up it paid
  for; at low rates two workers switch more per request than one process; in brackets the
  involuntary ones (another runnable process took the core);
- with ``--control`` (the default), a third run: one process at one worker's own rate
  (``rate / workers``, the same number of requests, polling as a worker polls): what a
  process costs at that rate with no workers' machinery (no fork, no snapshots, no
  pipe); a worker costing no more than it says the extra CPU of several workers is their
  sparser arrivals, not the sharing;
- the ratio of the two (the issue's budget: at most 1.10), and at the end its median over
  the rounds of each rate (one round's ratio moves by a tenth either way on this shared
  host): the ratio depends on the rate, since a process that sleeps between arrivals pays
  a wake-up for most of its requests, and each of two workers has half the arrivals to
  share its wake-ups with (``benchmarks/README.md``: where the budget holds and why);
- each worker's CPU seconds and loop lag p99 (a worker that fell behind shows here);
- the accuracy of the sent clock against the server's exact hold times: the largest
  ``|ours - truth|`` over p50, p95 and p99, against the rule ``max(1 %, 0.5 ms)``, and
  the hold times' p50 and p99 (how tight the truth is);
- whether the counts agree with the server's.

``--clients N`` runs a closed model instead (N clients, no think time, ``--rate`` x
``--duration`` requests in all): no schedule to keep, so no waiting for an arrival (the open
model sleeps on a kernel timer for each arrival that is not due yet, and a wake-up costs
more the emptier the loop: at the same total rate each of N workers has 1/N of the
arrivals and answers to share it with): what is left is the cost of the requests and the
workers' machinery.

The generator and the server share this machine's cores, unpinned: a measurement of the
cost per request, not of the highest rate. Run it beside another load, several rounds,
and read ranges.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import time
from typing import Any

from pyattacker.attack import (
    AttackPlan,
    AttackResult,
    ClosedModel,
    OpenModel,
    run_attack,
    run_workers,
)
from pyattacker.attack import _schedule as _schedule_defaults
from pyattacker.clock import wall_time
from pyattacker.servers import EchoServerProcess

DEFAULT_POLL_SHARE = _schedule_defaults.POLL_SHARE
QUANTILES = (("p50", 50.0), ("p95", 95.0), ("p99", 99.0))


def accuracy(result: AttackResult, truth: dict[str, Any]) -> tuple[float, bool]:
    """The largest sent-clock error (ms) over p50/p95/p99, and whether all meet the rule."""
    worst, ok = 0.0, True
    for key, q in QUANTILES:
        ours, exact = result.total.service_time.percentile(q), float(truth[key])
        error = abs(ours - exact)
        worst = max(worst, error)
        ok = ok and error <= max(0.01 * exact, 0.0005)
    return worst * 1000, ok


def switches() -> tuple[int, int]:
    """Context switches so far of this process and of its children reaped (the workers,
    once joined), voluntary (it waited: each a wake-up to pay) and involuntary (another
    runnable process took the core: on this machine the workers and the server contend
    for two cores, which a worker with a core of its own would not)."""
    own, reaped = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                       resource.RUSAGE_CHILDREN))  # fmt: skip
    return own.ru_nvcsw + reaped.ru_nvcsw, own.ru_nivcsw + reaped.ru_nivcsw


def one_run(server: EchoServerProcess, plan: AttackPlan, workers: int) -> dict[str, Any]:
    server.reset()
    switched0 = switches()
    cpu0, wall0 = time.process_time(), wall_time()
    if workers == 1:
        result: AttackResult = run_attack(plan, stop_on_signals=False)
        cpu = time.process_time() - cpu0
        each: list[dict[str, Any]] = []
    else:
        merged = run_workers(plan, workers, per_worker=True)
        driver = time.process_time() - cpu0
        each = [w.to_dict() for w in merged.workers]
        cpu = driver + sum(w["cpu_s"] for w in each)
        result = merged
    wall = wall_time() - wall0
    voluntary, involuntary = (b - a for a, b in zip(switched0, switches(), strict=True))
    truth = server.stats()
    worst, ok = accuracy(result, truth)
    return {
        "workers": workers,
        "sent": result.sent,
        "served": truth["count"],
        "cpu_s": cpu,
        "cpu_us_per_request": cpu / max(result.sent, 1) * 1e6,
        "switches_per_request": (voluntary + involuntary) / max(result.sent, 1),
        "involuntary_per_request": involuntary / max(result.sent, 1),
        "wall_s": wall,
        "loop_lag_p99_ms": [
            None if w["loop_lag_p99_s"] is None else w["loop_lag_p99_s"] * 1000 for w in each
        ]
        or [result.loop_lag.percentile(99) * 1000 if result.loop_lag else None],
        "worker_cpu_s": [w["cpu_s"] for w in each],
        "driver_cpu_s": cpu - sum(w["cpu_s"] for w in each) if each else None,
        "sent_clock_worst_error_ms": worst,
        "accuracy_rule_met": ok,
        "server_hold_ms": {key: float(truth[key]) * 1000 for key, _ in QUANTILES},
    }


def probe_every(seconds: float) -> None:
    """From now on, in this process and the workers it forks, every ``LagProbe`` fires
    every ``seconds`` (a measurement's knob, not the package's)."""
    from pyattacker.attack import _lag

    made = _lag.LagProbe.__init__

    def init(self: Any, call_at: Any, now: Any, every: float = seconds) -> None:
        made(self, call_at, now, every)

    _lag.LagProbe.__init__ = init  # type: ignore[method-assign]


def snapshot_every(seconds: float) -> None:
    """Workers forked from now on hand over their whole count every ``seconds`` (the
    package's ``SNAPSHOT_EVERY_S``; a large value: none before the final one)."""
    from pyattacker.attack import _workers

    for function in (_workers.work, _workers.run_worker):
        assert function.__kwdefaults__ is not None
        function.__kwdefaults__["snapshot_every"] = seconds


def polling_per_worker(workers: int, own: bool, share: float, *, share_of: int = 1) -> None:
    """Before a run of ``workers`` processes: with ``own``, each worker polls ``share``
    (the package's ``POLL_SHARE`` unless ``--poll-share``) of its own waits (the schedule
    before it divided the share among the workers), else ``share`` as the package divides
    it; ``share_of``: one process polling as one worker of that many does (the control)."""
    from pyattacker.attack import _schedule

    own_share = share * (workers if own else 1)
    _schedule.POLL_SHARE = own_share if own else own_share / share_of


def plans(args: argparse.Namespace, url: list[str], rate: float) -> dict[str, AttackPlan]:
    """The runs of a round: ``one`` process and the ``workers`` at ``rate``, and with
    ``--control`` (open model only) one process at one worker's rate, as many requests."""
    if args.clients is not None:
        requests = int(rate * args.duration)
        closed = AttackPlan.build(url, ClosedModel(args.clients), requests=requests)
        return {"one": closed, "workers": closed}
    plan = AttackPlan.build(url, OpenModel(rate=rate), duration=args.duration)
    runs = {"one": plan, "workers": plan}
    if args.control:
        runs["control"] = AttackPlan.build(url, OpenModel(rate=rate / args.workers),
                                           duration=args.duration * args.workers)  # fmt: skip
    return runs


def show(label: str, run: dict[str, Any]) -> None:
    holds = run["server_hold_ms"]
    print(
        f"{label}: sent {run['sent']} (server {run['served']}), CPU "
        f"{run['cpu_us_per_request']:.1f} us/request, {run['switches_per_request']:.2f} "
        f"context switches/request ({run['involuntary_per_request']:.2f} involuntary), "
        f"worker CPU {[round(c, 2) for c in run['worker_cpu_s']]} s, driver CPU "
        f"{run['driver_cpu_s'] and round(run['driver_cpu_s'], 3)} s, loop lag p99 "
        f"{[None if v is None else round(v, 2) for v in run['loop_lag_p99_ms']]} ms, "
        f"sent-clock worst error {run['sent_clock_worst_error_ms']:.3f} ms "
        f"({'meets' if run['accuracy_rule_met'] else 'misses'} the rule; the server held "
        f"p50 {holds['p50']:.3f}, p99 {holds['p99']:.3f} ms)",
        flush=True,
    )


def run_rate(
    server: EchoServerProcess, args: argparse.Namespace, rate: float
) -> tuple[list[dict[str, Any]], dict[str, list[float]]]:
    """Every round at ``rate``: its runs, and each round's ratios: ``budget``, workers /
    one process; ``control``, workers / one process at a worker's rate (with --control)."""
    kinds = plans(args, [server.url + "/"], rate)
    runs: list[dict[str, Any]] = []
    ratios: dict[str, list[float]] = {"budget": []}
    if "control" in kinds:
        ratios["control"] = []
    n = args.workers
    for round_ in range(args.rounds):
        order = list(kinds) if round_ % 2 == 0 else list(reversed(kinds))
        done = {}
        for kind in order:
            if kind == "control":
                polling_per_worker(1, args.own_polling, args.poll_share, share_of=n)
            else:
                polling_per_worker(n if kind == "workers" else 1, args.own_polling, args.poll_share)
            workers = n if kind == "workers" else 1
            done[kind] = {"rate": rate / n if kind == "control" else rate, "kind": kind,
                          **one_run(server, kinds[kind], workers)}  # fmt: skip
        runs.extend(done.values())
        many = done["workers"]["cpu_us_per_request"]
        ratios["budget"].append(many / done["one"]["cpu_us_per_request"])
        if "control" in done:
            ratios["control"].append(many / done["control"]["cpu_us_per_request"])
        for kind in kinds:
            label = {"one": "1 process", "workers": f"{n} workers",
                     "control": f"1 process at {rate / n:g}/s (a worker's rate)"}[kind]  # fmt: skip
            show(f"{rate:g}/s round {round_ + 1} {label}", done[kind])
        line = f"{rate:g}/s round {round_ + 1}: CPU per request, {n} workers / 1 process = "
        line += f"{ratios['budget'][-1]:.3f}"
        if "control" in done:
            line += f"; / 1 process at a worker's rate = {ratios['control'][-1]:.3f}"
        print(line, flush=True)
    return runs, ratios


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rates",
        "--rate",
        default="2000,8000,16000",
        help="arrivals per second, comma-separated: each rate its own rounds (default: "
        "2,000/s, where each of two workers has 1,000/s and wakes up for most of its "
        "requests, to 16,000/s, where a worker is busy enough to share wake-ups)",
    )
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (each: both ways)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--delay", default="fixed:1ms", help="the echo server's delay")
    parser.add_argument("--clients", type=int, help="a closed model of N clients instead")
    parser.add_argument("--out", help="write every run as JSON to this path")
    parser.add_argument(
        "--probe-every",
        type=float,
        help="the loop-lag probe's period in seconds (default: the engine's, 0.01), set in "
        "this process before the workers fork: what the probe adds to each process's CPU",
    )
    parser.add_argument(
        "--snapshot-every",
        type=float,
        help="how often each worker hands its whole count to the driver, in seconds "
        "(default: the package's, attack._workers.SNAPSHOT_EVERY_S; 1000: only at the end)",
    )
    parser.add_argument(
        "--own-polling",
        action="store_true",
        help="each worker polls POLL_SHARE of its own waits, not POLL_SHARE / workers "
        "(what the schedule did before; one process is unchanged)",
    )
    parser.add_argument(
        "--poll-share",
        type=float,
        default=DEFAULT_POLL_SHARE,
        help="the share of each wait for an arrival spent polling (attack._schedule."
        f"POLL_SHARE, default {DEFAULT_POLL_SHARE:g}; 0: sleep on the timer to the arrival): "
        "what the polling costs",
    )
    parser.add_argument(
        "--control",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run one process at one worker's rate (rate / workers, as many requests, "
        "polling as a worker polls) in each round of the open model: what the workers' "
        "machinery adds, apart from their sparser arrivals (default: on)",
    )
    args = parser.parse_args()
    try:
        args.rates = [float(r) for r in str(args.rates).split(",")]
    except ValueError:
        parser.error(f"--rates: {args.rates!r} is not rates separated by commas")
    if not all(r > 0 for r in args.rates):
        parser.error("--rates: every rate must be above 0")
    return args


def main() -> None:
    args = parse_args()
    if args.probe_every is not None:
        probe_every(args.probe_every)
    if args.snapshot_every is not None:
        snapshot_every(args.snapshot_every)
    rates = ", ".join(f"{r:g}/s" for r in args.rates)
    print(f"cores {len(os.sched_getaffinity(0))}; rates {rates} for {args.duration:g}s each; "
          f"server delay {args.delay}; rule max(1 %, 0.5 ms) on the sent clock")  # fmt: skip
    runs: list[dict[str, Any]] = []
    summary = []
    with EchoServerProcess(delay=args.delay) as server:
        for rate in args.rates:
            done, ratios = run_rate(server, args, rate)
            runs += done
            summary.append((rate, ratios))
    titles = {
        "budget": f"{args.workers} workers / 1 process at the same rate (budget 1.10)",
        "control": f"{args.workers} workers / 1 process at one worker's rate (the workers' "
        "machinery)",
    }
    for kind, title in titles.items():
        rows = [(rate, ratios[kind]) for rate, ratios in summary if kind in ratios]
        if rows:
            print(f"\nCPU per request, {title}:")
        for rate, each in rows:
            within = sum(r <= 1.10 for r in each)
            print(f"  {rate:>8g}/s  median of {len(each)} rounds {statistics.median(each):.3f} "
                  f"({within} of {len(each)} within 1.10; each: "
                  f"{', '.join(f'{r:.3f}' for r in each)})")  # fmt: skip
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            json.dump(runs, out, indent=2)


if __name__ == "__main__":
    main()
