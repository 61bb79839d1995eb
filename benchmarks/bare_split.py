"""What splitting arrivals over processes costs a client that does nothing else.

Usage: ``.venv/bin/python benchmarks/bare_split.py [--rates 2000,4000] [--duration 3]
[--rounds 8] [--connections 64]``

``workers.py`` finds two of pyattacker's workers spending more CPU per request than one
process at low rates, and one process at a worker's rate spending as much as a worker.
This asks how much of that any open-model client pays for splitting its arrivals: a bare
client (uvloop, httptools, one kernel timer, no record, no histogram, some 50 lines),
arrivals at ``k / rate`` with arrival ``k`` on process ``k mod n``, run as one process and
as two, alternating, against the echo server (fixed 1 ms); and pyattacker
(``workers.py``'s ``one_run``) at the same rate in the same rounds. Per run: CPU per
request (every process's CPU from its start, connections included) and context switches
per request; at the end the medians and the ratios (2 processes / 1) of each client.
Not a peer and not a budget: a control for ``workers.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import resource
import statistics
import time
from multiprocessing.queues import Queue
from typing import Any

import uvloop
from bare_client import REQUEST, Conn
from workers import one_run

from pyattacker.attack import AttackPlan, OpenModel
from pyattacker.clock import PreciseTimer
from pyattacker.servers import EchoServerProcess


class Client:
    """Process ``index`` of ``n``: sends arrival ``index + j n`` at ``start + (index + j n)
    / rate`` on an idle connection (there are enough), until its share of ``total``."""

    def __init__(self, rate: float, total: int, index: int, n: int, start: float) -> None:
        self.rate, self.index, self.n, self.start = rate, index, n, start
        self.mine = len(range(index, total, n))
        self.idle: list[Conn] = []
        self.sent = self.done = 0

    def answered(self, conn: Conn) -> None:
        self.done += 1
        self.idle.append(conn)
        if self.done == self.mine:
            self.finished.set_result(None)

    def fire(self) -> None:
        transport = self.idle.pop().transport
        assert transport is not None
        transport.write(REQUEST)
        self.sent += 1
        if self.sent < self.mine:
            due = self.start + (self.index + self.sent * self.n) / self.rate
            self.timer.call_at(due, self.fire)

    async def run(self, port: int, connections: int) -> None:
        loop = asyncio.get_running_loop()
        for _ in range(connections):
            _, conn = await loop.create_connection(lambda: Conn(self), "127.0.0.1", port)
            self.idle.append(conn)
        self.finished: asyncio.Future[None] = loop.create_future()
        timer = PreciseTimer.open(loop)
        assert timer is not None, "a kernel timer (Linux timerfd) is needed"
        self.timer = timer
        timer.call_at(self.start + self.index / self.rate, self.fire)
        await self.finished


def process(client: Client, port: int, connections: int, out: Queue[Any]) -> None:
    cpu, before = time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
    uvloop.run(client.run(port, connections))
    after = resource.getrusage(resource.RUSAGE_SELF)
    switches = after.ru_nvcsw - before.ru_nvcsw + after.ru_nivcsw - before.ru_nivcsw
    out.put((time.process_time() - cpu, switches))


def bare(rate: float, total: int, n: int, port: int, connections: int) -> tuple[float, float]:
    """CPU µs and context switches per request of ``n`` bare processes at ``rate``."""
    context = multiprocessing.get_context("fork")
    out: Queue[Any] = context.Queue()
    start = time.monotonic() + 0.3  # every process connected by then
    clients = [Client(rate, total, i, n, start) for i in range(n)]
    processes = [
        context.Process(target=process, args=(client, port, connections, out)) for client in clients
    ]
    for p in processes:
        p.start()
    # a process that died (its error on stderr) would leave this waiting for ever
    got = [out.get(timeout=total / rate + 60) for _ in processes]
    for p in processes:
        p.join()
    return sum(c for c, _ in got) / total * 1e6, sum(s for _, s in got) / total


Runs = dict[tuple[str, int], list[tuple[float, float]]]


def rounds(server: EchoServerProcess, args: argparse.Namespace, rate: float) -> Runs:
    """Every round's four runs at ``rate`` (the order reversed every other round)."""
    port = int(server.url.rsplit(":", 1)[1])
    total = int(rate * args.duration)
    plan = AttackPlan.build(
        [server.url + "/"],
        OpenModel(rate=rate),
        duration=args.duration,
        connections=args.connections,
    )
    runs: Runs = {}
    order = [("pyattacker", 1), ("pyattacker", 2), ("bare", 1), ("bare", 2)]
    for round_ in range(args.rounds):
        for client, n in order if round_ % 2 == 0 else reversed(order):
            if client == "bare":
                got = bare(rate, total, n, port, args.connections)
            else:
                run = one_run(server, plan, n)
                got = (run["cpu_us_per_request"], run["switches_per_request"])
            runs.setdefault((client, n), []).append(got)
    return runs


def summary(rate: float, client: str, runs: Runs) -> str:
    one, two = runs[(client, 1)], runs[(client, 2)]
    ratios = [b[0] / a[0] for a, b in zip(one, two, strict=True)]

    def median(values: list[tuple[float, float]], i: int) -> float:
        return statistics.median(v[i] for v in values)

    return (
        f"{rate:g}/s {client:>10}: 1 process {median(one, 0):.1f} µs/request "
        f"({median(one, 1):.2f} switches), 2 processes {median(two, 0):.1f} "
        f"({median(two, 1):.2f}); ratio median {statistics.median(ratios):.3f} "
        f"(each: {', '.join(f'{r:.2f}' for r in ratios)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="2000,4000", help="arrivals/s, comma-separated")
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per run")
    parser.add_argument("--rounds", type=int, default=8, help="rounds (each: all four runs)")
    parser.add_argument("--connections", type=int, default=64, help="per process")
    args = parser.parse_args()
    with EchoServerProcess(delay="fixed:1ms") as server:
        for rate in (float(r) for r in args.rates.split(",")):
            runs = rounds(server, args, rate)
            for client in ("bare", "pyattacker"):
                print(summary(rate, client, runs), flush=True)


if __name__ == "__main__":
    main()
