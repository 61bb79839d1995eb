"""Timing records: what an attempt and a request derive from their timestamps."""

from __future__ import annotations

import json

import pytest

from pyattacker.errors import ErrorClass
from pyattacker.measure import (
    LLM_SAMPLE_COLUMNS,
    SAMPLE_COLUMNS,
    Attempt,
    Outcome,
    RequestRecord,
)


def ok_attempt(request: int = 0, attempt: int = 1, at: float = 100.0) -> Attempt:
    """An OK attempt scheduled at ``at``: acquired +1 ms, sent +2, first byte +5, end +9."""
    return Attempt(
        request,
        attempt,
        scheduled=at,
        acquired=at + 0.001,
        sent=at + 0.002,
        first_byte=at + 0.005,
        end=at + 0.009,
        outcome=Outcome.OK,
        status=200,
        resource="k1",
        bytes_sent=100,
        bytes_received=250,
    )


def test_an_attempt_derives_each_span_from_two_timestamps() -> None:
    attempt = ok_attempt(at=10.0)
    assert attempt.wait == pytest.approx(0.001)
    assert attempt.dispatch_delay == pytest.approx(0.002)
    assert attempt.ttfb == pytest.approx(0.003)
    assert attempt.service_time == pytest.approx(0.007)
    assert attempt.latency == pytest.approx(0.009)
    assert attempt.ttft is None


def test_an_attempt_span_is_none_when_a_timestamp_it_needs_is_missing() -> None:
    attempt = Attempt(3, 1, scheduled=1.0, end=2.0)
    assert (attempt.wait, attempt.dispatch_delay, attempt.service_time, attempt.ttfb) == (
        None,
        None,
        None,
        None,
    )
    assert attempt.latency == 1.0


def test_an_attempt_row_is_json_and_copies_its_lists() -> None:
    attempt = ok_attempt()
    attempt.token_times = [1.0, 2.0]
    attempt.usage = {"tokens": 3.0}
    row = attempt.to_dict()
    assert json.loads(json.dumps(row)) == row
    assert row["outcome"] == "ok"
    assert row["service_time"] == attempt.service_time
    row["token_times"].append(3.0)
    row["usage"]["tokens"] = 0.0
    assert attempt.token_times == [1.0, 2.0]
    assert attempt.usage == {"tokens": 3.0}


def test_a_retried_request_spans_from_the_first_scheduled_to_the_last_end() -> None:
    refused = Attempt(
        7,
        1,
        scheduled=100.0,
        sent=100.5,
        first_byte=100.7,
        end=100.8,
        outcome=Outcome.THROTTLED,
        status=429,
        error_class=ErrorClass.RATE_LIMIT,
        retry_after=1.0,
        resource="k0",
    )
    record = RequestRecord.from_attempts([refused, ok_attempt(request=7, attempt=2, at=102.0)])
    assert record.scheduled == 100.0
    assert record.sent == 100.5
    assert record.end == pytest.approx(102.009)
    assert record.latency == pytest.approx(2.009)
    assert record.service_time == pytest.approx(1.509)
    assert record.dispatch_delay == 0.5
    assert record.ttfb_scheduled == pytest.approx(2.005)
    assert record.ttfb_sent == pytest.approx(1.505)
    assert (record.outcome, record.status, record.error_class, record.resource) == (
        Outcome.OK,
        200,
        None,
        "k1",
    )
    assert (record.n_attempts, record.retried, record.throttled) == (2, True, True)


def test_a_dropped_request_has_no_latency_no_service_time_and_no_dispatch_delay() -> None:
    dropped = Attempt(4, 1, scheduled=5.0, end=5.0, outcome=Outcome.DROPPED)
    record = RequestRecord.from_attempts([dropped])
    assert (record.sent, record.latency, record.service_time, record.dispatch_delay) == (
        None,
        None,
        None,
        None,
    )
    assert not record.answered


def test_a_request_cancelled_after_sending_has_a_dispatch_delay_but_no_latency() -> None:
    cancelled = Attempt(1, 1, scheduled=5.0, sent=5.25, end=6.0, outcome=Outcome.CANCELLED)
    record = RequestRecord.from_attempts([cancelled])
    assert record.dispatch_delay == 0.25
    assert (record.latency, record.service_time) == (None, None)


def test_dispatch_delay_is_sent_minus_scheduled_of_a_single_attempt() -> None:
    record = RequestRecord.from_attempts([ok_attempt(at=50.0)])
    assert record.dispatch_delay == pytest.approx(0.002)
    assert record.latency == pytest.approx(record.dispatch_delay + record.service_time)


def test_a_failure_before_sending_still_has_a_latency_and_the_retry_gives_the_send_time() -> None:
    refused = Attempt(
        2, 1, scheduled=1.0, end=1.5, outcome=Outcome.FAILED, error_class=ErrorClass.CONNECTION
    )
    alone = RequestRecord.from_attempts([refused])
    assert (alone.latency, alone.sent, alone.service_time) == (0.5, None, None)
    retried = RequestRecord.from_attempts([refused, ok_attempt(request=2, attempt=2, at=3.0)])
    assert retried.sent == pytest.approx(3.002)
    assert retried.dispatch_delay == pytest.approx(2.002)


