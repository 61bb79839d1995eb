"""``Tally``: what the engine counts as requests are scheduled and finish. No I/O, no clock.

Besides the mergeable aggregates (:mod:`pyattacker.measure`), it keeps a bounded count of
the error messages requests ended with (:class:`ErrorMessages`): what a report quotes to
say *what* went wrong, where status codes and error classes only say how often.

Kept apart from the engine so the async driver reads as scheduling and sending only, and
so the counting (the hot path: it runs for every request, and for most of them in the
batches of :meth:`Tally.flush`) can be read, measured and tuned on its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mypy_extensions import mypyc_attr

from pyattacker.measure import (
    Attempt,
    OkBatch,
    Outcome,
    Phases,
    PlainRow,
    RequestRecord,
    RequestStats,
    WindowSeries,
    row_attempt,
)

__all__ = [
    "BATCH",
    "MAX_MESSAGES",
    "OTHER_MESSAGES",
    "Breakdown",
    "ErrorGroup",
    "ErrorMessages",
    "Tally",
    "error_key",
]

MAX_MESSAGES = 20
BATCH = 32  # plain OK answers counted together (see Tally.flush)
OTHER_MESSAGES = "(other messages)"
_OK = Outcome.OK  # read per request: a module name costs less than an Enum member

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

    def note(self, message: str, count: int = 1) -> None:
        """Count ``count`` requests that ended with ``message``."""
        last, key = self._last
        if message != last:
            key = error_key(message)
            self._last = (message, key)
        counts = self._counts
        if key in counts:
            counts[key] += count
        elif len(counts) < MAX_MESSAGES:
            counts[key] = count
            self._examples[key] = message
        else:
            self.other += count

    def merge(self, other: ErrorMessages) -> None:
        """Add ``other``'s counts: kinds both kept add up, new ones are kept while there
        is room (the first example seen stays), the rest go to :data:`OTHER_MESSAGES`."""
        for key, count in other._counts.items():
            if key in self._counts:
                self._counts[key] += count
            elif len(self._counts) < MAX_MESSAGES:
                self._counts[key] = count
                self._examples[key] = other._examples[key]
            else:
                self.other += count
        self.other += other.other

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


class Breakdown:
    """Requests counted apart by a key (a target, a request's name): each key's
    :class:`RequestStats` in ``stats`` and its :class:`WindowSeries` in ``windows`` (its
    requests by the window they ended in), created when the key is first seen."""

    __slots__ = ("_window_spec", "stats", "windows")

    def __init__(self, window: float, origin: float) -> None:
        self.stats: dict[str, RequestStats] = {}
        self.windows: dict[str, WindowSeries] = {}
        self._window_spec = (window, origin)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled by its fields (compiled, it has no ``__dict__`` to copy)."""
        return (_restored_breakdown, (self._window_spec, self.stats, self.windows))

    def add(self, key: str, record: RequestRecord) -> None:
        """Count ``record`` under ``key``."""
        stats = self.stats.get(key)
        if stats is None:
            stats = self.stats[key] = RequestStats()
            self.windows[key] = WindowSeries(*self._window_spec)
        stats.add(record)
        series = self.windows[key]
        series.add(record)
        if record.sent is not None:
            series.note_sent(record.sent)

    def open(self, key: str) -> None:
        """Start counting under ``key`` (nothing counted yet): its place in the order."""
        self.stats[key] = RequestStats()
        self.windows[key] = WindowSeries(*self._window_spec)

    def merge(self, other: Breakdown) -> None:
        """Add ``other``'s counts key by key (same window and origin)."""
        for key, stats in other.stats.items():
            if key not in self.stats:
                self.open(key)
            self.stats[key].merge(stats)
            self.windows[key].merge(other.windows[key])

    def rebase(self, origin: float) -> None:
        """Move every key's windows (and those of keys still to come) to ``origin``."""
        self._window_spec = (self._window_spec[0], origin)
        for series in self.windows.values():
            series.origin = origin

    def add_ok_batch(self, key: str, batch: OkBatch) -> None:
        """Count ``batch`` (plain OK answers, see :class:`OkBatch`) under ``key``, as
        :meth:`add` of each would."""
        if key not in self.stats:
            self.open(key)
        self.stats[key].add_ok_batch(batch)
        self.windows[key].add_ok_batch(batch)


def _restored_breakdown(
    spec: tuple[float, float], stats: dict[str, RequestStats], windows: dict[str, WindowSeries]
) -> Breakdown:
    breakdown = Breakdown(*spec)
    breakdown.stats, breakdown.windows = stats, windows
    return breakdown


@mypyc_attr(allow_interpreted_subclasses=True)  # subclassed by plain Python (the warmup's)
class Tally:
    """Totals, per-target and per-name stats and the time series of one attack.

    ``per_target`` keeps a :class:`RequestStats` per target besides the total (pointless
    with one target, whose figures are the total's, and not free per request); every
    request that carries a name (:attr:`~pyattacker.measure.Attempt.name`) is counted
    under it too, in ``names``. ``on_record``
    receives every finished request's :class:`RequestRecord`; without it, one-attempt
    requests are counted from their attempt and no record is built.
    ``errors`` counts the last attempt's :attr:`~pyattacker.measure.Attempt.error` of
    every request that has one (a failed, throttled or dropped request, mostly).

    Without either, plain OK answers wait in a small batch (see :meth:`flush`): read the
    figures through ``total``, ``windows``, ``sent``, ``late`` and ``last_sent``, which
    count it first. A time that cannot be counted (not finite, before ``origin``) raises
    ``ValueError`` from :meth:`finished` or from whichever of those counts its batch.
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
        self._total = RequestStats()
        self._windows = WindowSeries(window, origin)
        self.targets = Breakdown(window, origin)
        self._names = Breakdown(window, origin)
        self.scheduled = 0
        self._sent = 0
        self._late = 0
        self._last_sent = origin
        self.errors = ErrorMessages()
        self._late_after = float(late_after)  # (its __lt__ counts the late in flush)
        self._per_target = per_target
        self._on_record = on_record
        # Plain OK answers not counted yet (see `flush`): only when nobody wants records
        # or per-target figures, which need each request as it finishes. Named ones are
        # batched too (a request mix names every request): `_named` says the batch has one.
        self._ok: list[PlainRow] = []
        self._named = False
        self.batching = on_record is None and not per_target
        self._phases = Phases()  # the timing breakdown of every attempt

    def __getstate__(self) -> dict[str, Any]:
        """What pickling keeps (a worker's tally on its way to the driver): everything but
        ``on_record``, which belongs to the process that counted."""
        state = dict(getattr(self, "__dict__", {}))
        for cls in type(self).__mro__:  # compiled, its fields are in no __dict__: these
            for name in getattr(cls, "__mypyc_attrs__", ()):  # name them
                if name != "__dict__" and hasattr(self, name):
                    state[name] = getattr(self, name)
        state["_on_record"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)

    @property
    def names(self) -> Breakdown:
        """Each request name's figures (the batch of plain OK answers counted first)."""
        self.flush()
        return self._names

    @property
    def by_target(self) -> dict[str, RequestStats]:
        return self.targets.stats

    @property
    def windows_by_target(self) -> dict[str, WindowSeries]:
        return self.targets.windows

    # What was counted, with the batch of plain OK answers in: read these, not the fields.

    @property
    def total(self) -> RequestStats:
        self.flush()
        return self._total

    @property
    def windows(self) -> WindowSeries:
        self.flush()
        return self._windows

    @property
    def phases(self) -> Phases:
        """Where the attempts' time went (connect, TLS, waiting, ...)."""
        self.flush()
        return self._phases

    @property
    def sent(self) -> int:
        self.flush()
        return self._sent

    @property
    def late(self) -> int:
        self.flush()
        return self._late

    @property
    def last_sent(self) -> float:
        self.flush()
        return self._last_sent

    def arrival(self, scheduled: float, in_flight: int) -> None:
        """One arrival of the load model at ``scheduled``, with ``in_flight`` in progress
        counting it (unless it was dropped): see ``WindowSeries.note_arrival``."""
        self.scheduled += 1
        self._windows.note_arrival(scheduled, in_flight)

    def dropped(self, scheduled: float, count: int, message: str) -> None:
        """``count`` arrivals at ``scheduled`` (in one window), dropped before sending with
        ``message``: counted as ``count`` dropped requests, in bulk (no record is built, so
        ``on_record`` does not see them)."""
        self.scheduled += count
        self._total.add_dropped(count)
        self._windows.note_dropped(scheduled, count)
        self.errors.note(message, count)

    def finished(self, attempts: list[Attempt]) -> None:
        """Count one finished request (its attempts, in order)."""
        if len(attempts) == 1:
            self.finished_one(attempts[0])
        else:
            self._alone(attempts)

    def finished_as(self, attempts: list[Attempt], *, warm: bool) -> None:
        """Count a finished request whose caller judged whether it is a warmup's (a
        scenario's step goes with its flow): without a warmup, :meth:`finished`."""
        self.finished(attempts)

    def finished_one(self, attempt: Attempt) -> None:
        """``finished([attempt])``: a one-attempt request."""
        sent, end = attempt.sent, attempt.end
        if (
            self.batching
            and attempt.error is None
            # a plain OK answer, as is_plain_ok says, asked without a call
            and attempt.outcome is _OK
            and sent is not None
            and end is not None
            and attempt.first_token is None
            and attempt.usage is None
            and attempt.connect is None  # a new connection's setup: counted alone
        ):
            self._batch(  # its plain_row, without the call: this runs once per request
                (
                    attempt.request, attempt.scheduled, sent, attempt.first_byte, end,
                    attempt.status, attempt.bytes_sent, attempt.bytes_received,
                    attempt.error_class, attempt.name,
                )
            )  # fmt: skip
            return
        self._alone([attempt])

    def finished_plain(self, row: PlainRow) -> None:
        """Count a one-attempt request that ended a plain OK answer, given as its row
        (:attr:`batching` must be true): how the engine's direct path counts its answers,
        with no :class:`Attempt` built."""
        self._batch(row)

    def _batch(self, row: PlainRow) -> None:
        name = row[9]
        if name is not None:
            self._named = True
            if name not in self._names.stats:  # reports list names as first seen
                self._names.open(name)
        ok = self._ok
        ok.append(row)
        if len(ok) >= BATCH:
            self.flush()

    def _alone(self, attempts: list[Attempt]) -> None:
        """Count one request as it finishes: the way for all but batched plain OK answers.
        A one-attempt request that nobody wants a record of is counted from its attempt,
        which is what counting its record does, without building it."""
        error = attempts[-1].error
        if error is not None:
            self.errors.note(error)
        if len(attempts) == 1 and self.batching and attempts[0].name is None:
            self._one_attempt(attempts[0])
        else:
            self._record(RequestRecord.from_attempts(attempts))

    def flush(self) -> None:
        """Count the plain OK answers batched so far.

        Every one-attempt request that ended OK with no error and no LLM figures (nearly
        all of a load test) waits in a batch of up to :data:`BATCH`, read once into an
        :class:`~pyattacker.measure.OkBatch` that the totals and the windows each add to
        their figures. Counting is commutative, so only the readers (the properties
        above) need the batch counted first. Small, so that counting a batch never holds
        the loop long (benchmarks/README.md has the figures).
        """
        ok = self._ok
        if not ok:
            return
        self._ok = []
        try:
            batch = OkBatch.of_rows(ok)
            self._windows.add_ok_batch(batch)  # first: it refuses a time before its origin
        except ValueError:
            self._each_alone(ok)
            return
        self._total.add_ok_batch(batch)
        self._phases.add_ok_batch(batch)
        if self._named:
            self._named = False
            self._names_batch(ok)
        # Late: sent more than late_after (>= 0, a plan's limit) after its scheduled
        # time; the batch's delays are those spans (negative as 0). Counted in C.
        self._late += sum(map(self._late_after.__lt__, batch.delays.values))
        self._sent += len(ok)
        self._last_sent = max(self._last_sent, max(batch.sents))

    def _names_batch(self, ok: list[PlainRow]) -> None:
        """Count the named answers of a batch under their names, a batch per name."""
        by_name: dict[str, list[PlainRow]] = {}
        for row in ok:
            name = row[9]
            if name is not None:
                group = by_name.get(name)
                if group is None:
                    by_name[name] = [row]
                else:
                    group.append(row)
        for name, rows in by_name.items():
            self._names.add_ok_batch(name, OkBatch.of_rows(rows))

    def _each_alone(self, ok: list[PlainRow]) -> None:
        """A batch with a time it refuses (a sender on another clock, say): count each one
        as it would have been alone, so that only the wrong ones are refused, then say so."""
        refused: ValueError | None = None
        self._named = False
        for row in ok:
            try:
                self._alone([row_attempt(row)])  # a named one is counted under its name too
            except ValueError as exc:
                refused = refused or exc
        if refused is not None:
            raise refused from None

    def _one_attempt(self, attempt: Attempt) -> None:
        self._total.add_attempt(attempt)
        self._phases.add_attempt(attempt)
        if attempt.sent is not None:
            self._sent_at(attempt.sent, attempt.scheduled)
        self._windows.add_attempt(attempt)

    def _record(self, record: RequestRecord) -> None:
        self._total.add(record)
        self._phases.add_record(record)
        if self._per_target and record.resource is not None:
            self.targets.add(record.resource, record)
        if record.name is not None:
            self._names.add(record.name, record)
        if record.sent is not None:
            self._sent_at(record.sent, record.scheduled)
        self._windows.add(record)
        if self._on_record is not None:
            self._on_record(record)

    def _sent_at(self, sent: float, scheduled: float) -> None:
        self._sent += 1
        if sent > self._last_sent:
            self._last_sent = sent
        self._windows.note_sent(sent)
        if sent - scheduled > self._late_after:
            self._late += 1

    def merge(self, other: Tally) -> None:
        """Add ``other``'s counts (another worker's tally of the same plan, same window and
        origin): the figures then equal one tally's of both sets of requests. The error
        kinds merge by key; past :data:`MAX_MESSAGES` kinds in all, the rarer ones count
        under :data:`OTHER_MESSAGES` (which kinds one process kept depends on arrival order).
        ``ValueError`` when the windows differ."""
        other.flush()
        self.flush()
        self._total.merge(other._total)
        self._windows.merge(other._windows)
        self.targets.merge(other.targets)
        self.names.merge(other.names)
        self.scheduled += other.scheduled
        self._sent += other._sent
        self._late += other._late
        self._last_sent = max(self._last_sent, other._last_sent)
        self.errors.merge(other.errors)
        self._phases.merge(other._phases)

    def rebase(self, origin: float) -> None:
        """Put this tally's times on a clock that reads ``origin`` at its current origin
        (a worker's counts from another machine's clock, before they are merged): every
        window keeps its index, so only the origins and the last send move."""
        self.flush()
        delta = origin - self._windows.origin
        self._last_sent += delta
        self.targets.rebase(origin)
        self._names.rebase(origin)
        self._windows.origin = origin
