"""``Tally``: what the engine counts as requests are scheduled and finish. No I/O, no clock.

Besides the mergeable aggregates (:mod:`pyattacker.measure`), it keeps a bounded count of
the error messages requests ended with (:class:`ErrorMessages`): what a report quotes to
say *what* went wrong, where status codes and error classes only say how often.

Kept apart from the engine so the async driver reads as scheduling and sending only, and
so the counting (on the hot path: every line here runs once per request) can be measured
and tuned on its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyattacker.measure import Attempt, RequestRecord, RequestStats, WindowSeries

__all__ = ["MAX_MESSAGES", "OTHER_MESSAGES", "ErrorGroup", "ErrorMessages", "Tally", "error_key"]

MAX_MESSAGES = 20
OTHER_MESSAGES = "(other messages)"

# An id: letters and digits joined by - or _ (``chatcmpl-9f2c``, a UUID), or one run of 8 or
# more letters and digits; either way holding a digit and a letter.
_ID = re.compile(r"\b[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)+\b|\b[A-Za-z0-9]{8,}\b")
# A number (or a dotted run of them: an IPv4 address, a version) that is not part of a
# word, nor a status code (``HTTP 429``, ``status=503``).
_NUMBER = re.compile(r"(?<![\w<])(?<!HTTP )(?<!status=)\d+(?:\.\d+)*")


def _id_or_word(match: re.Match[str]) -> str:
    text = match.group()
    has_digit = any(c.isdigit() for c in text)
    return "<id>" if has_digit and any(c.isalpha() for c in text) else text


def error_key(message: str) -> str:
    """The kind of an error message: ``message`` with its ids replaced by ``<id>`` and its
    numbers by ``<n>``, so that messages differing only in a ``Retry-After`` value, a
    completion id or a port group together. Status codes (``HTTP 429``, ``status=503``)
    are kept: they tell kinds apart. Deterministic; it knows no message format."""
    return _NUMBER.sub("<n>", _ID.sub(_id_or_word, message))


@dataclass(frozen=True, slots=True)
class ErrorGroup:
    """``count`` requests ended with a message of kind ``key`` (see :func:`error_key`);
    ``example`` is the first such message, verbatim (``None`` for :data:`OTHER_MESSAGES`)."""

    key: str
    count: int
    example: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "count": self.count, "example": self.example}


class ErrorMessages:
    """How many requests ended with each kind of error message, for at most
    :data:`MAX_MESSAGES` kinds, with one example message of each.

    A message's kind is its :func:`error_key`. The first ``MAX_MESSAGES`` kinds seen are
    kept and counted, each with the first message of that kind; a request whose kind came
    later, when the table was full, counts under :data:`OTHER_MESSAGES`. So memory is
    bounded whatever the messages carry, and the total of the counts is the number of
    requests noted. Messages are :attr:`~pyattacker.measure.Attempt.error` lines: one line,
    at most 300 characters, scrubbed of keys by whoever wrote them (so the examples are
    too). Not mergeable, on purpose: it is a report's quotation, not a figure.
    """

    __slots__ = ("_counts", "_examples", "_last", "other")

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._examples: dict[str, str] = {}
        self._last = ("", "")  # the last message and its key: errors come in runs
        self.other = 0

    def note(self, message: str) -> None:
        last, key = self._last
        if message != last:
            key = error_key(message)
            self._last = (message, key)
        counts = self._counts
        if key in counts:
            counts[key] += 1
        elif len(counts) < MAX_MESSAGES:
            counts[key] = 1
            self._examples[key] = message
        else:
            self.other += 1

    def groups(self) -> list[ErrorGroup]:
        """Kept kinds, most common first (ties by key), then :data:`OTHER_MESSAGES` (no
        example) if any request's kind was not kept."""
        ranked = sorted(self._counts.items(), key=lambda item: (-item[1], item[0]))
        groups = [ErrorGroup(key, count, self._examples[key]) for key, count in ranked]
        if self.other:
            groups.append(ErrorGroup(OTHER_MESSAGES, self.other, None))
        return groups

    def __repr__(self) -> str:
        return f"ErrorMessages(kept={len(self._counts)}, other={self.other})"


class Tally:
    """Totals, per-target stats and the time series of one attack.

    ``per_target`` keeps a :class:`RequestStats` per target besides the total (pointless
    with one target, whose figures are the total's, and ~5 us a request). ``on_record``
    receives every finished request's :class:`RequestRecord`; without it, one-attempt
    requests are counted from their attempt and no record is built (~2 us a request).
    ``errors`` counts the last attempt's :attr:`~pyattacker.measure.Attempt.error` of
    every request that has one (a failed, throttled or dropped request, mostly).
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
        self.errors = ErrorMessages()
        self._late_after = late_after
        self._per_target = per_target
        self._on_record = on_record

    def arrival(self, scheduled: float, in_flight: int) -> None:
        """One arrival of the load model at ``scheduled``, with ``in_flight`` in progress
        counting it (unless it was dropped): see ``WindowSeries.note_arrival``."""
        self.scheduled += 1
        self.windows.note_arrival(scheduled, in_flight)

    def finished(self, attempts: list[Attempt]) -> None:
        """Count one finished request (its attempts, in order)."""
        error = attempts[-1].error
        if error is not None:
            self.errors.note(error)
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
