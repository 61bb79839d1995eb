"""The tokens a reported usage names: one reading for pacing and for the results export.

``lease.report(usage=...)`` takes whatever a provider's answer says; the pool's pacing
(``pool._pacing``) and the ``results`` rows (``store._results``) both need its tokens, and
must agree on them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["tokens_of"]

# First match wins: a total, else a pair summed (a half not given counts 0), else `tokens`.
_TOKEN_KEYS: tuple[tuple[str, ...], ...] = (
    ("total_tokens",),
    ("prompt_tokens", "completion_tokens"),
    ("input_tokens", "output_tokens"),
    ("tokens",),
)


def tokens_of(usage: Mapping[str, Any] | None) -> float | None:
    """The tokens ``usage`` names: ``total_tokens``, else ``prompt_tokens +
    completion_tokens``, else ``input_tokens + output_tokens`` (either half alone counts),
    else ``tokens``; None when it names none (a value that is not a finite number, a bool
    included, is not a count)."""
    if not usage:
        return None
    for keys in _TOKEN_KEYS:
        numbers: list[float] = [usage[k] for k in keys if k in usage and _count(usage[k])]
        if numbers:
            return sum(numbers)  # as given: whole counts stay ints in the results export
    return None


def _count(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
