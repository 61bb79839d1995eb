"""An attack plan run against a fresh echo server, on the engine's direct path or forced onto
its task path, for the direct path's tests (imported as ``direct_helpers``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pyattacker.attack import AttackPlan, AttackResult, Engine, HttpSender, OpenModel
from pyattacker.http import HttpClient
from pyattacker.measure import RequestRecord
from pyattacker.servers import EchoServer

GUARD_S = 30.0  # a hang guard only: a run that needs it has failed already

PlanOf = Callable[[str], AttackPlan]
# Engine.statistics() once a run is over: no request, task, lease or queued arrival left.
NOTHING_IN_PROGRESS = {
    "in_flight": 0,
    "queued": 0,
    "leased": 0,
    "unstarted": 0,
    "tasks": 0,
    "direct": 0,
}
During = Callable[[Engine, EchoServer], Awaitable[None]]


class TaskPathSender(HttpSender):
    """The same sender, but not *the* ``HttpSender``: the engine sends it through tasks."""


@dataclass
class Run:
    result: AttackResult
    engine: Engine
    client: dict[str, int]  # the HttpClient's statistics for the one origin, at the end
    served: dict[str, Any]  # the echo server's
    records: list[RequestRecord] = field(default_factory=list)


async def attack(
    plan_of: PlanOf,
    *,
    direct: bool = True,
    records: bool = False,
    on_record: Callable[[RequestRecord], None] | None = None,
    during: During | None = None,
    **echo: Any,
) -> Run:
    """Run the plan against a fresh echo server (``**echo`` its settings), its
    ``preconnect`` connections opened first, keeping the records if asked (else no
    ``on_record``: the tally's one-attempt fast path)."""
    kept: list[RequestRecord] = []
    if records:
        on_record = kept.append
    async with EchoServer(**echo) as server:
        plan = plan_of(server.url + "/")
        async with HttpClient(timeouts=plan.timeouts, max_connections=plan.connections) as client:
            if plan.preconnect:  # as attack() does before its clock starts
                assert await client.preconnect(server.url, plan.preconnect) == plan.preconnect
            sender = (HttpSender if direct else TaskPathSender)(client)
            engine = Engine(plan, sender, on_record=on_record)
            running = asyncio.ensure_future(engine.run())
            try:
                if during is not None:
                    await during(engine, server)
                result = await asyncio.wait_for(running, GUARD_S)
            finally:
                if not running.done():  # `during` failed: leave nothing running
                    engine.stop("test failed")
                    await asyncio.gather(running, return_exceptions=True)
            (stats,) = client.statistics().values()
        served = server.stats()
    return Run(result, engine, stats, served, sorted(kept, key=lambda r: r.request))


def open_plan(rate: float, requests: int, **options: Any) -> PlanOf:
    return lambda url: AttackPlan.build([url], OpenModel(rate=rate), requests=requests, **options)
