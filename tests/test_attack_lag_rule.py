"""When a delay of the generator's own is worth a warning: ``lag_is_large``, at its edges."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.attack import LAG_SHARE, LAG_WARN_S, lag_is_large


def test_a_lag_at_the_floor_is_not_large_and_just_above_it_is() -> None:
    assert not lag_is_large(LAG_WARN_S, 0.001)
    assert lag_is_large(LAG_WARN_S + 1e-9, 0.001)


def test_against_a_slow_median_the_line_is_a_share_of_it() -> None:
    median = 0.2  # a tenth of it, 20 ms, is well above the 5 ms floor
    assert not lag_is_large(LAG_SHARE * median, median)
    assert lag_is_large(LAG_SHARE * median + 1e-9, median)
    assert not lag_is_large(0.019, median)


def test_with_nothing_timed_the_floor_alone_decides() -> None:
    assert not lag_is_large(LAG_WARN_S, None)
    assert lag_is_large(LAG_WARN_S * 2, None)


def test_no_lag_measured_is_never_large() -> None:
    assert not lag_is_large(None, 0.001)


def test_another_floor_replaces_the_loop_lags() -> None:
    assert not lag_is_large(0.009, 0.001, floor=0.01)
    assert lag_is_large(0.011, 0.001, floor=0.01)


@given(
    lag=st.floats(0.0, 10.0),
    median=st.floats(0.0, 10.0),
    more=st.floats(0.0, 10.0),
)
def test_a_slower_median_never_makes_a_lag_large_that_was_not(
    lag: float, median: float, more: float
) -> None:
    if lag_is_large(lag, median + more):
        assert lag_is_large(lag, median)


@given(lag=st.floats(0.0, 10.0), median=st.floats(0.0, 10.0))
def test_the_rule_is_the_larger_of_floor_and_share(lag: float, median: float) -> None:
    assert lag_is_large(lag, median) == (lag > max(LAG_WARN_S, LAG_SHARE * median))


@pytest.mark.parametrize("median", [0.001, 0.03, 0.2, 2.0])
def test_a_lag_just_under_the_line_passes_and_just_over_it_warns(median: float) -> None:
    line = max(LAG_WARN_S, LAG_SHARE * median)
    assert not lag_is_large(line * (1 - 1e-9), median)
    assert lag_is_large(line * (1 + 1e-9), median)
