"""Counting a load test's bulk, its plain OK answers, in batches.

Nearly every request of a load test is one attempt that ended OK, with a status and no
LLM figures (:func:`is_plain_ok`). A request is counted one of two ways: alone, as it
ends (``RequestStats.add``/``add_attempt``, ``WindowSeries.add``/``add_attempt`` and
``note_sent``), or, when it is a plain OK answer, in a batch: an :class:`OkBatch` reads a
run of them once, and each counting class adds the batch to its own figures
(:meth:`RequestStats.add_ok_batch`, :meth:`WindowSeries.add_ok_batch`), each value's
bucket found once for every histogram it goes to (:class:`~pyattacker.measure.Binned`).
Both ways give the same figures; a property test feeds the same requests through both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import chain
from typing import TYPE_CHECKING

from pyattacker.measure._binned import Binned, bucket_indexes, sum_units
from pyattacker.measure._histogram import _TOP
from pyattacker.measure._records import Attempt, Outcome

if TYPE_CHECKING:
    from pyattacker.measure._stats import RequestStats
    from pyattacker.measure._windows import WindowSeries

__all__ = ["OkBatch", "PlainRow", "add_ok_answers", "is_plain_ok", "plain_row", "row_attempt"]


def is_plain_ok(attempt: Attempt) -> bool:
    """Whether ``attempt`` is a *plain OK answer*: ended OK, sent and ended, with no LLM
    figures (no first token, no usage), as :class:`OkBatch` needs."""
    return (
        attempt.outcome is Outcome.OK
        and attempt.sent is not None
        and attempt.end is not None
        and attempt.first_token is None
        and attempt.usage is None
    )


#: A plain OK answer as a batch holds it (:func:`plain_row`): request number, scheduled,
#: sent, first byte (``None``: none), end, status (``None``: none), bytes sent, bytes
#: received, error class (``None``: none) and name (``None``: none). A tuple, not an
#: Attempt: the engine's direct path counts its answers without building one, and a batch
#: reads its columns in C (``zip``) rather than an attribute at a time.
PlainRow = tuple[
    int, float, float, "float | None", float, "int | None", int, int, "str | None", "str | None"
]


def plain_row(attempt: Attempt) -> PlainRow:
    """``attempt``, a plain OK answer (:func:`is_plain_ok`), as a batch's row."""
    sent, end = attempt.sent, attempt.end
    assert sent is not None  # is_plain_ok
    assert end is not None
    return (
        attempt.request, attempt.scheduled, sent, attempt.first_byte, end, attempt.status,
        attempt.bytes_sent, attempt.bytes_received, attempt.error_class, attempt.name,
    )  # fmt: skip


def row_attempt(row: PlainRow) -> Attempt:
    """The attempt a row was read from (its target aside): how a row is counted alone."""
    n, scheduled, sent, first_byte, end, status, sent_bytes, received, error_class, name = row
    attempt = Attempt(n, 1, scheduled, sent=sent, first_byte=first_byte, end=end, status=status)
    attempt.outcome, attempt.error_class, attempt.name = Outcome.OK, error_class, name
    attempt.bytes_sent, attempt.bytes_received = sent_bytes, received
    return attempt


