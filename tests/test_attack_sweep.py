"""Sweeps: the levels they run, the rates between, the order reports use, the saturation
rule, and a stop that ends the sweep (virtual time: each level is an exact timeline)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.attack import (
    AttackPlan,
    AttackResult,
    ClosedModel,
    LoadModel,
    OpenModel,
    SweepSpec,
    sweep,
)
from pyattacker.attack._sweep import ok_rate, rates_between
from pyattacker.errors import ConfigError
from pyattacker.report import sweep_dict, sweep_markdown, sweep_text
from pyattacker.report._sweep import saturation
from test_attack_engine import A, FakeServer, attack


def server_with_capacity(slots: int, service: float) -> FakeServer:
    """A server that answers ``slots`` requests at once in ``service`` seconds each; more
    in flight wait (their latency grows): what a saturating endpoint looks like."""
    busy: list[float] = []

    def latency(n: int, now: float) -> float:
        busy[:] = sorted(t for t in busy if t > now)
        start = now if len(busy) < slots else busy[len(busy) - slots]
        busy.append(start + service)
        return start + service - now

    return FakeServer(latency=latency)


def runs(server: Callable[[], FakeServer]) -> tuple[list[LoadModel], Any]:
    """The loads asked for, and a sweep's ``plan_for`` and ``run``: each level a 2 s run
    on virtual time against a fresh server (each run's clock starts at 0)."""
    loads: list[LoadModel] = []

    def plan_for(load: LoadModel) -> AttackPlan:
        loads.append(load)
        return AttackPlan.build([A], load, duration=2.0)

    def run(plan: AttackPlan) -> AttackResult:
        return attack(plan, server())[0]

    return loads, (plan_for, run)


def test_an_auto_sweep_runs_synchronous_then_throughput_then_the_rates_between() -> None:
    loads, (plan_for, run) = runs(lambda: server_with_capacity(slots=4, service=0.1))
    result = sweep(SweepSpec.parse("auto", levels=3, max_concurrency=8), plan_for, run)
    assert [level.kind for level, _ in result.runs] == [
        "synchronous", "throughput", "rate", "rate", "rate",
    ]  # fmt: skip
    assert loads[:2] == [ClosedModel(1), ClosedModel(8)]
    # synchronous: 10 answers/s; throughput: 4 slots of 0.1 s = 40/s; rates between
    (_, synchronous), (_, throughput) = result.runs[:2]
    assert ok_rate(synchronous) == pytest.approx(10.0)
    assert ok_rate(throughput) == pytest.approx(40.0, rel=0.05)
    rates = [load.rate for load in loads[2:] if isinstance(load, OpenModel)]
    assert rates == pytest.approx([17.5, 25.0, 32.5], rel=0.05)
    ordered = [level.name for level, _ in result.ordered()]
    assert ordered[0].startswith("synchronous")
    assert ordered[-1].startswith("throughput")
    assert not result.interrupted


def test_the_endpoint_saturates_where_latency_grows_past_the_rule() -> None:
    # 20 answers/s at most
    _, (plan_for, run) = runs(lambda: server_with_capacity(slots=2, service=0.1))
    result = sweep(SweepSpec.parse("rate=5/s,10/s,19/s,30/s,60/s"), plan_for, run)
    data = sweep_dict(result)
    assert [row["offered_rate"] for row in data["rows"]] == [5, 10, 19, 30, 60]
    assert data["sweep"]["saturated_at"] == "rate 30/s"
    assert data["rows"][0]["requests"] == 10
    assert [row["error_rate"] for row in data["rows"]] == [0.0] * 5
    assert len(data["levels"]) == 5
    assert data["levels"][3]["report"]["plan"]["load"]["rate"] == 30
    text = sweep_text(result, data)
    assert "Saturates at: rate 30/s" in text
    assert "| rate 60/s |" in sweep_markdown(result, data)


def test_a_concurrency_sweep_runs_a_closed_model_at_each_concurrency() -> None:
    loads, (plan_for, run) = runs(lambda: FakeServer(latency=lambda n, t: 0.1))
    result = sweep(SweepSpec.parse("concurrency=1,2,4"), plan_for, run)
    assert loads == [ClosedModel(1), ClosedModel(2), ClosedModel(4)]
    rows = sweep_dict(result)["rows"]
    assert [row["requests"] for row in rows] == [20, 40, 80]
    assert [row["concurrency"] for row in rows] == [1, 2, 4]
    assert saturation(rows) == (None, None)


def test_a_stopped_level_ends_the_sweep_and_the_levels_done_are_reported() -> None:
    server = FakeServer()
    levels: list[str] = []

    def plan_for(load: LoadModel) -> AttackPlan:
        return AttackPlan.build([A], load, duration=2.0)

    def run(plan: AttackPlan) -> AttackResult:
        return attack(plan, server, stop_at=1.0 if len(levels) == 3 else None)[0]

    result = sweep(
        SweepSpec.parse("rate=5/s,10/s,20/s,40/s"), plan_for, run,
        on_level=lambda i, level: levels.append(level.name),
    )  # fmt: skip
    assert levels == ["rate 5/s", "rate 10/s", "rate 20/s"]
    assert result.interrupted
    data = sweep_dict(result)
    assert data["sweep"]["levels_run"] == 3
    assert data["sweep"]["levels_planned"] == 4
    assert data["rows"][2]["stop_reason"] == "test stop"
    assert "Interrupted" in sweep_text(result, data)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("fast", "--sweep"),
        ("auto=3", "--sweep"),
        ("concurrency=1,x", "--sweep[1]"),
        ("concurrency=0", "--sweep[0]"),
        ("rate=1/s,-2/s", "--sweep[1]"),
        ("rate=", "--sweep[0]"),
    ],
)
def test_a_sweep_spec_that_cannot_be_read_is_refused_naming_the_flag(text: str, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        SweepSpec.parse(text)
    assert info.value.field == field


def test_clients_belong_to_the_auto_sweep_and_levels_are_bounded() -> None:
    with pytest.raises(ConfigError) as info:
        SweepSpec.parse("concurrency=1,2", max_concurrency=8)
    assert info.value.field == "--clients"
    with pytest.raises(ConfigError) as info:
        SweepSpec.parse("auto", levels=0)
    assert info.value.field == "--sweep-levels"


@given(
    st.floats(min_value=0.0, max_value=1e6),
    st.floats(min_value=0.0, max_value=1e6),
    st.integers(min_value=1, max_value=100),
)
def test_the_rates_between_are_ascending_positive_and_strictly_inside(
    low: float, high: float, n: int
) -> None:
    rates = rates_between(low, high, n)
    assert rates == sorted(rates)
    assert all(min(low, high) <= r <= max(low, high) and r > 0 for r in rates)
    if low != high and min(low, high) > 0:
        assert len(rates) == n


def row(offered: float | None, sustained: float | None, ttft_p99: float | None,
        e2e_p99: float | None = 1.0, **more: object) -> dict[str, object]:  # fmt: skip
    """A sweep row as the rule reads it; ``offered`` is the arrivals made a second."""
    return {"level": f"level {offered}", "offered_rate": offered, "arrivals_per_s": offered,
            "sustained_per_s": sustained, "ttft_p99_s": ttft_p99, "e2e_p99_s": e2e_p99,
            "error_rate": 0.0, **more}  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([row(None, 5, 0.1), row(10, 9.0, 0.1), row(20, 17.9, 0.1)], 2),  # 17.9 < 90 % of 20
        ([row(None, 5, 0.1), row(10, 9.0, 0.1), row(20, 18.0, 0.1)], None),  # 90 % exactly
        ([row(None, 5, 0.1), row(None, 9, 0.3), row(None, 12, 0.31)], 2),  # > 3x 0.1 s
        ([row(None, 5, None, 0.2), row(None, 9, None, 0.61)], 1),  # no stream: end to end
        ([row(None, 5, None, None), row(10, 10, None, None)], None),  # nothing to compare
        ([], None),
    ],
)
def test_the_saturation_rule_is_the_first_shortfall_or_latency_growth(
    rows: list[dict[str, object]], expected: int | None
) -> None:
    at, why = saturation(rows)
    assert at == expected
    assert (why is None) == (expected is None)


