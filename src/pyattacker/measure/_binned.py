"""Values bucketed once for several histograms: how a batch of answers is recorded."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pyattacker.measure._histogram import (
    _SCALE,
    _SHIFT,
    _SUB_BITS,
    _SUB_COUNT,
    _TOP,
    Histogram,
    _index,
    _sum_units,
)

__all__ = ["Binned", "bucket_indexes", "record_all", "sum_units"]


class Binned:
    """Values placed in their buckets once, to be recorded into several histograms
    (:meth:`Histogram.add_binned`): a batch of answers' latencies go to the totals and to
    their window alike, and the bucket arithmetic need not run twice.

    Raises ``ValueError``, having kept nothing, if any value is negative, NaN or infinite.
    ``values`` is the sequence given (not copied).
    """

    __slots__ = ("count", "high", "indexes", "low", "total", "values")

    def __init__(
        self, values: Sequence[float], *, _parts: tuple[list[int], int] | None = None
    ) -> None:
        self.values = values
        self.count = len(values)
        self.indexes: list[int] = []
        self.total = 0
        self.low, self.high = (min(values), max(values)) if values else (math.inf, -math.inf)
        if _parts is not None:  # binned elsewhere (of_parts)
            self.indexes, self.total = _parts
            return
        if not values:
            return
        if not (self.low >= 0.0 and self.high < _TOP) or math.isnan(sum(values)):
            self._bin_checked(values)
            return
        units = sum_units(values)
        self.indexes, self.total = bucket_indexes(units), sum(units)

    @classmethod
    def of_parts(cls, values: Sequence[float], indexes: list[int], total: int) -> Binned:
        """``Binned(values)`` from its buckets and sum worked out elsewhere (``OkBatch``
        bins three spans with one :func:`bucket_indexes` call), for values known to be
        finite, >= 0 and below the top."""
        return cls(values, _parts=(indexes, total))

    def _bin_checked(self, values: Sequence[float]) -> None:
        """The rare case (a value at or above the top, or a bad one): say which is wrong."""
        for value in values:
            if not 0.0 <= value < math.inf:
                raise ValueError(f"a duration must be finite and >= 0 seconds, got {value!r}")
        units = [_sum_units(value) for value in values]
        self.indexes = [_index(x) for x in units]
        self.total = sum(units)


def sum_units(values: Sequence[float]) -> list[int]:
    """``_sum_units`` of each value (``floor(v * 2**60)``, the histograms' sum units), for
    values >= 0, in one C loop. Raises ``OverflowError`` or ``ValueError`` for a value that
    is infinite or NaN (or past 1e290)."""
    return list(map(int, map(_SCALE.__mul__, values)))


def bucket_indexes(units: Sequence[int]) -> list[int]:
    """The bucket of each value, given in sum units (``floor(v * 2**60)``, as
    ``int(v * _SCALE)`` gives it), for values >= 0 and below the top: ``_index`` of each,
    on local names (this runs once per span of every request of a load test)."""
    indexes: list[int] = []
    append = indexes.append
    shift, direct, bits, half = _SHIFT, _SUB_COUNT, _SUB_BITS, _SUB_BITS - 1
    for x in units:
        u = x >> shift
        if u < direct:
            append(u)
        else:
            k = u.bit_length() - bits
            append((k << half) + (u >> k))
    return indexes


def record_all(values: Sequence[float], *histograms: Histogram) -> None:
    """Record each of ``values`` once in each of ``histograms``: exactly what
    ``h.record(v)`` for each value and histogram does, with each value's bucket found
    once (:class:`Binned`). Raises ``ValueError``, having recorded nothing, if any value
    is negative, NaN or infinite.
    """
    if not values or not histograms:
        return
    binned = Binned(values)
    for histogram in histograms:
        histogram.add_binned(binned)
