"""The attack engine's Python cost per request, without sockets: a steadier gauge than scale.py.

Usage: ``.venv/bin/python benchmarks/request_cost.py [--requests 100000] [--runs 3]
[--rate R] [--gc]``

``scale.py`` is the budget's measure, but on this VM its levels move by 20-30 % from
minute to minute (the host lends our vCPUs more or less of a core), so it cannot show a
change of a few percent. This runs the engine's open model against *fake* keep-alive
connections: each write is answered on the next loop turn with a canned response, fed to
the real ``Connection`` (httptools parser, timing, pool), so everything of ours on the
request's path runs (scheduler, lease, ``HttpClient.start``, the waiter, the tally) and
nothing of the kernel's. The arrival rate is far above capacity, so the scheduler never
waits: the figure is CPU seconds per request, the best of ``--runs``. Compare two
versions in the same minute (``PYTHONPATH=other/src``), not with yesterday's numbers.

``--rate R`` plans R arrivals a second instead, so the scheduler keeps time (polls for
each arrival) as in a real attack; each run then prints its p99 dispatch delay and how
many requests were late (> 10 ms): whether our own work keeps that rate, kernel aside.
Runs are under ``quiet_gc``, as ``run_attack``'s are.

``--flow STEPS`` runs a scenario instead (issue 21): each arrival a flow of STEPS ``GET``
steps, so the figure is the flow path's cost per request (a task per flow, the flow
client, a lease and an ``HttpClient.request`` per step), to set beside the plain one.
``--closed`` runs ``--connections`` closed-model clients instead of the open model, so
that at most that many flows (or requests) run at once: the open model far above
capacity parks every flow's task in the pool, which costs more per request than the
flow path itself; the plain path there runs each request in a task (not the direct path).

``--mix lines`` sends a three-line request mix instead (``--targets``: weights 6, 3, 1,
paths only), ``--mix templated`` the same lines with ``{id}`` in the URL and a header,
filled from 1,000 data rows (``--data``): the cost a mix adds per request beside the plain
path's (``--mix none``, the default, which runs against any version of the package).

What it leaves out (the write and read syscalls, epoll, the waits between arrivals) is
about as much again on this VM.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from typing import Any

import uvloop

from pyattacker._gc import quiet_gc
from pyattacker.attack import (
    AttackPlan,
    ClosedModel,
    Engine,
    FlowClient,
    HttpSender,
    OpenModel,
    Scenario,
)
from pyattacker.http import HttpClient
from pyattacker.http._connection import Connection

RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n"
    b"Connection: keep-alive\r\n\r\nok"
)


class AnsweringTransport:
    """Just enough of an ``asyncio.Transport``: every write is answered next turn."""

    def __init__(self, conn: Connection, loop: asyncio.AbstractEventLoop) -> None:
        self.conn, self.loop = conn, loop

    def write(self, data: bytes) -> None:
        self.loop.call_soon(self.conn.data_received, RESPONSE)

    def writelines(self, parts: Any) -> None:
        self.write(b"".join(parts))

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass


def flow_of(steps: int) -> Scenario:
    """A scenario whose flows send ``steps`` GET steps, one after another."""

    async def flow(client: FlowClient) -> None:
        for _ in range(steps):
            await client.get("/", name="step")

    return Scenario(flow, f"request_cost.py:{steps} steps")


def mix_options(mix: str) -> dict[str, Any]:
    """The plan's ``mix`` for ``--mix`` (imported here: older versions have none)."""
    if mix == "none":
        return {}
    from pyattacker.attack import DataRows, Mix, MixLine

    templated = mix == "templated"
    path = "/users/{id}" if templated else "/users/1"
    header = (("x-user", "{id}" if templated else "1"),)
    lines = [
        MixLine(url=path, weight=6, headers=header, name="user"),
        MixLine(url="/search?q=shoes", weight=3, name="search"),
        MixLine(url="/orders", method="POST", body=b'{"item": 7}', weight=1, name="order"),
    ]
    rows = DataRows([{"id": i} for i in range(1000)]) if templated else None
    return {"mix": Mix(lines, data=rows)}


def sender_for(plan: AttackPlan, client: HttpClient) -> HttpSender:
    if getattr(plan, "mix", None) is None:
        return HttpSender(client)
    from pyattacker.attack import MixSender

    return MixSender(client, plan)


async def one_run(
    requests: int,
    connections: int,
    rate: float | None,
    steps: int | None = None,
    closed: bool = False,
    mix: str = "none",
) -> float:
    """CPU microseconds per request of one engine run over answering transports (with
    ``steps``: ``requests / steps`` flows of that many steps)."""
    loop = asyncio.get_running_loop()
    plan = AttackPlan.build(
        ["http://127.0.0.1:9/"],  # never dialled: every connection is made up front
        ClosedModel(clients=connections)
        if closed
        else OpenModel(rate=1e7, max_in_flight=1_000_000)
        if rate is None
        else OpenModel(rate=rate),
        requests=requests if steps is None else requests // steps,
        connections=connections,
        scenario=None if steps is None else flow_of(steps),
        **mix_options(mix),
    )
    requests = plan.requests * (steps or 1) if plan.requests is not None else requests
    client = HttpClient(timeouts=plan.timeouts, max_connections=plan.connections)
    target = plan.resolved_targets()[0]
    client._bind(loop)
    pool = client._pool_for(target.url)
    for _ in range(connections):
        assert pool.reserve()
        conn = Connection(pool, client._now, loop)
        conn.connection_made(AnsweringTransport(conn, loop))  # type: ignore[arg-type]
        pool.opened(conn)
        pool.checkin(conn)
    engine = Engine(plan, sender_for(plan, client))
    cpu = time.process_time()
    result = await engine.run()
    cpu = time.process_time() - cpu
    answered = result.total.by_outcome["ok"]
    if answered != requests:
        raise SystemExit(f"only {answered} of {requests} requests answered: not a valid run")
    if rate is not None:
        p99 = result.total.dispatch_delay.percentile(99) * 1e3
        print(f"  {rate:,.0f}/s: p99 dispatch delay {p99:.2f} ms, late {result.late:,}")
    return cpu / requests * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--rate", type=float, help="planned arrivals/s (default: far above)")
    parser.add_argument("--flow", type=int, metavar="STEPS", help="flows of STEPS steps each")
    parser.add_argument("--closed", action="store_true", help="--connections closed clients")
    parser.add_argument("--mix", choices=["none", "lines", "templated"], default="none")
    parser.add_argument(
        "--gc", action="store_true", help="also print the garbage collections and their time"
    )
    args = parser.parse_args()
    collections = watch_gc() if args.gc else None
    with quiet_gc():
        costs = [
            uvloop.run(
                one_run(
                    args.requests, args.connections, args.rate, args.flow, args.closed, args.mix
                )
            )
            for _ in range(args.runs)
        ]
    print(
        f"python cost per request: {min(costs):.2f} us (best of {args.runs}: "
        + ", ".join(f"{c:.2f}" for c in costs)
        + ")"
    )
    if collections is not None:
        count, seconds = collections
        print(f"garbage collections: {count[0]}, {seconds[0] * 1e3:.1f} ms in all, "
              f"{seconds[0] / (args.requests * args.runs) * 1e6:.3f} us a request")  # fmt: skip


def watch_gc() -> tuple[list[int], list[float]]:
    """Count the garbage collections from now on, and their time (lists updated in place)."""
    count, seconds, began = [0], [0.0], [0.0]

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            count[0] += 1
            seconds[0] += time.perf_counter() - began[0]

    gc.callbacks.append(callback)
    return count, seconds


if __name__ == "__main__":
    main()
