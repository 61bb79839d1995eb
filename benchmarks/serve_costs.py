"""What one `/report.json` and one `/metrics` of `pyattacker serve STORE` cost on a big store.

docs/run.md ("Watching a run") quotes these figures. A store of N three-task pipelines is
written with `benchmarks/runner.py`'s workload (`--one N STORE`, in a child process), then
each body is built the way the server builds it (the store opened read-only, read, closed)
and timed on this machine (wall time, median of `--repeat` builds). The server reuses a
body while it is younger than twice its cost, so these are also how stale the figures of
a page polling that store can be.

    python benchmarks/serve_costs.py [--pipelines 50000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pyattacker.report import prometheus_text
from pyattacker.report._serve_store import run_payload
from pyattacker.store import RowKind, open_store


def timed(build: Any, store_path: str, repeat: int) -> tuple[float, int]:
    """Median seconds of ``repeat`` builds (each opening the store read-only), and the size
    of what one built."""
    seconds, size = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        store = open_store(store_path, read_only=True)
        try:
            size = len(build(store))
        finally:
            store.close()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipelines", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "run.db")
        runner = Path(__file__).with_name("runner.py")
        subprocess.run([sys.executable, runner, "--one", str(args.pipelines), path], check=True)
        store = open_store(path, read_only=True)
        attempts = sum(1 for _ in store.rows(RowKind.ATTEMPTS))
        store.close()
        print(f"store: {args.pipelines} pipelines, {attempts} attempts")
        bodies = {
            "/report.json": lambda s: json.dumps(run_payload(s), separators=(",", ":")),
            "/metrics": prometheus_text,
        }
        for name, build in bodies.items():
            seconds, size = timed(build, path, args.repeat)
            print(f"{name:13} {seconds:7.2f} s  {size / 1000:8.1f} kB")


if __name__ == "__main__":
    main()
