"""The direct path of a plan without feedback holds units of its one target
(``Pool.take_unit``), not a Lease per request: the pool still counts and tells every one.
And a plain OK answer sent directly is counted from its ``DirectRequest``, with no
``Attempt`` built, unless a record of it is wanted."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from http_helpers import LOOPS, run
from pyattacker.attack import AttackPlan, Engine, HttpSender, OpenModel
from pyattacker.http import HttpClient
from pyattacker.measure import Attempt, RequestRecord
from pyattacker.pool import Lease, Pool
from pyattacker.servers import EchoServer


async def attack_counting(feedback: bool) -> tuple[Counter[str], Engine]:
    """200 requests at 1,000/s on connections opened first: the pool's events by kind,
    and the engine."""
    events: Counter[str] = Counter()
    async with EchoServer(delay="fixed:1ms") as server:
        plan = AttackPlan.build(
            [server.url + "/"], OpenModel(rate=1000), requests=200, connections=200,
            preconnect=200, feedback=feedback,
        )  # fmt: skip
        async with HttpClient(max_connections=200) as client:
            await client.preconnect(server.url, 200)
            engine = Engine(plan, HttpSender(client))
            engine.pool.subscribe(lambda e: events.update([e.kind]))
            result = await engine.run()
    assert result.total.by_outcome == {"ok": 200}
    return events, engine


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("feedback", [False, True])
def test_every_direct_request_is_a_lease_to_the_pool_with_or_without_a_lease_object(
    loop: str, feedback: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[int] = []
    original = Lease.__init__

    def counting(self: Lease, *args: object) -> None:
        made.append(1)
        original(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Lease, "__init__", counting)

    async def main() -> tuple[Counter[str], Engine]:
        return await attack_counting(feedback)

    events, engine = run(main, loop)
    stats = engine.pool.statistics()
    # Heard and counted as leases either way, and every one given back.
    assert events["lease.acquired"] == events["lease.released"] == stats.leases >= 200
    assert stats.active == 0
    if feedback:  # outcomes reported to the pool need the lease: one object a request
        assert events["lease.reported"] == 200
        assert len(made) == stats.leases
    else:  # units: only the first request, which builds the target's client, took one
        assert events["lease.reported"] == 0
        assert len(made) < 5


def test_a_unit_pool_gives_back_what_a_request_that_found_no_idle_connection_took() -> None:
    # No connection opened first: the first requests find none idle and go to tasks,
    # giving their unit back; the pool ends with nothing out.
    async def main() -> Pool:
        async with EchoServer(delay="fixed:1ms") as server:
            plan = AttackPlan.build([server.url + "/"], OpenModel(rate=2000), requests=100)
            async with HttpClient(max_connections=plan.connections) as client:
                engine = Engine(plan, HttpSender(client))
                result = await engine.run()
        assert result.total.by_outcome == {"ok": 100}
        return engine.pool

    pool = asyncio.run(main())
    assert pool.statistics().active == 0
    assert pool.active == 0


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("wanted", ["nothing", "records", "feedback"])
def test_a_plain_answer_sent_directly_builds_an_attempt_only_when_something_needs_one(
    loop: str, wanted: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Counted where every attempt is made (a patch of DirectRequest.attempt would not be
    # seen by the compiled load path, which calls it in C).
    built: list[Attempt] = []
    original = Attempt.__init__

    def counting(self: Attempt, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        built.append(self)

    monkeypatch.setattr(Attempt, "__init__", counting)
    records: list[RequestRecord] = []

    async def main() -> Engine:
        async with EchoServer(delay="fixed:1ms") as server:
            plan = AttackPlan.build(
                [server.url + "/"], OpenModel(rate=1000), requests=100, connections=100,
                preconnect=100, feedback=wanted == "feedback",
            )  # fmt: skip
            async with HttpClient(max_connections=100) as client:
                await client.preconnect(server.url, 100)
                on_record = records.append if wanted == "records" else None
                engine = Engine(plan, HttpSender(client), on_record=on_record)
                result = await engine.run()
        assert result.total.by_outcome == {"ok": 100}
        assert result.sent == result.total.latency.count == 100
        return engine

    run(main, loop)
    if wanted == "nothing":  # counted from the row: every one of them
        assert built == []
    else:  # the record, or the lease's report, is the attempt's
        assert len(built) == 100
        assert all(a.outcome.value == "ok" and a.sent is not None for a in built)
    if wanted == "records":
        assert sorted(r.request for r in records) == list(range(100))
