"""Tokens per second the mock LLM server writes, and what each costs it in CPU.

Usage: ``.venv/bin/python benchmarks/llm_server_throughput.py [--streams 1000]
[--tokens 1000] [--no-pin]``

The server (``pyattacker llm-server``, 1 ms TTFT and 1 ms between tokens) runs as its own
process on CPU 0; this process, on CPU 1, opens ``--streams`` connections at once, each
asking for one streamed chat completion of ``--tokens`` tokens (``x-mock-tokens``), and
reads them with a bare asyncio protocol that only looks for ``[DONE]`` (so the client is
as cheap as a client can be, and the server is what is measured). It prints the tokens the
server reported writing, per wall second and per second of the server's CPU time
(``/proc``), and the server's own ITL and TTFT percentiles, and how long its first
``/stats`` took to come back (it sorts every gap it recorded, in slices between which the
loop runs). The server must never be the bottleneck of ``benchmarks/llm_accuracy.py``:
compare its tokens per CPU-second with the tokens/s that benchmark needs. A measurement,
not a test; say which machine it ran on (``nproc`` CPUs are printed) when you quote it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os

import uvloop
from echo_server import cpu_seconds_here

from pyattacker.clock import wall_time
from pyattacker.servers import LlmServerProcess

BODY = json.dumps(
    {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
).encode()


class _Reader(asyncio.Protocol):
    def __init__(self, done: asyncio.Future[int]) -> None:
        self.done, self.tail, self.size = done, b"", 0

    def data_received(self, data: bytes) -> None:
        self.size += len(data)
        if b"[DONE]" in self.tail + data and not self.done.done():
            self.done.set_result(self.size)
        self.tail = data[-8:]


async def _stream(host: str, port: int, tokens: int) -> int:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[int] = loop.create_future()
    transport, _ = await loop.create_connection(lambda: _Reader(done), host, port)
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        f"x-mock-tokens: {tokens}\r\nContent-Length: {len(BODY)}\r\n\r\n"
    ).encode()
    transport.write(head + BODY)
    try:
        return await done
    finally:
        transport.close()


async def _all(url: str, streams: int, tokens: int) -> tuple[float, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    started = wall_time()
    sizes = await asyncio.gather(*(_stream(host, int(port), tokens) for _ in range(streams)))
    return wall_time() - started, sum(sizes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--no-pin", action="store_true")
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    pin = not args.no_pin and len(cpus) >= 2
    prefix = ["taskset", "-c", str(cpus[0])] if pin else []
    server = LlmServerProcess(models="m", ttft="fixed:1ms", itl="fixed:1ms", command_prefix=prefix)
    url = server.start()
    try:
        if pin:
            os.sched_setaffinity(0, {cpus[1]})
        before = cpu_seconds_here(server.pid, "llm_server_throughput.py")
        wall, size = uvloop.run(_all(url, args.streams, args.tokens))
        used = cpu_seconds_here(server.pid, "llm_server_throughput.py") - before
        asked = wall_time()
        stats = server.stats()
        answered = wall_time() - asked
    finally:
        server.stop()
    tokens = stats["completion_tokens"]
    itl, ttft = stats["itl"], stats["ttft"]
    print(
        f"{args.streams} streams x {args.tokens} tokens: {tokens:,} tokens in {wall:.2f} s = "
        f"{tokens / wall:,.0f} tokens/s ({size / wall / 1e6:.1f} MB/s); server CPU {used:.2f} s"
        f" = {tokens / used if used else float('nan'):,.0f} tokens per CPU-second; "
        f"server ITL p50 {itl['p50'] * 1e3:.2f} ms p99 {itl['p99'] * 1e3:.2f} ms, "
        f"TTFT p99 {ttft['p99'] * 1e3:.1f} ms; first /stats in {answered:.2f} s; "
        f"{os.cpu_count()} CPUs, {'pinned' if pin else 'not pinned'}"
    )


if __name__ == "__main__":
    main()
