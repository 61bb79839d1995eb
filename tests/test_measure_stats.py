"""``RequestStats``, the aggregate of request records: counts, spans, LLM figures, merging
and JSON."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from itertools import pairwise

import pytest
from hypothesis import given

from measure_helpers import ORIGIN, attempt, mixed_records, record, stats_of, tagged_records
from pyattacker.measure import (
    ANSWERED,
    Attempt,
    Histogram,
    Outcome,
    RequestRecord,
    RequestStats,
    Summary,
)

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
