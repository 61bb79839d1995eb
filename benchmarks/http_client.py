"""Closed-loop throughput of pyattacker's HTTP client against aiohttp's, one core each.

    .venv/bin/python benchmarks/http_client.py --aiohttp-python /tmp/aiohttp-bench/bin/python

Starts a zero-delay HTTP server in its own process (``python -m pyattacker echo-server
--port 0 --delay fixed:0ms`` when that command exists, else the minimal keep-alive server
in this file: httptools + uvloop, a fixed 2-byte answer), then drives it closed-loop with
``--concurrency`` requests in flight for ``--duration`` seconds, first with our client and
then with aiohttp's, each in its own process pinned to one CPU and on uvloop. ``--repeat``
alternates the two. It prints requests per second for each, the ratio, and how busy the
server's CPU was (near 100 % means the server, not the client, was the limit).

The aiohttp side runs this same file with ``--aiohttp-python`` (a separate virtual
environment: aiohttp is never a dependency of pyattacker). Without it, only ours is shown.
A measurement, not a test: nothing here asserts a time. Compare figures within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

HERE = Path(__file__).resolve()
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"


# ------------------------------------------------------------------- the fallback server


def serve(cpu: int | None) -> None:
    """A minimal keep-alive HTTP/1.1 server on 127.0.0.1: prints its URL, answers ``ok``."""
    import httptools
    import uvloop

    _pin(cpu)

    class Answer(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport
            self.parser = httptools.HttpRequestParser(self)

        def data_received(self, data: bytes) -> None:
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserError:
                self.transport.close()

        def on_message_complete(self) -> None:
            self.transport.write(ANSWER)  # type: ignore[attr-defined]

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Answer, "127.0.0.1", 0, backlog=4096)
        port = server.sockets[0].getsockname()[1]
        print(f"http://127.0.0.1:{port}/", flush=True)
        await asyncio.Event().wait()

    uvloop.run(main())


# ------------------------------------------------------------------------------ workers


async def _drive(
    one_request: Callable[[], Awaitable[None]], concurrency: int, warmup: float, duration: float
) -> dict[str, float]:
    """Run ``concurrency`` loops of ``await one_request()``; count those done in the window."""
    done = errors = 0
    stop = False

    async def loop() -> None:
        nonlocal done, errors
        while not stop:
            try:
                await one_request()
                done += 1
            except Exception:
                errors += 1

    tasks = [asyncio.ensure_future(loop()) for _ in range(concurrency)]
    await asyncio.sleep(warmup)
    count0, err0, t0, cpu0 = done, errors, time.perf_counter(), time.process_time()
    await asyncio.sleep(duration)
    count1, err1, t1, cpu1 = done, errors, time.perf_counter(), time.process_time()
    stop = True
    await asyncio.gather(*tasks)
    return {
        "requests": count1 - count0,
        "errors": err1 - err0,
        "seconds": t1 - t0,
        "cpu_s": cpu1 - cpu0,
    }


async def run_ours(url: str, concurrency: int, warmup: float, duration: float) -> dict[str, float]:
    from pyattacker.http import URL, HttpClient

    target = URL.parse(url)
    async with HttpClient(max_connections=concurrency) as client:

        async def one() -> None:
            response = await client.request("GET", target)
            if response.status != 200:
                raise RuntimeError(response.status)

        return await _drive(one, concurrency, warmup, duration)


async def run_aiohttp(
    url: str, concurrency: int, warmup: float, duration: float
) -> dict[str, float]:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one() -> None:
            async with session.get(url) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(response.status)

        return await _drive(one, concurrency, warmup, duration)


def work(
    kind: str, url: str, concurrency: int, warmup: float, duration: float, cpu: int | None
) -> None:
    import uvloop

    _pin(cpu)
    runner = run_ours if kind == "ours" else run_aiohttp
    result = uvloop.run(runner(url, concurrency, warmup, duration))
    print(json.dumps(result), flush=True)


# --------------------------------------------------------------------------- the driver


def _pin(cpu: int | None) -> None:
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})


def _cpus() -> tuple[int | None, int | None]:
    """(client CPU, server CPU): different ones when there are two."""
    if not hasattr(os, "sched_getaffinity"):
        return None, None
    cpus = sorted(os.sched_getaffinity(0))
    return (cpus[0], cpus[1]) if len(cpus) >= 2 else (cpus[0], cpus[0])


def start_server(server_cpu: int | None, choice: str) -> tuple[subprocess.Popen[str], str, str]:
    """The echo server if it exists (and ``choice`` allows), else ours: (process, URL, which)."""
    pin = [] if server_cpu is None else ["taskset", "-c", str(server_cpu)]
    echo = [
        *pin,
        sys.executable,
        "-m",
        "pyattacker",
        "echo-server",
        "--port",
        "0",
        "--delay",
        "fixed:0ms",
    ]
    builtin = [sys.executable, str(HERE), "--serve", *_cpu_arg(server_cpu)]
    candidates = [
        (echo, "pyattacker echo-server"),
        (builtin, "minimal (httptools + uvloop, in this file)"),
    ]
    if choice != "auto":
        candidates = candidates[:1] if choice == "echo" else candidates[1:]
    for command, which in candidates:
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if line.startswith("http"):
            return proc, line.split()[0], which
        proc.kill()
        proc.wait()
    raise SystemExit("could not start a server")


def _cpu_arg(cpu: int | None) -> list[str]:
    return [] if cpu is None else ["--cpu", str(cpu)]


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (Linux ``/proc``; 0.0 elsewhere)."""
    # Here, not at the top: the aiohttp side runs this file where pyattacker is not there.
    from echo_server import cpu_seconds

    return cpu_seconds(pid) or 0.0


