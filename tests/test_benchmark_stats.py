"""The pure statistics behind the benchmark report: aggregates, Student's t, paired
differences."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.benchmark._stats import (
    aggregate,
    on_shared_keys,
    paired_difference,
    t_quantile,
)

PROBABILITIES = st.floats(min_value=1e-9, max_value=1 - 1e-9)
DEGREES = st.one_of(st.integers(1, 60), st.integers(60, 200_000))


def t3_cdf(t: float) -> float:
    """Student's t CDF with three degrees of freedom, in closed form."""
    root3 = math.sqrt(3.0)
    return 0.5 + (t / (root3 * (1.0 + t * t / 3.0)) + math.atan(t / root3)) / math.pi


# -- aggregate ------------------------------------------------------------------------------


def test_an_aggregate_has_the_mean_range_and_sample_stdev_of_its_values() -> None:
    found = aggregate([2.0, 4.0, 9.0])
    assert found.n == 3
    assert found.mean == pytest.approx(5.0)
    assert (found.min, found.max) == (2.0, 9.0)
    assert found.stdev == pytest.approx(math.sqrt(13.0))  # (9 + 1 + 16) / (3 - 1)
    assert found.values == (2.0, 4.0, 9.0)


def test_one_value_has_no_spread_rather_than_a_spread_of_zero() -> None:
    found = aggregate([7.5])
    assert (found.n, found.mean, found.stdev) == (1, 7.5, None)


def test_an_aggregate_of_nothing_or_of_nan_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        aggregate([])
    with pytest.raises(ValueError, match="finite"):
        aggregate([1.0, math.nan])


# -- Student's t ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [
        (0.975, 1, 12.7062047),
        (0.975, 2, 4.30265273),
        (0.975, 3, 3.18244631),
        (0.975, 4, 2.77644511),
        (0.975, 29, 2.04522964),
        (0.975, 30, 2.04227246),
        (0.995, 10, 3.16927267),
        (0.95, 5, 2.01504837),
        (0.975, 1000, 1.96233908),
    ],
)
def test_t_quantile_matches_published_values(p: float, df: int, expected: float) -> None:
    assert t_quantile(p, df) == pytest.approx(expected, abs=5e-8)


def test_t_quantile_tends_to_the_normal_quantile_as_df_grows() -> None:
    normal = statistics.NormalDist().inv_cdf(0.975)
    assert normal == pytest.approx(1.95996398, abs=5e-9)
    assert t_quantile(0.975, 10**6) == pytest.approx(normal, abs=5e-6)
    assert t_quantile(0.975, 10**9) == pytest.approx(normal, abs=5e-9)


def test_t_quantile_is_continuous_where_it_switches_to_the_series() -> None:
    for p in (0.6, 0.975, 0.999999):
        assert t_quantile(p, 100_000) == pytest.approx(t_quantile(p, 100_001), rel=1e-8)


def test_the_median_of_t_is_zero() -> None:
    assert t_quantile(0.5, 7) == 0.0


@given(PROBABILITIES)
def test_the_general_solver_inverts_the_closed_form_cdf_at_three_degrees(p: float) -> None:
    assert t3_cdf(t_quantile(p, 3)) == pytest.approx(p, rel=1e-9, abs=1e-13)


@given(PROBABILITIES)
def test_one_degree_of_freedom_is_the_cauchy_quantile(p: float) -> None:
    assert t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-7, abs=1e-9)


@given(PROBABILITIES, PROBABILITIES, DEGREES)
def test_t_quantile_is_monotone_in_p(p1: float, p2: float, df: int) -> None:
    low, high = sorted((p1, p2))
    assert t_quantile(low, df) <= t_quantile(high, df)


@given(PROBABILITIES, DEGREES)
def test_t_quantile_is_exactly_antisymmetric_in_its_float_argument(p: float, df: int) -> None:
    # 1 - (1 - p) is not always p in floating point; the complement that was computed is.
    q = 1.0 - p
    assert t_quantile(q, df) == -t_quantile(1.0 - q, df)


@given(st.floats(min_value=1e-4, max_value=1 - 1e-4), DEGREES)
def test_t_quantile_is_symmetric_about_the_median(p: float, df: int) -> None:
    assert t_quantile(1.0 - p, df) == pytest.approx(-t_quantile(p, df), rel=1e-9, abs=1e-12)


@given(st.floats(min_value=0.5, max_value=1 - 1e-9), st.integers(1, 200))
def test_t_is_wider_than_the_normal_and_narrows_with_more_degrees(p: float, df: int) -> None:
    normal = statistics.NormalDist().inv_cdf(p)
    assert t_quantile(p, df) >= t_quantile(p, df + 1) >= normal - 1e-12


@given(st.floats(min_value=2**-52, max_value=1e-10), DEGREES)
def test_t_quantile_keeps_its_relative_precision_next_to_the_median(delta: float, df: int) -> None:
    # Near 0 the CDF is linear with slope density(0): t = delta / density(0).
    density = math.exp(
        math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    )
    p = 0.5 + delta
    assert t_quantile(p, df) == pytest.approx((p - 0.5) / density, rel=1e-9)


