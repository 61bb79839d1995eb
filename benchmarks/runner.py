"""Durable-run throughput: our Runner against pyattacker 0.3.3's, same workload, one run.

Usage: ``.venv/bin/python benchmarks/runner.py [--pipelines 5000] [--rounds 3] [--no-peer]
[--memory 1000000]``

The workload is the peer script ``anchor_runner.py``'s (kept outside this repository, in the
folder ``PEERS_BENCH`` names), written the same way for our API: N pipelines of three tasks
(async; async leasing from a pool of 4 resources and reporting usage; sync) on a SQLite store,
concurrency 64, signals off. The guarantees are the same as the peer's: every task's artifact,
task row and cursor are committed before the pipeline's next task starts (group commit across
pipelines; WAL, ``synchronous=NORMAL``: a committed checkpoint survives the process being
killed), and every attempt and its retry decision is recorded (written behind in batches, as
"Durability" in ``docs/architecture.md`` allows).

Rounds alternate peer and ours (the machine's speed drifts); the ratio is of the medians.
The budget is 10x.

``--memory N`` instead runs a one-task pipeline over an N-row generator on a SQLite store
and prints the peak RSS: run it for 100,000 and for 1,000,000 rows and compare, to see
that admission keeps a generator from materialising. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from pyattacker import Pool, Resource
from pyattacker.clock import wall_time
from pyattacker.run import Runner, pipeline, task

ROOT = Path(__file__).resolve().parent.parent
# The peers' scripts live beside the project's checkout; PEERS_BENCH names them from
# anywhere else (a git worktree, a copy).
SHARED = Path(os.environ.get("PEERS_BENCH", ROOT.parent / "shared" / "bench"))
PEERS = Path(os.environ.get("PEERS_DIR", "/tmp/pyattacker-peers"))


@task("a")
async def a(x: dict[str, int], ctx: Any) -> dict[str, int]:
    return {"v": x["v"] + 1}


@task("b", resource="apis")
async def b(x: dict[str, int], ctx: Any) -> dict[str, int]:
    async with ctx.acquire() as lease:
        lease.report(ok=True, usage={"tokens": 1})
        return {"v": x["v"] * 2}


@task("c")
def c(x: dict[str, int]) -> dict[str, int]:
    return {"v": x["v"] - 1}


def ours(n: int, store: str) -> float:
    pool = Pool("apis", [Resource.create("llm", id=f"api-{i}", capacity=64) for i in range(4)])
    template = pipeline("tp", a, b, c)
    start = wall_time()
    with Runner(store=store, pools=[pool], concurrency=64, handle_signals=False) as runner:
        report = runner.run(template.map({"v": i} for i in range(n)))
    elapsed = wall_time() - start
    assert report.stats["pipelines"]["by_state"] == {"succeeded": n}, report.stats
    return n / elapsed


def peer(n: int, store: str) -> float:
    python = PEERS / "anchor" / "bin" / "python"
    if not python.exists():
        subprocess.run(["bash", str(SHARED / "peers.sh")], check=True, capture_output=True)
    # Without PYTHONPATH: one that names our src would make the peer import our package.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [str(python), str(SHARED / "anchor_runner.py"), str(n), store],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    match = re.search(r"peer_pipelines_per_s (\d+)", out)
    assert match, out
    return float(match.group(1))


def ours_in_child(n: int, store: str) -> float:
    """Ours in a fresh process too, so both sides pay the same start-up and warm-up."""
    out = subprocess.run(
        [sys.executable, __file__, "--one", str(n), store],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(out.split()[-1])


def memory(n: int) -> None:
    """One-task pipelines over an ``n``-row generator on a SQLite store in a temporary
    folder; prints the peak RSS, which should not grow with ``n`` (admission pulls rows as
    room frees up, and the store keeps them on disk)."""
    rows = ({"v": i} for i in range(n))
    with tempfile.TemporaryDirectory() as tmp:
        start = wall_time()
        with Runner(store=f"{tmp}/memory.db", concurrency=64, handle_signals=False) as runner:
            report = runner.run(pipeline("m", c).map(rows))
        elapsed = wall_time() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{n} rows: {report.by_state} in {elapsed:.0f} s, peak RSS {peak_mb:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pipelines", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument("--memory", type=int, default=0)
    parser.add_argument("--one", nargs=2, metavar=("N", "STORE"))
    args = parser.parse_args()
    if args.one:
        print(f"ours_pipelines_per_s {ours(int(args.one[0]), args.one[1]):.0f}")
        return
    if args.memory:
        memory(args.memory)
        return
    mine: list[float] = []
    theirs: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            if not args.no_peer:
                theirs.append(peer(args.pipelines, f"{tmp}/peer-{r}.db"))
            mine.append(ours_in_child(args.pipelines, f"{tmp}/ours-{r}.db"))
            print(
                f"round {r + 1}: ours {mine[-1]:.0f}/s"
                + (f", peer {theirs[-1]:.0f}/s" if theirs else "")
            )
    ours_median = statistics.median(mine)
    print(f"ours  {ours_median:.0f} pipelines/s (median of {len(mine)})")
    if theirs:
        peer_median = statistics.median(theirs)
        print(f"peer  {peer_median:.0f} pipelines/s (pyattacker 0.3.3)")
        print(f"ratio {ours_median / peer_median:.1f}x (budget: 10x)")


if __name__ == "__main__":
    main()
