"""Every garbage collection of 0.5 ms or more in a command and every Python process it starts.

Usage: ``.venv/bin/python benchmarks/gc_pauses.py [--at-least-ms 0.5] -- COMMAND...``, e.g.
``.venv/bin/python benchmarks/gc_pauses.py -- .venv/bin/python benchmarks/scale.py
--levels 70000,75000 --tries 2 --no-peer``.

A collection stops its process's event loop: in the generator it is dispatch delay, in a
server it lands in every hold it measures and every answer it owes. This runs COMMAND
with a ``sitecustomize`` on ``PYTHONPATH`` that times each collection
(``gc.callbacks``) in every Python process started with that environment (the echo
server's too), then prints, per process, each collection at least ``--at-least-ms`` long:
when (seconds from the command's start), which generation, how long, how many objects
it freed. COMMAND's own output passes through. Not a figure of ours: a probe to find
which process pauses, and when.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROBE = """\
import gc, os, sys, time

_started = [0.0]
_path = os.path.join({out!r}, "pauses.%d" % os.getpid())
_name = " ".join(sys.argv)[:60]


def _timed(phase, info):
    if phase == "start":
        _started[0] = time.perf_counter()
        return
    took = time.perf_counter() - _started[0]
    if took >= {least!r}:
        with open(_path, "a") as out:
            out.write("%.3f\\t%d\\t%.2f\\t%d\\t%s\\n" % (
                time.time(), info["generation"], took * 1000, info["collected"], _name))


gc.callbacks.append(_timed)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--at-least-ms", type=float, default=0.5, help="shortest shown")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND...")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    with tempfile.TemporaryDirectory() as out:
        probe = PROBE.format(out=out, least=args.at_least_ms / 1000)
        Path(out, "sitecustomize.py").write_text(probe, encoding="utf-8")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [out, env.get("PYTHONPATH")]))
        began = time.time()
        status = subprocess.call(command, env=env)
        print(f"\ncollections of {args.at_least_ms:g} ms or more (s from start, generation, "
              "ms, objects freed):")  # fmt: skip
        for log in sorted(Path(out).glob("pauses.*")):
            rows = [line.split("\t") for line in log.read_text().splitlines()]
            print(f"pid {log.suffix[1:]}: {rows[0][4] if rows else ''}")
            for at, generation, ms, freed, _ in rows:
                print(f"  {float(at) - began:8.3f}  gen{generation}  {float(ms):7.2f} ms"
                      f"  freed {freed}")  # fmt: skip
    return status


if __name__ == "__main__":
    sys.exit(main())