@pytest.mark.parametrize(
    ("attempts", "match"),
    [
        ([], "at least one"),
        ([ok_attempt(request=1), ok_attempt(request=2, attempt=2)], "mixed"),
        ([ok_attempt(attempt=2), ok_attempt(attempt=1)], "not in order"),
        ([ok_attempt(attempt=1), ok_attempt(attempt=1)], "not in order"),
    ],
)
def test_a_request_record_refuses_no_attempts_mixed_requests_and_disorder(
    attempts: list[Attempt], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        RequestRecord.from_attempts(attempts)


def test_a_request_record_built_directly_is_checked_too() -> None:
    with pytest.raises(ValueError, match="no attempts"):
        RequestRecord(0, ())
    with pytest.raises(ValueError, match="mixed"):
        RequestRecord(9, (ok_attempt(request=0),))


def test_a_request_row_is_flat_json_with_the_documented_keys() -> None:
    row = RequestRecord.from_attempts([ok_attempt()]).to_dict()
    assert json.loads(json.dumps(row)) == row
    assert set(row) >= {
        "request", "scheduled", "sent", "end", "latency", "service_time", "dispatch_delay",
        "outcome", "status", "error_class", "resource", "attempts", "throttled",
    }  # fmt: skip
    assert all(not isinstance(value, list | dict) for value in row.values())
    assert (row["outcome"], row["attempts"], row["throttled"]) == ("ok", 1, False)
    assert tuple(row) == SAMPLE_COLUMNS


def retried_stream() -> RequestRecord:
    """Refused at 10 (sent 10.25, Retry-After 1 s), then streamed: scheduled 11.5, sent
    11.75, first token 12.25, two more chunks, 300 + 20 tokens, headers and a request id."""
    refused = Attempt(
        4, 1, scheduled=10.0, sent=10.25, end=10.5, outcome=Outcome.THROTTLED, status=429,
        retry_after=1.0, headers={"retry-after": "1", "x-request-id": "req-refused"},
    )  # fmt: skip
    answer = Attempt(
        4, 2, scheduled=11.5, sent=11.75, first_byte=11.875, first_token=12.25,
        token_times=[12.5, 12.75], end=13.0, outcome=Outcome.OK, status=200,
        usage={"prompt_tokens": 300.0, "completion_tokens": 20.0, "total_tokens": 320.0},
        headers={
            "x-ratelimit-remaining-requests": "7",
            "azure-openai-deployment-utilization": "42.5%",
            "x-request-id": "req-served",
        },
    )  # fmt: skip
    return RequestRecord.from_attempts([refused, answer])


def test_an_llm_row_adds_the_last_attempts_stream_tokens_id_and_headers() -> None:
    row = retried_stream().to_dict(llm=True)
    assert tuple(row) == LLM_SAMPLE_COLUMNS
    assert {k: row[k] for k in LLM_SAMPLE_COLUMNS[len(SAMPLE_COLUMNS) :]} == {
        "first_token": 12.25,
        "ttft": 0.5,  # 12.25 - 11.75: the last attempt's own, as the server saw it
        "ttft_scheduled": 2.25,  # 12.25 - 10.0: what the user waited, refusal included
        "chunks": 3,
        "prompt_tokens": 300,
        "completion_tokens": 20,
        "request_id": "req-served",
        "retry_after": None,  # the last attempt was not asked to wait
        "rate_limit_headers": {
            "x-ratelimit-remaining-requests": "7",
            "azure-openai-deployment-utilization": "42.5%",
        },
    }
    assert json.loads(json.dumps(row)) == row
    assert retried_stream().to_dict() == {k: row[k] for k in SAMPLE_COLUMNS}


def test_an_llm_row_of_a_refusal_or_a_plain_answer_says_none_where_there_is_no_fact() -> None:
    refusal = RequestRecord.from_attempts([retried_stream().attempts[0]]).to_dict(llm=True)
    assert (refusal["first_token"], refusal["ttft"], refusal["chunks"]) == (None, None, None)
    assert (refusal["prompt_tokens"], refusal["completion_tokens"]) == (None, None)
    assert (refusal["request_id"], refusal["retry_after"]) == ("req-refused", 1.0)
    assert refusal["rate_limit_headers"] == {"retry-after": "1"}
    plain = RequestRecord.from_attempts([ok_attempt()]).to_dict(llm=True)
    assert all(plain[k] is None for k in LLM_SAMPLE_COLUMNS[len(SAMPLE_COLUMNS) :])


def test_an_llm_row_counts_no_chunk_for_a_stream_that_broke_before_its_first_token() -> None:
    broken = Attempt(0, 1, scheduled=1.0, sent=1.5, end=2.0, token_times=[])
    row = RequestRecord.from_attempts([broken]).to_dict(llm=True)
    assert (row["chunks"], row["first_token"]) == (0, None)


@pytest.mark.parametrize(
    ("status", "error_class", "outcome"),
    [
        (200, None, Outcome.OK),
        (304, None, Outcome.OK),
        (429, None, Outcome.THROTTLED),
        (425, None, Outcome.THROTTLED),
        (None, ErrorClass.RATE_LIMIT, Outcome.THROTTLED),
        (503, "rate_limit", Outcome.THROTTLED),
        (404, None, Outcome.FAILED),
        (500, ErrorClass.UPSTREAM, Outcome.FAILED),
        (None, ErrorClass.TIMEOUT, Outcome.FAILED),
        (None, None, Outcome.FAILED),
        (200, ErrorClass.INVALID, Outcome.FAILED),
    ],
)
def test_outcome_of_a_status_and_error_class_follows_the_documented_rule(
    status: int | None, error_class: str | None, outcome: Outcome
) -> None:
    assert Outcome.of(status, error_class) is outcome


def test_outcomes_are_their_string_values() -> None:
    assert [str(o) for o in Outcome] == ["ok", "failed", "throttled", "dropped", "cancelled"]


def test_an_attempts_first_four_fields_by_position_are_request_attempt_scheduled_acquired() -> None:
    # The engine builds its attempts positionally on the hot path: a reordering of the
    # fields must fail here, not skew every record.
    assert Attempt(7, 2, 10.0, 10.5) == Attempt(request=7, attempt=2, scheduled=10.0, acquired=10.5)
