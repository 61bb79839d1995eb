"""Closed windows are frozen: a long series' memory grows with its windows, not its records."""

from __future__ import annotations

import random
import tracemalloc

from hypothesis import given
from hypothesis import strategies as st

from pyattacker.measure import Attempt, Histogram, Outcome, WindowSeries, exact_percentile

ORIGIN = 1000.0


def ok(n: int, end: float, latency: float) -> Attempt:
    """An OK answer that ended at ``end`` (so it counts in that window), ``latency`` long."""
    at = end - latency
    attempt = Attempt(n, 1, scheduled=at, sent=at, first_byte=end, end=end)
    attempt.outcome, attempt.status = Outcome.OK, 200
    return attempt


def feed(
    series: WindowSeries, windows: int, per_window: int, seed: int = 1, first: int = 1
) -> list[float]:
    """``per_window`` OK answers ending in each of ``windows`` windows from ``first``,
    latencies log-uniform over 100 µs .. 1 s."""
    rng = random.Random(seed)
    latencies = []
    n = 0
    for w in range(first, first + windows):
        for i in range(per_window):
            end = ORIGIN + w + i / per_window
            latency = 10 ** rng.uniform(-4, 0)
            series.add_attempt(ok(n, end, latency))
            series.note_sent(end - latency)
            latencies.append(latency)
            n += 1
    return latencies


def test_a_long_series_keeps_a_bounded_number_of_buckets_whatever_the_request_count() -> None:
    series = WindowSeries(1.0, ORIGIN)
    feed(series, 100, 2000)
    # 100 µs .. 1 s spans 15 octaves: closed windows keep at most 32 buckets an octave in
    # each of two histograms; the 5 newest keep up to a fine bucket a value (2,000).
    assert series.stored_buckets() <= 95 * 2 * (15 * 32 + 2) + 5 * 2 * 2000
    fine = Histogram()  # what each of them kept before: nearly a bucket a value
    for v in feed(WindowSeries(1.0, ORIGIN), 1, 2000):
        fine.record(v)
    assert len(fine.buckets()) > 1800


def test_memory_per_record_of_a_long_series_is_a_few_bytes_not_eighty() -> None:
    series = WindowSeries(1.0, ORIGIN)
    tracemalloc.start()  # before the warm-up: so that what it frees later counts too
    try:
        feed(series, 5, 2000)  # warm up: the live windows are full
        before = tracemalloc.get_traced_memory()[0]
        feed(series, 60, 2000, seed=2, first=6)
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    grown = after - before
    # 120,000 records over 60 windows, spread over 15 octaves: a window touches nearly a
    # fine bucket a value, ~140 bytes a record kept before; frozen, a window keeps two
    # histograms of <= 480 buckets at 6 bytes, and its counts
    assert grown / 120_000 < 10, f"{grown} bytes for 120,000 records"


def test_a_closed_window_keeps_its_counts_exactly_and_its_percentiles_within_1_6_percent() -> None:
    series = WindowSeries(1.0, ORIGIN)
    latencies = feed(series, 10, 2000)
    first = series.windows()[1]
    exact = sorted(latencies[:2000])
    assert (first.ok, first.completed) == (2000, 2000)
    assert first.latency.count == 2000
    # (the latencies the series saw are end - scheduled: the same values, to a rounding)
    assert abs(first.latency.min - exact[0]) < 1e-12  # type: ignore[operator]
    assert abs(first.latency.max - exact[-1]) < 1e-12  # type: ignore[operator]
    assert abs(first.latency.mean - sum(exact) / 2000) < 1e-12  # type: ignore[operator]
    for q, got in ((50, first.latency.p50), (99, first.latency.p99), (99.9, first.latency.p999)):
        truth = exact_percentile(exact, q)
        assert abs(got - truth) <= truth / 64 + 1e-8, (q, got, truth)  # type: ignore[operator]


def test_a_late_record_for_a_closed_window_is_counted_in_it() -> None:
    series = WindowSeries(1.0, ORIGIN)
    feed(series, 10, 50)
    series.add_attempt(ok(10_000, ORIGIN + 1.5, 0.25))  # ends in window 1, long closed
    assert series.windows()[1].ok == 51
    assert series.windows()[1].latency.count == 51


def test_a_series_with_closed_windows_survives_to_dict_and_merge() -> None:
    series = WindowSeries(1.0, ORIGIN)
    feed(series, 12, 300)
    restored = WindowSeries.from_dict(series.to_dict())
    assert restored.windows() == series.windows()
    merged = WindowSeries(1.0, ORIGIN)
    merged.merge(series)
    merged.merge(series)
    assert [w.ok for w in merged.windows()] == [0] + [600] * 12


values = st.lists(st.floats(0.0, 10.0), min_size=1, max_size=60)


@given(values, values, st.booleans())
def test_reading_a_window_does_not_depend_on_when_it_was_closed(
    early: list[float], late: list[float], close_early: bool
) -> None:
    # Window 20 gets `early`, is closed (or not) by a newer window, then gets `late`.
    end = ORIGIN + 20.5
    series = WindowSeries(1.0, ORIGIN)
    for i, v in enumerate(early):
        series.add_attempt(ok(i, end, v))
    if close_early:
        series.note_arrival(ORIGIN + 50.0, 1)
    for i, v in enumerate(late):
        series.add_attempt(ok(1000 + i, end, v))
    series.note_arrival(ORIGIN + 50.0, 1)
    reference = WindowSeries(1.0, ORIGIN)
    for i, v in enumerate(early + late):
        reference.add_attempt(ok(i, end, v))
    reference.note_arrival(ORIGIN + 50.0, 1)
    assert series.windows()[20] == reference.windows()[20]
    assert series.windows()[20].latency.count == len(early) + len(late)