@pytest.mark.parametrize(("p", "df"), [(0.0, 3), (1.0, 3), (-0.1, 3), (0.5, 0), (0.9, 2.5)])
def test_t_quantile_refuses_arguments_outside_its_domain(p: float, df: object) -> None:
    with pytest.raises(ValueError, match="must be"):
        t_quantile(p, df)  # type: ignore[arg-type]


# -- paired differences ---------------------------------------------------------------------


def test_a_paired_difference_matches_the_hand_computation() -> None:
    # d = (1, 2, 4): mean 7/3; stdev^2 = (16/9 + 1/9 + 25/9) / 2 = 7/3; se = sqrt(7/9).
    found = paired_difference({1: 11.0, 2: 12.0, 3: 14.0}, {1: 10.0, 2: 10.0, 3: 10.0})
    se = math.sqrt(7.0 / 9.0)
    half = 4.30265273 * se
    assert found.n == 3
    assert found.df == 2
    assert found.mean == pytest.approx(7.0 / 3.0)
    assert found.stdev == pytest.approx(math.sqrt(7.0 / 3.0))
    assert found.se == pytest.approx(se)
    assert found.ci_low == pytest.approx(7.0 / 3.0 - half, abs=1e-7)
    assert found.ci_high == pytest.approx(7.0 / 3.0 + half, abs=1e-7)
    assert found.confidence == 0.95


def test_only_the_seeds_both_ran_are_paired() -> None:
    found = paired_difference({1: 5.0, 2: 7.0, 9: 100.0}, {1: 4.0, 2: 4.0, 8: -100.0})
    assert found.n == 2
    assert found.mean == pytest.approx(2.0)


def test_one_shared_seed_gives_a_difference_without_an_interval() -> None:
    found = paired_difference({1: 5.0}, {1: 3.0})
    assert (found.n, found.mean, found.df) == (1, 2.0, 0)
    assert (found.stdev, found.se, found.ci_low, found.ci_high) == (None, None, None, None)


def test_a_higher_confidence_gives_a_wider_interval() -> None:
    a, b = {1: 1.0, 2: 3.0, 3: 2.5}, {1: 0.0, 2: 1.0, 3: 2.0}
    narrow, wide = paired_difference(a, b, 0.8), paired_difference(a, b, 0.99)
    assert narrow.ci_low is not None
    assert wide.ci_low is not None
    assert wide.ci_low < narrow.ci_low < narrow.mean


def test_pairing_needs_a_shared_seed_and_a_sensible_confidence() -> None:
    with pytest.raises(ValueError, match="share no seed"):
        paired_difference({1: 1.0}, {2: 1.0})
    with pytest.raises(ValueError, match="confidence"):
        paired_difference({1: 1.0}, {1: 1.0}, confidence=1.0)


# -- shared keys ------------------------------------------------------------------------------


def test_samples_are_cut_to_the_keys_every_one_of_them_has_in_the_given_order() -> None:
    samples = {"wait": {1: 10.0, 2: 10.0, 3: 1.0}, "backoff": {2: 9.0, 1: 9.0}}
    shared = on_shared_keys(samples, [3, 2, 1, 4])
    assert shared == {"wait": {2: 10.0, 1: 10.0}, "backoff": {2: 9.0, 1: 9.0}}
    assert [list(v) for v in shared.values()] == [[2, 1], [2, 1]]
    assert statistics.fmean(shared["wait"].values()) == 10.0  # not 7.0: seed 3 is not shared


def test_samples_with_no_key_in_common_come_back_empty() -> None:
    assert on_shared_keys({"a": {1: 1.0}, "b": {2: 2.0}}, [1, 2]) == {"a": {}, "b": {}}


@given(
    st.dictionaries(
        st.sampled_from("abc"),
        st.dictionaries(st.integers(0, 5), st.floats(allow_nan=False)),
        min_size=1,
    )
)
def test_every_sample_keeps_exactly_the_same_keys(
    samples: dict[str, dict[int, float]],
) -> None:
    shared = on_shared_keys(samples, range(6))
    key_sets = [set(v) for v in shared.values()]
    assert all(keys == key_sets[0] for keys in key_sets)
    assert key_sets[0] == set.intersection(*(set(v) for v in samples.values()))
    assert all(shared[n][k] == samples[n][k] for n in shared for k in shared[n])


def test_an_aggregates_interval_is_the_student_t_interval_of_its_mean() -> None:
    found = aggregate([1.0, 2.0, 3.0])  # mean 2, sample stdev 1, n 3
    interval = found.interval(0.95)
    assert interval is not None
    half = 4.302652729911275 / math.sqrt(3)  # t(0.975, df=2)
    assert interval == pytest.approx((2.0 - half, 2.0 + half), rel=1e-9)
    assert aggregate([5.0]).interval() is None  # one seed has no spread


def test_the_bench_json_gives_each_algorithms_mean_its_95_percent_interval() -> None:
    from pyattacker.benchmark import get_scenario, run_benchmark

    report = run_benchmark(
        get_scenario("bursty_provider").with_overrides(jobs=60), ["wait"], seeds=2
    )
    found = report.aggregates()["throughput_rps"]["wait"]
    entry = report.to_dict()["aggregates"]["throughput_rps"]["wait"]
    expected = found.interval(0.95)
    assert expected is not None
    assert (entry["ci95_low"], entry["ci95_high"]) == expected
