"""Merging workers' tallies is exact: the merged report equals the unsplit one, field by field."""

from __future__ import annotations

import pickle
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyattacker.attack import AttackPlan, AttackResult, OpenModel, WorkerOutcome, merge_outcomes
from pyattacker.attack._flow_stats import FlowTally
from pyattacker.attack._result import RunTimes
from pyattacker.attack._tally import Tally
from pyattacker.errors import ErrorClass
from pyattacker.measure import Attempt, Histogram, Outcome

ORIGIN = 100.0
WINDOW = 0.5
PLAN = AttackPlan.build(
    ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b"], OpenModel(rate=50), duration=8.0
)
TARGETS = [target.id for target in PLAN.resolved_targets()]
TIMES = RunTimes(started_at=1.7e9, start=ORIGIN, schedule_end=ORIGIN + 8, end=ORIGIN + 9,
                 last_offset=7.9)  # fmt: skip


@st.composite
def requests(draw: st.DrawFn) -> list[tuple[int, list[Attempt]]]:
    """(worker, attempts) of finished requests over several seconds (so that old windows
    are frozen): OK answers, failures with messages of a few kinds, drops, retries,
    streamed LLM answers with usage, named ones, on either target."""
    workers = draw(st.integers(1, 4))
    found = []
    for n in range(draw(st.integers(0, 60))):
        at = ORIGIN + draw(st.floats(0.0, 7.9))
        sent = at + draw(st.floats(0.0, 0.05))
        end = sent + draw(st.floats(0.0, 0.8))
        target = draw(st.sampled_from(TARGETS))
        received = draw(st.integers(0, 99))
        first = Attempt(n, 1, scheduled=at, sent=sent, first_byte=end, end=end, status=200,
                        resource=target, bytes_sent=10, bytes_received=received)  # fmt: skip
        first.outcome = Outcome.OK
        attempts = [first]
        kind = draw(st.sampled_from(["ok"] * 4 + ["failed", "dropped", "retried", "llm"]))
        if kind == "failed":
            first.outcome, first.status, first.error_class = Outcome.FAILED, 500, "upstream"
            first.error = f"HttpStatusError: HTTP 500 after {draw(st.integers(0, 9))} ms"
        elif kind == "dropped":
            first.sent = first.first_byte = first.end = first.status = None
            first.outcome, first.error_class = Outcome.DROPPED, ErrorClass.CANCELLED.value
            first.error = "dropped: --max-in-flight requests were already in progress"
        elif kind == "retried":
            first.outcome, first.status, first.retry_after = Outcome.THROTTLED, 429, 0.5
            again = Attempt(n, 2, scheduled=end + 0.01, sent=end + 0.01, end=end + 0.02,
                            resource=target, status=200)  # fmt: skip
            again.outcome = Outcome.OK
            attempts.append(again)
        elif kind == "llm":
            first.first_token = sent + 0.001
            first.token_times = [sent + 0.001, sent + 0.002, end]
            first.usage = {"prompt_tokens": 7, "completion_tokens": 3}
        if draw(st.booleans()):
            first.name = draw(st.sampled_from(["login", "search"]))
            for attempt in attempts:
                attempt.name = first.name
        found.append((draw(st.integers(0, workers - 1)), attempts))
    return found


def tally(per_target: bool = True) -> Tally:
    return Tally(origin=ORIGIN, window=WINDOW, late_after=0.01, per_target=per_target,
                 on_record=None)  # fmt: skip


def count(into: Tally, attempts: list[Attempt], in_flight: int) -> None:
    into.arrival(attempts[0].scheduled, in_flight)
    into.finished(attempts)


def outcome(index: int, counted: Tally, lag: Histogram | None = None) -> WorkerOutcome:
    return WorkerOutcome(index=index, tally=counted, times=TIMES, decisions={"retry": index},
                         stop_reason=None, loop_lag=lag, cpu_s=0.1, final=True)  # fmt: skip


