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
from typing import TYPE_CHECKING, NoReturn

from pyattacker.measure._binned import Binned
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

    Raises ``ValueError``, having read none of them, for a time that is not finite.
    """

    __slots__ = (
        "bytes_received", "bytes_sent", "count", "delays", "early", "ends", "error_classes",
        "latencies", "sents", "services", "status_each", "statuses", "ttfbs",
    )  # fmt: skip

    def __init__(self, attempts: Sequence[Attempt]) -> None:
        self.count = len(attempts)
        statuses: list[int] = []
        error_classes: list[str] = []
        sents: list[float] = []
        ends: list[float] = []
        delays: list[float] = []
        latencies: list[float] = []
        services: list[float] = []
        ttfbs: list[float] = []
        early = sent_bytes = received_bytes = 0
        for attempt in attempts:  # on local names: this runs once per request
            scheduled, sent, end = attempt.scheduled, attempt.sent, attempt.end
            assert sent is not None  # is_plain_ok
            assert end is not None
            first_byte = attempt.first_byte
            if not (
                -math.inf < end < math.inf
                and -math.inf < sent < math.inf
                and -math.inf < scheduled < math.inf
                and (first_byte is None or -math.inf < first_byte < math.inf)
            ):
                _refuse(attempt)
            ends.append(end)
            sents.append(sent)
            if attempt.status is not None:
                statuses.append(attempt.status)
            if attempt.error_class is not None:
                error_classes.append(str(attempt.error_class))
            sent_bytes += attempt.bytes_sent
            received_bytes += attempt.bytes_received
            if sent < scheduled:
                early += 1
            delays.append(sent - scheduled if sent > scheduled else 0.0)
            latencies.append(end - scheduled if end > scheduled else 0.0)
            services.append(end - sent if end > sent else 0.0)
            if first_byte is not None:
                ttfbs.append(first_byte - sent if first_byte > sent else 0.0)
        self.statuses, self.error_classes = statuses, error_classes
        # Each answer's status, in order (for a batch that spans windows): ``statuses``
        # itself when every answer has one, as plain OK answers over HTTP always do.
        self.status_each: Sequence[int | None] = (
            statuses if len(statuses) == self.count else [a.status for a in attempts]
        )
        self.sents, self.ends = sents, ends
        self.early, self.bytes_sent, self.bytes_received = early, sent_bytes, received_bytes
        self.delays = Binned(delays)
        self.latencies = Binned(latencies)
        self.services = Binned(services)
        self.ttfbs = self.services if ttfbs == services else Binned(ttfbs)

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


def _refuse(attempt: Attempt) -> NoReturn:
    """Raise the ``ValueError`` that counting ``attempt`` alone would raise."""
    for name in ("scheduled", "sent", "first_byte", "end"):
        t = getattr(attempt, name)
        if t is not None and not math.isfinite(t):
            raise ValueError(f"attempt {attempt.request}'s {name} time must be finite, got {t!r}")
    raise AssertionError("_refuse found nothing to refuse")  # pragma: no cover
