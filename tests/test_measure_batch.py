"""The two ways a request is counted give the same figures: alone, or in an ``OkBatch``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.measure import (
    Attempt,
    Binned,
    Histogram,
    OkBatch,
    Outcome,
    RequestRecord,
    RequestStats,
    WindowSeries,
    plain_row,
    row_attempt,
)

ORIGIN = 100.0


@st.composite
def plain_ok_answers(draw: st.DrawFn) -> list[Attempt]:
    """Plain OK answers over many 0.5 s windows (so batches cross windows and old windows
    freeze): early sends, zero spans, answers in one read or not, no status sometimes."""
    answers = []
    for n in range(draw(st.integers(0, 120))):
        at = ORIGIN + draw(st.floats(0.001, 6.0))
        sent = at + draw(st.floats(-0.001, 0.3))
        end = sent + draw(st.floats(0.0, 1.5))
        first_byte = draw(st.sampled_from([end, None, sent + (end - sent) / 2]))
        answer = Attempt(n, 1, scheduled=at, sent=sent, first_byte=first_byte, end=end)
        answer.outcome = Outcome.OK
        answer.status = draw(st.sampled_from([None, 200, 204]))
        answer.error_class = draw(st.sampled_from([None, "upstream"]))
        answer.bytes_sent, answer.bytes_received = (
            draw(st.integers(0, 99)),
            draw(st.integers(0, 99)),
        )
        answer.name = draw(st.sampled_from([None, "login"]))
        answers.append(answer)
    return answers


@given(plain_ok_answers(), st.lists(st.integers(1, 40), max_size=10))
def test_counting_plain_ok_answers_in_batches_of_any_split_equals_counting_each_alone(
    answers: list[Attempt], cuts: list[int]
) -> None:
    alone, batched = RequestStats(), RequestStats()
    alone_windows, batched_windows = WindowSeries(0.5, ORIGIN), WindowSeries(0.5, ORIGIN)
    for answer in answers:  # alone: as the record of the request it is
        record = RequestRecord.from_attempts([answer])
        alone.add(record)
        alone_windows.add(record)
        assert answer.sent is not None
        alone_windows.note_sent(answer.sent)
    start = 0
    for size in [*cuts, len(answers)]:  # in batches: the same answers, cut anywhere
        batch = OkBatch(answers[start : start + size])
        batched_windows.add_ok_batch(batch)
        batched.add_ok_batch(batch)
        start += size
    # Every count and every histogram bucket, in the totals and in every window.
    assert batched.to_dict() == alone.to_dict()
    assert batched_windows.to_dict() == alone_windows.to_dict()
    assert batched_windows.windows() == alone_windows.windows()


@given(plain_ok_answers())
def test_a_row_turns_back_into_the_attempt_it_was_read_from(answers: list[Attempt]) -> None:
    for answer in answers:
        again = row_attempt(plain_row(answer))
        assert again == answer


@given(st.lists(st.floats(0.0, 2e5, allow_nan=False), max_size=50))
def test_binned_values_record_into_a_histogram_as_each_recorded_alone(values: list[float]) -> None:
    alone, binned = Histogram(), Histogram()
    for value in values:
        alone.record(value)
    binned.add_binned(Binned(values))
    assert binned == alone


@given(st.lists(st.sampled_from([0.0, 0.001, 1.5, 131_071.9, 131_072.0, 2e5, 1e12]), max_size=8))
def test_a_batch_with_spans_at_or_past_the_histograms_top_counts_as_each_alone(
    spans: list[float],
) -> None:
    answers = []
    for n, span in enumerate(spans):
        answer = Attempt(n, 1, scheduled=ORIGIN, sent=ORIGIN + span / 2, end=ORIGIN + span)
        answer.first_byte, answer.outcome, answer.status = answer.end, Outcome.OK, 200
        answers.append(answer)
    alone, batched = RequestStats(), RequestStats()
    for answer in answers:
        alone.add(RequestRecord.from_attempts([answer]))
    batched.add_ok_batch(OkBatch(answers))
    assert batched.to_dict() == alone.to_dict()


def test_a_batch_refuses_a_span_too_large_for_its_arithmetic_so_that_each_is_counted_alone() -> (
    None
):
    huge = Attempt(0, 1, scheduled=-1e300, sent=0.0, end=1e300)
    huge.first_byte, huge.outcome, huge.status = huge.end, Outcome.OK, 200
    with pytest.raises(ValueError, match="count these alone"):
        OkBatch([huge])
    alone = RequestStats()
    alone.add(RequestRecord.from_attempts([huge]))  # alone, it is counted at the top
    assert alone.latency_ok.count == 1
