"""Thousands of concurrent LLM streams: attack workers against a mock server of several
processes, TTFT against the server's truth at each level (issue 22).

Usage: ``.venv/bin/python benchmarks/llm_streams.py [--workers 2] [--processes 2]
[--streams 200,400,800,1600] [--hold 15]``

For each level N a fresh ``pyattacker llm-server --processes P`` (lognormal TTFT, median
150 ms, 20 ms between tokens, 100-token answers: about 2.15 s a stream) is attacked by
``run_workers`` with W workers (``run_attack`` when W is 1) in an open model at
``N / 2.15`` requests/s, so that about N streams are open at once (Little's law; the
figure printed is the measured one: the server's mean e2e x requests / hold). An open
model, not N clients: no burst of N first requests queueing in the accept queue, which
would be the server's latency, not ours. Connections are preconnected (N of them, divided
between workers).

It prints, per level: TTFT p50/p95/p99 ours (sent clock, merged histograms) against the
server's exact merged ``/stats``, the worst absolute error, whether it is within 0.5 ms
(and the goal max(1 %, 0.5 ms)), counts (ours = the server's), events (tokens) read per
second in total and per worker, and the CPU seconds the generator (this process and its
workers) and the server (all its processes) spent: events per CPU-second is what one free
core carries, whatever the neighbours take of the machine. No pinning: workers and server
processes share the cores. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import resource
from typing import Any

from accuracy import GOAL, QUANTILES

from pyattacker.attack import AttackPlan, LlmSpec, OpenModel, run_attack, run_workers
from pyattacker.clock import wall_time
from pyattacker.llm import SyntheticPrompts
from pyattacker.measure import Outcome
from pyattacker.servers import LlmServerProcess

TTFT = "lognormal:median=150ms,sigma=0.5"
STREAM_S = 2.15  # mean TTFT (~0.17 s) + 99 gaps of 20 ms
STRICT_S = 0.0005


def level(streams: int, workers: int, processes: int, hold: float) -> dict[str, Any]:
    server = LlmServerProcess(
        models="bench", ttft=TTFT, itl="fixed:20ms", output_tokens="fixed:100",
        processes=processes,
    )  # fmt: skip
    url = server.start()
    before = _cpu()
    try:
        plan = AttackPlan.build(
            [url + "/v1"],
            OpenModel(rate=streams / STREAM_S, max_in_flight=2 * streams),
            duration=hold,
            llm=LlmSpec("bench", SyntheticPrompts(200, 100)),
            connections=streams + streams // 2 + 16,
            preconnect=streams,
            window=10.0,
        )
        started = wall_time()
        if workers == 1:
            result = run_attack(plan, stop_on_signals=False)
        else:
            result = run_workers(plan, workers)
        elapsed = wall_time() - started
        generator_cpu = _cpu() - before  # this process and its workers, joined by now
        stats = server.stats()
    finally:
        server.stop()
    server_cpu = _cpu() - before - generator_cpu  # the server and its members, stopped
    total = result.total
    ours = {key: total.ttft.percentile(q) for key, q in QUANTILES}
    truth = {key: float(stats["ttft"][key]) for key, _ in QUANTILES}
    errors = {key: abs(ours[key] - truth[key]) for key, _ in QUANTILES}
    return {
        "streams": streams,
        "workers": workers,
        "processes": processes,
        "open_streams": stats["e2e"]["mean"] * stats["requests"] / hold,
        "requests": total.requests,
        "server_requests": stats["requests"],
        "not_ok": total.requests - total.by_outcome[Outcome.OK.value],
        "ours_ms": {k: v * 1e3 for k, v in ours.items()},
        "truth_ms": {k: v * 1e3 for k, v in truth.items()},
        "worst_ms": max(errors.values()) * 1e3,
        "strict": all(e <= STRICT_S for e in errors.values()),
        "goal": all(GOAL.passes(ours[k], truth[k]) for k, _ in QUANTILES),
        "events_per_s": total.completion_tokens / elapsed,
        "events_per_s_per_worker": total.completion_tokens / elapsed / workers,
        "generator_cpu_s": generator_cpu,
        "server_cpu_s": server_cpu,
        "events_per_generator_cpu_s": total.completion_tokens / generator_cpu,
        "events_per_server_cpu_s": total.completion_tokens / server_cpu,
        "by_process": stats.get("received_by_process", [stats["received"]]),
    }


def _cpu() -> float:
    """CPU seconds of this process and of every child it has waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def render(row: dict[str, Any]) -> str:
    cells = "  ".join(f"{k} {row['ours_ms'][k]:.2f}/{row['truth_ms'][k]:.2f}" for k, _ in QUANTILES)
    verdict = "within 0.5 ms" if row["strict"] else ("goal" if row["goal"] else "MISSES")
    return (
        f"N={row['streams']:<5} open {row['open_streams']:7.0f}  W={row['workers']} "
        f"P={row['processes']}  ttft ms ours/truth {cells}  worst {row['worst_ms']:.3f} ms "
        f"{verdict}; requests {row['requests']}/{row['server_requests']} "
        f"(not ok {row['not_ok']}), {row['events_per_s']:,.0f} events/s "
        f"({row['events_per_s_per_worker']:,.0f} per worker), by process {row['by_process']}; "
        f"CPU s generator {row['generator_cpu_s']:.1f} server {row['server_cpu_s']:.1f}: "
        f"events per CPU-second {row['events_per_generator_cpu_s']:,.0f} generator, "
        f"{row['events_per_server_cpu_s']:,.0f} server"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--streams", default="200,400,800,1600")
    parser.add_argument("--hold", type=float, default=15.0, help="seconds per level")
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args()
    rows = []
    for streams in (int(s) for s in args.streams.split(",")):
        row = level(streams, args.workers, args.processes, args.hold)
        rows.append(row)
        print(render(row), flush=True)
    if args.out:
        with open(args.out, "w") as out:
            json.dump(rows, out, indent=2)


if __name__ == "__main__":
    main()
