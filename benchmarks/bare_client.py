"""A bare open-model HTTP client (uvloop + httptools, no measurement): one process's ceiling.

Usage: ``.venv/bin/python benchmarks/bare_client.py [--rates 20000,30000,40000,50000]
[--hold 5] [--connections 256]``

Not pyattacker: a throwaway of some 60 lines that does the least an open-model load
generator can do against the echo server (``--delay fixed:1ms``, its own process, pinned
as in ``scale.py``). It keeps no lease, no record and no histogram: it writes a canned
request on a free keep-alive connection when an arrival is due, queues arrivals when
every connection is busy, and keeps each request's dispatch delay and latency (write to
answer) in lists. Its scheduler is a callback that dispatches every arrival due, then asks
for another turn. Each rate's line ends with its latency's p50 and p99 against the
server's exact hold times (``/stats``, reset before each rate): what any client's
percentiles are checked against, and how far a client that does nothing lands from them.
What it reaches is roughly what one Python process can do here at all; ``scale.py``'s
levels are ours, to compare in the same minutes. Not a peer, and not a budget.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import deque
from typing import Any, Protocol

import uvloop
from accuracy import cpu_pair, pin_generator, pin_server
from httptools import HttpResponseParser

from pyattacker.measure import exact_percentile
from pyattacker.servers import EchoServerProcess

REQUEST = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


class Answered(Protocol):
    def answered(self, conn: Conn) -> None: ...


class Conn(asyncio.Protocol):
    """A keep-alive connection that tells ``driver`` of each complete answer (also
    ``bare_split.py``'s)."""

    def __init__(self, driver: Answered) -> None:
        self.driver, self.parser = driver, HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.sent_at = 0.0  # when ``send`` last wrote

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_message_complete(self) -> None:
        self.driver.answered(self)

    def send(self) -> None:
        assert self.transport is not None
        self.sent_at = time.monotonic()
        self.transport.write(REQUEST)


class Driver:
    def __init__(self, rate: float, total: int) -> None:
        self.rate, self.total = rate, total
        self.idle: list[Conn] = []
        self.queued: deque[float] = deque()
        self.lags: list[float] = []
        self.latencies: list[float] = []
        self.sent = self.done = 0
        self.finished: asyncio.Future[None] | None = None

    def dispatch(self, scheduled: float) -> None:
        if self.idle:
            self.lags.append(time.monotonic() - scheduled)
            self.idle.pop().send()
        else:
            self.queued.append(scheduled)

    def answered(self, conn: Conn) -> None:
        self.latencies.append(time.monotonic() - conn.sent_at)
        self.done += 1
        if self.queued:
            self.lags.append(time.monotonic() - self.queued.popleft())
            conn.send()
        else:
            self.idle.append(conn)
        if self.done == self.total and self.finished is not None:
            self.finished.set_result(None)

    def tick(self) -> None:
        now = time.monotonic()
        while self.sent < self.total and self.start + self.sent / self.rate <= now:
            self.dispatch(self.start + self.sent / self.rate)
            self.sent += 1
        if self.sent < self.total:
            asyncio.get_running_loop().call_soon(self.tick)

    async def run(self, port: int, connections: int) -> None:
        loop = asyncio.get_running_loop()
        for _ in range(connections):
            _, conn = await loop.create_connection(lambda: Conn(self), "127.0.0.1", port)
            self.idle.append(conn)
        self.finished = loop.create_future()
        self.start = time.monotonic() + 0.05
        loop.call_soon(self.tick)
        await self.finished


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="20000,30000,40000,50000")
    parser.add_argument("--hold", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=256)
    args = parser.parse_args()
    cpus = cpu_pair()
    if cpus is not None:
        pin_generator(cpus)
    with EchoServerProcess(delay="fixed:1ms") as server:
        if cpus is not None:
            pin_server(server.pid, cpus)
        port = int(server.url.rsplit(":", 1)[1])
        for rate in (float(text) for text in args.rates.split(",")):
            server.reset()
            driver = Driver(rate, int(rate * args.hold))
            cpu = time.process_time()
            uvloop.run(driver.run(port, args.connections))
            cpu = time.process_time() - cpu
            lags = sorted(driver.lags)
            p99 = lags[int(0.99 * (len(lags) - 1))] * 1e3
            late = sum(lag > 0.010 for lag in lags)
            print(
                f"{rate:>8,.0f}/s  p50 lag {lags[len(lags) // 2] * 1e3:.3f} ms  "
                f"p99 {p99:.3f} ms  late {late:,}  cpu {cpu / driver.total * 1e6:.1f} us/req  "
                f"{against_truth(driver.latencies, server.stats())}",
                flush=True,
            )


def against_truth(latencies: list[float], truth: dict[str, Any]) -> str:
    """The latency's p50 and p99 (exact, nearest rank) against the server's, in ms."""
    ordered = sorted(latencies)
    parts = []
    for key, q in (("p50", 50.0), ("p99", 99.0)):
        ours, exact = exact_percentile(ordered, q) * 1e3, float(truth[key]) * 1e3
        parts.append(f"{key} {ours:.3f}/{exact:.3f} ({ours - exact:+.3f})")
    return "latency/server hold ms: " + ", ".join(parts)


if __name__ == "__main__":
    main()
