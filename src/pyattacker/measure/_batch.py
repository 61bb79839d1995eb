"""Many plain answers counted at once: the attack's hottest path, done with numpy.

A load test's requests are nearly all alike: one attempt, answered OK, no LLM data. Each
used to cost ~8 us of Python in :class:`RequestStats` and :class:`WindowSeries` (four
histogram records, two window records, a dozen counters), a quarter of what one process
can spend per request at 30k requests a second. :class:`PlainAnswers` holds a batch of
such requests as arrays, and ``RequestStats.add_plain`` / ``WindowSeries.add_plain`` /
:func:`record_array` count the batch with a few vector operations, to *exactly* the
state that adding them one by one gives (the tests compare the two on arbitrary batches).

Why numpy is worth a dependency here (DESIGN.md §8 allows it for histograms): it is the
only way to do per-value arithmetic in Python without paying the interpreter per value.
It is imported on the first batch, not when pyattacker is (numpy takes ~90 ms to import).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from pyattacker.measure._histogram import Histogram
from pyattacker.measure._records import Attempt, Outcome, is_plain
from pyattacker.measure._stats import RequestStats
from pyattacker.measure._windows import WindowSeries

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "PlainAnswers", "add_to_stats", "add_to_windows", "is_plain", "record_array", "warm_up"
]  # fmt: skip

_UNIT = 2.0**30  # the histogram's bucket unit, 2**-30 s (see _histogram.py)
_SUB_BITS = 11
_SUB_COUNT = 1 << _SUB_BITS
_CHUNK = 1 << 16  # values per vector sum: 2**16 values below 2**47 units fit in int64


class PlainAnswers:
    """One-attempt requests that :func:`is_plain` accepts, as arrays (seconds).

    ``latency`` (end - scheduled), ``service`` (end - sent), ``ttfb`` (first byte - sent)
    and ``dispatch`` (sent - scheduled) are clamped at 0, as the per-request code does;
    ``early`` counts sends before their schedule.
    """

    __slots__ = (
        "bytes_received", "bytes_sent", "dispatch", "early", "end", "latency", "scheduled",
        "sent", "service", "statuses", "ttfb",
    )  # fmt: skip

    def __init__(self, attempts: Sequence[Attempt]) -> None:
        rows = [(a.scheduled, a.sent, a.first_byte, a.end) for a in attempts]
        times = np.array(rows, dtype=np.float64).reshape(len(rows), 4)
        scheduled, sent, first_byte, end = times.T
        self.scheduled, self.sent, self.end = scheduled, sent, end
        self.latency = _span(scheduled, end)
        self.service = _span(sent, end)
        self.ttfb = _span(sent, first_byte)
        self.dispatch = _span(scheduled, sent)
        self.early = int(np.count_nonzero(sent < scheduled))
        self.statuses = Counter(a.status for a in attempts if a.status is not None)
        self.bytes_sent = sum(a.bytes_sent for a in attempts)
        self.bytes_received = sum(a.bytes_received for a in attempts)

    def __len__(self) -> int:
        return len(self.end)


def warm_up() -> None:
    """Run every numpy call of this module once on a throwaway batch: some import parts of
    numpy on first use (~10 ms), which a caller does not want inside a measured run."""
    attempt = Attempt(request=0, attempt=1, scheduled=1.0, outcome=Outcome.OK)
    attempt.sent, attempt.first_byte, attempt.end, attempt.status = 1.0, 1.5, 2.0, 200
    batch = PlainAnswers([attempt, attempt])
    add_to_stats(RequestStats(), batch)
    add_to_windows(WindowSeries(1.0, 0.0), batch)
    record_array(Histogram(), np.array([Histogram.TOP, 1.0]))


def _span(start: npt.NDArray[np.float64], end: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``end - start`` where positive, else 0.0 (the scalar code's ``if end > start``)."""
    return np.where(end > start, end - start, 0.0)


