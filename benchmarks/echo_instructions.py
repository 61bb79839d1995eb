"""Machine instructions per request of the echo server's protocol: a deterministic gauge.

Usage: ``.venv/bin/python benchmarks/echo_instructions.py [--against OTHER/src]``

``echo_server.py`` measures requests per second with wrk, but on a shared machine its
figure follows the neighbours' load, so a change of a few percent in the server's hot path
cannot be seen in it. This feeds requests straight into one ``EchoProtocol`` (a fake
transport that drops what is written; no socket, no loop turn) under valgrind's callgrind,
which counts instructions whatever the load: 20,000 and 60,000 requests, the difference
divided by 40,000, so start-up cancels out. Two kinds: a plain ``GET /`` (the fast path,
what wrk sends) and a ``POST /`` with a 100-byte body (the general path: the body is
echoed). ``--against PATH`` measures the code at PATH too (a ``src`` directory) and prints
the ratios. Needs ``valgrind``; about a minute per measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
SIZES = (20_000, 60_000)
REQUESTS = {
    "GET": b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n",
    "POST": b"POST / HTTP/1.1\r\nHost: bench\r\nContent-Length: 100\r\n\r\n" + b"b" * 100,
}


class _Transport:
    """Just enough of a transport for the protocol: writes are dropped."""

    def set_write_buffer_limits(self, high: int) -> None:
        pass

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        pass


async def _feed(kind: str, count: int) -> None:
    from pyattacker.servers import EchoServer

    server = EchoServer()
    server._bind(asyncio.get_running_loop())
    protocol = server._protocol()
    protocol.connection_made(_Transport())  # type: ignore[arg-type]
    data = REQUESTS[kind]
    for _ in range(count):
        protocol.data_received(data)
    assert len(server._core.samples) == count  # not stats(): its cost is not per request


def instructions(src: Path, kind: str, count: int) -> int:
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    command += [sys.executable, __file__, "--child", kind, str(count)]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    found = re.search(r"Collected : ([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"callgrind run failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def per_request(src: Path, kind: str) -> float:
    # Once outside valgrind first: bytecode caches written now are not counted in either run.
    env = {**os.environ, "PYTHONPATH": str(src)}
    subprocess.run([sys.executable, __file__, "--child", kind, "1"], env=env, check=True)
    low, high = (instructions(src, kind, n) for n in SIZES)
    return (high - low) / (SIZES[1] - SIZES[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, help="another src directory to compare")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(_feed(args.child[0], int(args.child[1])))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    for kind in REQUESTS:
        ours = per_request(SRC, kind)
        line = f"{kind}: {ours:,.0f} instructions per request ({SRC})"
        if args.against is not None:
            theirs = per_request(args.against.resolve(), kind)
            line += f"; {theirs:,.0f} at {args.against}: ratio {ours / theirs:.3f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
