"""``Tally``: what the engine counts as requests are scheduled and finish. No I/O, no clock.

Kept apart from the engine so the async driver reads as scheduling and sending only, and
so the counting (on the hot path: every line here runs once per request) can be measured
and tuned on its own.
"""

from __future__ import annotations

from collections.abc import Callable

from pyattacker.measure import Attempt, RequestRecord, RequestStats, WindowSeries

__all__ = ["Tally"]


class Tally:
    """Totals, per-target stats and the time series of one attack.

    ``per_target`` keeps a :class:`RequestStats` per target besides the total (pointless
    with one target, whose figures are the total's, and ~5 us a request). ``on_record``
    receives every finished request's :class:`RequestRecord`; without it, one-attempt
    requests are counted from their attempt and no record is built (~2 us a request).
    """

    def __init__(
        self,
        *,
        origin: float,
        window: float,
        late_after: float,
        per_target: bool,
        on_record: Callable[[RequestRecord], None] | None,
    ) -> None:
        self.total = RequestStats()
        self.by_target: dict[str, RequestStats] = {}
        self.windows = WindowSeries(window, origin)
        self.scheduled = 0
        self.sent = 0
        self.late = 0
        self.last_sent = origin
        self._late_after = late_after
        self._per_target = per_target
        self._on_record = on_record

    def arrival(self, scheduled: float, in_flight: int) -> None:
        """One arrival of the load model at ``scheduled``, with ``in_flight`` in progress."""
        self.scheduled += 1
        self.windows.note_arrival(scheduled, in_flight)

    def finished(self, attempts: list[Attempt]) -> None:
        """Count one finished request (its attempts, in order)."""
        if len(attempts) == 1 and self._on_record is None and not self._per_target:
            self._one_attempt(attempts[0])
        else:
            self._record(RequestRecord.from_attempts(attempts))

    def _one_attempt(self, attempt: Attempt) -> None:
        self.total.add_attempt(attempt)
        if attempt.sent is not None:
            self._sent_at(attempt.sent, attempt.scheduled)
        self.windows.add_attempt(attempt)

    def _record(self, record: RequestRecord) -> None:
        self.total.add(record)
        if self._per_target and record.resource is not None:
            stats = self.by_target.get(record.resource)
            if stats is None:
                stats = self.by_target[record.resource] = RequestStats()
            stats.add(record)
        if record.sent is not None:
            self._sent_at(record.sent, record.scheduled)
        self.windows.add(record)
        if self._on_record is not None:
            self._on_record(record)

    def _sent_at(self, sent: float, scheduled: float) -> None:
        self.sent += 1
        if sent > self.last_sent:
            self.last_sent = sent
        self.windows.note_sent(sent)
        if sent - scheduled > self._late_after:
            self.late += 1
