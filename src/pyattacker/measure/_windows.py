"""Fixed aggregation windows: the time series of a run (achieved vs planned rate, latency).

Window ``i`` covers ``[origin + i * width, origin + (i + 1) * width)`` on the run's clock;
the index of a time ``t`` is ``floor((t - origin) / width)`` in float arithmetic. Windows
are fixed (never sliding or adaptive) so that series from several workers or processes
line up and merge exactly, window by window.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, SupportsFloat

from pyattacker._checks import check_number
from pyattacker.errors import ConfigError
from pyattacker.measure._binned import Binned
from pyattacker.measure._records import ANSWERED, Attempt, Outcome, RequestRecord
from pyattacker.measure._summary import Summary
from pyattacker.measure._window_tally import COUNTS, HISTOGRAMS, Frozen, WindowTally

if TYPE_CHECKING:
    from pyattacker.measure._batch import OkBatch

__all__ = ["Window", "WindowSeries"]

_EMPTY = Summary.empty()  # frozen, so one instance serves every default
# Windows this far behind the newest one touched are frozen. Records land in the window of
# their end, which is about now; a later one (a batch counted late) thaws its window.
LIVE_WINDOWS = 4


@dataclass(frozen=True, slots=True)
class Window:
    """The facts of one window; ``start`` is relative to the series' origin (seconds).

    ``scheduled``: planned arrivals (by scheduled time). ``sent``: requests' first sends,
    by send time (counted when the request finished). Records count in the window of
    their ``end`` (their ``scheduled`` time if they have none): ``completed = ok + failed
    + throttled`` (answered requests), while ``dropped`` and ``cancelled`` are counted
    beside it. ``latency`` (scheduled clock) and ``service_time`` (sent clock) summarise
    the answered requests, as :class:`~pyattacker.measure.RequestStats` does.
    ``max_in_flight``: the most requests in flight at once in the window. In-flight counts
    only rise at an arrival, so the peak is at one of the window's arrivals (each noted
    with the count including itself, see :meth:`WindowSeries.note_arrival`) or at the
    window's start: the count then is carried over as the arrivals before the window minus
    the requests counted as ended before it (a record counts in the window of its ``end``,
    one with no end, cut off before sending, in that of its arrival). So a window with no
    arrival, in the middle of a long stream, shows what was still in flight.

    ``throttled_attempts``: refused *attempts*, each in the window of its own ``end`` (its
    ``scheduled`` if it has none), so a request refused twice and then served counts two
    here, in the windows where the refusals came, while ``throttled`` counts requests by
    their final outcome.

    LLM figures of the requests counted here (as
    :class:`~pyattacker.measure.RequestStats` defines them): ``ttft`` on the sent clock
    (the last attempt's first token minus the first send) of every streamed request;
    ``e2e_scheduled`` on the scheduled clock (``end`` minus the first ``scheduled``) of
    every OK answer, streamed or whole body (one with a ``first_token`` or a ``usage``);
    ``itl`` (every chunk gap) and ``tpot`` of the streams that ended OK; the
    ``prompt_tokens`` and ``completion_tokens`` of the OK requests' usage. Empty and 0
    without LLM data. None of these is in :meth:`to_dict` (the HTTP row); :meth:`llm_dict`
    has them.
    """

    index: int
    start: float
    width: float
    scheduled: int
    sent: int
    completed: int
    ok: int
    failed: int
    throttled: int
    dropped: int
    max_in_flight: int
    latency: Summary
    service_time: Summary
    cancelled: int = 0
    ttft: Summary = _EMPTY
    prompt_tokens: int = 0
    completion_tokens: int = 0
    throttled_attempts: int = 0
    e2e_scheduled: Summary = _EMPTY
    itl: Summary = _EMPTY
    tpot: Summary = _EMPTY
    statuses: Mapping[int, int] = field(default_factory=dict)

    def llm_dict(self) -> dict[str, Any]:
        """``ttft``, ``e2e_scheduled``, ``itl`` and ``tpot`` as :meth:`Summary.to_dict`, the
        two token counts and ``throttled_attempts``."""
        return {
            "ttft": self.ttft.to_dict(),
            "e2e_scheduled": self.e2e_scheduled.to_dict(),
            "itl": self.itl.to_dict(),
            "tpot": self.tpot.to_dict(),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "throttled_attempts": self.throttled_attempts,
        }

    def to_dict(self) -> dict[str, Any]:
        """Flat counts, ``statuses`` (requests ending here by their last HTTP status, keys
        as strings), plus ``latency`` and ``service_time`` as :meth:`Summary.to_dict`."""
        data: dict[str, Any] = {"index": self.index, "start": self.start, "width": self.width}
        data.update({name: getattr(self, name) for name in COUNTS})
        data["max_in_flight"] = self.max_in_flight
        data["statuses"] = {str(status): n for status, n in sorted(self.statuses.items())}
        data["latency"] = self.latency.to_dict()
        data["service_time"] = self.service_time.to_dict()
        return data


class WindowSeries:
    """Fixed aggregation windows: window i covers [origin + i*width, origin + (i+1)*width).

    Every ``add``/``note_*`` raises ``ValueError`` for a time before ``origin`` or not
    finite. Memory grows with the number of windows touched, not with the number of
    records: the :data:`LIVE_WINDOWS` newest windows keep full histograms (within 0.05 %),
    older ones are frozen, coarsened to 32 buckets an octave (percentiles within 1.6 %;
    counts, ``min``, ``max`` and ``mean`` exact) and packed at 6 bytes a bucket (see
    ``measure/_frozen.py``). Merging needs the same width and origin.
    """

    __slots__ = ("_frozen", "_live", "_newest", "_tallies", "origin", "width")

    def __init__(self, width: SupportsFloat, origin: float, *, live: int = LIVE_WINDOWS) -> None:
        """``width > 0`` seconds, else ``ConfigError(field="window")``. ``live``: how many
        of the newest windows keep full histograms (a test may want them all). (``width``
        is typed by a protocol, which the compiled load path does not check: anything
        else given is this ``ConfigError``, compiled or not.)"""
        self.width = check_number(width, "window", above=0, hint="seconds per window, e.g. 1")
        if isinstance(origin, bool) or not isinstance(origin, int | float):
            raise ValueError(f"origin must be clock seconds, got {origin!r}")
        if not math.isfinite(origin):
            raise ValueError(f"origin must be finite, got {origin!r}")
        self.origin = float(origin)
        self._tallies: dict[int, WindowTally] = {}  # open windows, by index
        self._frozen: dict[int, Frozen] = {}  # closed ones (never in both)
        self._newest = -1
        self._live = live

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled by its fields (compiled, it has no ``__dict__`` to copy)."""
        state = (self._tallies, self._frozen, self._newest)
        return (_restored_series, (self.width, self.origin, self._live, state))

    def index_of(self, t: float) -> int:
        """The index of the window holding time ``t``."""
        if not self.origin <= t < math.inf:  # also false for NaN
            if t < self.origin:
                raise ValueError(f"time {t!r} is before the series origin {self.origin!r}")
            raise ValueError(f"a window time must be finite, got {t!r}")
        return int((t - self.origin) / self.width)  # int() floors a non-negative float

    def _tally(self, t: float) -> WindowTally:
        if not self.origin <= t < math.inf:  # checked here: index_of costs a call
            self.index_of(t)  # raises the reason
        index = int((t - self.origin) / self.width)
        return self._tallies.get(index) or self._tally_at(index)

    def _tally_at(self, index: int) -> WindowTally:
        tally = self._tallies.get(index)
        if tally is None:
            frozen = self._frozen.pop(index, None)
            tally = WindowTally() if frozen is None else WindowTally.thaw(frozen)
            self._tallies[index] = tally
            if index > self._newest:  # once per new window: close the old ones
                self._newest = index
                self._freeze_before(index - self._live)
        return tally

    def _freeze_before(self, limit: int) -> None:
        for index in [i for i in self._tallies if i < limit]:
            self._frozen[index] = self._tallies.pop(index).freeze()

    def _view(self, index: int) -> WindowTally | None:
        """Window ``index`` to read, or None if never touched: as frozen (coarse) if it is
        older than the live ones, even if a late record thawed it, so that what is read
        does not depend on the order the records came in (coarsening the union of two
        sets of buckets, coarsened or not, gives one result)."""
        tally = self._tallies.get(index)
        if tally is None:
            frozen = self._frozen.get(index)
            return None if frozen is None else WindowTally.thaw(frozen)
        if index < self._newest - self._live:
            return WindowTally.thaw(tally.freeze())
        return tally

    def _indexes(self) -> list[int]:
        return sorted((*self._tallies, *self._frozen))

    def stored_buckets(self) -> int:
        """How many histogram buckets every window together keeps (a measure of memory)."""
        live = sum(len(getattr(t, n)._counts) for t in self._tallies.values() for n in HISTOGRAMS)
        frozen = sum(len(p[4]) for _, packed, _ in self._frozen.values() for p in packed if p)
        return live + frozen

    def add(self, record: RequestRecord) -> None:
        """Count ``record`` in the window of its ``end`` (its ``scheduled`` if it has none),
        and each of its throttled attempts in the window of that attempt's end. A
        one-attempt record is counted by :meth:`add_attempt`: one way per request."""
        if len(record.attempts) == 1:
            self.add_attempt(record.attempts[0])
            return
        end = record.end
        tally = self._tally(record.scheduled if end is None else end)
        outcome = record.outcome
        setattr(tally, outcome.value, getattr(tally, outcome.value) + 1)
        status = record.attempts[-1].status
        if status is not None:
            tally.statuses[status] += 1
        if outcome in ANSWERED:
            tally.completed += 1
        for attempt in record.attempts:
            if attempt.outcome is Outcome.THROTTLED:
                ended = attempt.end
                self._tally(attempt.scheduled if ended is None else ended).throttled_attempts += 1
        latency, service = record.latency, record.service_time
        if latency is not None and end is not None:
            tally.latency.record(max(0.0, latency))  # negative: an early timer, see stats
            last = record.attempts[-1]
            if last.first_token is not None:
                tally.add_streamed(last, last.first_token, record.scheduled, record.sent, end)
            elif last.usage is not None:
                tally.add_whole_body(last, record.scheduled, end)
        if service is not None:
            tally.service_time.record(max(0.0, service))

    def add_attempt(self, attempt: Attempt) -> None:
        """``add`` of the one-attempt request ``attempt``, without building its record."""
        end, outcome = attempt.end, attempt.outcome
        scheduled = attempt.scheduled
        tally = self._tally(scheduled if end is None else end)
        if outcome is Outcome.OK:  # the common case, without reading the enum's value
            tally.ok += 1
        else:
            name = outcome.value
            setattr(tally, name, getattr(tally, name) + 1)
        status = attempt.status
        if status is not None:
            tally.statuses[status] += 1
        if outcome not in ANSWERED:
            return
        tally.completed += 1
        if outcome is Outcome.THROTTLED:
            tally.throttled_attempts += 1
        if end is None:
            return
        tally.latency.record(end - scheduled if end > scheduled else 0.0)
        sent = attempt.sent
        if sent is not None:
            tally.service_time.record(end - sent if end > sent else 0.0)
        if attempt.first_token is not None:  # the two LLM checks an HTTP request pays
            tally.add_streamed(attempt, attempt.first_token, scheduled, sent, end)
        elif attempt.usage is not None:
            tally.add_whole_body(attempt, scheduled, end)

    def add_ok_batch(self, batch: OkBatch) -> None:
        """``add_attempt`` and ``note_sent`` of every plain OK answer of ``batch``, in one
        step. Raises ``ValueError``, having counted none, for a time before the origin."""
        if not batch.count:
            return
        sents, ends = batch.sents, batch.ends
        first_sent, first_end = min(sents), min(ends)
        for earliest in (first_sent, first_end):
            if earliest < self.origin:
                self.index_of(earliest)  # raises the reason
        self._count_sent(sents, first_sent)
        # A window's index only grows with the time, so a batch whose earliest and latest
        # ends share a window lies wholly in it: the usual case, with no index per answer.
        first = self._index(first_end)
        if first == self._index(max(ends)):
            self._tally_at(first).add_ok(
                batch.count, batch.latencies, batch.services, batch.statuses
            )
            return
        latencies, services = batch.latencies.values, batch.services.values
        statuses = batch.status_each
        by_window: dict[int, list[int]] = {}
        for i, end in enumerate(ends):
            by_window.setdefault(self._index(end), []).append(i)
        for index in sorted(by_window):  # a batch across a window's end
            mine = by_window[index]
            self._tally_at(index).add_ok(
                len(mine),
                Binned([latencies[i] for i in mine]),
                Binned([services[i] for i in mine]),
                [s for s in (statuses[i] for i in mine) if s is not None],
            )

    def _count_sent(self, sents: Sequence[float], earliest: float) -> None:
        first = self._index(earliest)
        if first == self._index(max(sents)):
            self._tally_at(first).sent += len(sents)
            return
        for index, count in Counter([self._index(t) for t in sents]).items():
            self._tally_at(index).sent += count

    def _index(self, t: float) -> int:
        """:meth:`index_of` for a time known to be finite and after the origin."""
        return int((t - self.origin) / self.width)

    def note_arrival(self, t: float, in_flight: int) -> None:
        """Count one planned arrival at ``t`` and keep the largest ``in_flight`` seen in
        its window (the engine calls this once per arrival). ``in_flight`` counts the
        arriving request if it was admitted (not dropped): the count just after it."""
        origin = self.origin  # what _tally(t) does, without the calls: once per arrival
        if not origin <= t < math.inf:
            self.index_of(t)  # raises the reason
        index = int((t - origin) / self.width)
        tally = self._tallies.get(index) or self._tally_at(index)
        tally.scheduled += 1
        if in_flight > tally.max_in_flight:
            tally.max_in_flight = in_flight

    def note_dropped(self, t: float, count: int) -> None:
        """Count ``count`` planned arrivals at ``t``, each dropped before sending."""
        tally = self._tally(t)
        tally.scheduled += count
        tally.dropped += count

    def note_sent(self, t: float) -> None:
        """Count one request's first send, at ``t``."""
        self._tally(t).sent += 1

    def windows(self) -> list[Window]:
        """Every window from 0 to the last one touched, empty ones included."""
        last = max((*self._tallies, *self._frozen), default=-1)
        windows = []
        carried = 0  # in flight at the window's start: arrived before it, not yet ended
        for i in range(last + 1):
            tally = self._view(i) or WindowTally()
            windows.append(self._window(i, tally, max(tally.max_in_flight, carried)))
            ended = tally.completed + tally.dropped + tally.cancelled
            carried = max(0, carried + tally.scheduled - ended)
        return windows

    def _window(self, index: int, tally: WindowTally, max_in_flight: int) -> Window:
        counts = {name: getattr(tally, name) for name in COUNTS}
        return Window(
            index=index,
            start=index * self.width,
            width=self.width,
            max_in_flight=max_in_flight,
            latency=tally.latency.summary(),
            service_time=tally.service_time.summary(),
            statuses=dict(tally.statuses),
            ttft=tally.ttft.summary(),
            e2e_scheduled=tally.e2e_scheduled.summary(),
            itl=tally.itl.summary(),
            tpot=tally.tpot.summary(),
            prompt_tokens=tally.prompt_tokens,
            completion_tokens=tally.completion_tokens,
            throttled_attempts=tally.throttled_attempts,
            **counts,
        )

    def merge(self, other: WindowSeries) -> None:
        """Add ``other``'s windows; ``ValueError`` unless width and origin are the same."""
        if (self.width, self.origin) != (other.width, other.origin):
            raise ValueError(
                f"cannot merge windows of width {other.width} from {other.origin} into "
                f"windows of width {self.width} from {self.origin}"
            )
        for index in other._indexes():
            theirs = other._view(index)
            assert theirs is not None  # one of other's indexes
            self._tally_at(index).merge(theirs)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form (touched windows only) that :meth:`from_dict` restores exactly."""
        windows = [{"index": i, **self._view(i).to_dict()} for i in self._indexes()]  # type: ignore[union-attr]
        return {"width": self.width, "origin": self.origin, "windows": windows}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WindowSeries:
        """The series :meth:`to_dict` described; ``ValueError`` on bad data."""
        try:
            series = cls(data["width"], data["origin"])
            for window in data["windows"]:
                index = window["index"]
                if isinstance(index, bool) or not isinstance(index, int) or index < 0:
                    raise ValueError(f"window index must be >= 0, got {index!r}")
                if index in series._tallies:
                    raise ValueError(f"window {index} appears twice")
                series._tallies[index] = WindowTally.from_dict(window)
                series._newest = max(series._newest, index)
        except (KeyError, TypeError, AttributeError, ValueError, ConfigError) as exc:
            raise ValueError(f"not a window series: {exc!r}") from exc
        return series

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WindowSeries):
            return NotImplemented
        mine = {i: self._view(i) for i in self._indexes()}
        theirs = {i: other._view(i) for i in other._indexes()}
        return (self.width, self.origin, mine) == (other.width, other.origin, theirs)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return (
            f"WindowSeries(width={self.width}, origin={self.origin}, "
            f"windows={max(self._indexes(), default=-1) + 1})"
        )


def _restored_series(
    width: float,
    origin: float,
    live: int,
    state: tuple[dict[int, WindowTally], dict[int, Frozen], int],
) -> WindowSeries:
    series = WindowSeries(width, origin, live=live)
    series._tallies, series._frozen, series._newest = state
    return series
