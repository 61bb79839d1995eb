"""Aggregates of request records: ``RequestStats`` and fixed ``WindowSeries``."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.errors import ConfigError, ErrorClass
from pyattacker.measure import (
    ANSWERED,
    Attempt,
    Histogram,
    Outcome,
    RequestRecord,
    RequestStats,
    Summary,
    WindowSeries,
    add_ok_answers,
    is_plain_ok,
)

ORIGIN = 1000.0


def attempt(
    request: int,
    n: int,
    at: float,
    outcome: Outcome,
    *,
    sent: float | None = 0.001,
    end: float | None = 0.010,
    status: int | None = None,
    error_class: str | None = None,
    first_token: float | None = None,
    token_times: list[float] | None = None,
    usage: dict[str, float] | None = None,
    headers: dict[str, str] | None = None,
) -> Attempt:
    """An attempt scheduled at ``at`` with ``sent``, first byte, ``end`` and (LLM) first
    token and token times as offsets."""
    return Attempt(
        request,
        n,
        scheduled=at,
        sent=None if sent is None else at + sent,
        first_byte=None if end is None else at + end / 2,
        first_token=None if first_token is None else at + first_token,
        token_times=None if token_times is None else [at + t for t in token_times],
        end=None if end is None else at + end,
        outcome=outcome,
        status=status,
        error_class=error_class,
        usage=usage,
        headers=headers,
        bytes_sent=10,
        bytes_received=20,
    )


def record(*attempts: Attempt) -> RequestRecord:
    return RequestRecord.from_attempts(attempts)


def mixed_records() -> list[RequestRecord]:
    """ok; throttled then ok; failed 500; dropped; cancelled after sending."""
    at = ORIGIN
    return [
        record(attempt(0, 1, at, Outcome.OK, status=200)),
        record(
            attempt(1, 1, at + 0.5, Outcome.THROTTLED, status=429, error_class="rate_limit"),
            attempt(1, 2, at + 2.0, Outcome.OK, status=200),
        ),
        record(attempt(2, 1, at + 1.0, Outcome.FAILED, status=500, error_class="upstream")),
        record(attempt(3, 1, at + 1.5, Outcome.DROPPED, sent=None, end=None)),
        record(attempt(4, 1, at + 2.5, Outcome.CANCELLED, end=None)),
    ]


def stats_of(records: list[RequestRecord]) -> RequestStats:
    stats = RequestStats()
    for rec in records:
        stats.add(rec)
    return stats


# --- RequestStats ---------------------------------------------------------------------


def test_request_stats_count_outcomes_statuses_attempts_and_throttling() -> None:
    stats = stats_of(mixed_records())
    assert (stats.requests, stats.attempts) == (5, 6)
    assert stats.by_outcome == Counter(ok=2, failed=1, dropped=1, cancelled=1)
    assert stats.by_status == Counter({200: 2, 500: 1})
    assert stats.by_error_class == Counter(upstream=1)
    assert stats.attempts_per_request == Counter({1: 4, 2: 1})
    assert (stats.throttled_requests, stats.throttled_attempts) == (1, 1)
    assert (stats.bytes_sent, stats.bytes_received) == (60, 120)


def test_a_request_refused_twice_is_one_throttled_request_of_two_throttled_attempts() -> None:
    refused = [
        attempt(0, n, ORIGIN + n, Outcome.THROTTLED, status=429, error_class="rate_limit")
        for n in (1, 2)
    ]
    stats = stats_of([record(*refused, attempt(0, 3, ORIGIN + 3, Outcome.OK, status=200))])
    assert (stats.throttled_requests, stats.throttled_attempts) == (1, 2)
    assert stats.by_outcome == Counter(ok=1)


def test_latency_holds_ok_failed_and_throttled_requests_and_latency_ok_only_the_ok() -> None:
    records = mixed_records()
    stats = stats_of(records)
    retried = records[1]
    assert stats.latency.count == 3
    assert stats.latency_ok.count == 2
    assert stats.latency.max == retried.latency  # the retried one spans both attempts
    assert stats.service_time.count == stats.ttfb.count == 3
    assert stats.service_time.max == retried.service_time
    assert stats.ttfb.max == retried.ttfb_sent


def test_dispatch_delay_holds_every_sent_request_and_attempt_service_every_answered_try() -> None:
    stats = stats_of(mixed_records())
    assert stats.dispatch_delay.count == 4  # all but the dropped one
    assert stats.attempt_service_time.count == 4  # ok, refused try, its retry, failed
    assert stats.attempt_service_time.max == pytest.approx(0.009)


def test_sent_attempts_count_the_attempts_a_server_could_have_seen_and_no_other() -> None:
    stats = stats_of(mixed_records())
    # ok (1), throttled + ok (2), failed (1), dropped (never sent), cancelled after sending
    assert (stats.attempts, stats.sent_attempts) == (6, 5)
    never_sent_first = record(
        attempt(9, 1, ORIGIN, Outcome.FAILED, sent=None, end=0.002, error_class="connect"),
        attempt(9, 2, ORIGIN + 1.0, Outcome.OK, status=200),
    )
    stats = stats_of([never_sent_first])
    assert (stats.attempts, stats.sent_attempts) == (2, 1)
    assert stats.to_dict()["sent_attempts"] == 1


def test_a_request_sent_before_its_scheduled_time_counts_as_early_with_zero_delay() -> None:
    early = record(attempt(0, 1, ORIGIN, Outcome.OK, sent=-0.0002, end=-0.0001, status=200))
    stats = stats_of([early])
    assert stats.early_sends == 1
    assert (stats.dispatch_delay.max, stats.latency.max) == (0.0, 0.0)
    assert early.dispatch_delay == pytest.approx(-0.0002)  # the record keeps the fact


def test_empty_stats_round_trip_and_say_so() -> None:
    stats = RequestStats()
    assert RequestStats.from_dict(json.loads(json.dumps(stats.to_dict()))) == stats
    assert stats.latency.summary() == Summary.empty()
    assert repr(stats) == "RequestStats(requests=0, empty, Histogram(count=0))"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("requests", -1),
        ("attempts", 1.5),
        ("by_status", {"ok": 1}),
        ("by_outcome", {"ok": -2}),
        ("by_outcome", [1, 2]),
        ("latency_ok", {"version": 9}),
    ],
)
def test_request_stats_from_dict_refuses_bad_data(key: str, value: object) -> None:
    data = stats_of(mixed_records()).to_dict()
    data[key] = value
    with pytest.raises(ValueError, match="not request stats"):
        RequestStats.from_dict(data)


USAGES = st.none() | st.fixed_dictionaries(
    {"prompt_tokens": st.integers(0, 900).map(float)},
    optional={"completion_tokens": st.sampled_from([0.0, 1.0, 2.0, 7.0, 2.5, -1.0])},
)
UTILISATION = st.none() | st.fixed_dictionaries(
    {"azure-openai-deployment-utilization": st.sampled_from(["12.5%", "100%", " 7 % ", "n/a"])}
)


@st.composite
def request_records(draw: st.DrawFn, request: int) -> RequestRecord:
    """Any plausible request: 1-3 attempts, any outcomes, missing timestamps, early sends;
    some streamed (first token, chunks in any order, usage) and some with headers."""
    at = ORIGIN + draw(st.floats(0.0, 20.0))
    attempts = []
    for n in range(1, draw(st.integers(1, 3)) + 1):
        outcome = draw(st.sampled_from(Outcome))
        sent = None if outcome is Outcome.DROPPED else draw(st.none() | st.floats(-0.001, 2.0))
        end = draw(st.none() | st.floats(0.0, 3.0))
        if sent is not None and end is not None:
            end = max(end, sent)
        status = draw(st.sampled_from([None, 200, 404, 429, 500]))
        error_class = draw(st.sampled_from([None, *ErrorClass]))
        first = chunks = None
        if sent is not None and draw(st.booleans()):
            first = sent + draw(st.floats(-0.001, 1.0))
            chunks = [first + t for t in draw(st.lists(st.floats(-0.01, 0.5), max_size=4))]
        llm = {"usage": draw(USAGES), "headers": draw(UTILISATION)}
        attempts.append(
            attempt(
                request,
                n,
                at,
                outcome,
                sent=sent,
                end=end,
                status=status,
                error_class=error_class,
                first_token=first,
                token_times=chunks,
                **llm,
            )
        )
        at += (end or 0.0) + draw(st.floats(0.0, 1.0))
    return record(*attempts)


@st.composite
def tagged_records(draw: st.DrawFn) -> list[tuple[RequestRecord, int]]:
    n = draw(st.integers(0, 12))
    return [(draw(request_records(i)), draw(st.integers(0, 2))) for i in range(n)]


@given(tagged_records())
def test_merging_request_stats_of_any_split_equals_adding_every_record(
    tagged: list[tuple[RequestRecord, int]],
) -> None:
    merged = RequestStats()
    for part in range(3):
        merged.merge(stats_of([rec for rec, p in tagged if p == part]))
    whole = stats_of([rec for rec, _ in tagged])
    assert merged == whole
    assert merged.latency.summary() == whole.latency.summary()


def histogram_of(spans: Iterable[float | None]) -> Histogram:
    hist = Histogram()
    for span in spans:
        if span is not None:
            hist.record(max(0.0, span))
    return hist


@given(tagged_records())
def test_request_stats_hold_exactly_the_spans_the_records_derive(
    tagged: list[tuple[RequestRecord, int]],
) -> None:
    records = [rec for rec, _ in tagged]
    stats = stats_of(records)
    assert stats.latency == histogram_of(r.latency for r in records)
    assert stats.latency_ok == histogram_of(r.latency for r in records if r.outcome == "ok")
    assert stats.service_time == histogram_of(r.service_time for r in records)
    assert stats.ttfb == histogram_of(r.ttfb_sent for r in records if r.answered)
    assert stats.dispatch_delay == histogram_of(r.dispatch_delay for r in records)
    assert stats.attempt_service_time == histogram_of(
        a.service_time for r in records for a in r.attempts if a.outcome in ANSWERED
    )
    assert stats.early_sends == sum((r.dispatch_delay or 0.0) < 0 for r in records)
    assert stats.sent_attempts == sum(a.sent is not None for r in records for a in r.attempts)
    assert stats.throttled_requests == sum(r.throttled for r in records)
    assert stats.by_status == Counter(r.status for r in records if r.status is not None)


def streams(records: list[RequestRecord]) -> list[tuple[RequestRecord, float]]:
    """The streamed requests (answered, last attempt with a first token) and that token."""
    return [
        (r, r.last.first_token) for r in records if r.answered and r.last.first_token is not None
    ]


def tokens(value: float | None, default: int) -> int:
    return default if value is None or value < 0 else round(value)


def utilisation(a: Attempt) -> float | None:
    text = (a.headers or {}).get("azure-openai-deployment-utilization", "n/a")
    return None if text == "n/a" else float(text.strip().rstrip("%"))


@given(tagged_records())
def test_request_stats_hold_exactly_the_llm_figures_the_definitions_give(
    tagged: list[tuple[RequestRecord, int]],
) -> None:
    records = [rec for rec, _ in tagged]
    stats = stats_of(records)
    streamed = streams(records)
    ok_streams = [(r, first) for r, first in streamed if r.outcome is Outcome.OK]
    assert stats.ttft == histogram_of(first - r.sent for r, first in streamed if r.sent)
    assert stats.ttft_scheduled == histogram_of(first - r.scheduled for r, first in streamed)
    assert stats.failed_after_first_token == len(streamed) - len(ok_streams)
    # End to end: every OK answer, streamed or whole body (a first token or a usage).
    ok_answers = [
        r
        for r in records
        if r.answered
        and r.outcome is Outcome.OK
        and (r.last.first_token is not None or r.last.usage is not None)
    ]
    assert stats.e2e == histogram_of(r.service_time for r in ok_answers if r.sent is not None)
    assert stats.e2e_scheduled == histogram_of(r.latency for r in ok_answers)
    chunks = [[first, *(r.last.token_times or [])] for r, first in ok_streams]
    assert stats.itl == histogram_of(b - a for times in chunks for a, b in pairwise(times))
    expected_tpot = []
    for r, first in ok_streams:
        n = 1 + len(r.last.token_times or [])
        n = tokens((r.last.usage or {}).get("completion_tokens"), n)
        if n >= 2:
            expected_tpot.append(max(0.0, r.end - first) / (n - 1))  # type: ignore[operator]
    assert stats.tpot == histogram_of(expected_tpot)
    # Tokens count for every answered OK request, streamed or not (a whole-body answer).
    ok = [
        r.last.usage
        for r in records
        if r.answered and r.outcome == "ok" and r.last.usage is not None
    ]
    assert stats.usage_requests == len(ok)
    assert stats.prompt_tokens == sum(tokens(u.get("prompt_tokens"), 0) for u in ok)
    assert stats.completion_tokens == sum(tokens(u.get("completion_tokens"), 0) for u in ok)
    read = [a for r in records for a in r.attempts if a.outcome is Outcome.THROTTLED]
    with_llm_answer = [
        r
        for r in records
        if r.answered and (r.last.first_token is not None or r.last.usage is not None)
    ]
    read += [r.last for r in with_llm_answer if r.outcome is not Outcome.THROTTLED]
    assert stats.utilisation == histogram_of(utilisation(a) for a in read)


@given(tagged_records())
def test_request_stats_round_trip_exactly_through_json(
    tagged: list[tuple[RequestRecord, int]],
) -> None:
    stats = stats_of([rec for rec, _ in tagged])
    again = RequestStats.from_dict(json.loads(json.dumps(stats.to_dict())))
    assert again == stats
    assert again.by_status == stats.by_status


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