def clients(n: int, sustained: float, e2e_p99: float = 1.0) -> dict[str, object]:
    return {**row(None, sustained, None, e2e_p99), "kind": "concurrency", "concurrency": n}


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        # 1 -> 4 clients: 25/s -> 50.9/s, twice as much for four times the clients
        ([clients(1, 25.0), clients(4, 50.9), clients(16, 50.6)], 1),
        # each step gains at least half of what its added clients would
        ([clients(1, 10.0), clients(8, 45.0), clients(32, 120.0)], None),
        ([clients(1, 10.0), clients(8, 45.0), clients(32, 110.0)], 2),  # 110 < 45 (1 + 1.5)
        # rate levels (no clients) are not judged by it, nor a step that drops clients
        ([row(None, 5, 0.1), row(10, 9.5, 0.1), row(20, 19.0, 0.1)], None),
        ([clients(8, 40.0), clients(4, 20.0)], None),
    ],
)
def test_a_concurrency_sweep_saturates_where_more_clients_stop_adding_throughput(
    rows: list[dict[str, object]], expected: int | None
) -> None:
    assert saturation(rows)[0] == expected


def test_a_throughput_levels_rate_is_what_the_endpoint_answered_not_plus_its_clients() -> None:
    # 4 slots of 0.1 s: 40 answers/s, whatever the clients. Over the sending span alone,
    # the 64 requests in flight when sending stopped would add 64 / 2 s = 32/s.
    loads, (plan_for, run) = runs(lambda: server_with_capacity(slots=4, service=0.1))
    result = sweep(SweepSpec.parse("auto", levels=2, max_concurrency=64), plan_for, run)
    (_, throughput) = result.runs[1]
    assert ok_rate(throughput) == pytest.approx(40.0, rel=0.05)
    rates = [load.rate for load in loads[2:] if isinstance(load, OpenModel)]
    assert max(rates) < 40.0
    row_of = {row["kind"]: row for row in sweep_dict(result)["rows"]}
    assert row_of["throughput"]["sustained_per_s"] == pytest.approx(40.0, rel=0.05)


