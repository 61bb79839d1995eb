"""The percentile definition and the log-linear histogram of ``pyattacker.measure``."""

from __future__ import annotations

import ast
import json
import math
import random
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pyattacker.measure as measure
from pyattacker.measure import (
    PERCENTILES,
    Histogram,
    Summary,
    _histogram,
    exact_percentile,
    nearest_rank,
    record_all,
)

QS = (0.0, *PERCENTILES, 100.0)
in_range = st.floats(min_value=0.0, max_value=Histogram.TOP, exclude_max=True)
from_1us = st.floats(min_value=1e-6, max_value=Histogram.TOP, exclude_max=True)
# Percentiles as people write them: 0, 0.1, ..., 100.0 (one decimal).
decimal_qs = st.integers(0, 1000).map(lambda tenths: tenths / 10)


def histogram_of(values: list[float]) -> Histogram:
    hist = Histogram()
    for value in values:
        hist.record(value)
    return hist


def bound(exact: float) -> float:
    """The documented error bound, with room for float rounding of the answer (~1e-16)."""
    return max(2.0**-31, exact / 2048) * (1 + 1e-9)


# --- the percentile definition -------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([1, 2, 3, 4], 0, 1),
        ([1, 2, 3, 4], 25, 1),
        ([1, 2, 3, 4], 25.1, 2),
        ([1, 2, 3, 4], 50, 2),
        ([1, 2, 3, 4], 75, 3),
        ([1, 2, 3, 4], 76, 4),
        ([1, 2, 3, 4], 100, 4),
        ([7], 0, 7),
        ([7], 99.9, 7),
        ([10, 20, 30, 40, 50, 60, 70, 80, 90, 100], 90, 90),
        ([10, 20, 30, 40, 50, 60, 70, 80, 90, 100], 90.5, 100),
        ([10, 20, 30, 40, 50, 60, 70, 80, 90, 100], 9.9, 10),
    ],
)
def test_exact_percentile_is_the_nearest_rank_on_hand_worked_lists(
    values: list[float], q: float, expected: float
) -> None:
    assert exact_percentile(values, q) == expected


def test_p99_9_of_a_thousand_samples_is_the_999th_although_float_math_says_1000th() -> None:
    values = list(range(1, 1001))
    assert math.ceil(99.9 / 100 * 1000) == 1000  # the trap the rank computation avoids
    assert exact_percentile(values, 99.9) == 999
    assert nearest_rank(99.9, 1000) == 999
    assert exact_percentile(values, 99.99) == 1000
    assert nearest_rank(0.1, 1000) == 1


@pytest.mark.parametrize("q", [-0.1, 100.1, math.nan, math.inf, True, "50"])
def test_a_percentile_outside_0_to_100_or_not_a_number_is_refused(q: object) -> None:
    with pytest.raises(ValueError, match="percentile"):
        exact_percentile([1.0, 2.0], q)  # type: ignore[arg-type]


def test_a_percentile_of_no_samples_is_refused() -> None:
    with pytest.raises(ValueError, match="no samples"):
        exact_percentile([], 50)


@given(st.lists(st.integers(0, 50), min_size=1, max_size=60), decimal_qs)
def test_exact_percentile_is_the_smallest_sample_with_at_least_q_percent_at_or_below(
    values: list[int], q: float
) -> None:
    ordered = sorted(values)
    wanted = Fraction(str(q)) / 100 * len(ordered)
    expected = min(x for x in ordered if sum(v <= x for v in ordered) >= wanted)
    assert exact_percentile(ordered, q) == expected


# --- histogram: accuracy ---------------------------------------------------------------


@given(st.lists(in_range, min_size=1, max_size=200))
def test_every_percentile_is_within_the_documented_bound_of_the_exact_one(
    values: list[float],
) -> None:
    hist = histogram_of(values)
    ordered = sorted(values)
    for q, got in hist.percentiles(QS).items():
        exact = exact_percentile(ordered, q)
        assert abs(got - exact) <= bound(exact), (q, got, exact)


@given(st.lists(from_1us, min_size=1, max_size=200), decimal_qs)
def test_every_percentile_of_samples_from_1us_is_within_0_1_percent_of_the_exact_one(
    values: list[float], q: float
) -> None:
    hist = histogram_of(values)
    ordered = sorted(values)
    for quantile in (*QS, q):
        exact = exact_percentile(ordered, quantile)
        assert abs(hist.percentile(quantile) - exact) <= 0.001 * exact


def test_percentiles_of_a_large_lognormal_sample_are_within_the_bound() -> None:
    rng = random.Random(5)
    values = [rng.lognormvariate(-4, 1.5) for _ in range(50_000)]
    hist = histogram_of(values)
    ordered = sorted(values)
    for q in (*QS, 99.99, 12.5):
        exact = exact_percentile(ordered, q)
        assert abs(hist.percentile(q) - exact) <= bound(exact)


@given(in_range)
def test_a_single_sample_is_every_percentile_exactly(value: float) -> None:
    hist = histogram_of([value])
    assert set(hist.percentiles(QS).values()) == {value}
    assert hist.min == hist.max == value


