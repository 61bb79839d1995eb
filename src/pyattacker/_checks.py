"""Validation of numbers in user input: one wording, one ``ConfigError`` per mistake.

Every check names the field (a dotted path where it helps), says what was expected and
what came, and returns the value normalised (``float`` or ``int``). Booleans are not
numbers here, NaN and infinities are never in range, and an int too large for a float is
out of range rather than an ``OverflowError``.
"""

from __future__ import annotations

import math

from pyattacker.errors import ConfigError

__all__ = ["check_number", "check_seconds", "check_whole"]


def check_number(
    value: object,
    field: str,
    *,
    above: float | None = None,
    at_least: float | None = None,
    below: float | None = None,
    at_most: float | None = None,
    hint: str | None = None,
) -> float:
    """``value`` as a float, or ``ConfigError`` unless it is a finite number in range."""
    number = _finite(value)
    if (
        number is None
        or (above is not None and not number > above)
        or (at_least is not None and not number >= at_least)
        or (below is not None and not number < below)
        or (at_most is not None and not number <= at_most)
    ):
        bounds = [
            f"{op} {bound:g}"
            for op, bound in ((">", above), (">=", at_least), ("<", below), ("<=", at_most))
            if bound is not None
        ]
        wanted = " and ".join(bounds) or "that is finite"
        raise ConfigError(f"must be a number {wanted}, got {value!r}", field=field, hint=hint)
    return number


def check_whole(
    value: object,
    field: str,
    *,
    at_least: int = 1,
    at_most: int | None = None,
    hint: str | None = None,
) -> int:
    """``value`` if it is an int (not a bool) from ``at_least`` to ``at_most`` (no upper
    bound when ``None``), else ``ConfigError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < at_least:
        raise ConfigError(
            f"must be a whole number >= {at_least}, got {value!r}", field=field, hint=hint
        )
    if at_most is not None and value > at_most:
        raise ConfigError(
            f"must be a whole number from {at_least:,} to {at_most:,}, got {value:,}",
            field=field,
            hint=hint,
        )
    return value


def check_seconds(value: object, field: str, *, hint: str | None = None) -> float | None:
    """``None`` (no limit) or a finite number of seconds ``>= 0``."""
    if value is None:
        return None
    return check_number(value, field, at_least=0, hint=hint or "seconds, or None for no limit")


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None