def record_array(histogram: Histogram, values: npt.NDArray[np.float64]) -> None:
    """``histogram.record(v)`` for every ``v`` of ``values``, to the identical state.

    Values outside ``[0, TOP)`` (or NaN) go through ``record`` one by one, so they raise
    or land in the top bucket exactly as they would have.
    """
    top = histogram.TOP
    inside = (values >= 0.0) & (values < top)
    if not inside.all():
        for value in values[~inside].tolist():
            histogram.record(value)
        values = values[inside]
    for start in range(0, len(values), _CHUNK):
        _record_inside(histogram, values[start : start + _CHUNK])


def _record_inside(histogram: Histogram, values: npt.NDArray[np.float64]) -> None:
    """``values`` all in ``[0, TOP)``, at most ``_CHUNK`` of them.

    ``Histogram.record`` takes ``x = floor(v * 2**60)`` and buckets ``u = x >> 30``. Here
    ``u = floor(v * 2**30)`` (the same: scaling by a power of two is exact) and
    ``x = u * 2**30 + floor(frac(v * 2**30) * 2**30)``, every step exact in float64, so
    the integer sum is exact without 77-bit integers. ``bit_length(u)`` is ``frexp``'s
    exponent (exact below 2**53).
    """
    if not len(values):
        return
    scaled = values * _UNIT
    whole = np.floor(scaled)
    low = np.floor((scaled - whole) * _UNIT).astype(np.int64)
    units = whole.astype(np.int64)
    shift = np.maximum(np.frexp(whole)[1] - _SUB_BITS, 0)
    index = np.where(units < _SUB_COUNT, units, (shift << (_SUB_BITS - 1)) + (units >> shift))
    buckets, counts = np.unique(index, return_counts=True)
    histogram._add_counts(
        zip(buckets.tolist(), counts.tolist(), strict=True),
        count=len(values),
        total_units=(int(units.sum()) << 30) + int(low.sum()),
        low=float(values.min()),
        high=float(values.max()),
    )


def add_to_stats(stats: RequestStats, batch: PlainAnswers) -> None:
    """``stats.add_attempt(a)`` for every request of ``batch``, to the identical state."""
    n = len(batch)
    if not n:
        return
    stats.requests += n
    stats.attempts += n
    stats.attempts_per_request[1] += n
    stats.by_outcome[Outcome.OK.value] += n
    stats.by_status.update(batch.statuses)
    stats.bytes_sent += batch.bytes_sent
    stats.bytes_received += batch.bytes_received
    stats.sent_attempts += n
    stats.early_sends += batch.early
    record_array(stats.dispatch_delay, batch.dispatch)
    record_array(stats.latency_ok, batch.latency)
    record_array(stats._service_single, batch.service)
    record_array(stats.ttfb, batch.ttfb)


def add_to_windows(series: WindowSeries, batch: PlainAnswers) -> None:
    """``series.add_attempt(a)`` and ``series.note_sent(a.sent)`` for every request of
    ``batch``, to the identical state. ``ValueError`` (and nothing added) if a time is
    before the series' origin or not finite, as those would raise."""
    if not len(batch):
        return
    ends, sends = _indexes(series, batch.end), _indexes(series, batch.sent)
    for index in np.unique(ends).tolist():
        mine = ends == index
        tally = series._tally_at(index)
        answered = int(np.count_nonzero(mine))
        tally.ok += answered
        tally.completed += answered
        record_array(tally.latency, batch.latency[mine])
        record_array(tally.service_time, batch.service[mine])
    windows, counts = np.unique(sends, return_counts=True)
    for index, sent in zip(windows.tolist(), counts.tolist(), strict=True):
        series._tally_at(index).sent += sent


def _indexes(series: WindowSeries, times: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """``series.index_of(t)`` of each time (the same float arithmetic), or its error."""
    bad = ~((times >= series.origin) & (times < np.inf))
    if bad.any():
        series.index_of(float(times[bad][0]))  # raises the scalar code's ValueError
    # astype truncates toward zero: int() of the non-negative quotient, as index_of does
    return ((times - series.origin) / series.width).astype(np.int64)