class OkBatch:
    """The one-attempt requests ``attempts``, each a plain OK answer, read once: a value
    that the counting classes add to their own figures (:meth:`of_rows` reads them from
    their rows instead, :data:`PlainRow`).

    ``statuses`` are the answers' statuses (those that have one); ``status_each`` the
    status of each answer in order, ``None`` where it has none. ``sents`` and ``ends`` are
    the attempts' times; ``delays`` (sent minus scheduled),
    ``latencies`` (end minus scheduled), ``services`` (end minus sent) and ``ttfbs``
    (first byte minus sent, of those that have one) are binned, each span negative
    counted as 0, as ``RequestStats`` does. When every first byte is its answer's end (a
    small answer arrives in one read), ``ttfbs`` *is* ``services``.

    Raises ``ValueError``, having read none of them, for a time that is not finite (or a
    span too large for its arithmetic, past 1e290 s: count such answers alone).
    """

    __slots__ = (
        "bytes_received", "bytes_sent", "count", "delays", "early", "ends", "error_classes",
        "latencies", "sents", "services", "status_each", "statuses", "ttfbs",
    )  # fmt: skip
    count: int
    sents: Sequence[float]
    ends: Sequence[float]
    status_each: Sequence[int | None]
    statuses: Sequence[int]
    error_classes: list[str]
    early: int
    bytes_sent: int
    bytes_received: int
    delays: Binned
    latencies: Binned
    services: Binned
    ttfbs: Binned

    def __init__(
        self, attempts: Sequence[Attempt] = (), *, _rows: Sequence[PlainRow] | None = None
    ) -> None:
        self._read([plain_row(attempt) for attempt in attempts] if _rows is None else _rows)

    @classmethod
    def of_rows(cls, rows: Sequence[PlainRow]) -> OkBatch:
        """The batch of the plain OK answers ``rows`` (see :data:`PlainRow`)."""
        return cls(_rows=rows)

    def _read(self, rows: Sequence[PlainRow]) -> None:
        """Every answer's figures: the columns taken apart in C, the three spans of all
        of them binned in one call (:func:`bucket_indexes`)."""
        self.count = len(rows)
        if not rows:
            self._read_none()
            return
        _, scheduleds, sents, firsts, ends, statuses, sent_bytes, received, classes, _ = zip(
            *rows, strict=True
        )
        if not math.isfinite(sum(scheduleds) + sum(sents) + sum(ends)):
            _refuse_not_finite(rows)  # (or finite times whose sum overflowed: fine)
        delays: list[float] = []
        latencies: list[float] = []
        services: list[float] = []
        early = 0
        for scheduled, sent, end in zip(scheduleds, sents, ends, strict=True):  # per request
            if sent > scheduled:
                delays.append(sent - scheduled)
            else:
                delays.append(0.0)
                if sent < scheduled:
                    early += 1
            latencies.append(end - scheduled if end > scheduled else 0.0)
            services.append(end - sent if end > sent else 0.0)
        try:
            self.delays, self.latencies, self.services = _binned(delays, latencies, services)
        except OverflowError:  # int() of a span past 1e290 s
            # Counted alone, it is binned at the top as any span past the histograms' range.
            raise ValueError("a span too large to count in a batch: count these alone") from None
        self.sents, self.ends, self.status_each = sents, ends, statuses
        self.statuses = [s for s in statuses if s is not None] if None in statuses else statuses
        self.error_classes = [str(c) for c in classes if c is not None]
        self.early, self.bytes_sent, self.bytes_received = early, sum(sent_bytes), sum(received)
        self.ttfbs = self.services if firsts == ends else Binned(_ttfbs(rows))

    def _read_none(self) -> None:
        self.sents = self.ends = self.status_each = self.statuses = ()
        self.error_classes = []
        self.early = self.bytes_sent = self.bytes_received = 0
        self.delays = self.latencies = self.services = self.ttfbs = Binned([])

    def __repr__(self) -> str:
        return f"OkBatch(count={self.count})"


def add_ok_answers(
    attempts: Sequence[Attempt], stats: RequestStats, windows: WindowSeries | None = None
) -> None:
    """Count the one-attempt requests ``attempts``, each a plain OK answer
    (:func:`is_plain_ok`): exactly what ``stats.add_attempt(a)`` does for each, and, with
    ``windows``, ``windows.add_attempt(a)`` and ``windows.note_sent(a.sent)``.

    Raises ``ValueError``, having counted none of them, for a time that is not finite or
    (with ``windows``) before their origin: then count them one by one to keep the rest.
    """
    if not attempts:
        return
    batch = OkBatch(attempts)
    if windows is not None:
        windows.add_ok_batch(batch)  # first: it refuses a time before its origin
    stats.add_ok_batch(batch)


def _refuse_not_finite(rows: Sequence[PlainRow]) -> None:
    """Raise the ``ValueError`` that counting alone would raise for the first answer with
    a time that is not finite; return if there is none."""
    for row in rows:
        for name, t in zip(("scheduled", "sent", "first_byte", "end"), row[1:5], strict=True):
            if t is not None and not math.isfinite(t):
                raise ValueError(f"attempt {row[0]}'s {name} time must be finite, got {t!r}")


def _binned(*spans: list[float]) -> list[Binned]:
    """Each list of spans (finite, >= 0, of one length) binned, with one
    :func:`bucket_indexes` call for all of them; raises ``OverflowError`` for a span past
    1e290 s. When any span is at or above the histograms' top, each list is binned by
    ``Binned`` itself (its checked way)."""
    every = list(chain.from_iterable(spans))
    units = sum_units(every)
    if max(every, default=0.0) >= _TOP:
        return [Binned(part) for part in spans]
    indexes, n = bucket_indexes(units), len(spans[0])
    return [
        Binned.of_parts(part, indexes[i * n : (i + 1) * n], sum(units[i * n : (i + 1) * n]))
        for i, part in enumerate(spans)
    ]


def _ttfbs(rows: Sequence[PlainRow]) -> list[float]:
    """First byte minus sent of each answer that has a first byte (negative as 0)."""
    ttfbs = []
    for row in rows:
        sent, first_byte = row[2], row[3]
        if first_byte is not None:
            if not math.isfinite(first_byte):
                _refuse_not_finite([row])
            ttfbs.append(first_byte - sent if first_byte > sent else 0.0)
    return ttfbs
