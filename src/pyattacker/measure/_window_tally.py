"""One window's running counts and histograms (:class:`WindowTally`), and how a closed
one is kept small (:meth:`WindowTally.freeze`, see ``_frozen.py``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from pyattacker.measure._binned import Binned
from pyattacker.measure._frozen import PackedHistogram, pack, unpack
from pyattacker.measure._histogram import Histogram
from pyattacker.measure._records import Attempt, Outcome
from pyattacker.measure._stats import itl_gaps, tpot_of, usage_tokens

__all__ = ["COUNTS", "EXTRA", "HISTOGRAMS", "LLM_HISTOGRAMS", "Frozen", "WindowTally"]

# Per-window counters; every one adds on merge except max_in_flight, which takes the max.
# The outcome names double as counter names (`Outcome.OK.value == "ok"`, ...).
COUNTS = ("scheduled", "sent", "completed", "ok", "failed", "throttled", "dropped", "cancelled")
# Counts the LLM row shows (add on merge); optional in `from_dict` (written before them),
# as the LLM histograms are.
EXTRA = ("prompt_tokens", "completion_tokens", "throttled_attempts")
_FIELDS = (*COUNTS, *EXTRA, "max_in_flight")
LLM_HISTOGRAMS = ("ttft", "e2e_scheduled", "itl", "tpot")
HISTOGRAMS = ("latency", "service_time", *LLM_HISTOGRAMS)
# A closed window (see measure/_frozen.py): its counts, its histograms packed, and its
# requests by last status as (status, count) pairs.
Frozen = tuple[tuple[int, ...], tuple[PackedHistogram, ...], tuple[tuple[int, int], ...]]


# Every field, for __slots__ and __eq__ (compiled, a class has no __slots__ to read).
_STATE = (*COUNTS, *EXTRA, *HISTOGRAMS, "max_in_flight", "statuses")


class WindowTally:
    """One window's running counts and histograms."""

    __slots__ = _STATE

    def __init__(self) -> None:
        self.scheduled = self.sent = self.completed = 0
        self.ok = self.failed = self.throttled = self.dropped = self.cancelled = 0
        self.max_in_flight = 0
        self.statuses: Counter[int] = Counter()  # requests ending here, by last status
        self.latency = Histogram()
        self.service_time = Histogram()
        self.ttft = Histogram()
        self.e2e_scheduled = Histogram()
        self.itl = Histogram()
        self.tpot = Histogram()
        self.prompt_tokens = self.completion_tokens = self.throttled_attempts = 0

    def add_streamed(
        self, attempt: Attempt, first: float, scheduled: float, sent: float | None, end: float
    ) -> None:
        """The LLM figures of an answered request whose last attempt streamed: its TTFT,
        and if it ended OK its end to end (scheduled clock), ITL gaps and TPOT."""
        if sent is not None:
            self.ttft.record(first - sent if first > sent else 0.0)
        if attempt.outcome is Outcome.OK:
            self.e2e_scheduled.record(end - scheduled if end > scheduled else 0.0)
            for gap in itl_gaps(first, attempt.token_times):
                self.itl.record(gap)
            tpot = tpot_of(attempt, first, end)
            if tpot is not None:
                self.tpot.record(tpot)
        self.add_usage(attempt)

    def add_whole_body(self, attempt: Attempt, scheduled: float, end: float) -> None:
        """The LLM figures of an answered request whose last attempt is a whole-body
        answer: its end to end (scheduled clock) if it ended OK, and its tokens."""
        if attempt.outcome is Outcome.OK:
            self.e2e_scheduled.record(end - scheduled if end > scheduled else 0.0)
        self.add_usage(attempt)

    def add_usage(self, attempt: Attempt) -> None:
        """The token counts of an answered request's last attempt (streamed or not)."""
        usage = attempt.usage
        if usage is not None and attempt.outcome is Outcome.OK:
            self.prompt_tokens += usage_tokens(usage, "prompt_tokens", 0)
            self.completion_tokens += usage_tokens(usage, "completion_tokens", 0)

    def add_ok(
        self, count: int, latencies: Binned, services: Binned, statuses: Iterable[int]
    ) -> None:
        """``count`` plain OK answers ending here, with their spans (binned) and statuses."""
        self.ok += count
        self.completed += count
        self.statuses.update(statuses)
        self.latency.add_binned(latencies)
        self.service_time.add_binned(services)

    def merge(self, other: WindowTally) -> None:
        for name in (*COUNTS, *EXTRA):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.max_in_flight = max(self.max_in_flight, other.max_in_flight)
        self.statuses.update(other.statuses)
        for name in HISTOGRAMS:
            getattr(self, name).merge(getattr(other, name))

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {name: getattr(self, name) for name in (*COUNTS, *EXTRA)}
        data["max_in_flight"] = self.max_in_flight
        data["statuses"] = {str(status): n for status, n in sorted(self.statuses.items())}
        for name in HISTOGRAMS:
            data[name] = getattr(self, name).to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WindowTally:
        """A tally from ``to_dict``; the LLM keys, ``throttled_attempts`` and ``statuses``
        may be missing (written before them): they are then 0 or empty."""
        tally = cls()
        for name in (*COUNTS, "max_in_flight", *EXTRA):
            if name not in data and name in EXTRA:
                continue
            value = data[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"window {name} must be a count >= 0, got {value!r}")
            setattr(tally, name, value)
        for status, n in data.get("statuses", {}).items():
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise ValueError(f"window statuses[{status}] must be a count >= 0, got {n!r}")
            tally.statuses[int(status)] = n
        tally.latency = Histogram.from_dict(data["latency"])
        tally.service_time = Histogram.from_dict(data["service_time"])
        for name in LLM_HISTOGRAMS:
            if name in data:
                setattr(tally, name, Histogram.from_dict(data[name]))
        return tally

    def freeze(self) -> Frozen:
        """This window's counts, and its histograms coarsened and packed (``_frozen``)."""
        counts = tuple(getattr(self, name) for name in _FIELDS)
        packed = tuple(pack(getattr(self, name)) for name in HISTOGRAMS)
        return counts, packed, tuple(sorted(self.statuses.items()))

    @classmethod
    def thaw(cls, frozen: Frozen) -> WindowTally:
        """The tally :meth:`freeze` kept (with its coarse histograms)."""
        tally = cls()
        counts, packed, statuses = frozen
        tally.statuses.update(dict(statuses))
        for name, value in zip(_FIELDS, counts, strict=True):
            setattr(tally, name, value)
        for name, histogram in zip(HISTOGRAMS, packed, strict=True):
            setattr(tally, name, unpack(histogram))
        return tally

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WindowTally):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in _STATE)

    __hash__ = None  # type: ignore[assignment]  # mutable
