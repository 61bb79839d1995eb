"""The one percentile definition, and the summary every report prints.

:func:`exact_percentile` is *the* definition used everywhere: by our histograms, by the
echo server's ground truth and by the tests that compare them. It is the nearest-rank
percentile: the smallest sample ``x`` such that at least ``q`` % of the samples are
``<= x``. The rank reads ``q`` as the decimal the user wrote (``99.9`` means 999/10, not
the binary float just above it), so ``p99.9`` of 1000 samples is the 999th, never the
1000th.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

__all__ = ["PERCENTILES", "Summary", "exact_percentile", "nearest_rank"]

PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0, 99.9)


def nearest_rank(q: float, n: int) -> int:
    """The 1-based rank of the ``q``-th percentile among ``n >= 1`` sorted samples.

    ``max(1, ceil(q / 100 * n))`` computed exactly on the decimal value of ``q`` (its
    shortest ``repr``), so float rounding never moves the rank. Raises ``ValueError``
    unless ``0 <= q <= 100`` and ``n >= 1``.
    """
    if n < 1:
        raise ValueError("no samples: a percentile of nothing is undefined")
    scaled = _decimal(q) * n
    # ceil(scaled / 100) on exact rationals: -(-a // b).
    return max(1, -(-scaled.numerator // (scaled.denominator * 100)))


@lru_cache(maxsize=64, typed=True)  # typed: True must not hit the cache entry of 1
def _decimal(q: float) -> Fraction:
    if isinstance(q, bool) or not isinstance(q, int | float):
        raise ValueError(f"percentile must be a number in [0, 100], got {q!r}")
    if not 0.0 <= q <= 100.0:  # also rejects NaN
        raise ValueError(f"percentile must be in [0, 100], got {q!r}")
    return Fraction(repr(float(q)))


def exact_percentile(sorted_values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile of ``sorted_values`` (ascending).

    ``sorted_values[nearest_rank(q, n) - 1]``: ``q = 0`` gives the minimum, ``q = 100``
    the maximum. The input is trusted to be sorted (it is not checked: that would cost a
    pass per call). Raises ``ValueError`` for an empty sequence or ``q`` outside [0, 100].
    """
    return sorted_values[nearest_rank(q, len(sorted_values)) - 1]


@dataclass(frozen=True, slots=True)
class Summary:
    """Count, extremes, mean and the :data:`PERCENTILES` of one distribution, in seconds.

    An empty distribution has ``count == 0`` and ``None`` in every other field (``None``
    rather than NaN: it survives JSON and a type checker makes every renderer handle it;
    renderers print an en dash). Percentiles of a :class:`~pyattacker.measure.Histogram` carry
    its bucket error (at most 0.05 % for values >= 1 µs); ``min``, ``max`` are exact and
    ``mean`` is exact to about 1e-18 s per sample.
    """

    count: int
    min: float | None
    mean: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    p999: float | None
    max: float | None

    @classmethod
    def empty(cls) -> Summary:
        """The summary of no samples."""
        return cls(0, None, None, None, None, None, None, None, None)

    @classmethod
    def of_values(cls, values: Sequence[float]) -> Summary:
        """The exact summary of raw samples (ground truth for tests and small runs)."""
        if not values:
            return cls.empty()
        ordered = sorted(values)
        p50, p90, p95, p99, p999 = (exact_percentile(ordered, q) for q in PERCENTILES)
        mean = math.fsum(ordered) / len(ordered)
        return cls(len(ordered), ordered[0], mean, p50, p90, p95, p99, p999, ordered[-1])

    def to_dict(self) -> dict[str, float | int | None]:
        """Keys ``count, min, mean, p50, p90, p95, p99, p99.9, max`` (values as here)."""
        return {
            "count": self.count,
            "min": self.min,
            "mean": self.mean,
            "p50": self.p50,
            "p90": self.p90,
            "p95": self.p95,
            "p99": self.p99,
            "p99.9": self.p999,
            "max": self.max,
        }
