"""Durations and rates as people type them (pyattacker._units)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker._units import format_duration, parse_duration, parse_rate
from pyattacker.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("20ms", 0.02),
        ("1.5s", 1.5),
        ("250us", 0.00025),
        ("250µs", 0.00025),
        ("500ns", 5e-7),
        ("2m", 120.0),
        ("2min", 120.0),
        ("1h", 3600.0),
        ("0", 0.0),
        ("0ms", 0.0),
        ("30", 30.0),
        (".5s", 0.5),
        (" 3 S ", 3.0),
        ("1e3ms", 1.0),
        (7, 7.0),
        (0.25, 0.25),
    ],
)
def test_durations_parse_to_seconds(text: str | float, seconds: float) -> None:
    assert parse_duration(text, field="--duration") == seconds


@pytest.mark.parametrize(
    "text",
    ["-1s", "-5", "nan", "inf", "1d", "ms", "", "20 ms ms", "1h30m", "abc", True, None, -0.5],
)
def test_bad_durations_name_the_field_and_show_examples(text: object) -> None:
    with pytest.raises(ConfigError) as info:
        parse_duration(text, field="--duration")  # type: ignore[arg-type]
    assert info.value.field == "--duration"
    assert "250ms" in str(info.value.hint)


def test_non_finite_numbers_are_not_durations() -> None:
    for value in (math.nan, math.inf, -math.inf):
        with pytest.raises(ConfigError):
            parse_duration(value, field="x")


@pytest.mark.parametrize(
    ("text", "rate"),
    [
        ("500/s", 500.0),
        ("500", 500.0),
        ("30/m", 0.5),
        ("30/min", 0.5),
        ("3600/h", 1.0),
        ("2.5 / sec", 2.5),
        (40, 40.0),
        (0.5, 0.5),
    ],
)
def test_rates_parse_to_requests_per_second(text: str | float, rate: float) -> None:
    assert parse_rate(text, field="--rate") == rate


@pytest.mark.parametrize("text", ["0", "0/s", "-5/s", "500/d", "/s", "fast", "inf", 0, -1, True])
def test_bad_rates_name_the_field_and_show_examples(text: object) -> None:
    with pytest.raises(ConfigError) as info:
        parse_rate(text, field="--rate")  # type: ignore[arg-type]
    assert info.value.field == "--rate"
    assert "500/s" in str(info.value.hint)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.02, "20.0ms"),
        (1.5, "1.50s"),
        (0.00025, "250µs"),
        (0.123456, "123ms"),
        (0.0009999, "1.00ms"),
        (5e-10, "0.500ns"),
        (3600, "3600s"),
        (0, "0s"),
        (-0.02, "-20.0ms"),
        (math.inf, "inf"),
    ],
)
def test_durations_format_with_three_significant_digits(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@given(st.floats(min_value=1e-9, max_value=1e6))
def test_a_formatted_duration_parses_back_within_half_a_percent(seconds: float) -> None:
    parsed = parse_duration(format_duration(seconds), field="x")
    assert abs(parsed - seconds) <= 0.005 * seconds


@given(
    st.floats(min_value=0, max_value=1e6, allow_nan=False),
    st.sampled_from([("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("m", 60.0), ("h", 3600.0)]),
)
def test_a_number_with_a_unit_parses_to_that_many_units(
    number: float, unit: tuple[str, float]
) -> None:
    suffix, scale = unit
    assert math.isclose(parse_duration(f"{number!r}{suffix}", field="x"), number * scale)


@given(
    st.floats(min_value=1e-6, max_value=1e9),
    st.sampled_from([("s", 1.0), ("m", 60.0), ("h", 3600.0)]),
)
def test_a_rate_per_period_is_that_many_per_period_seconds(
    count: float, period: tuple[str, float]
) -> None:
    suffix, seconds = period
    assert math.isclose(parse_rate(f"{count!r}/{suffix}", field="x"), count / seconds)
