"""Fixed ``WindowSeries``, and requests added to stats and windows by their attempt or in
batches."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from measure_helpers import ORIGIN, attempt, mixed_records, record, stats_of, tagged_records
from pyattacker.errors import ConfigError, ErrorClass
from pyattacker.measure import (
    Attempt,
    Outcome,
    RequestRecord,
    RequestStats,
    Summary,
    WindowSeries,
    add_ok_answers,
    is_plain_ok,
)

# --- WindowSeries ---------------------------------------------------------------------


@pytest.mark.parametrize("width", [0, -1.0, math.nan, math.inf, "1s", True])
def test_a_window_width_that_is_not_a_positive_number_is_a_config_error(width: object) -> None:
    with pytest.raises(ConfigError) as caught:
        WindowSeries(width, ORIGIN)  # type: ignore[arg-type]
    assert caught.value.field == "window"


def test_records_count_in_the_window_of_their_end_or_else_their_scheduled_time() -> None:
    series = WindowSeries(1.0, ORIGIN)
    for rec in mixed_records():
        series.add(rec)
    windows = series.windows()
    assert [w.index for w in windows] == [0, 1, 2]
    assert [w.start for w in windows] == [0.0, 1.0, 2.0]
    assert [(w.ok, w.failed, w.throttled, w.completed) for w in windows] == [
        (1, 0, 0, 1),
        (0, 1, 0, 1),
        (1, 0, 0, 1),
    ]
    assert [(w.dropped, w.cancelled) for w in windows] == [(0, 0), (1, 0), (0, 1)]
    assert windows[2].latency.max == mixed_records()[1].latency
    assert windows[2].service_time.count == 1


def test_windows_are_dense_from_zero_with_empty_windows_included() -> None:
    series = WindowSeries(0.5, ORIGIN)
    series.note_arrival(ORIGIN + 1.6, 0)
    windows = series.windows()
    assert [w.index for w in windows] == [0, 1, 2, 3]
    assert [w.scheduled for w in windows] == [0, 0, 0, 1]
    assert windows[0].latency == Summary.empty()
    assert windows[0].to_dict()["latency"]["p99.9"] is None
    assert WindowSeries(1.0, ORIGIN).windows() == []


def test_notes_count_arrivals_and_sends_and_keep_the_largest_in_flight() -> None:
    series = WindowSeries(1.0, ORIGIN)
    for t, n in ((ORIGIN, 3), (ORIGIN + 0.4, 7), (ORIGIN + 0.6, 5), (ORIGIN + 1.2, 4)):
        series.note_arrival(t, n)
    series.note_sent(ORIGIN + 0.9)
    first, second = series.windows()
    assert (first.scheduled, first.sent, first.max_in_flight) == (3, 1, 7)
    # 3 arrived in the first window and none ended: 3 in flight when the second began,
    # fewer than at its arrival.
    assert (second.scheduled, second.sent, second.max_in_flight) == (1, 0, 4)


def test_a_window_with_no_arrival_shows_what_was_still_in_flight_when_it_began() -> None:
    series = WindowSeries(1.0, ORIGIN)
    for n, t in enumerate((0.1, 0.2, 0.3)):  # three arrive, each counting itself
        series.note_arrival(ORIGIN + t, n + 1)
    series.add(record(attempt(0, 1, ORIGIN + 0.1, Outcome.OK, end=0.5)))  # ends in window 0
    series.add(record(attempt(1, 1, ORIGIN + 0.2, Outcome.OK, end=1.5)))  # ends in window 1
    series.add(record(attempt(2, 1, ORIGIN + 0.3, Outcome.OK, end=3.5)))  # a long stream
    windows = series.windows()
    assert [w.scheduled for w in windows] == [3, 0, 0, 0]
    assert [w.max_in_flight for w in windows] == [3, 2, 1, 1]


def test_dropped_and_cancelled_requests_are_not_carried_as_in_flight() -> None:
    series = WindowSeries(1.0, ORIGIN)
    series.note_arrival(ORIGIN, 1)
    series.note_arrival(ORIGIN + 0.5, 1)  # dropped: noted with the count it did not join
    series.add(record(attempt(1, 1, ORIGIN + 0.5, Outcome.DROPPED, sent=None, end=None)))
    series.add(record(attempt(0, 1, ORIGIN, Outcome.CANCELLED, sent=None, end=None)))
    series.note_arrival(ORIGIN + 1.5, 1)
    assert [w.max_in_flight for w in series.windows()] == [1, 1]


@pytest.mark.parametrize(("t", "match"), [(ORIGIN - 0.001, "before"), (math.nan, "finite")])
def test_a_time_before_the_origin_or_not_finite_is_refused(t: float, match: str) -> None:
    series = WindowSeries(1.0, ORIGIN)
    with pytest.raises(ValueError, match=match):
        series.note_sent(t)
    assert series.windows() == []


def test_merging_series_of_other_width_or_origin_is_refused() -> None:
    series = WindowSeries(1.0, ORIGIN)
    for other in (WindowSeries(2.0, ORIGIN), WindowSeries(1.0, ORIGIN + 1)):
        with pytest.raises(ValueError, match="cannot merge"):
            series.merge(other)


def test_a_window_row_is_json_with_summaries_by_clock() -> None:
    series = WindowSeries(1.0, ORIGIN)
    series.add(mixed_records()[0])
    row = series.windows()[0].to_dict()
    assert json.loads(json.dumps(row)) == row
    assert row["completed"] == row["ok"] == 1
    assert row["latency"]["count"] == row["service_time"]["count"] == 1


@st.composite
def window_events(draw: st.DrawFn) -> list[tuple[str, object, int]]:
    """Records and notes, each tagged with the part (worker) that saw it."""
    events: list[tuple[str, object, int]] = []
    for i, (rec, part) in enumerate(draw(tagged_records())):
        events.append(("record", rec, part))
        t = ORIGIN + draw(st.floats(0.0, 20.0))
        kind = draw(st.sampled_from(["scheduled", "sent", "in_flight"]))
        events.append((kind, (t, i % 7), draw(st.integers(0, 2))))
    return events


def series_of(events: list[tuple[str, object, int]], part: int | None = None) -> WindowSeries:
    series = WindowSeries(0.75, ORIGIN)
    for kind, what, p in events:
        if part is not None and p != part:
            continue
        if isinstance(what, RequestRecord):
            series.add(what)
        else:
            t, n = what  # type: ignore[misc]
            if kind == "sent":
                series.note_sent(t)
            else:
                series.note_arrival(t, n)
    return series


@given(window_events())
def test_merging_window_series_of_any_split_equals_adding_everything(
    events: list[tuple[str, object, int]],
) -> None:
    merged = WindowSeries(0.75, ORIGIN)
    for part in range(3):
        merged.merge(series_of(events, part))
    whole = series_of(events)
    assert merged == whole
    assert merged.windows() == whole.windows()


@given(window_events())
def test_window_series_round_trip_exactly_through_json(
    events: list[tuple[str, object, int]],
) -> None:
    series = series_of(events)
    again = WindowSeries.from_dict(json.loads(json.dumps(series.to_dict())))
    assert again == series
    assert again.windows() == series.windows()


@pytest.mark.parametrize(
    "change",
    [
        {"width": 0},
        {"windows": [{"index": -1}]},
        {"windows": "none"},
    ],
)
def test_window_series_from_dict_refuses_bad_data(change: dict[str, object]) -> None:
    series = WindowSeries(1.0, ORIGIN)
    series.add(mixed_records()[0])
    with pytest.raises(ValueError, match="not a window series"):
        WindowSeries.from_dict({**series.to_dict(), **change})


def test_a_window_listed_twice_is_refused() -> None:
    series = WindowSeries(1.0, ORIGIN)
    series.note_sent(ORIGIN)
    data = series.to_dict()
    data["windows"] = data["windows"] * 2
    with pytest.raises(ValueError, match="twice"):
        WindowSeries.from_dict(data)


def test_a_window_summarises_its_records_like_request_stats_do() -> None:
    series = WindowSeries(1.0, ORIGIN)
    records = mixed_records()[:2]
    for rec in records:
        series.add(rec)
    stats = stats_of(records)
    assert series.windows()[2].latency == stats_of(records[1:]).latency.summary()
    assert series.windows()[0].service_time == stats_of(records[:1]).service_time.summary()
    assert stats.latency.count == sum(w.latency.count for w in series.windows())


@given(tagged_records())
def test_adding_a_one_attempt_request_by_its_attempt_equals_adding_its_record(
    tagged: list[tuple[RequestRecord, int]],
) -> None:
    singles = [rec for rec, _ in tagged if len(rec.attempts) == 1]
    by_record, by_attempt = RequestStats(), RequestStats()
    windows_by_record, windows_by_attempt = WindowSeries(1.0, 0.0), WindowSeries(1.0, 0.0)
    for rec in singles:
        by_record.add(rec)
        by_attempt.add_attempt(rec.attempts[0])
        windows_by_record.add(rec)
        windows_by_attempt.add_attempt(rec.attempts[0])
    assert by_attempt == by_record
    assert windows_by_attempt.windows() == windows_by_record.windows()


@st.composite
def plain_ok_attempts(draw: st.DrawFn) -> list[Attempt]:
    """One-attempt OK answers with no LLM figures, as the load path counts them in
    batches: early sends, zero spans, no first byte or status sometimes."""
    found = []
    one_read = draw(st.booleans())  # each answer whole in one read: first byte = end
    for n in range(draw(st.integers(0, 40))):
        at = ORIGIN + draw(st.floats(0.001, 5.0))  # an early send stays after the origin
        sent = at + draw(st.floats(-0.001, 1.0))
        end = sent + draw(st.floats(0.0, 2.0))
        first_byte = end if one_read else draw(st.none() | st.floats(sent - 0.001, end))
        found.append(
            Attempt(
                n,
                1,
                scheduled=at,
                sent=sent,
                first_byte=first_byte,
                end=end,
                outcome=Outcome.OK,
                status=draw(st.sampled_from([None, 200, 204])),
                error_class=draw(st.sampled_from([None, ErrorClass.UPSTREAM.value])),
                bytes_sent=draw(st.integers(0, 100)),
                bytes_received=draw(st.integers(0, 100)),
            )
        )
    return found


@given(tagged_records(), plain_ok_attempts(), st.booleans())
def test_adding_plain_ok_answers_in_one_batch_equals_adding_each_by_its_attempt(
    tagged: list[tuple[RequestRecord, int]], batch: list[Attempt], with_windows: bool
) -> None:
    assert all(is_plain_ok(a) for a in batch)
    each, at_once = stats_of([r for r, _ in tagged]), stats_of([r for r, _ in tagged])
    each_windows, windows_at_once = WindowSeries(0.75, ORIGIN), WindowSeries(0.75, ORIGIN)
    for a in batch:
        each.add_attempt(a)
        each_windows.add_attempt(a)
        assert a.sent is not None
        each_windows.note_sent(a.sent)
    add_ok_answers(batch, at_once, windows_at_once if with_windows else None)
    assert at_once == each
    assert at_once.to_dict() == each.to_dict()
    if with_windows:  # a batch across a window's end too (0.75 s windows, 5 s of answers)
        assert windows_at_once.windows() == each_windows.windows()


@pytest.mark.parametrize(
    ("field", "value", "match", "with_windows"),
    [
        ("end", ORIGIN - 2.0, "before the series origin", True),
        ("sent", ORIGIN - 1.0, "before the series origin", True),
        ("end", math.nan, "finite", True),
        ("sent", math.inf, "finite", True),
        ("end", math.inf, "end time must be finite", False),
        ("first_byte", math.nan, "first_byte time must be finite", False),
        ("scheduled", -math.inf, "scheduled time must be finite", True),
    ],
)
def test_a_batch_with_a_time_before_the_origin_or_not_finite_is_refused_and_counts_none(
    field: str, value: float, match: str, with_windows: bool
) -> None:
    good = attempt(0, 1, ORIGIN + 1.0, Outcome.OK, status=200)
    bad = attempt(1, 1, ORIGIN + 0.5, Outcome.OK, status=200)
    setattr(bad, field, value)
    stats, series = RequestStats(), WindowSeries(1.0, ORIGIN)
    with pytest.raises(ValueError, match=match):
        add_ok_answers([good, bad], stats, series if with_windows else None)
    assert series.windows() == []
    assert stats == RequestStats()


@pytest.mark.parametrize(
    ("change", "plain"),
    [
        ({}, True),
        ({"outcome": Outcome.FAILED}, False),
        ({"sent": None}, False),
        ({"end": None}, False),
        ({"first_token": ORIGIN + 0.002}, False),
        ({"usage": {"completion_tokens": 3.0}}, False),
    ],
)
def test_a_plain_ok_answer_is_ok_sent_and_ended_with_no_llm_figures(
    change: dict[str, object], plain: bool
) -> None:
    a = attempt(0, 1, ORIGIN, Outcome.OK, status=200)
    for name, value in change.items():
        setattr(a, name, value)
    assert is_plain_ok(a) is plain


@given(tagged_records())
def test_windows_hold_each_throttled_attempt_where_it_ended_and_each_ok_stream_once(
    tagged: list[tuple[RequestRecord, int]],
) -> None:
    records = [rec for rec, _ in tagged]
    series = WindowSeries(1.0, ORIGIN)
    for rec in records:
        series.add(rec)
    windows = series.windows()
    refused = Counter(
        series.index_of(a.scheduled if a.end is None else a.end)
        for r in records
        for a in r.attempts
        if a.outcome is Outcome.THROTTLED
    )
    assert {w.index: w.throttled_attempts for w in windows if w.throttled_attempts} == refused
    stats = stats_of(records)
    assert sum(refused.values()) == stats.throttled_attempts
    assert sum(w.e2e_scheduled.count for w in windows) == stats.e2e_scheduled.count
    assert sum(w.ttft.count for w in windows) == stats.ttft.count


def test_each_window_counts_its_requests_by_last_status_and_keeps_them_when_frozen() -> None:
    def ended(n: int, at: float, status: int, outcome: Outcome, attempt: int = 1) -> Attempt:
        return Attempt(
            n, attempt, scheduled=at, sent=at, first_byte=at + 0.1, end=at + 0.1,
            outcome=outcome, status=status,
        )  # fmt: skip

    series = WindowSeries(1.0, 0.0, live=1)  # every window but the newest is frozen
    series.add_attempt(ended(0, 0.2, 200, Outcome.OK))
    series.add_attempt(ended(1, 0.4, 500, Outcome.FAILED))
    retried = RequestRecord.from_attempts(
        [ended(2, 0.5, 429, Outcome.THROTTLED), ended(2, 1.5, 200, Outcome.OK, attempt=2)]
    )
    series.add(retried)  # counted once, by its last status, where it ended
    series.add_attempt(ended(3, 2.5, 503, Outcome.FAILED))
    first, second, third = series.windows()
    assert first.statuses == {200: 1, 500: 1}
    assert second.statuses == {200: 1}
    assert third.statuses == {503: 1}
    assert series.to_dict()["windows"][0]["statuses"] == {"200": 1, "500": 1}
    assert WindowSeries.from_dict(series.to_dict()) == series
