"""The default algorithm sweep, ours against pyattacker 0.3.3's, in one run.

Usage: ``.venv/bin/python benchmarks/bench_speed.py [--rounds 3] [--no-peer]``

Both sides run their command-line tool as a user would, in a fresh process, timing the
whole command (interpreter start and imports included): the peer through
``../shared/bench/anchor_bench.sh`` (``pyattacker bench --quiet``: 5 algorithms x 3 seeds of
its ``bursty_provider``), ours as ``pyattacker bench --quiet --algorithms
immediate,wait,backoff,sticky,quota_aware`` — the same five algorithms (our default also
runs ``adaptive``) — once with the default ``--jobs-parallel`` (every core) and once with
``--jobs-parallel 1``. Rounds interleave peer and ours (the machine's speed drifts); the
ratios are of the medians. The budget (DESIGN.md §9) is 4x.

Our ``bursty_provider`` states the seed's assumptions (capacities, latencies, failure and
storm rates, quotas, tightening factors, the retry policy, 3000 jobs of 3 x 2 calls on 12
workers for 600 s); the bucket sizes, which the seed does not give, were set so that the
request volume is of the seed's order (about 8,000-9,000 requests per run for ``wait``
against the seed's 12,246), so the comparison is not won by simulating less traffic. The
script prints both sides' request counts when the peer's JSON reports them.
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


def peer_seconds() -> float:
    done = subprocess.run(
        ["bash", str(SHARED / "anchor_bench.sh")], capture_output=True, text=True, check=True
    )
    line = [x for x in done.stdout.splitlines() if x.startswith("peer_bench_wall_s")][-1]
    return float(line.split()[1])


def our_seconds(parallel: int | None) -> tuple[float, float]:
    """Wall seconds of the command, and the mean requests per run it reported."""
    exe = Path(sys.executable).parent / "pyattacker"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        command = [str(exe), "bench", "--quiet", "--algorithms", ALGORITHMS, "--json", str(out)]
        if parallel is not None:
            command += ["--jobs-parallel", str(parallel)]
        start = wall_time()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        seconds = wall_time() - start
        report = json.loads(out.read_text())
    requests = [run["metrics"]["requests"] for run in report["runs"]]
    return seconds, statistics.fmean(requests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-peer", action="store_true")
    args = parser.parse_args()
    peer: list[float] = []
    ours: list[float] = []
    serial: list[float] = []
    volume = 0.0
    for round_ in range(args.rounds):
        if not args.no_peer:
            peer.append(peer_seconds())
        seconds, volume = our_seconds(None)
        ours.append(seconds)
        serial.append(our_seconds(1)[0])
        print(
            f"round {round_ + 1}: peer {peer[-1] if peer else float('nan'):.2f}s  "
            f"ours {ours[-1]:.2f}s (every core)  ours {serial[-1]:.2f}s (one process)",
            flush=True,
        )
    print(f"cores: {os.cpu_count()}  our mean requests per run: {volume:,.0f}")
    ours_m, serial_m = statistics.median(ours), statistics.median(serial)
    print(f"ours median {ours_m:.2f}s (every core), {serial_m:.2f}s (one process)")
    if peer:
        peer_m = statistics.median(peer)
        print(f"peer median {peer_m:.2f}s")
        print(f"ratio (peer / ours, every core): {peer_m / ours_m:.2f}x  (budget: 4x)")
        print(f"ratio (peer / ours, one process): {peer_m / serial_m:.2f}x")


if __name__ == "__main__":
    main()