@settings(max_examples=30, deadline=None)
@given(requests(), st.integers(0, 3), st.booleans())
def test_tallies_split_among_workers_merge_into_the_report_of_the_unsplit_tally(
    found: list[tuple[int, list[Attempt]]], dropped: int, through_pickle: bool
) -> None:
    whole = tally()
    parts = {w: tally() for w in range(4)}
    for i, (worker, attempts) in enumerate(found):
        count(whole, attempts, i % 5 + 1)
        count(parts[worker], attempts, i % 5 + 1)
    if dropped:  # arrivals dropped in bulk (an overrun's rest), counted by worker 0
        whole.dropped(ORIGIN + 7.5, dropped, "dropped: the schedule overran")
        parts[0].dropped(ORIGIN + 7.5, dropped, "dropped: the schedule overran")
    outcomes = [outcome(w, t) for w, t in parts.items()]
    if through_pickle:  # as they come from worker processes
        outcomes = pickle.loads(pickle.dumps(outcomes))
    merged = merge_outcomes(PLAN, outcomes)
    expected = AttackResult.build(PLAN, whole, TIMES, decisions={"retry": 6},
                                  stop_reason=None, loop_lag=None)  # fmt: skip
    got = merged.to_dict()
    assert got.pop("workers") == {"count": 4, "lost": [], "on_ray": False}
    want = expected.to_dict()
    # Every worker's CPU adds up (each outcome says 0.1 s); one process's build has none.
    assert got.pop("cpu")["process_s"] == pytest.approx(0.1 * len(outcomes))
    want.pop("cpu")
    # Compared bucket by bucket (each histogram's to_dict) and then every field.
    assert merged.total.latency.to_dict() == whole.total.latency.to_dict()
    for name, stats in whole.by_target.items():
        assert merged.by_target[name] == stats
    # The error kinds and their counts are figures; each kind's example is a quotation:
    # the first one the lowest-numbered worker saw, which one process may have seen later.
    examples = {group.key: group.example for group in merged.errors}
    for group in expected.errors:
        assert examples[group.key] is None or examples[group.key] in {
            a[-1].error for _, a in found if a[-1].error is not None
        } | {"dropped: the schedule overran"}
    for row in (*got["errors"], *want["errors"]):
        row.pop("example")
    for key in want:
        assert got[key] == want[key], key
    assert got == want


def test_the_workers_loop_lags_merge_and_a_lost_worker_is_named() -> None:
    lags = [Histogram(), Histogram()]
    lags[0].record(0.001)
    lags[1].record(0.020)
    merged = merge_outcomes(PLAN, [outcome(0, tally(), lags[0]), outcome(2, tally(), lags[1])],
                            lost=[2], workers=3, per_worker=True)  # fmt: skip
    assert merged.loop_lag is not None
    assert merged.loop_lag.count == 2
    assert merged.lost == [1, 2]  # 1 sent nothing, 2 died after a snapshot
    each = merged.to_dict()["workers"]["each"]
    assert [(w["state"], w["counted"], w["partial"]) for w in each] == [
        ("finished", True, False),
        ("lost", False, False),
        ("lost", True, True),
    ]


def test_an_attack_with_a_lost_worker_exits_3_and_one_without_keeps_its_code() -> None:
    from pyattacker.cli._attack_workers import LOST_EXIT, workers_exit

    lost = merge_outcomes(PLAN, [outcome(0, tally())], lost=[1], workers=2)
    whole = merge_outcomes(PLAN, [outcome(0, tally()), outcome(1, tally())])
    assert workers_exit(lost, 0) == LOST_EXIT == 3
    assert workers_exit(whole, 1) == 1


