"""The clocks of ``attack --ray`` without Ray: an actor's clock offset is measured within
the uncertainty it states, workers that counted on different monotonic clocks merge,
once put on their common start, into the report of one tally of all their requests, and
each Ray worker's node is reported beside its offset."""

from __future__ import annotations

import pickle
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyattacker.attack import (
    AttackPlan,
    AttackResult,
    OpenModel,
    Warmup,
    WorkerOutcome,
    measure_offset,
    merge_outcomes,
    on_common_clock,
)
from pyattacker.attack._result import RunTimes
from pyattacker.attack._tally import Tally
from pyattacker.attack._warmup import WarmupTally
from pyattacker.cli._attack_workers import worker_lines
from pyattacker.measure import Attempt, Outcome
from pyattacker.report import attack_markdown, attack_text, clock_text
from pyattacker.report._workers import workers_line

PLAN = AttackPlan.build(["http://127.0.0.1:9/"], OpenModel(rate=50), duration=6.0)
TARGET = PLAN.resolved_targets()[0].id
GRID = 1 / 1024  # times on a binary grid: shifting them by whole seconds is exact
ORIGIN = 50.0


@settings(max_examples=50, deadline=None)
@given(
    offset=st.floats(-5.0, 5.0),
    trips=st.lists(st.tuples(st.floats(0.0, 0.01), st.floats(0.0, 0.01)), min_size=1, max_size=9),
)
def test_a_measured_offset_is_within_half_the_shortest_round_trip_of_the_true_one(
    offset: float, trips: list[tuple[float, float]]
) -> None:
    now = [1000.0]
    ways = iter(trips)

    def driver() -> float:
        return now[0]

    def ask() -> float:  # the way out, the actor's reading, the way back
        out, back = next(ways)
        now[0] += out
        theirs = now[0] + offset
        now[0] += back
        return theirs

    measured = measure_offset(ask, driver, trips=len(trips))
    assert measured.uncertainty_s == pytest.approx(min(o + b for o, b in trips) / 2, abs=1e-9)
    assert abs(measured.offset_s - offset) <= measured.uncertainty_s + 1e-9


def _tally(origin: float) -> Tally:
    return Tally(origin=origin, window=0.5, late_after=0.01, per_target=True, on_record=None)


def _times(shift: float) -> RunTimes:
    return RunTimes(started_at=1.7e9, start=ORIGIN + shift, schedule_end=ORIGIN + shift + 6,
                    end=ORIGIN + shift + 7, last_offset=5.9)  # fmt: skip


@settings(max_examples=30, deadline=None)
@given(
    found=st.lists(
        st.tuples(
            st.integers(0, 2), st.integers(0, 6 * 1024 - 1), st.integers(0, 600), st.booleans()
        ),
        max_size=60,
    ),
    shifts=st.lists(st.integers(-10_000, 10_000), min_size=3, max_size=3),
)
def test_workers_on_different_clocks_merge_into_the_report_of_one_tally(
    found: list[tuple[int, int, int, bool]], shifts: list[int]
) -> None:
    whole = _tally(ORIGIN)
    parts = [_tally(ORIGIN + shift) for shift in shifts]  # each machine's monotonic clock
    for n, (worker, at, took, ok) in enumerate(found):
        for into, shift in ((whole, 0), (parts[worker], shifts[worker])):
            scheduled = ORIGIN + shift + at * GRID
            attempt = Attempt(n, 1, scheduled=scheduled, sent=scheduled, first_byte=None,
                              end=scheduled + took * GRID, status=200 if ok else 500,
                              resource=TARGET)  # fmt: skip
            attempt.outcome = Outcome.OK if ok else Outcome.FAILED
            into.arrival(scheduled, 1)
            into.finished([attempt])
    outcomes = [
        WorkerOutcome(
            index=w,
            tally=t,
            times=_times(shifts[w]),
            decisions={},
            stop_reason=None,
            loop_lag=None,
            cpu_s=0.0,
            final=True,
        )
        for w, t in enumerate(parts)
    ]
    outcomes = pickle.loads(pickle.dumps(outcomes))  # as they come from the actors
    merged = merge_outcomes(PLAN, [on_common_clock(o) for o in outcomes])
    whole.rebase(0.0)
    common = RunTimes(started_at=1.7e9, start=0.0, schedule_end=6.0, end=7.0, last_offset=5.9)
    expected = AttackResult.build(PLAN, whole, common, decisions={}, stop_reason=None,
                                  loop_lag=None)  # fmt: skip
    assert merged.total.latency.to_dict() == whole.total.latency.to_dict()  # bucket by bucket
    got, want = merged.to_dict(), expected.to_dict()
    got.pop("workers"), got.pop("cpu"), want.pop("cpu")
    assert got == want


