"""Soak: does a long attack's memory stay flat? RSS of ``pyattacker attack``, sampled.

Usage: ``.venv/bin/python benchmarks/soak.py [--minutes 30] [--rate 1000] [--every 10]``

Starts ``pyattacker echo-server --delay 0`` and ``pyattacker attack URL --rate RATE/s
--duration MINUTESm -q`` (the CLI, as a user runs it: default plan, 1 s windows), both
from this Python, and reads the attack process's resident set size (``VmRSS`` in
``/proc/PID/status``, Linux) every ``--every`` seconds. Prints each sample, then the
least-squares slope of RSS over time after the first minute (the warm-up: imports,
connections, the first windows) in MB per minute and in bytes per request, and the
attack's own summary line. Flat memory is a slope near 0 MB/min; what remains is what
grows with the number of windows (one a second), not with the number of requests. A
measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def rss_mb(pid: int) -> float | None:
    """Resident set size of ``pid`` in MB, or None once it has exited."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of ``(x, y)`` points (0 for fewer than two)."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=1000.0, help="requests/s")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    args = parser.parse_args()
    cli = [sys.executable, "-m", "pyattacker"]
    server = subprocess.Popen(
        [*cli, "echo-server", "--delay", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as tmp:
            report = Path(tmp) / "soak.json"
            attack = subprocess.Popen(
                [*cli, "attack", url, "--rate", f"{args.rate:g}/s",
                 "--duration", f"{args.minutes * 60:g}s", "-q", "--json", str(report)],
                stdout=subprocess.DEVNULL,
            )  # fmt: skip
            samples = sample(attack, args.every)
            code = attack.wait()
            summary = json.loads(report.read_text())["summary"] if report.exists() else {}
    finally:
        server.terminate()
        server.wait()
    print_result(samples, args, code, summary)


def sample(attack: subprocess.Popen[bytes], every: float) -> list[tuple[float, float]]:
    """``(seconds since start, RSS MB)`` every ``every`` seconds until ``attack`` exits."""
    start = time.monotonic()
    samples: list[tuple[float, float]] = []
    while attack.poll() is None:
        mb = rss_mb(attack.pid)
        if mb is not None:
            elapsed = time.monotonic() - start
            samples.append((elapsed, mb))
            print(f"{elapsed:7.0f} s  {mb:7.1f} MB", flush=True)
        time.sleep(every)
    return samples


def print_result(
    samples: list[tuple[float, float]], args: argparse.Namespace, code: int, summary: dict
) -> None:
    steady = [(t, mb) for t, mb in samples if t >= 60.0]
    per_second = slope(steady)  # MB/s
    print(f"attack exit {code}; summary: {json.dumps(summary)[:300]}")
    if samples:
        first, last = samples[0][1], samples[-1][1]
        print(f"RSS first {first:.1f} MB, last {last:.1f} MB, max {max(m for _, m in samples):.1f}")
    if steady:
        print(
            f"slope after 60 s: {per_second * 60:+.3f} MB/min "
            f"= {per_second * 1e6 / args.rate:+.2f} bytes/request at {args.rate:g}/s "
            f"({len(steady)} samples from {steady[0][0]:.0f} s to {steady[-1][0]:.0f} s: "
            f"{steady[0][1]:.1f} -> {steady[-1][1]:.1f} MB)"
        )


if __name__ == "__main__":
    main()
