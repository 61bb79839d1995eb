"""Threshold expressions: the grammar, its errors, and exact behaviour at the bound."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.errors import ConfigError
from pyattacker.report import parse_threshold
from pyattacker.report._thresholds import DISTRIBUTIONS, RATES, SHARES, Kind, judge

OPS = ("<", "<=", ">", ">=")
DURATION_UNITS = {"us": Fraction(1, 10**6), "ms": Fraction(1, 1000), "s": Fraction(1)}


def decimals() -> st.SearchStrategy[str]:
    """Decimal numbers as a person types them: 250, 0.5, 99.95, 1.000."""
    whole = st.integers(min_value=0, max_value=10**6).map(str)
    return st.one_of(
        whole, st.tuples(whole, st.integers(0, 10**4).map(str)).map(lambda p: f"{p[0]}.{p[1]}")
    )


@st.composite
def duration_expressions(draw: st.DrawFn) -> tuple[str, Fraction, str]:
    metric = draw(st.sampled_from(sorted(DISTRIBUTIONS)))
    stat = draw(st.sampled_from(["p50", "p95", "p99", "p99.9", "p0", "p100", "mean", "min", "max"]))
    number, unit, op = (
        draw(decimals()),
        draw(st.sampled_from(sorted(DURATION_UNITS))),
        draw(st.sampled_from(OPS)),
    )
    space = draw(st.sampled_from(["", " ", "  "]))
    text = f"{stat}({metric}){space}{op}{space}{number}{unit}"
    return text, Fraction(number) * DURATION_UNITS[unit], op


def test_the_examples_of_the_docs_parse_to_what_they_say() -> None:
    t = parse_threshold("p95(latency) < 250ms")
    assert (t.metric, t.stat, t.quantile, t.op, t.bound) == (
        "latency",
        "p95",
        95.0,
        "<",
        Fraction(1, 4),
    )
    assert t.kind is Kind.DURATION
    assert parse_threshold("error_rate < 1%").bound == Fraction(1, 100)
    assert parse_threshold("p99(ttft) < 2s").bound == 2
    assert parse_threshold("rate >= 95/s").bound == 95
    assert parse_threshold("tokens_per_s >= 3000/m").bound == 50
    assert parse_threshold("goodput >= 90%").kind is Kind.SHARE
    assert parse_threshold("max(e2e) <= 1.5min").bound == 90


@given(duration_expressions())
def test_a_duration_bound_is_exactly_the_decimal_written(case: tuple[str, Fraction, str]) -> None:
    text, bound, op = case
    t = parse_threshold(text)
    assert t.bound == bound
    assert t.op == op
    assert parse_threshold(t.text) == t  # the canonical spelling reads back the same


@given(duration_expressions())
def test_a_value_equal_to_the_bound_passes_or_equal_and_fails_strict(
    case: tuple[str, Fraction, str],
) -> None:
    t = parse_threshold(case[0])
    at = float(t.bound)  # what a histogram reports when every sample is this value
    assert judge(t, at) is (t.op in ("<=", ">="))
    above, below = math.nextafter(at, math.inf), math.nextafter(at, -math.inf)
    assert judge(t, above) is (t.op in (">", ">="))
    if at > 0:
        assert judge(t, below) is (t.op in ("<", "<="))


@given(
    st.integers(min_value=0, max_value=6),
    st.integers(min_value=0, max_value=10**6),
    st.sampled_from(OPS),
    st.sampled_from(sorted(SHARES)),
)
def test_a_share_of_counts_equal_to_the_percentage_is_on_the_bound(
    digits: int, k: int, op: str, metric: str
) -> None:
    n = 10**digits
    k %= n + 1
    percent = Fraction(100 * k, n)
    written = f"{percent.numerator // percent.denominator}"
    if percent.denominator != 1:  # a terminating decimal: n is a power of ten
        written = f"{float(percent):.{digits}f}"
    t = parse_threshold(f"{metric} {op} {written}%")
    assert judge(t, Fraction(k, n)) is (op in ("<=", ">="))


def test_one_failure_in_a_hundred_is_exactly_one_percent() -> None:
    assert judge(parse_threshold("error_rate <= 1%"), Fraction(1, 100)) is True
    assert judge(parse_threshold("error_rate < 1%"), Fraction(1, 100)) is False
    assert judge(parse_threshold("error_rate < 1%"), Fraction(99, 10_000)) is True


def test_a_bound_that_is_not_a_binary_fraction_still_equals_the_float_measured() -> None:
    # 100ms is 1/10 s, which no float is; the histogram reports the float nearest it.
    assert judge(parse_threshold("p50(latency) <= 100ms"), 0.1) is True
    assert judge(parse_threshold("p50(latency) < 100ms"), 0.1) is False
    assert judge(parse_threshold("rate >= 33.3/s"), 33.3) is True


def test_nothing_measured_is_nothing_judged() -> None:
    assert judge(parse_threshold("p95(latency) < 1s"), None) is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "cannot read"),
        ("p95(latency) << 1s", "cannot read"),
        ("latency < 1s", "read it through a statistic"),
        ("p95(latency) < 250", "no unit"),
        ("p95(latency) < 250kb", "unit 'kb'"),
        ("p101(latency) < 1s", "not a statistic"),
        ("median(latency) < 1s", "not a statistic"),
        ("p95(speed) < 1s", "no distribution named 'speed'"),
        ("errors < 1%", "no figure named 'errors'"),
        ("error_rate < 0.01", "no unit"),
        ("error_rate < 1/s", "unit '/s'"),
        ("rate >= 95", "no unit"),
        ("rate >= 95/fortnight", "unit '/fortnight'"),
        ("p95(latency) < -1s", "cannot read"),
    ],
)
def test_a_bad_expression_names_the_flag_and_what_was_expected(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_threshold(text)
    assert caught.value.field == "--threshold"
    assert says in caught.value.message
    assert caught.value.hint


@given(st.text(max_size=40))
def test_any_text_parses_or_is_a_config_error(text: str) -> None:
    error: ConfigError | None = None
    try:
        t = parse_threshold(text)
    except ConfigError as exc:
        error = exc
    if error is None:
        assert t.metric in {*DISTRIBUTIONS, *SHARES, *RATES}
    else:
        assert error.field == "--threshold"