@given(st.lists(in_range, min_size=1, max_size=100))
def test_p0_is_the_exact_min_and_p100_the_exact_max(values: list[float]) -> None:
    hist = histogram_of(values)
    assert hist.percentile(0) == hist.min == min(values)
    assert hist.percentile(100) == hist.max == max(values)


@given(st.lists(in_range, min_size=1, max_size=100))
def test_total_and_mean_are_the_sum_of_the_samples_to_2_pow_minus_60_each(
    values: list[float],
) -> None:
    hist = histogram_of(values)
    exact = math.fsum(values)
    slack = len(values) * 2.0**-60 + exact * 2.0**-52
    assert abs(hist.total - exact) <= slack
    assert hist.mean is not None
    assert abs(hist.mean - exact / len(values)) <= slack / len(values) + 2.0**-60


@given(st.lists(in_range, min_size=1, max_size=100))
def test_every_sample_lies_in_the_bucket_that_counts_it(values: list[float]) -> None:
    buckets = histogram_of(values).buckets()
    assert sum(count for _, _, count in buckets) == len(values)
    for value in values:
        assert sum(low <= value < high for low, high, _ in buckets) == 1


def test_values_above_the_top_share_the_top_bucket_but_max_stays_exact() -> None:
    hist = histogram_of([1.0, Histogram.TOP * 3, 1e300])
    assert hist.max == 1e300
    assert hist.percentile(100) == 1e300
    assert len(hist.to_dict()["buckets"]) == 2
    assert Histogram.from_dict(hist.to_dict()) == hist


@given(st.lists(st.floats(min_value=0.0, max_value=1e300), max_size=50))
def test_memory_is_bounded_by_the_fixed_bucket_count_whatever_is_recorded(
    values: list[float],
) -> None:
    hist = histogram_of(values)
    indexes = [index for index, _ in hist.to_dict()["buckets"]]
    assert all(0 <= index < 38_912 for index in indexes)


# --- histogram: merging, equality, serialisation -------------------------------------


@given(st.lists(st.tuples(in_range, st.integers(0, 3)), max_size=200))
def test_merging_any_split_of_samples_equals_recording_them_all(
    tagged: list[tuple[float, int]],
) -> None:
    parts = [histogram_of([v for v, part in tagged if part == p]) for p in range(4)]
    merged = Histogram()
    for part in parts:
        merged.merge(part)
    whole = histogram_of([v for v, _ in tagged])
    assert merged == whole
    assert merged.summary() == whole.summary()
    assert merged.total == whole.total


@given(st.lists(st.floats(min_value=0.0, max_value=1e300), max_size=100))
def test_to_dict_and_from_dict_round_trip_exactly_through_json(values: list[float]) -> None:
    hist = histogram_of(values)
    again = Histogram.from_dict(json.loads(json.dumps(hist.to_dict())))
    assert again == hist
    assert again.summary() == hist.summary()


@given(in_range, st.integers(1, 1000))
def test_recording_with_a_count_equals_recording_that_many_times(value: float, n: int) -> None:
    once = Histogram()
    once.record(value, count=n)
    assert once == histogram_of([value] * n)


def _corrupt(data: dict[str, object], key: str, value: object) -> dict[str, object]:
    return {**data, key: value}


GOOD = histogram_of([0.001, 0.002, 0.5]).to_dict()


@pytest.mark.parametrize(
    "data",
    [
        _corrupt(GOOD, "version", 2),
        _corrupt(GOOD, "count", 4),
        _corrupt(GOOD, "count", -3),
        _corrupt(GOOD, "min", 0.4),
        _corrupt(GOOD, "max", 0.001),
        _corrupt(GOOD, "min", -1.0),
        _corrupt(GOOD, "max", math.inf),
        _corrupt(GOOD, "sum", 0),
        _corrupt(GOOD, "sum", "many"),
        _corrupt(GOOD, "buckets", list(reversed(GOOD["buckets"]))),
        _corrupt(GOOD, "buckets", [[38_912, 3]]),
        _corrupt(GOOD, "buckets", [[i, 0] for i, _ in GOOD["buckets"]]),
        _corrupt(GOOD, "buckets", [[i, True] for i, _ in GOOD["buckets"]]),
        _corrupt(GOOD, "buckets", [[1, 2, 3]]),
        {k: v for k, v in GOOD.items() if k != "sum"},
        {**Histogram().to_dict(), "min": 0.0},
        "not a mapping",
    ],
)
def test_from_dict_refuses_data_that_is_not_a_consistent_histogram(data: object) -> None:
    with pytest.raises(ValueError, match="not a histogram"):
        Histogram.from_dict(data)  # type: ignore[arg-type]


# --- histogram: input checks, empty, repr ---------------------------------------------


@pytest.mark.parametrize(
    ("value", "count"),
    [(-1e-9, 1), (math.nan, 1), (math.inf, 1), (-math.inf, 1), (1.0, 0), (1.0, 1.5), (1.0, -2)],
)
def test_bad_values_and_counts_are_refused_and_change_nothing(value: float, count: int) -> None:
    hist = histogram_of([0.25])
    before = Histogram.from_dict(hist.to_dict())
    with pytest.raises(ValueError, match="must be"):
        hist.record(value, count)
    assert hist == before