def test_when_every_worker_was_lost_the_rates_are_over_the_time_they_ran() -> None:
    # Both workers' last snapshots were 2 s into an 8 s plan: nobody sent the other 6 s.
    early = replace(TIMES, schedule_end=ORIGIN + 2, end=ORIGIN + 2)
    snapshots = [replace(outcome(w, tally()), times=early, final=False) for w in (0, 1)]
    merged = merge_outcomes(PLAN, snapshots, lost=[0, 1], workers=2)
    assert merged.stop_reason == "every worker lost"
    assert merged.schedule_s == 2.0
    one_left = merge_outcomes(PLAN, [outcome(0, tally())], lost=[1], workers=2)
    assert one_left.stop_reason is None  # the other worker ran the whole plan
    assert one_left.schedule_s == 8.0


@st.composite
def flows(draw: st.DrawFn) -> list[tuple[int, str, str, float]]:
    """(worker, how it ended, where, duration) of a scenario's flows: completed, failed at
    a step, failed in the flow's own code (messages of a few kinds), cancelled, or still in
    progress."""
    workers = draw(st.integers(1, 4))
    kinds = st.sampled_from(["completed"] * 3 + ["step", "code", "cancelled", "in_progress"])
    return [
        (
            draw(st.integers(0, workers - 1)),
            draw(kinds),
            draw(st.sampled_from(["login", "browse", "checkout"])),
            draw(st.floats(0.0, 5.0)),
        )
        for _ in range(draw(st.integers(0, 60)))
    ]


def count_flow(into: FlowTally, steps: Tally, flow: tuple[int, str, str, float], n: int) -> None:
    """Count one flow as the flow dispatcher does, its last step a named request."""
    _, kind, where, seconds = flow
    into.admitted += 1
    into.started += 1
    step = Attempt(n, 1, scheduled=ORIGIN + seconds / 2, sent=ORIGIN + seconds / 2,
                   first_byte=ORIGIN + seconds, end=ORIGIN + seconds, status=200)  # fmt: skip
    step.outcome, step.name = Outcome.OK, where
    if kind == "completed":
        into.finished(seconds)
    elif kind == "step":
        into.failed_at(where)
        step.outcome, step.status, step.error = Outcome.FAILED, 500, "HTTP 500"
    elif kind == "code":
        into.failed_in_code(f"KeyError: 'item-{n % 3}' in {where}")
    elif kind == "cancelled":
        into.cancelled += 1
    steps.arrival(step.scheduled, 1)
    steps.finished([step])


@settings(max_examples=30, deadline=None)
@given(flows(), st.booleans())
def test_a_scenarios_flows_split_among_workers_merge_into_the_unsplit_flows(
    found: list[tuple[int, str, str, float]], through_pickle: bool
) -> None:
    whole, whole_steps = FlowTally("flows.py:shop"), tally()
    parts = {w: (FlowTally("flows.py:shop"), tally()) for w in range(4)}
    for n, flow in enumerate(found):
        count_flow(whole, whole_steps, flow, n)
        count_flow(*parts[flow[0]], flow, n)
    outcomes = [replace(outcome(w, steps), flows=f) for w, (f, steps) in parts.items()]
    if through_pickle:  # as they come from worker processes
        outcomes = pickle.loads(pickle.dumps(outcomes))
    merged = merge_outcomes(PLAN, outcomes)
    expected = whole.stats(whole_steps.scheduled)
    assert merged.flows is not None
    assert merged.flows.duration.to_dict() == expected.duration.to_dict()  # bucket by bucket
    got, want = merged.flows.to_dict(), expected.to_dict()
    # each error kind's example is the first seen, which one process may have seen later
    assert [(e["key"], e["count"]) for e in got.pop("errors")] == [
        (e["key"], e["count"]) for e in want.pop("errors")
    ]
    assert got == want
    one = AttackResult.build(PLAN, whole_steps, TIMES, decisions={}, stop_reason=None,
                             loop_lag=None)  # fmt: skip
    assert merged.by_name == one.by_name  # the steps' own figures, by step name
    assert merged.name_windows == one.name_windows
