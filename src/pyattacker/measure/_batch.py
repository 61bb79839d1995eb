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

__all__ = ["OkBatch", "add_ok_answers", "is_plain_ok"]


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


class OkBatch:
    """The one-attempt requests ``attempts``, each a plain OK answer, read once: a value
    that the counting classes add to their own figures.

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

    def __init__(self, attempts: Sequence[Attempt]) -> None:
        self.count = len(attempts)
        try:
            self._read(attempts)
        except (OverflowError, ValueError):  # int() of an infinite or NaN span
            _refuse_not_finite(attempts)
            # Every time is finite: a span past 1e290 s overflowed. Counted alone, it is
            # binned at the top as any span past the histograms' range.
            raise ValueError("a span too large to count in a batch: count these alone") from None
        if not math.isfinite(sum(self.sents) + sum(self.ends)):
            _refuse_not_finite(attempts)  # (or finite times whose sum overflowed: fine)
        self.status_each: Sequence[int | None] = (  # (for a batch that spans windows)
            self.statuses if len(self.statuses) == self.count else [a.status for a in attempts]
        )

    def _read(self, attempts: Sequence[Attempt]) -> None:
        """Every attempt's figures in one pass; then the three spans of all of them binned
        in one call (:func:`bucket_indexes`), which costs less than a pass per span.
        Raises ``ValueError`` or ``OverflowError`` for a time that is not finite."""
        statuses: list[int] = []
        error_classes: list[str] = []
        sents: list[float] = []
        ends: list[float] = []
        delays: list[float] = []
        latencies: list[float] = []
        services: list[float] = []
        early = sent_bytes = received_bytes = 0
        scheduled_sum = 0.0  # only to see that every scheduled time is finite
        in_one_read = True  # every first byte is its answer's end
        for attempt in attempts:  # on local names: this runs once per request
            scheduled, sent, end = attempt.scheduled, attempt.sent, attempt.end
            assert sent is not None  # is_plain_ok
            assert end is not None
            scheduled_sum += scheduled
            sents.append(sent)
            ends.append(end)
            if attempt.status is not None:
                statuses.append(attempt.status)
            if attempt.error_class is not None:
                error_classes.append(str(attempt.error_class))
            sent_bytes += attempt.bytes_sent
            received_bytes += attempt.bytes_received
            if attempt.first_byte != end:
                in_one_read = False
            if sent > scheduled:
                delays.append(sent - scheduled)
            else:
                delays.append(0.0)
                if sent < scheduled:
                    early += 1
            latencies.append(end - scheduled if end > scheduled else 0.0)
            services.append(end - sent if end > sent else 0.0)
        if not math.isfinite(scheduled_sum):
            raise ValueError("a scheduled time is not finite")  # _refuse_not_finite says which
        self.statuses, self.error_classes = statuses, error_classes
        self.sents, self.ends = sents, ends
        self.early, self.bytes_sent, self.bytes_received = early, sent_bytes, received_bytes
        self.delays, self.latencies, self.services = _binned(delays, latencies, services)
        self.ttfbs = self.services if in_one_read else Binned(_ttfbs(attempts))

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


def _refuse_not_finite(attempts: Sequence[Attempt]) -> None:
    """Raise the ``ValueError`` that counting alone would raise for the first attempt with
    a time that is not finite; return if there is none."""
    for attempt in attempts:
        for name in ("scheduled", "sent", "first_byte", "end"):
            t = getattr(attempt, name)
            if t is not None and not math.isfinite(t):
                raise ValueError(
                    f"attempt {attempt.request}'s {name} time must be finite, got {t!r}"
                )


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


def _ttfbs(attempts: Sequence[Attempt]) -> list[float]:
    """First byte minus sent of each attempt that has a first byte (negative as 0)."""
    ttfbs = []
    for attempt in attempts:
        first_byte, sent = attempt.first_byte, attempt.sent
        if first_byte is not None:
            assert sent is not None  # is_plain_ok
            if not math.isfinite(first_byte):
                _refuse_not_finite([attempt])
            ttfbs.append(first_byte - sent if first_byte > sent else 0.0)
    return ttfbs
