"""The default algorithm sweep, ours against pyattacker 0.3.3's, in one run.

Usage: ``.venv/bin/python benchmarks/bench_speed.py [--rounds 3] [--no-peer]``

Both sides run their command-line tool as a user would, in a fresh process, timing the whole
command (interpreter start and imports included): the peer through the peer script
``anchor_bench.sh`` (kept outside this repository; ``pyattacker bench --quiet``: 5 algorithms x
3 seeds of its ``bursty_provider``), ours as ``pyattacker bench --quiet --algorithms
immediate,wait,backoff,sticky,quota_aware`` — the same five algorithms (our default also runs
``adaptive``) — once with the default ``--jobs-parallel`` (every core) and once with
``--jobs-parallel 1``. Rounds interleave peer and ours (the machine's speed drifts); the ratios
are of the medians. The budget is 4x.

Our ``bursty_provider`` states the reference world's assumptions (capacities, latencies, failure and
storm rates, quotas, tightening factors, the retry policy, 3000 jobs of 3 x 2 calls on 12
workers for 600 s); the bucket sizes, which the reference does not give, were set so that the
request volume is of the reference's order (about 8,000-9,000 requests per run for ``wait``
against the reference's 12,246): the worlds are alike but not identical, so the script also
prints both sides' simulated requests per run and the cost per simulated request (each
run's own ``wall_s`` over its requests), the ratio that does not depend on how much
traffic each world generates.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from pyattacker.clock import wall_time

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "bench"
ALGORITHMS = "immediate,wait,backoff,sticky,quota_aware"


def _per_request(report: dict[str, object]) -> tuple[float, float]:
    """Mean simulated requests per run, and the runs' own seconds per request (the sum of
    every run's ``wall_s`` over the sum of its requests: cost per unit of simulated work,
    without interpreter start-up or process scheduling)."""
    runs = report["runs"]
    assert isinstance(runs, list)
    requests = sum(run["metrics"]["requests"] for run in runs)
    seconds = sum(run["metrics"]["wall_s"] for run in runs)
    return requests / len(runs), seconds / requests


def peer_seconds() -> tuple[float, float, float]:
    """Wall seconds of the peer's command, its mean requests per run, seconds per request."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "peer.json"
        done = subprocess.run(
            ["bash", str(SHARED / "anchor_bench.sh"), "--json", str(out)],
            capture_output=True,
            text=True,
            check=True,
        )
        volume, cost = _per_request(json.loads(out.read_text()))
    line = [x for x in done.stdout.splitlines() if x.startswith("peer_bench_wall_s")][-1]
    return float(line.split()[1]), volume, cost


def our_seconds(parallel: int | None) -> tuple[float, float, float]:
    """Wall seconds of our command, its mean requests per run, seconds per request."""
    exe = Path(sys.executable).parent / "pyattacker"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        command = [str(exe), "bench", "--quiet", "--algorithms", ALGORITHMS, "--json", str(out)]
        if parallel is not None:
            command += ["--jobs-parallel", str(parallel)]
        start = wall_time()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        seconds = wall_time() - start
        volume, cost = _per_request(json.loads(out.read_text()))
    return seconds, volume, cost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-peer", action="store_true")
    args = parser.parse_args()
    peer: list[tuple[float, float, float]] = []
    ours: list[tuple[float, float, float]] = []
    serial: list[tuple[float, float, float]] = []
    for round_ in range(args.rounds):
        if not args.no_peer:
            peer.append(peer_seconds())
        ours.append(our_seconds(None))
        serial.append(our_seconds(1))
        print(
            f"round {round_ + 1}: peer {peer[-1][0] if peer else float('nan'):.2f}s  "
            f"ours {ours[-1][0]:.2f}s (every core)  ours {serial[-1][0]:.2f}s (one process)",
            flush=True,
        )

    def median(rows: list[tuple[float, float, float]], i: int) -> float:
        return statistics.median(row[i] for row in rows)

    print(f"cores: {os.cpu_count()}")
    print(
        f"ours: median {median(ours, 0):.2f}s (every core), {median(serial, 0):.2f}s (one "
        f"process); {median(serial, 1):,.0f} requests per run, "
        f"{median(serial, 2) * 1e6:.1f} us per simulated request"
    )
    if peer:
        print(
            f"peer: median {median(peer, 0):.2f}s; {median(peer, 1):,.0f} requests per run, "
            f"{median(peer, 2) * 1e6:.1f} us per simulated request"
        )
        print(
            f"ratio (peer / ours, every core): {median(peer, 0) / median(ours, 0):.2f}x  "
            "(budget: 4x)"
        )
        print(f"ratio (peer / ours, one process): {median(peer, 0) / median(serial, 0):.2f}x")
        print(
            f"ratio per simulated request (one process): {median(peer, 2) / median(serial, 2):.2f}x"
        )


if __name__ == "__main__":
    main()
