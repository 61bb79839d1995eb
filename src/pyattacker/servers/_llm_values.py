"""An exact distribution that grows while it is being served: values kept as sorted runs.

The mock LLM server records one ITL per token written; ``/stats`` must report exact
nearest-rank percentiles over millions of them without freezing the loop that writes the
tokens (sorting millions of floats at once holds the loop for a large part of a second,
and every stream stalls meanwhile). :class:`Values` therefore does three cheap things and one
bounded one:

- :meth:`Values.add` and :meth:`Values.extend` append to an unsorted ``array('d')``
  (8 bytes a value, no Python object), the only cost on the hot path;
- :meth:`Values.step` does one bounded unit of work: sort the newest :data:`SLICE` values
  into a run, or merge two neighbouring runs whose merged size is at most :data:`CAP`
  (the newest runs first, sizes kept roughly halving from the oldest, as a binary counter
  does). A step is bounded (:data:`SLICE` values sorted, or :data:`CAP` merged), so a
  caller can give the loop a turn between steps;
- :meth:`Values.summary` (once :meth:`Values.settled`) finds each percentile by selection
  across the runs with ``bisect`` (a few hundred binary searches), never by a full sort.

Work is done only when somebody asks (``/stats``): a server nobody polls pays nothing but
the appends. Exactness: ``min``, ``max`` and every percentile are values of the data, by
nearest rank (:func:`pyattacker.measure.nearest_rank`); ``mean`` is the ``math.fsum`` of
the runs' exact sums, within a few units in the last place of the exact mean.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from typing import Any

from pyattacker.measure import nearest_rank

__all__ = ["CAP", "PERCENTILES", "SLICE", "Values"]

#: The percentiles /stats reports, by key.
PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("p99.9", 99.9))
#: Values sorted into a run by one step: a few milliseconds of the loop at most.
SLICE = 16_384
#: Runs merge while the merged run holds at most this many values (a merge, like a sort,
#: holds the loop for a few milliseconds at most).
CAP = 65_536


class Values:
    """Floats appended in any order; exact count, extremes, mean and percentiles.

    Not thread-safe. ``len()`` counts every value added, sorted or not. ``slice_size`` and
    ``cap`` (:data:`SLICE`, :data:`CAP`) bound a step's work.
    """

    __slots__ = ("_cached", "_cap", "_fresh", "_runs", "_slice", "_sums")

    def __init__(self, *, slice_size: int = SLICE, cap: int = CAP) -> None:
        self._slice, self._cap = slice_size, cap
        self._fresh = array("d")
        self._runs: list[array[float]] = []
        self._sums: list[float] = []  # math.fsum of each run
        self._cached: dict[str, Any] | None = None

    def add(self, value: float) -> None:
        self._fresh.append(value)

    def extend(self, values: Iterable[float]) -> None:
        self._fresh.extend(values)

    def data(self) -> array[float]:
        """A copy of every value added, in no particular order (for merging servers)."""
        every = array("d")
        for run in self._runs:
            every.extend(run)
        every.extend(self._fresh)
        return every

    def __len__(self) -> int:
        return len(self._fresh) + sum(len(run) for run in self._runs)

    def settled(self) -> bool:
        """Whether :meth:`step` has nothing left to do."""
        return not self._fresh and self._mergeable() is None

    def step(self) -> None:
        """One bounded unit of work: sort a slice of new values, else merge two runs."""
        fresh = self._fresh
        if fresh:
            start = max(0, len(fresh) - self._slice)
            ordered = fresh[start:].tolist()
            del fresh[start:]  # from the end: nothing is moved
            ordered.sort()
            self._runs.append(array("d", ordered))
            self._sums.append(math.fsum(ordered))
            self._cached = None
            return
        index = self._mergeable()
        if index is not None:
            runs, sums = self._runs, self._sums
            merged = runs[index].tolist()
            merged += runs[index + 1].tolist()
            merged.sort()  # two sorted runs: one linear merge inside timsort
            runs[index : index + 2] = [array("d", merged)]
            sums[index : index + 2] = [math.fsum(sums[index : index + 2])]

    def steps(self) -> Iterator[None]:
        """:meth:`step` until :meth:`settled`, yielding after each (a turn for the loop)."""
        while not self.settled():
            self.step()
            yield

    def settle(self) -> None:
        """Every step at once."""
        for _ in self.steps():
            pass

    def clear(self) -> None:
        self._fresh = array("d")
        self._runs.clear()
        self._sums.clear()
        self._cached = None

    def summary(self) -> dict[str, Any]:
        """``count``, ``min``, ``mean``, the :data:`PERCENTILES` (nearest rank) and ``max``,
        ``None`` for all but ``count`` when empty. Settles first if it must."""
        self.settle()
        if self._cached is None:
            self._cached = self._summary()
        return dict(self._cached)

    def _summary(self) -> dict[str, Any]:
        runs = self._runs
        count = sum(len(run) for run in runs)
        result: dict[str, Any] = {"count": count}
        if not count:
            result.update(dict.fromkeys(("min", "mean", *(k for k, _ in PERCENTILES), "max")))
            return result
        result["min"] = min(run[0] for run in runs)
        result["mean"] = math.fsum(self._sums) / count
        for key, q in PERCENTILES:
            result[key] = select(runs, nearest_rank(q, count) - 1)
        result["max"] = max(run[-1] for run in runs)
        return result

    def _mergeable(self) -> int | None:
        """The newest neighbouring pair worth merging: the older run is at most twice the
        newer one, and together they fit in the cap."""
        runs = self._runs
        for index in range(len(runs) - 2, -1, -1):
            older, newer = len(runs[index]), len(runs[index + 1])
            if older <= 2 * newer and older + newer <= self._cap:
                return index
        return None

    def __repr__(self) -> str:
        return f"<Values {len(self)} in {len(self._runs)} runs, {len(self._fresh)} unsorted>"


def select(runs: list[array[float]], k: int) -> float:
    """The ``k``-th smallest value (from 0) of the union of sorted ``runs``.

    Each round takes the middle of the largest still-possible range as a pivot and
    counts, with ``bisect``, the values below and at it in every run: the answer is the
    pivot, or every run's range shrinks to one side of it. Raises ``IndexError`` when
    ``k`` is out of range.
    """
    if not 0 <= k < sum(len(run) for run in runs):
        raise IndexError(f"no value of rank {k}")
    lows = [0] * len(runs)
    highs = [len(run) for run in runs]
    while True:
        widest = max(range(len(runs)), key=lambda i: highs[i] - lows[i])
        pivot = runs[widest][(lows[widest] + highs[widest]) // 2]
        below = [bisect_left(run, pivot, lows[i], highs[i]) for i, run in enumerate(runs)]
        if k < sum(below):
            highs = below
            continue
        through = [bisect_right(run, pivot, below[i], highs[i]) for i, run in enumerate(runs)]
        if k < sum(through):
            return pivot
        lows = through
