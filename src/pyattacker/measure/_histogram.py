"""A mergeable log-linear histogram of seconds (HdrHistogram's bucket model).

Model. A value ``v`` (seconds) is read as ``x = floor(v * 2**60)``, an exact integer
(scaling a float by a power of two is exact). Its bucket comes from ``u = x >> 30``, the
value in units of 2**-30 s (about 0.93 ns): below 2048 units every unit has its own
bucket; above, each power-of-two range ``[1024 * 2**k, 2048 * 2**k)`` is split into 1024
sub-buckets of width ``2**k`` units. That is HdrHistogram's layout with 2048 sub-buckets
(three significant digits), addressed with ``int.bit_length()``. The top is 2**47 units =
131,072 s (36.4 h); larger values land in the top bucket, while ``max`` stays exact. The
bucket count is fixed (38,912), so memory never grows with the number of samples.

Storage. Counts live in a dict of the buckets touched (30-60 bytes each), not a dense
list of all 38,912 (311 KB per histogram, touched or not). Dense is a little faster per
``record()`` (``benchmarks/histogram.py``), but every window of a
:class:`~pyattacker.measure.WindowSeries` keeps two histograms: 600 one-second windows
would hold 370 MB dense, while a window of 1,000 samples touches at most 1,000 buckets.
(A wide distribution touches many: HdrHistogram's model has 1,024 buckets per octave.)

Error bound. A percentile is answered with the midpoint of the bucket holding its rank,
clamped to ``[min, max]``. For every recorded value ``v`` below the top::

    |answer - exact| <= max(2**-31 s, exact / 2048)    (plus float rounding, ~1e-16 relative)

i.e. at most 0.47 ns, or 0.049 % of the value — within 0.05 % for every value >= 1 µs.
A single sample, ``p0`` and ``p100`` are exact.

Exactness. ``count``, ``min``, ``max`` and the integer sum of ``x`` are kept exactly, so
:meth:`Histogram.merge` gives *exactly* the histogram of all samples, in any order and
split (``total`` and ``mean`` are exact to 2**-60 s ~ 1e-18 s per sample, rounded once).

Why hand-written rather than the ``hdrhistogram`` PyPI package: it is slower on the load
path (``benchmarks/histogram.py`` compares them; the figures are in ``benchmarks/README.md``),
and it keeps a dense counts array per histogram (320 KB, see Storage), has no exact sum
or ``min``/``max`` in float seconds, and serialises to a compressed binary blob where we
want plain JSON. One float-to-int conversion here feeds both the bucket and the exact sum.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, SupportsIndex

from pyattacker.measure._summary import PERCENTILES, Summary, nearest_rank

if TYPE_CHECKING:
    from pyattacker.measure._binned import Binned

__all__ = ["Histogram"]


# ``counts[i] = counts.get(i, 0) + 1`` for each ``i`` of an iterable, in C: the loop behind
# ``Counter.update``. A batch's bucket indexes are computed once in Python (:class:`Binned`),
# then counted into each histogram by this, which is cheaper than counting in Python. The
# fallback, for a Python without the C helper, does the same in Python.
def _count_in_python(counts: dict[int, int], indexes: Iterable[int]) -> None:
    for i in indexes:
        counts[i] = counts.get(i, 0) + 1


_count_elements: Callable[[dict[int, int], Iterable[int]], None] = getattr(
    collections, "_count_elements", _count_in_python
)

_UNIT_BITS = 30  # bucket unit: 2**-30 s
_SUM_BITS = 60  # sum unit: 2**-60 s
_SCALE = float(1 << _SUM_BITS)
_SHIFT = _SUM_BITS - _UNIT_BITS
_SUB_BITS = 11  # 2048 sub-buckets: 3 significant digits
_SUB_COUNT = 1 << _SUB_BITS
_TOP_BITS = 47  # units below 2**47 have their own bucket
_TOP = float(1 << (_TOP_BITS - _UNIT_BITS))  # 131072.0 s
_N_BUCKETS = (_TOP_BITS - _SUB_BITS + 2) << (_SUB_BITS - 1)  # 38,912
_EXACT_INT = 2.0**53  # floats at or above are integers: convert without scaling
_FORMAT_VERSION = 1


def _sum_units(value: float) -> int:
    """``floor(value * 2**60)`` exactly, for any finite ``value >= 0``."""
    return int(value * _SCALE) if value < _EXACT_INT else int(value) << _SUM_BITS


def _index(x: int) -> int:
    """The bucket of a value given as ``floor(v * 2**60)``; the top bucket above the top."""
    u = x >> _SHIFT
    if u < _SUB_COUNT:
        return u
    if u.bit_length() > _TOP_BITS:
        return _N_BUCKETS - 1
    k = u.bit_length() - _SUB_BITS
    return (k << (_SUB_BITS - 1)) + (u >> k)


def _bounds(index: int) -> tuple[int, int]:
    """``(low, width)`` of bucket ``index`` in units of 2**-30 s."""
    if index < _SUB_COUNT:
        return index, 1
    k = (index >> (_SUB_BITS - 1)) - 1
    return ((index & (_SUB_COUNT // 2 - 1)) | _SUB_COUNT // 2) << k, 1 << k


def _midpoint(index: int) -> float:
    """The midpoint of bucket ``index`` in seconds (correctly rounded)."""
    low, width = _bounds(index)
    return (2 * low + width) / (1 << (_UNIT_BITS + 1))


class Histogram:
    """Log-linear (HdrHistogram model) histogram of non-negative float seconds.

    Promises: bounded memory (at most 38,912 buckets), exact :meth:`merge`, exact
    ``count``/``min``/``max``, and percentiles within ``max(2**-31 s, exact / 2048)`` of
    the nearest-rank percentile of the raw samples (so <= 0.05 % for values >= 1 µs; the
    module docstring derives it). Values above :attr:`TOP` (131,072 s) share the top
    bucket, so their percentiles lose that bound, but ``max`` stays exact.

    Empty: ``min``, ``max`` and ``mean`` are ``None``; :meth:`percentile` raises
    ``ValueError``; :meth:`summary` is :meth:`Summary.empty`. Not thread-safe.
    """

    TOP: ClassVar[float] = _TOP
    RESOLUTION: ClassVar[float] = 2.0**-_UNIT_BITS
    MAX_RELATIVE_ERROR: ClassVar[float] = 1 / _SUB_COUNT

    __slots__ = ("_count", "_counts", "_max", "_min", "_sum")
    _counts: dict[int, int]  # bucket index -> count, non-zero only
    _count: int
    _sum: int  # sum of floor(v * 2**60): exact, so merges are exact
    _min: float
    _max: float

    def __init__(self) -> None:
        self.reset()

    def record(self, value: float, count: SupportsIndex = 1) -> None:
        """Record ``value`` seconds ``count`` times (a whole number >= 1).

        Raises ``ValueError`` for a negative, NaN or infinite value and for a bad count.
        The common case (count 1, value in range) is computed here, without a call: this
        is on the load path.
        """
        if count != 1 or not 0.0 <= value < _TOP:
            self._record_checked(value, count)
            return
        x = int(value * _SCALE)
        u = x >> _SHIFT
        if u < _SUB_COUNT:
            i = u
        else:
            k = u.bit_length() - _SUB_BITS
            i = (k << (_SUB_BITS - 1)) + (u >> k)
        try:  # one dict lookup when the bucket exists, the common case
            self._counts[i] += 1
        except KeyError:
            self._counts[i] = 1
        self._count += 1
        self._sum += x
        if value < self._min:
            self._min = value
        if value > self._max:
            self._max = value

    def _record_checked(self, value: float, count: SupportsIndex) -> None:
        # (``count`` typed by a protocol, which the compiled load path does not check:
        # anything but a whole number >= 1 is this ValueError, compiled or not)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"count must be a whole number >= 1, got {count!r}")
        if not 0.0 <= value < math.inf:
            raise ValueError(f"a duration must be finite and >= 0 seconds, got {value!r}")
        x = _sum_units(value)
        i = _index(x)
        self._counts[i] = self._counts.get(i, 0) + count
        self._count += count
        self._sum += x * count
        self._min = min(self._min, value)
        self._max = max(self._max, value)

    def merge(self, other: Histogram) -> None:
        """Add ``other``'s samples: afterwards ``self`` equals the histogram of both."""
        counts = self._counts
        for i, n in other._counts.items():
            counts[i] = counts.get(i, 0) + n
        self._count += other._count
        self._sum += other._sum
        self._min = min(self._min, other._min)
        self._max = max(self._max, other._max)

    def add_binned(self, binned: Binned) -> None:
        """Record every value of ``binned``: what :meth:`record` of each does."""
        if not binned.count:
            return
        _count_elements(self._counts, binned.indexes)
        self._count += binned.count
        self._sum += binned.total
        if binned.low < self._min:
            self._min = binned.low
        if binned.high > self._max:
            self._max = binned.high

    def copy(self) -> Histogram:
        """An independent histogram equal to this one."""
        twin = Histogram()
        twin.merge(self)
        return twin

    def reset(self) -> None:
        """Forget every sample (the one definition of the empty state)."""
        self._counts = {}
        self._count = 0
        self._sum = 0
        self._min = math.inf
        self._max = -math.inf

    @property
    def count(self) -> int:
        return self._count

    @property
    def total(self) -> float:
        """The sum of the recorded values (seconds; exact to 2**-60 s per sample)."""
        return self._sum / (1 << _SUM_BITS)

    @property
    def min(self) -> float | None:
        """The smallest recorded value, exactly; ``None`` when empty."""
        return float(self._min) if self._count else None

    @property
    def max(self) -> float | None:
        """The largest recorded value, exactly (even above :attr:`TOP`); ``None`` when empty."""
        return float(self._max) if self._count else None

    @property
    def mean(self) -> float | None:
        """``total / count``, rounded once; ``None`` when empty."""
        return self._sum / (self._count << _SUM_BITS) if self._count else None

    def percentile(self, q: float) -> float:
        """The nearest-rank ``q``-th percentile (``0 <= q <= 100``), within the bucket error.

        Same definition as :func:`~pyattacker.measure.exact_percentile`. Raises
        ``ValueError`` when empty or when ``q`` is out of range.
        """
        return self.percentiles((q,))[q]

    def percentiles(self, qs: Iterable[float] = PERCENTILES) -> dict[float, float]:
        """``{q: percentile(q)}`` for every ``q`` in ``qs``, in one pass over the buckets."""
        qs = tuple(qs)
        if not self._count:
            raise ValueError("an empty histogram has no percentiles")
        wanted = sorted((nearest_rank(q, self._count), q) for q in qs)
        found: dict[float, float] = {}
        seen = 0
        j = 0
        for i in sorted(self._counts):
            seen += self._counts[i]
            while j < len(wanted) and wanted[j][0] <= seen:
                found[wanted[j][1]] = self._representative(i, wanted[j][0])
                j += 1
            if j == len(wanted):
                break
        return {q: found[q] for q in qs}

    def _representative(self, index: int, rank: int) -> float:
        # Ranks 1 and n are the exact extremes. Otherwise the bucket midpoint, clamped to
        # [min, max]: that can only move it towards the truth, which lies in [min, max].
        if rank == 1:
            return float(self._min)
        if rank == self._count:
            return float(self._max)
        return float(min(max(_midpoint(index), self._min), self._max))

    def summary(self) -> Summary:
        """Count, min, mean, the :data:`PERCENTILES` and max; :meth:`Summary.empty` if empty."""
        if not self._count:
            return Summary.empty()
        p50, p90, p95, p99, p999 = self.percentiles(PERCENTILES).values()
        return Summary(self._count, self.min, self.mean, p50, p90, p95, p99, p999, self.max)

    def buckets(self) -> list[tuple[float, float, int]]:
        """``(low, high, count)`` in seconds for every non-empty bucket, ascending.

        For charts. ``high`` is exclusive; the top bucket also holds values above ``TOP``.
        """
        unit = 1 << _UNIT_BITS
        out = []
        for i in sorted(self._counts):
            low, width = _bounds(i)
            out.append((low / unit, (low + width) / unit, self._counts[i]))
        return out

    def to_dict(self) -> dict[str, Any]:
        """A compact JSON-able form (sparse counts) that :meth:`from_dict` restores exactly.

        ``{"version": 1, "count": n, "min": s|None, "max": s|None, "sum": int,
        "buckets": [[index, count], ...]}`` with ``sum`` in units of 2**-60 s.
        """
        return {
            "version": _FORMAT_VERSION,
            "count": self._count,
            "min": self.min,
            "max": self.max,
            "sum": self._sum,
            "buckets": [[i, self._counts[i]] for i in sorted(self._counts)],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Histogram:
        """The histogram :meth:`to_dict` described. Raises ``ValueError`` on bad data.

        Checked: version, bucket indexes (in range, ascending) and counts (>= 1), the
        count total, and that ``min``, ``max`` and ``sum`` agree with the buckets.
        """
        try:
            return _parse(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a histogram: {exc!r}") from exc

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Histogram):
            return NotImplemented
        return (
            self._count == other._count
            and self._sum == other._sum
            and self._min == other._min
            and self._max == other._max
            and self._counts == other._counts
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __len__(self) -> int:
        return self._count

    def __repr__(self) -> str:
        if not self._count:
            return "Histogram(count=0)"
        p50, p99 = self.percentiles((50.0, 99.0)).values()
        return (
            f"Histogram(count={self._count}, p50={_ms(p50)}, p99={_ms(p99)}, max={_ms(self._max)})"
        )


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g}ms"  # three significant digits: what the buckets hold


def _whole(value: object, at_least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < at_least:
        raise ValueError(f"expected a whole number >= {at_least}, got {value!r}")
    return value


def _seconds(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected seconds, got {value!r}")
    if not 0.0 <= value < math.inf:
        raise ValueError(f"expected finite seconds >= 0, got {value!r}")
    return float(value)


def _parse(data: Mapping[str, Any]) -> Histogram:
    if data["version"] != _FORMAT_VERSION:
        raise ValueError(f"unknown histogram format version {data['version']!r}")
    counts: dict[int, int] = {}
    last = -1
    for index, n in data["buckets"]:
        if not last < _whole(index, 0) < _N_BUCKETS:
            raise ValueError(f"bucket index {index!r} out of range or out of order")
        counts[index], last = _whole(n, 1), index
    total, count = _whole(data["sum"], 0), _whole(data["count"], 0)
    if count != sum(counts.values()):
        raise ValueError(f"count {count} disagrees with the buckets ({sum(counts.values())})")
    hist = Histogram()
    if count:
        low, high = _seconds(data["min"]), _seconds(data["max"])
        ends = (_index(_sum_units(low)), _index(_sum_units(high)))
        if low > high or ends != (min(counts), max(counts)):
            raise ValueError("min/max disagree with the buckets")
        if not _sum_units(low) * count <= total <= _sum_units(high) * count:
            raise ValueError("sum disagrees with min, max and count")
        hist._min, hist._max = low, high
    elif data["min"] is not None or data["max"] is not None or total:
        raise ValueError("an empty histogram has no min, max or sum")
    hist._counts, hist._count, hist._sum = counts, count, total
    return hist
