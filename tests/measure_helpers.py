"""Attempts and request records for the tests of the aggregates, built by hand or drawn by
hypothesis (imported as ``measure_helpers``)."""

from __future__ import annotations

from hypothesis import strategies as st

from pyattacker.errors import ErrorClass
from pyattacker.measure import Attempt, Outcome, RequestRecord, RequestStats

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
