"""Plain answers counted in numpy batches equal the same answers counted one by one.

The batch path (``measure._batch``, used by the attack's ``Tally``) is an optimisation
only: every histogram bucket, sum, minimum, maximum, counter and window must come out
*identical*, for any values, including the edges of the histogram's layout.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.attack._tally import BATCH, Tally
from pyattacker.measure import Attempt, Histogram, Outcome, RequestStats, WindowSeries
from pyattacker.measure._batch import (
    PlainAnswers,
    add_to_stats,
    add_to_windows,
    is_plain,
    record_array,
)

ORIGIN = 1000.0
# Durations across the histogram's whole layout: sub-unit, the linear part (below 2048
# units of 2**-30 s), bucket edges, seconds, and values near the top.
durations = st.one_of(
    st.floats(min_value=0.0, max_value=Histogram.TOP, exclude_max=True),
    st.floats(min_value=0.0, max_value=1e-5),
    st.integers(min_value=0, max_value=2**47 - 1).map(lambda u: u * 2.0**-30),
    st.sampled_from([0.0, 2047 * 2.0**-30, 2048 * 2.0**-30, 4095 * 2.0**-30, 1.0, 3600.0]),
)


@given(st.lists(durations, max_size=300))
def test_record_array_leaves_the_histogram_recording_each_value_leaves(
    values: list[float],
) -> None:
    one_by_one, batched = Histogram(), Histogram()
    for value in values:
        one_by_one.record(value)
    record_array(batched, np.array(values, dtype=np.float64))
    assert batched == one_by_one
    assert batched.to_dict() == one_by_one.to_dict()


def test_record_array_puts_values_above_the_top_in_the_top_bucket_as_record_does() -> None:
    values = [1.0, Histogram.TOP, Histogram.TOP * 4, 1e300]
    one_by_one, batched = Histogram(), Histogram()
    for value in values:
        one_by_one.record(value)
    record_array(batched, np.array(values))
    assert batched == one_by_one
    assert batched.max == 1e300


@pytest.mark.parametrize("bad", [-1e-9, float("nan"), float("inf")])
def test_record_array_refuses_what_record_refuses(bad: float) -> None:
    with pytest.raises(ValueError, match="finite and >= 0"):
        record_array(Histogram(), np.array([0.5, bad]))


def test_record_array_sums_exactly_past_one_vector_chunk() -> None:
    values = np.full(70_000, 100_000.0)  # 2**16 values this large would overflow one int64
    one_by_one, batched = Histogram(), Histogram()
    one_by_one.record(100_000.0, count=70_000)
    record_array(batched, values)
    assert batched == one_by_one


@st.composite
def plain_attempts(draw: st.DrawFn) -> list[Attempt]:
    attempts = []
    for n in range(draw(st.integers(min_value=0, max_value=60))):
        scheduled = ORIGIN + draw(st.floats(min_value=0.001, max_value=30.0))
        # sent may precede scheduled (an early timer), first byte may precede sent: the
        # spans clamp at 0, as the per-request code's do
        sent = scheduled + draw(st.floats(min_value=-0.001, max_value=2.0))
        first_byte = sent + draw(st.floats(min_value=-0.001, max_value=2.0))
        end = max(first_byte, sent) + draw(st.floats(min_value=0.0, max_value=2.0))
        attempt = Attempt(request=n, attempt=1, scheduled=scheduled)
        attempt.sent, attempt.first_byte, attempt.end = sent, first_byte, end
        attempt.status = draw(st.sampled_from([200, 201, 204, 302]))
        attempt.bytes_sent = draw(st.integers(min_value=0, max_value=500))
        attempt.bytes_received = draw(st.integers(min_value=0, max_value=500))
        attempt.outcome = Outcome.OK
        attempts.append(attempt)
    return attempts


@given(plain_attempts(), st.sampled_from([0.25, 1.0, 10.0]))
def test_a_batch_of_plain_answers_counts_exactly_as_adding_each(
    attempts: list[Attempt], width: float
) -> None:
    stats, series = RequestStats(), WindowSeries(width, ORIGIN)
    for attempt in attempts:
        assert is_plain(attempt)
        stats.add_attempt(attempt)
        series.add_attempt(attempt)
        assert attempt.sent is not None
        series.note_sent(attempt.sent)
    batch_stats, batch_series = RequestStats(), WindowSeries(width, ORIGIN)
    batch = PlainAnswers(attempts)
    add_to_windows(batch_series, batch)
    add_to_stats(batch_stats, batch)
    assert batch_stats == stats
    assert batch_stats.to_dict() == stats.to_dict()
    assert batch_series == series
    assert batch_series.windows() == series.windows()


def test_a_batch_with_a_time_before_the_origin_raises_and_adds_nothing() -> None:
    attempt = Attempt(request=0, attempt=1, scheduled=ORIGIN - 5, outcome=Outcome.OK)
    attempt.sent, attempt.first_byte, attempt.end, attempt.status = ORIGIN - 5, ORIGIN, ORIGIN, 200
    series = WindowSeries(1.0, ORIGIN)
    with pytest.raises(ValueError, match="before the series origin"):
        add_to_windows(series, PlainAnswers([attempt]))
    assert series == WindowSeries(1.0, ORIGIN)


def plain(n: int, at: float) -> Attempt:
    attempt = Attempt(request=n, attempt=1, scheduled=at, outcome=Outcome.OK)
    attempt.sent, attempt.first_byte, attempt.end, attempt.status = at, at + 0.001, at + 0.002, 200
    return attempt


@pytest.mark.parametrize(
    "change",
    [
        {"outcome": Outcome.FAILED},
        {"end": None},
        {"sent": None},
        {"first_byte": None},
        {"status": None},
        {"error": "boom"},
        {"error_class": "upstream"},
        {"first_token": ORIGIN + 0.001},
        {"usage": {"completion_tokens": 3}},
    ],
)
def test_only_ok_answers_with_every_timestamp_and_no_llm_data_are_plain(
    change: dict[str, object],
) -> None:
    attempt = plain(0, ORIGIN)
    assert is_plain(attempt)
    for name, value in change.items():
        setattr(attempt, name, value)
    assert not is_plain(attempt)


def test_a_tally_holding_plain_answers_shows_them_to_every_reader() -> None:
    def tally() -> Tally:
        return Tally(origin=ORIGIN, window=1.0, late_after=0.01, per_target=False, on_record=None)

    held, reference = tally(), tally()
    n = BATCH + 7  # one full batch counted on its own, seven still held
    for i in range(n):
        at = ORIGIN + i * 0.001
        held.finished([plain(i, at)])
        reference._one_attempt(plain(i, at))  # the per-request path
    assert len(held._plain) == 7
    assert (held.sent, held.late, held.last_sent) == (n, 0, reference.last_sent)
    assert held._plain == []  # reading counted the held ones
    assert held.total == reference.total
    assert held.windows == reference.windows


@pytest.mark.parametrize("field", ["end", "sent", "first_byte", "scheduled"])
def test_a_bad_time_is_counted_as_one_by_one_counting_would_and_loses_no_held_answer(
    field: str,
) -> None:
    def tally() -> Tally:
        return Tally(origin=ORIGIN, window=1.0, late_after=0.01, per_target=False, on_record=None)

    def feed(count: Callable[[Attempt], None]) -> str | None:
        """Five good answers, one with a NaN ``field``, five more; the error, if any."""
        error = None
        for i in range(11):
            attempt = plain(i, ORIGIN + i * 0.001)
            if i == 5:
                setattr(attempt, field, float("nan"))
            try:
                count(attempt)
            except ValueError as exc:
                error = str(exc)
        return error

    held, reference = tally(), tally()
    error = feed(lambda a: held.finished([a]))
    assert error == feed(reference._one_attempt)  # raised (or not) as before batching
    assert (error is not None) == (field in ("end", "sent"))  # a time no window holds
    assert held.total == reference.total  # ...and the held answers were all counted
    assert held.windows == reference.windows
    assert held.sent == reference.sent
