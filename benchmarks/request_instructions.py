"""Machine instructions per request of the attack engine's direct path: a deterministic gauge.

Usage: ``.venv/bin/python benchmarks/request_instructions.py [--against OTHER/src]
[--against-pure] [--mix lines|templated [--same-mix]] [--closed]``

``request_cost.py`` times the engine against fake connections, but on this VM its figure
moves by 30 % or more from one minute to the next, so a change worth a few percent cannot
be seen in it. This runs the same script under valgrind's callgrind, which counts the
instructions the process executes: the count does not depend on the machine's load. It
runs ``request_cost.py`` with 10,000 and with 30,000 requests and divides the difference
by 20,000, so start-up (imports, the loop, the fake connections) cancels out and what
remains is the cost of one request: scheduler, lease, ``HttpClient.start``, the
connection's parse, the waiter and the tally. Fewer instructions is faster on any machine,
although not in exact proportion (the cache and the branch predictor are not counted).
``--against PATH`` also measures the code at PATH (a ``src`` directory, e.g. of a
``git worktree``) and prints the ratio; ``--against-pure`` measures it (or this tree) with
the compiled load path's modules run from their sources (``PYATTACKER_PURE=1``, see "The
compiled load path" in ``docs/architecture.md``). ``--mix lines|templated`` measures ours on the
request-mix path instead (``request_cost.py --mix``; the code at ``--against`` still runs
the plain path, so the ratio is the mix's cost over the plain request's; with
``--same-mix`` it runs the same mix, so the ratio compares two versions of the mix path).
``--closed`` measures both on the closed model's path instead (``request_cost.py --closed
--connections 64``: each request in a task, not the direct path). Needs
``valgrind`` (Debian's package); each measurement takes about a minute and a half.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
SIZES = (10_000, 30_000)


def instructions(src: Path, requests: int, extra: list[str], pure: bool = False) -> int:
    """Instructions callgrind counted for one ``request_cost.py`` run of ``requests``
    (``pure``: the compiled load path's modules run from their sources)."""
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
    env["PYATTACKER_PURE"] = "1" if pure else ""
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        str(HERE / "request_cost.py"),
        "--runs",
        "1",
        "--requests",
        str(requests),
        *extra,
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    found = re.search(r"Collected : ([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"callgrind run failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def per_request(src: Path, extra: list[str], pure: bool = False) -> float:
    low, high = (instructions(src, n, extra, pure) for n in SIZES)
    return (high - low) / (SIZES[1] - SIZES[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, help="another src directory to compare")
    parser.add_argument("--mix", choices=["none", "lines", "templated"], default="none")
    parser.add_argument(
        "--same-mix", action="store_true", help="run the --against tree on the same mix too"
    )
    parser.add_argument("--closed", action="store_true", help="both on the closed model")
    parser.add_argument(
        "--against-pure",
        action="store_true",
        help="compare with this tree's pure-Python load path (PYATTACKER_PURE=1)",
    )
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    mix = ["--mix", args.mix] if args.mix != "none" else []
    closed = ["--closed", "--connections", "64"] if args.closed else []
    ours = per_request(SRC, mix + closed)
    path = f"mix {args.mix}" + (", closed" if closed else "")
    print(f"{SRC} ({path}): {ours:,.0f} instructions per request")
    if args.against is not None or args.against_pure:
        other = args.against.resolve() if args.against is not None else SRC
        extra = (mix if args.same_mix else []) + closed
        theirs = per_request(other, extra, pure=args.against_pure)
        label = f"{other}{' (pure)' if args.against_pure else ''}"
        print(f"{label}: {theirs:,.0f} instructions per request")
        print(f"ratio: {ours / theirs:.3f} (ours / theirs)")


if __name__ == "__main__":
    main()