def test_an_empty_histogram_has_no_extremes_no_percentiles_and_an_empty_summary() -> None:
    hist = Histogram()
    assert (hist.count, len(hist), hist.total) == (0, 0, 0.0)
    assert (hist.min, hist.max, hist.mean) == (None, None, None)
    assert hist.summary() == Summary.empty()
    assert repr(hist) == "Histogram(count=0)"
    with pytest.raises(ValueError, match="empty"):
        hist.percentile(50)


def test_reset_empties_the_histogram_and_copy_is_independent() -> None:
    hist = histogram_of([0.1, 0.2])
    twin = hist.copy()
    hist.reset()
    assert hist == Histogram()
    assert twin == histogram_of([0.1, 0.2])


def test_repr_tells_count_p50_p99_and_max() -> None:
    hist = histogram_of([0.001] * 98 + [0.25, 0.5])
    assert repr(hist) == "Histogram(count=100, p50=1ms, p99=250ms, max=500ms)"


def test_histograms_compare_by_content_and_never_equal_other_types() -> None:
    assert histogram_of([0.1]) == histogram_of([0.1])
    assert histogram_of([0.1]) != histogram_of([0.1, 0.1])
    assert histogram_of([0.1]) != 0.1


def test_summary_to_dict_names_the_percentiles_as_reports_print_them() -> None:
    summary = histogram_of([0.002]).summary()
    assert list(summary.to_dict()) == [
        "count", "min", "mean", "p50", "p90", "p95", "p99", "p99.9", "max",
    ]  # fmt: skip
    assert set(summary.to_dict().values()) == {1, 0.002}
    assert Summary.of_values([3.0, 1.0, 2.0]).p50 == 2.0


# --- record_all -----------------------------------------------------------------------


@given(st.lists(in_range, max_size=80), st.lists(in_range, max_size=20))
def test_recording_many_at_once_equals_recording_each(
    before: list[float], batch: list[float]
) -> None:
    one_by_one, at_once = histogram_of(before), histogram_of(before)
    for value in batch:
        one_by_one.record(value)
    record_all(batch, at_once)
    assert at_once == one_by_one
    assert at_once.to_dict() == one_by_one.to_dict()


@given(st.lists(st.floats(min_value=0.0, max_value=1e300), max_size=30))
def test_recording_many_values_above_the_top_equals_recording_each(values: list[float]) -> None:
    one_by_one, at_once = Histogram(), Histogram()
    for value in values:
        one_by_one.record(value)
    record_all(values, at_once)
    assert at_once == one_by_one


@pytest.mark.parametrize("bad", [-0.001, math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("where", [0, 1, 2])
def test_recording_many_with_one_bad_value_raises_and_records_none(bad: float, where: int) -> None:
    values = [0.001, 0.002, 0.003]
    values[where] = bad
    hist = histogram_of([0.5])
    with pytest.raises(ValueError, match="finite and >= 0"):
        record_all(values, hist)
    assert hist == histogram_of([0.5])


@given(st.lists(in_range, max_size=40), st.integers(1, 4))
def test_recording_values_into_several_histograms_equals_recording_each_into_each(
    values: list[float], how_many: int
) -> None:
    at_once = [histogram_of([0.25 * n]) for n in range(how_many)]
    one_by_one = [histogram_of([0.25 * n]) for n in range(how_many)]
    record_all(values, *at_once)
    for hist in one_by_one:
        for value in values:
            hist.record(value)
    assert at_once == one_by_one


@given(st.dictionaries(st.integers(0, 50), st.integers(1, 5)), st.lists(st.integers(0, 60)))
def test_the_python_fallback_counts_bucket_indexes_as_the_c_helper_does(
    counts: dict[int, int], indexes: list[int]
) -> None:
    in_c, in_python = dict(counts), dict(counts)
    _histogram._count_elements(in_c, indexes)
    _histogram._count_in_python(in_python, indexes)
    assert (
        in_c
        == in_python
        == {i: counts.get(i, 0) + indexes.count(i) for i in set(counts) | set(indexes)}
    )


# --- the package ----------------------------------------------------------------------


def test_measure_exports_exactly_its_public_names_in_sorted_order() -> None:
    # ruff's RUF022 order: CONSTANTS, then Classes, then functions, each alphabetical.
    def kind(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert measure.__all__ == sorted(measure.__all__, key=kind)
    for name in measure.__all__:
        assert hasattr(measure, name), name
    assert {name for name in vars(measure) if not name.startswith("_")} == set(measure.__all__)


def test_measure_imports_nothing_from_pyattacker_but_errors_and_checks() -> None:
    allowed = {"pyattacker.errors", "pyattacker._checks"}
    for path in Path(measure.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pyattacker"):
                module = node.module or ""
                assert module in allowed or module.startswith("pyattacker.measure"), path