def measure(
    python: str, kind: str, args: argparse.Namespace, url: str, cpu: int | None, server: int
) -> dict[str, float]:
    command = [python, str(HERE), "--worker", kind, "--url", url, *_cpu_arg(cpu)]
    command += [
        "--concurrency",
        str(args.concurrency),
        "--duration",
        str(args.duration),
        "--warmup",
        str(args.warmup),
    ]
    before = _cpu_seconds(server)
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    result["server_cpu_s"] = _cpu_seconds(server) - before  # includes warm-up: an upper bound
    return result


def _show(name: str, result: dict[str, float], args: argparse.Namespace) -> float:
    rate = result["requests"] / result["seconds"]
    client_busy = result["cpu_s"] / result["seconds"]
    server_busy = result["server_cpu_s"] / (result["seconds"] + args.warmup)
    print(
        f"  {name:8} {rate:>10,.0f} req/s  ({result['requests']:,.0f} in "
        f"{result['seconds']:.2f} s, {result['errors']:.0f} errors, "
        f"client CPU {client_busy:.0%}, server CPU {server_busy:.0%})"
    )
    return rate


def _aiohttp_python(path: str | None) -> str | None:
    """``path`` if that Python can import aiohttp and uvloop, else ``None`` (and why)."""
    if path is None:
        print("no --aiohttp-python given: showing ours only")
        return None
    probe = subprocess.run([path, "-c", "import aiohttp, uvloop"], capture_output=True)
    if probe.returncode != 0:
        print(f"aiohttp (with uvloop) is not importable by {path}: showing ours only")
        return None
    return path


def drive(args: argparse.Namespace) -> None:
    client_cpu, server_cpu = _cpus()
    pythons = {"ours": sys.executable}
    aiohttp_python = _aiohttp_python(args.aiohttp_python)
    if aiohttp_python is not None:
        pythons["aiohttp"] = aiohttp_python
    proc, url, which = start_server(server_cpu, args.server)
    print(f"server: {which} at {url} (CPU {server_cpu}); clients on CPU {client_cpu}, uvloop")
    print(f"closed loop, concurrency {args.concurrency}, {args.duration:g} s per run", end="")
    print(f" after {args.warmup:g} s warm-up")
    rates: dict[str, list[float]] = {kind: [] for kind in pythons}
    try:
        for round_ in range(1, args.repeat + 1):
            print(f"round {round_}:")
            for kind, python in pythons.items():
                result = measure(python, kind, args, url, client_cpu, proc.pid)
                rates[kind].append(_show(kind, result, args))
    finally:
        proc.kill()
        proc.wait()
    for kind, values in rates.items():
        median, best = statistics.median(values), max(values)
        print(f"{kind + ':':8} median {median:,.0f} req/s, best {best:,.0f}")
    if "aiohttp" in rates:
        ratio = statistics.median(rates["ours"]) / statistics.median(rates["aiohttp"])
        print(f"ratio (median ours / median aiohttp): {ratio:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--concurrency", "-c", type=int, default=64)
    parser.add_argument("--duration", "-d", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--aiohttp-python", help="a Python that can import aiohttp and uvloop")
    parser.add_argument(
        "--server",
        choices=["auto", "echo", "minimal"],
        default="auto",
        help="auto: the echo server if available, else the minimal one in this file",
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", choices=["ours", "aiohttp"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--cpu", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.cpu)
    elif args.worker:
        work(args.worker, args.url, args.concurrency, args.warmup, args.duration, args.cpu)
    else:
        drive(args)


if __name__ == "__main__":
    main()