def test_poisson_levels_are_judged_against_the_arrivals_they_were_offered() -> None:
    # Far below capacity; a Poisson draw makes fewer arrivals than the nominal rate, all
    # answered at once: no level saturates.
    _, (plan_for, run) = runs(lambda: FakeServer(latency=lambda n, t: 0.01))
    spec = SweepSpec.parse("rate=19/s,20/s", arrival="poisson")
    data = sweep_dict(sweep(spec, plan_for, run))
    assert [row["sustained_per_s"] for row in data["rows"]] == pytest.approx(
        [row["arrivals_per_s"] for row in data["rows"]]
    )
    assert data["sweep"]["saturated_at"] is None


def test_a_stopped_level_is_marked_and_left_out_of_the_verdict() -> None:
    slow = row(40, 40.0, 9.0, stopped=True)  # its p99 would saturate it
    assert saturation([row(10, 10.0, 0.1), row(20, 20.0, 0.1), slow]) == (None, None)
    server = FakeServer()

    def run(plan: AttackPlan) -> AttackResult:
        stop = 1.0 if isinstance(plan.load, OpenModel) and plan.load.rate == 20 else None
        return attack(plan, server, stop_at=stop)[0]

    _, (plan_for, _) = runs(FakeServer)
    result = sweep(SweepSpec.parse("rate=5/s,20/s"), plan_for, run)
    data = sweep_dict(result)
    assert [row["stopped"] for row in data["rows"]] == [False, True]
    assert "rate 20/s (stopped)" in sweep_text(result, data)
    assert "rate 20/s (stopped)" in sweep_markdown(result, data)


def test_a_first_level_that_mostly_failed_is_no_baseline_and_the_errors_are_quoted() -> None:
    failing = row(10, 0.0, None, error_rate=1.0)
    at, why = saturation([failing, row(20, 0.0, None, error_rate=1.0)])
    assert at is None
    assert why is not None
    assert "failed 100% of its requests" in why
    _, (plan_for, run) = runs(lambda: FakeServer(status=lambda n, attempt: 404))
    result = sweep(SweepSpec.parse("rate=5/s,10/s"), plan_for, run)
    text = sweep_text(result)
    assert "Saturates at: cannot say: the first level (rate 5/s) failed 100%" in text
    assert "Errors (rate 5/s, rate 10/s): " in text
    assert "404" in text


def test_the_verdict_says_which_rule_fired() -> None:
    assert saturation([row(10, 10.0, 0.1), row(20, 17.0, 0.1)])[1] == (
        "sustained 17.00/s, under 90% of the 20.00 arrivals/s it was offered"
    )
    assert saturation([row(10, 10.0, 0.1), row(20, 20.0, 0.4)])[1] == (
        "TTFT p99 400.0 ms, over 3x the first level's 100.0 ms"
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("concurrency=8,1,8", "concurrency 8 is given twice"),
        ("rate=5/s,5/s", "rate 5 is given twice"),
        ("concurrency=100001", "must be 1 to 100,000 clients, got 100,001"),
        ("concurrency=1.5", "'1.5' is not a whole number of clients"),
    ],
)
def test_a_list_sweeps_values_are_whole_and_distinct(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        SweepSpec.parse(text)
    assert says in info.value.message


def test_a_list_sweep_runs_its_levels_in_increasing_order() -> None:
    assert SweepSpec.parse("concurrency=32,1,8").values == (1.0, 8.0, 32.0)
    assert SweepSpec.parse("rate=10/s,2/s").values == (2.0, 10.0)


@pytest.mark.parametrize(("clients", "says"), [(1, "synchronous one"), (200_000, "2 to 100,000")])
def test_the_throughput_levels_clients_are_two_or_more_and_bounded(clients: int, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        SweepSpec.parse("auto", max_concurrency=clients)
    assert info.value.field == "--clients"
    assert says in info.value.message


def test_the_sweeps_warmup_line_keeps_a_count_with_a_thousands_separator_whole() -> None:
    from pyattacker.report._sweep import _lead

    warmup = {"seconds": None, "scheduled": 1500, "skipped_s": 0.75, "sent": 1500,
              "sent_attempts": 1502}  # fmt: skip
    rows = [{"level": name, "warmup": warmup} for name in ("synchronous", "throughput")]
    (line,) = _lead(rows)
    assert line.startswith("Warmup: each level first sends the first 1,500 requests (0.75s), ")
    assert "3,004 attempts for 3,000 requests over 2 levels" in line
