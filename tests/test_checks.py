"""The number checks every config path shares: wording, field, and what counts as a number."""

from __future__ import annotations

import pytest

from pyattacker._checks import check_number, check_seconds, check_whole
from pyattacker.errors import ConfigError


@pytest.mark.parametrize("value", [True, "1", None, float("nan"), float("inf"), 10**400])
def test_things_that_are_not_finite_numbers_are_refused(value: object) -> None:
    with pytest.raises(ConfigError) as info:
        check_number(value, "x.y")
    assert info.value.field == "x.y"
    assert "must be a number" in info.value.message


def test_bounds_are_checked_and_named_in_the_message() -> None:
    assert check_number(2, "f", above=1, below=3) == 2.0
    with pytest.raises(ConfigError, match=r"must be a number > 1 and < 3, got 3"):
        check_number(3, "f", above=1, below=3)
    with pytest.raises(ConfigError, match=r">= 0"):
        check_number(-0.5, "f", at_least=0)


def test_whole_numbers_refuse_floats_and_booleans() -> None:
    assert check_whole(3, "n") == 3
    for bad in (0, 2.0, False):
        with pytest.raises(ConfigError, match="whole number >= 1"):
            check_whole(bad, "n")


def test_seconds_accept_none_as_no_limit() -> None:
    assert check_seconds(None, "t") is None
    assert check_seconds(0, "t") == 0.0
    with pytest.raises(ConfigError) as info:
        check_seconds(-1, "t")
    assert info.value.hint == "seconds, or None for no limit"


def test_at_most_is_an_inclusive_upper_bound() -> None:
    assert check_number(1.0, "p", at_least=0.0, at_most=1.0) == 1.0
    with pytest.raises(ConfigError, match=r"<= 1") as caught:
        check_number(1.0000001, "p", at_least=0.0, at_most=1.0)
    assert caught.value.field == "p"
