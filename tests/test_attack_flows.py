"""Scripted flows on virtual time: each arrival runs a flow, each step is a named request.

A fake step sender stands in for the network: it "sends" a step at the instant it is
called and answers after a latency the test chooses, with the status the test chooses, so
every figure below is known in advance.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from engine_helpers import attack
from pyattacker.attack import (
    FLOW_CODE,
    AttackPlan,
    ClosedModel,
    FlowClient,
    OpenModel,
    Scenario,
    Step,
    StepFailed,
    Target,
    Warmup,
)
from pyattacker.attack._flow_client import resolve
from pyattacker.clock import LoopClock
from pyattacker.errors import ConfigError
from pyattacker.http import URL, Response, Timing
from pyattacker.measure import Attempt
from pyattacker.report import attack_markdown, attack_text

A = "http://127.0.0.1:9/shop/"


@dataclass
class FakeSteps:
    """Answers each step after ``latency(name)`` seconds with ``status(name, flow_step)``."""

    latency: Callable[[str], float] = lambda name: 0.01
    status: Callable[[str], int] = lambda name: 200
    calls: list[tuple[str, str, float]] = field(default_factory=list)  # name, path, sent

    async def send(self, target: Target, attempt: Attempt) -> None:
        raise AssertionError("a scenario sends steps, never the plan's request")

    async def send_step(self, target: Target, step: Step, attempt: Attempt) -> Response:
        clock = LoopClock()
        attempt.sent = clock.now()
        self.calls.append((step.name, step.path, attempt.sent))
        await clock.sleep(self.latency(step.name))
        attempt.first_byte = attempt.end = clock.now()
        response = Response(URL.parse(A), Timing(0.0))
        response.status = attempt.status = self.status(step.name)
        return response


async def checkout(client: FlowClient, row: Mapping[str, Any] | None) -> None:
    await client.get("/login", name="login")
    await client.sleep(1.0)
    await client.get("items", name="browse")
    await client.post("/cart", name="checkout", json={"item": 1})


def plan_of(function: Any, **options: Any) -> AttackPlan:
    load = options.pop("load", OpenModel(rate=2))
    return AttackPlan.build([A], load, scenario=Scenario(function, "test:flow"), **options)


def test_each_arrival_runs_one_flow_and_each_step_is_a_named_request() -> None:
    result, records = attack(plan_of(checkout, duration=2.0), FakeSteps())
    assert result.scheduled == 4  # arrivals: flows
    assert sorted(r.name or "" for r in records) == sorted(["login", "browse", "checkout"] * 4)
    assert {name: s.requests for name, s in result.by_name.items()} == {
        "login": 4,
        "browse": 4,
        "checkout": 4,
    }
    flows = result.flows
    assert flows is not None
    assert (flows.started, flows.completed, flows.failed, flows.cancelled) == (4, 4, {}, 0)
    # login 10 ms, a 1 s think time, then two 10 ms steps: 1.03 s from the arrival
    assert flows.duration.min == pytest.approx(1.03, abs=1e-6)
    assert flows.duration.max == pytest.approx(1.03, abs=1e-6)


def test_the_first_step_is_scheduled_at_the_arrival_and_a_step_after_a_sleep_when_it_was_due() -> (
    None
):
    _, records = attack(plan_of(checkout, requests=1), FakeSteps())
    login, browse, cart = sorted(records, key=lambda r: r.scheduled)
    assert (login.name, login.scheduled) == ("login", 0.0)
    assert browse.scheduled == pytest.approx(0.01 + 1.0)  # the end of the think time
    assert cart.scheduled == pytest.approx(browse.end)  # asked for as browse ended
    assert all(r.dispatch_delay == 0.0 for r in records)


def test_relative_paths_reach_the_step_sender_as_the_flow_wrote_them() -> None:
    steps = FakeSteps()
    attack(plan_of(checkout, requests=1), steps)
    assert [(name, path) for name, path, _ in steps.calls] == [
        ("login", "/login"),
        ("browse", "items"),
        ("checkout", "/cart"),
    ]


def test_a_failed_step_ends_the_flow_and_is_counted_at_that_step() -> None:
    steps = FakeSteps(status=lambda name: 500 if name == "browse" else 200)
    result, records = attack(plan_of(checkout, requests=3), steps)
    assert [r.name for r in records if r.name == "checkout"] == []  # never reached
    assert result.by_name["browse"].by_outcome == {"failed": 3}
    flows = result.flows
    assert flows is not None
    assert flows.failed == {"browse": 3}
    assert flows.completed == 0
    assert flows.duration.count == 0  # durations are of completed flows


def test_a_status_the_step_expects_is_a_success_and_any_other_fails() -> None:
    async def flow(client: FlowClient) -> None:
        await client.get("/gone", name="gone", expect=404)
        await client.get("/made", name="made", expect=(201,))

    result, _ = attack(
        plan_of(flow, requests=1), FakeSteps(status=lambda n: 404 if n == "gone" else 200)
    )
    assert result.by_name["gone"].by_outcome == {"ok": 1}
    assert result.by_name["made"].by_outcome == {"failed": 1}
    assert result.flows is not None
    assert result.flows.failed == {"made": 1}


def test_a_flow_that_catches_a_failed_step_goes_on_and_every_step_is_counted() -> None:
    seen: list[int | None] = []

    async def flow(client: FlowClient) -> None:
        try:
            await client.get("/flaky", name="flaky")
        except StepFailed as exc:
            seen.append(exc.status)
        await client.get("/after", name="after")

    result, _ = attack(
        plan_of(flow, requests=2), FakeSteps(status=lambda n: 503 if n == "flaky" else 200)
    )
    assert seen == [503, 503]
    assert result.by_name["flaky"].by_outcome == {"failed": 2}
    assert result.by_name["after"].by_outcome == {"ok": 2}
    assert result.flows is not None
    assert result.flows.completed == 2


def test_an_error_in_the_flows_own_code_fails_the_flow_with_its_message() -> None:
    async def flow(client: FlowClient) -> None:
        await client.get("/a", name="a")
        raise KeyError("sku")

    result, _ = attack(plan_of(flow, requests=2), FakeSteps())
    flows = result.flows
    assert flows is not None
    assert flows.failed == {FLOW_CODE: 2}
    assert [(g.count, g.example) for g in flows.errors] == [(2, "KeyError: 'sku'")]
    assert result.total.by_outcome == {"ok": 2}


def test_a_stop_counts_the_step_in_progress_as_cancelled_and_sends_no_more() -> None:
    steps = FakeSteps(latency=lambda name: 0.5)
    # arrivals at 0, 0.5, 1.0 ...; stop at 0.75: flow 0 is in its think time, flow 1 in login
    result, records = attack(plan_of(checkout, duration=10.0), steps, stop_at=0.75)
    assert len(records) == len(steps.calls)  # every step sent is counted
    assert result.total.by_outcome == {"ok": 1, "cancelled": 1}
    flows = result.flows
    assert flows is not None
    assert (flows.started, flows.cancelled, flows.completed) == (2, 2, 0)
    assert result.flows is not None
    assert result.flows.in_progress == 0


def test_a_step_a_flow_asks_for_after_the_stop_is_never_sent() -> None:
    async def stubborn(client: FlowClient) -> None:
        for _ in range(3):
            with contextlib.suppress(asyncio.CancelledError):
                await client.get("/slow", name="slow")

    steps = FakeSteps(latency=lambda name: 1.0)
    result, records = attack(plan_of(stubborn, requests=1), steps, stop_at=0.5)
    assert len(steps.calls) == 1 == len(records)
    assert records[0].outcome == "cancelled"
    assert result.flows is not None
    assert result.flows.cancelled == 1


def test_closed_model_clients_run_flows_back_to_back() -> None:
    result, records = attack(
        plan_of(checkout, load=ClosedModel(clients=2), requests=4), FakeSteps()
    )
    assert result.scheduled == 4
    flows = result.flows
    assert flows is not None
    assert flows.completed == 4
    assert len(records) == 12
    logins = sorted(r.scheduled for r in records if r.name == "login")
    assert logins == pytest.approx([0.0, 0.0, 1.03, 1.03])  # each client's next flow


def test_the_flow_gets_its_row_when_rows_are_given() -> None:
    rows: list[object] = []

    async def flow(client: FlowClient, row: Mapping[str, Any] | None) -> None:
        rows.append(row)
        await client.get(f"/users/{row['id'] if row else 0}", name="user")

    scenario = Scenario(flow, "t:flow", rows=lambda n: {"id": n * 10})
    plan = AttackPlan.build([A], OpenModel(rate=2), requests=3, scenario=scenario)
    attack(plan, FakeSteps())
    assert rows == [{"id": 0}, {"id": 10}, {"id": 20}]


def test_the_reports_have_a_flows_section() -> None:
    result, _ = attack(plan_of(checkout, requests=2), FakeSteps())
    data = result.to_dict()
    assert data["plan"]["scenario"] == "test:flow"
    assert data["flows"]["completed"] == 2
    assert data["flows"]["duration_s"]["count"] == 2
    assert set(data["names"]) == {"login", "browse", "checkout"}
    assert "Flows (test:flow)" in attack_text(result)
    assert "## Flows (test:flow)" in attack_markdown(result)


def test_a_scenario_refuses_a_method_or_body_of_the_plan() -> None:
    with pytest.raises(ConfigError) as caught:
        plan_of(checkout, requests=1, method="POST")
    assert caught.value.field == "scenario"


async def two_steps(client: FlowClient) -> None:
    await client.get("/a", name="a")
    await client.get("/b", name="b")


def test_arrivals_that_find_every_connection_busy_queue_and_keep_their_scheduled_start() -> None:
    # One connection, 0.1 s steps, a flow every 0.1 s: each flow needs 0.2 s of the one
    # connection, so flows queue; each first step is still scheduled at its arrival.
    steps = FakeSteps(latency=lambda name: 0.1)
    plan = plan_of(two_steps, load=OpenModel(rate=10), requests=4, connections=1)
    result, records = attack(plan, steps)
    firsts = sorted((r for r in records if r.name == "a"), key=lambda r: r.scheduled)
    assert [r.scheduled for r in firsts] == pytest.approx([0.0, 0.1, 0.2, 0.3])
    assert firsts[0].dispatch_delay == 0.0
    assert all(r.dispatch_delay >= 0.1 - 1e-9 for r in firsts[1:])  # queued, and it shows
    flows = result.flows
    assert flows is not None
    assert (flows.completed, flows.cancelled, flows.in_progress) == (4, 0, 0)
    assert len(records) == len(steps.calls) == 8


def test_a_stop_counts_queued_flows_as_cancelled_without_a_request_for_them() -> None:
    steps = FakeSteps(latency=lambda name: 1.0)
    plan = plan_of(two_steps, load=OpenModel(rate=10), duration=1.0, connections=1)
    result, records = attack(plan, steps, stop_at=0.55)
    assert len(records) == len(steps.calls) == 1  # the one step that was sent
    assert records[0].outcome == "cancelled"
    flows = result.flows
    assert flows is not None
    assert (flows.scheduled, flows.cancelled, flows.completed) == (6, 6, 0)
    assert (flows.dropped, flows.in_progress) == (0, 0)


@pytest.mark.parametrize(
    ("base", "path", "resolved"),
    [
        ("http://h:1/shop/", "/login", "/login"),
        ("http://h:1/shop/", "items", "/shop/items"),
        ("http://h:1/shop/", "items?page=2", "/shop/items?page=2"),
        ("http://h:1/shop/cart", "items", "/shop/items"),
        ("http://h:1/shop/a/", "../b", "/shop/b"),
        ("http://h:1/?k=v", "x", "/x"),
        ("http://h:1", "x", "/x"),
    ],
)
def test_a_steps_path_resolves_against_the_target_url_as_a_link_would(
    base: str, path: str, resolved: str
) -> None:
    url = resolve(URL.parse(base), path)
    assert (url.host, url.port, url.target) == ("h", 1, resolved)


def test_a_full_url_is_refused_before_anything_is_sent_or_counted() -> None:
    async def flow(client: FlowClient) -> None:
        await client.get("http://elsewhere.example/x")

    steps = FakeSteps()
    result, records = attack(plan_of(flow, requests=1), steps)
    assert (steps.calls, records) == ([], [])
    assert result.flows is not None
    assert result.flows.failed == {FLOW_CODE: 1}


@pytest.mark.parametrize(("warmup", "apart"), [(Warmup(seconds=1.0), 2), (Warmup(requests=3), 3)])
def test_a_warmups_flows_are_set_apart_from_every_flow_figure(warmup: Warmup, apart: int) -> None:
    # 2 flows a second for 3 s: the warmup's arrivals (the first second's, or the first
    # three) are in no `scheduled`, and their flows in no flow figure but `warmup`.
    result, _ = attack(plan_of(checkout, duration=3.0, warmup=warmup), FakeSteps())
    flows = result.flows
    assert flows is not None
    assert flows.warmup == apart
    assert flows.scheduled == 6 - apart
    assert (flows.started, flows.completed, flows.duration.count) == (6 - apart,) * 3
    assert flows.to_dict()["warmup"] == apart
    # and every step of theirs, the ones sent after the warmup's span too (a flow's steps
    # go with it: its think time of 1 s puts two of its three steps past a 1 s span)
    assert result.total.requests == 3 * (6 - apart)
    assert result.to_dict()["warmup"]["sent_attempts"] == 3 * apart