def test_a_warmup_span_counted_on_different_clocks_merges_into_one_tallys_warmup() -> None:
    warmup = Warmup(seconds=1.0)
    plan = AttackPlan.build(["http://127.0.0.1:9/"], OpenModel(rate=50), duration=6.0,
                            warmup=warmup)  # fmt: skip
    shifts = [0.0, -3.5, 7.25]  # each machine's monotonic clock; worker 0's is the driver's

    def tally(shift: float) -> WarmupTally:
        return WarmupTally(warmup, origin=ORIGIN + shift, window=0.5, late_after=0.01,
                           per_target=False, on_record=None)  # fmt: skip

    def outcome(index: int, counted: Tally, shift: float) -> WorkerOutcome:
        return WorkerOutcome(index=index, tally=counted, times=_times(shift), decisions={},
                             stop_reason=None, loop_lag=None, cpu_s=0.0, final=True)  # fmt: skip

    whole, parts = tally(0.0), [tally(shift) for shift in shifts]
    for n in range(24):  # arrival n at n / 4 s, on worker n mod 3: the first 4 are warm
        for into, shift in ((whole, 0.0), (parts[n % 3], shifts[n % 3])):
            scheduled = ORIGIN + shift + n / 4
            attempt = Attempt(n, 1, scheduled=scheduled, sent=scheduled, end=scheduled + 0.25,
                              status=200, resource=TARGET)  # fmt: skip
            attempt.outcome = Outcome.OK
            into.arrival(scheduled, 1)
            into.finished([attempt])
    outcomes = [outcome(w, t, shifts[w]) for w, t in enumerate(parts)]
    outcomes = pickle.loads(pickle.dumps(outcomes))  # as they come from the actors
    merged = merge_outcomes(plan, [on_common_clock(o) for o in outcomes])
    one = merge_outcomes(plan, [on_common_clock(outcome(0, whole, 0.0))])
    assert one.warmup is not None
    assert (one.warmup.scheduled, one.warmup.skipped_s) == (4, 1.0)
    assert merged.warmup == one.warmup
    assert merged.total.latency.to_dict() == one.total.latency.to_dict()


def test_a_ray_worker_is_reported_with_its_node_and_clock_offset_a_local_one_without() -> None:
    outcomes = [
        WorkerOutcome(index=w, tally=_tally(ORIGIN), times=_times(0), decisions={},
                      stop_reason=None, loop_lag=None, cpu_s=0.0, final=True)
        for w in range(2)
    ]  # fmt: skip
    merged = merge_outcomes(PLAN, [on_common_clock(o) for o in outcomes], per_worker=True)
    node = "9f3c1a2b" + "0" * 48  # Ray's node ids: 56 hex digits
    merged.workers[1] = replace(merged.workers[1], node_id=node, node_ip="10.0.0.7",
                                clock_offset_s=0.0015, clock_uncertainty_s=0.0002)  # fmt: skip
    local, on_ray = merged.to_dict()["workers"]["each"]
    assert not {"node_id", "node_ip", "clock_offset_s"} & set(local)
    assert (on_ray["node_id"], on_ray["node_ip"]) == (node, "10.0.0.7")
    assert (on_ray["clock_offset_s"], on_ray["clock_uncertainty_s"]) == (0.0015, 0.0002)
    first, second = worker_lines(merged, every=True)
    assert "node" not in first
    assert "clock offset" not in first
    assert second.endswith("; node 10.0.0.7 (id 9f3c1a2b), clock offset +1.500ms ±0.200ms")


def test_every_report_of_ray_workers_states_their_clock_offsets_and_how_exact_they_are() -> None:
    # Without --per-worker too: the text and Markdown reports' lead, and the JSON's section.
    outcomes = [
        WorkerOutcome(index=w, tally=_tally(ORIGIN), times=_times(0), decisions={},
                      stop_reason=None, loop_lag=None, cpu_s=0.0, final=True)
        for w in range(2)
    ]  # fmt: skip
    merged = merge_outcomes(PLAN, [on_common_clock(o) for o in outcomes])
    local = merged.to_dict()
    assert workers_line(local) == "Workers: 2 processes on this machine, their figures merged"
    for w, (offset, within) in enumerate(((-0.0004, 0.0002), (0.0015, 0.0004))):
        merged.workers[w] = replace(merged.workers[w], node_id="0" * 56, node_ip="10.0.0.7",
                                    clock_offset_s=offset, clock_uncertainty_s=within)  # fmt: skip
    data = merged.to_dict()
    section = data["workers"]
    assert "each" not in section
    assert (section["clock_offset_min_s"], section["clock_offset_max_s"]) == (-0.0004, 0.0015)
    assert section["clock_uncertainty_s"] == 0.0004
    line = ("Workers: 2 on Ray, their figures merged; clock offsets from this machine "
            "-0.400ms to +1.500ms, each within ±0.400ms: the common start instant is no more "
            "exact than that")  # fmt: skip
    assert workers_line(data) == line
    assert line in attack_text(merged)
    assert f"- {line}" in attack_markdown(merged)
    assert "offsets from this machine +1.000ms, each" in clock_text(0.001, 0.001, 0.0)
