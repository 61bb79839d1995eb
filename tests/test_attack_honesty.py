"""No hidden work, checked against a server that counts: every attempt we make is one the
server saw, and every one it saw is an attempt we report ("Measurement" in docs/architecture.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from pyattacker.attack import (
    AttackPlan,
    AttackResult,
    ClosedModel,
    Engine,
    HttpSender,
    OpenModel,
    run_attack,
)
from pyattacker.http import HttpClient, Timeouts
from pyattacker.servers import EchoServer, EchoServerProcess

pytestmark = pytest.mark.slow  # real servers and a one-second Retry-After


@pytest.fixture(scope="module")
def throttling() -> Iterator[EchoServerProcess]:
    # 30 % of requests are refused with 429 and "Retry-After: 1".
    with EchoServerProcess(delay="fixed:1ms", fail="429:0.3", seed=5) as server:
        yield server


def test_retry_none_makes_one_attempt_per_request_and_the_server_agrees(
    throttling: EchoServerProcess,
) -> None:
    throttling.reset()
    plan = AttackPlan.build([throttling.url], OpenModel(rate=400), requests=400, retry="none")
    result = run_attack(plan, stop_on_signals=False)
    served = throttling.stats()
    refused = served["statuses"].get("429", 0)
    assert served["count"] == result.total.attempts == result.total.requests == 400
    assert result.total.by_outcome["throttled"] == refused > 0
    assert result.total.throttled_requests == refused
    assert result.total.attempts_per_request == {1: 400}
    assert result.decisions == {"attempts_exhausted": refused}


def test_with_retries_every_attempt_is_one_the_server_saw_and_spans_the_request(
    throttling: EchoServerProcess,
) -> None:
    throttling.reset()
    # Retry-After says 1 s; cap the wait at 3 attempts so the test stays short.
    retry = {"max_attempts": 3, "base": 0.01, "cap": 0.05}
    plan = AttackPlan.build([throttling.url], OpenModel(rate=200), requests=100, retry=retry)
    result = run_attack(plan, stop_on_signals=False)
    served = throttling.stats()
    total = result.total
    assert served["count"] == total.attempts > total.requests == 100
    assert served["statuses"].get("429", 0) == total.throttled_attempts
    assert sum(n * k for n, k in total.attempts_per_request.items()) == total.attempts
    # A retried request waited for Retry-After (1 s) at least once: its latency, from the
    # first scheduled instant, covers that wait; a one-attempt request's does not.
    assert total.latency.max is not None
    assert total.latency.max >= 1.0
    assert result.decisions["retryable"] == total.attempts - total.requests


def test_targets_sharing_a_host_get_connections_for_all_of_them() -> None:
    # Two keys on one URL, two connections each, four clients, 200 ms answers, a 100 ms
    # connect timeout: four requests at once must find four connections, not two plus a
    # queue that the connect timeout would cut short.
    with EchoServerProcess(delay="fixed:200ms") as server:
        plan = AttackPlan.build(
            [server.url],
            ClosedModel(clients=4),
            requests=8,
            connections=2,
            headers={"Authorization": "Bearer {key}"},
            keys=("sk-a", "sk-b"),
            timeouts=Timeouts(connect=0.1, read=None, total=5.0),
        )
        result = run_attack(plan, stop_on_signals=False)
        assert result.total.by_outcome == {"ok": 8}
        assert server.stats()["count"] == 8


def test_a_stop_mid_flight_still_counts_every_request_that_was_sent() -> None:
    async def main() -> tuple[int, int, dict[str, int]]:
        async with EchoServer(delay="fixed:1s") as server:
            plan = AttackPlan.build([server.url], OpenModel(rate=20), duration=0.5)
            engine_task = asyncio.ensure_future(attack_with_stop(plan, after=0.7))
            result = await engine_task
            stats = server.stats()
        held = stats["count"] + stats["in_flight"] + stats["dropped"]
        return result.sent, held, dict(result.total.by_outcome)

    sent, server_saw, outcomes = asyncio.run(main())
    assert sent == server_saw == 10
    assert outcomes == {"cancelled": 10}


async def attack_with_stop(plan: AttackPlan, *, after: float) -> AttackResult:
    async with HttpClient() as client:
        engine = Engine(plan, HttpSender(client))
        asyncio.get_running_loop().call_later(after, engine.stop, "test stop")
        return await engine.run()
