"""Durations and rates as people type them, and durations as reports print them.

Every CLI flag and config field that takes a duration or a rate goes through
:func:`parse_duration` or :func:`parse_rate`, so ``--duration 30s``, ``--rate 500/s`` and
``delay: 20ms`` read the same everywhere and fail with the same wording. Numbers (not
booleans) pass through as seconds or requests per second. :func:`format_duration` is the
inverse for humans: three significant digits in the largest unit that keeps them above 1.

What these are not: calendars (no days, no ``1h30m`` compounds) and not lenient about
signs. A negative, NaN or infinite value is always a ``ConfigError`` naming the field.
"""

from __future__ import annotations

import math
import re

from pyattacker.errors import ConfigError

__all__ = ["format_duration", "parse_duration", "parse_rate"]

DURATION_HINT = "e.g. 30s, 250ms, 1.5s, 2m, 1h (a bare number is seconds)"
RATE_HINT = "e.g. 500/s, 500 (per second), 30/m, 3600/h"

# Seconds per unit. Sub-second units are applied by dividing by their count per second
# (``20 / 1000`` is the correctly rounded 0.02; ``20 * 0.001`` is not).
_PER_SECOND = {"ns": 1e9, "us": 1e6, "µs": 1e6, "μs": 1e6, "ms": 1e3}
_SECONDS = {"": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_RATE_PERIODS = {
    "": 1.0,
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hour": 3600.0,
}
_NUMBER = r"(?P<number>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)"
_DURATION = re.compile(rf"{_NUMBER}\s*(?P<unit>[a-zA-Zµμ]*)")
_RATE = re.compile(rf"{_NUMBER}\s*(?:/\s*(?P<period>[a-zA-Z]+))?")


def parse_duration(text: str | float | int, *, field: str) -> float:
    """Seconds (a finite float ``>= 0``) from ``"20ms"``, ``"1.5s"``, ``"250us"``, ``"2m"``...

    Units: ``ns``, ``us``/``µs``, ``ms``, ``s``/``sec``, ``m``/``min``, ``h``; no unit
    means seconds. Case and surrounding spaces are ignored. Raises ``ConfigError``
    (``field`` named, a hint with examples) for anything else.
    """
    if isinstance(text, bool):
        raise _bad_duration(text, field)
    if isinstance(text, int | float):
        return _finite_at_least_zero(float(text), text, field)
    if not isinstance(text, str):
        raise _bad_duration(text, field)
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise _bad_duration(text, field)
    number, unit = float(match["number"]), match["unit"].lower()
    if unit in _PER_SECOND:
        return _finite_at_least_zero(number / _PER_SECOND[unit], text, field)
    if unit in _SECONDS:
        return _finite_at_least_zero(number * _SECONDS[unit], text, field)
    raise _bad_duration(text, field)


def parse_rate(text: str | float | int, *, field: str) -> float:
    """Requests per second (finite, ``> 0``) from ``"500/s"``, ``"500"``, ``"30/m"``...

    Periods: ``s``/``sec``/``second``, ``m``/``min``/``minute``, ``h``/``hr``/``hour``; a
    bare number is per second. Raises ``ConfigError`` for zero, negatives and garbage.
    """
    rate: float | None = None
    if isinstance(text, int | float) and not isinstance(text, bool):
        rate = float(text)
    elif isinstance(text, str):
        match = _RATE.fullmatch(text.strip())
        period = _RATE_PERIODS.get((match["period"] or "").lower()) if match else None
        if match is not None and period is not None:
            rate = float(match["number"]) / period
    if rate is None or not (math.isfinite(rate) and rate > 0):
        raise ConfigError(
            f"must be a rate of requests > 0, got {text!r}", field=field, hint=RATE_HINT
        )
    return rate


def format_duration(seconds: float) -> str:
    """Three significant digits in the largest fitting unit: ``20.0ms``, ``1.50s``, ``250µs``.

    Units are ``s``, ``ms``, ``µs`` and ``ns``; a value of 1000 s or more stays in seconds
    (``3600s``). Zero is ``0s``; the sign is kept; NaN and infinities print as Python does.
    The text parses back with :func:`parse_duration` to within 0.5 % (non-negatives).
    """
    if not math.isfinite(seconds):
        return str(seconds)
    if seconds == 0:
        return "0s"
    sign = "-" if seconds < 0 else ""
    # Round to three significant digits first, so 999.96 ms becomes 1.00 s, not "1000.0ms".
    value = float(f"{abs(seconds):.3g}")
    for unit, scale in (("s", 1.0), ("ms", 1e3), ("µs", 1e6)):
        if value >= 1 / scale:
            return sign + _three_digits(value * scale) + unit
    return sign + _three_digits(value * 1e9) + "ns"


def _three_digits(value: float) -> str:
    value = float(f"{value:.3g}")  # scaling may have put it a hair off the rounded grid
    decimals = max(0, 2 - math.floor(math.log10(value))) if value > 0 else 0
    return f"{value:.{decimals}f}"


def _finite_at_least_zero(seconds: float, text: object, field: str) -> float:
    if not (math.isfinite(seconds) and seconds >= 0):
        raise _bad_duration(text, field)
    return seconds


def _bad_duration(text: object, field: str) -> ConfigError:
    return ConfigError(f"must be a duration >= 0, got {text!r}", field=field, hint=DURATION_HINT)
