"""``--warmup``: the first requests of an attack are sent, counted apart, and left out of
every figure.

A warmup is either a span (``Warmup(seconds=10)``: every request *scheduled* in the first
10 s of the run) or a number (``Warmup(requests=50)``: the first 50 arrivals). A warmup
request is sent exactly as any other (same schedule, same clocks, same retry policy); when
it ends it is counted in :class:`WarmupFacts` instead of the totals, the per-target
figures, the time series, the error quotations and ``on_record`` (so ``--samples`` and the
thresholds never see it either). The no-hidden-request rule still holds: the report's
``warmup`` section says how many requests and attempts the warmup sent, so the report's
counts plus the warmup's add up to what the server counted.

The warmup is part of the run: ``--duration`` and ``--requests`` count it (``--duration
60s --warmup 10s`` measures 50 s). The summary's spans (and so every rate) start where the
measured part starts: at the warmup's span, or at the first measured arrival's scheduled
time for a number. The time series keep the run's own clock, so their first windows are
empty.

The one place the split happens is :class:`WarmupTally`, a :class:`Tally` whose plain
path (no warmup) is the parent's, untouched.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pyattacker._units import parse_duration
from pyattacker.attack._load import share_below
from pyattacker.attack._tally import Tally
from pyattacker.errors import ConfigError
from pyattacker.measure import Attempt, PlainRow, row_attempt

if TYPE_CHECKING:
    from pyattacker.attack._result import AttackResult

__all__ = ["Warmup", "WarmupFacts", "WarmupTally"]


@dataclass(frozen=True, slots=True)
class Warmup:
    """The start of a run that is sent but not measured: ``seconds`` of schedule, or the
    first ``requests`` arrivals (exactly one of the two)."""

    seconds: float | None = None
    requests: int | None = None

    def __post_init__(self) -> None:
        if (self.seconds is None) == (self.requests is None):
            raise ConfigError(
                "a warmup is a duration or a number of requests (one of the two)",
                field="warmup",
                hint="e.g. 10s or 50",
            )
        if self.seconds is not None and not (math.isfinite(self.seconds) and self.seconds > 0):
            raise ConfigError(f"must be > 0 s, got {self.seconds!r}", field="warmup")
        if self.requests is not None and (
            isinstance(self.requests, bool)
            or not isinstance(self.requests, int)
            or self.requests < 1
        ):
            raise ConfigError(f"must be >= 1 request, got {self.requests!r}", field="warmup")

    @classmethod
    def parse(cls, text: str, *, field: str = "warmup") -> Warmup:
        """``"10s"`` (a duration, with its unit) or ``"50"`` (a number of requests)."""
        stripped = text.strip()
        if stripped.isdigit():
            try:
                return cls(requests=int(stripped))
            except ConfigError as exc:
                raise ConfigError(exc.message, field=field, hint="e.g. 10s or 50") from None
        unreadable = ConfigError(
            f"cannot read {text!r} as a warmup",
            field=field,
            hint="a duration with its unit (10s, 1.5m) or a whole number of requests (50)",
        )
        if _bare_number(stripped):
            raise unreadable
        try:
            seconds = parse_duration(stripped, field=field)
        except ConfigError:  # its hint says a bare number is seconds: here it is requests
            raise unreadable from None
        try:
            return cls(seconds=seconds)
        except ConfigError as exc:
            raise ConfigError(exc.message, field=field, hint="e.g. 10s or 50") from None

    def check_fits(
        self, duration: float | None, requests: int | None, last_arrival: float | None = None
    ) -> None:
        """Refuse a warmup that would leave nothing to measure. ``last_arrival``: when the
        load model knows it, the scheduled offset of the last of ``requests`` arrivals (a
        time warmup past it would set every request apart)."""
        if self.seconds is not None and duration is not None and self.seconds >= duration:
            raise ConfigError(
                f"a {self.seconds:g} s warmup leaves nothing of a {duration:g} s run",
                field="warmup",
                hint="the warmup is part of --duration: make it shorter than the run",
            )
        if self.seconds is not None and last_arrival is not None and self.seconds > last_arrival:
            raise ConfigError(
                f"a {self.seconds:g} s warmup leaves nothing of {requests} requests: the last "
                f"is scheduled {last_arrival:.3g} s after the start",
                field="warmup",
                hint="make the warmup shorter than the requests' span, or give it as a number "
                "of requests fewer than the run's",
            )
        if self.requests is not None and requests is not None and self.requests >= requests:
            raise ConfigError(
                f"a warmup of {self.requests} requests leaves nothing of {requests}",
                field="warmup",
                hint="the warmup is part of --requests: make it fewer than the run's",
            )

    def label(self) -> str:
        """``"the first 10s"`` or ``"the first 50 requests"``."""
        if self.seconds is not None:
            return f"the first {self.seconds:g}s"
        return f"the first {self.requests} requests"

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "requests": self.requests}


@dataclass(frozen=True, slots=True)
class WarmupFacts:
    """What the warmup of a run sent: ``scheduled`` arrivals, ``requests`` that ended (by
    ``outcomes``), ``sent`` requests (sent at least once) and ``sent_attempts`` (each
    attempt that reached the wire: what a server counts); ``skipped_s``, the span at the
    start of the run the summary's spans leave out."""

    warmup: Warmup
    scheduled: int
    requests: int
    sent: int
    sent_attempts: int
    outcomes: dict[str, int] = field(default_factory=dict)
    skipped_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.warmup.to_dict(),
            "scheduled": self.scheduled,
            "requests": self.requests,
            "sent": self.sent,
            "sent_attempts": self.sent_attempts,
            "outcomes": dict(sorted(self.outcomes.items())),
            "skipped_s": self.skipped_s,
            "excluded": "every figure of this report (totals, percentiles, windows, "
            "targets, errors, samples, thresholds)",
        }


def _bare_number(text: str) -> bool:
    """Whether ``text`` is a number with no unit (ambiguous: seconds or requests?)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


class WarmupTally(Tally):
    """A :class:`Tally` that counts the warmup's requests apart (see the module docstring).

    An arrival's ordinal is its place in the order arrivals were made (the request
    number the schedules give it); a request is the warmup's when its first attempt's
    ``request`` is below ``warmup.requests``, or its first ``scheduled`` time is within
    ``warmup.seconds`` of ``origin``.

    A worker's tally (``part``: its index of n workers, taking runs of ``run``
    consecutive arrivals of the one schedule in turn, :meth:`OpenModel.numbered`) counts
    its ``i``-th arrival as the warmup's when that arrival's global number is below
    ``warmup.requests``: the same arrivals one process would set apart, so the workers'
    tallies :meth:`merge` into one process's.
    """

    def __init__(
        self,
        warmup: Warmup,
        *,
        origin: float,
        part: tuple[int, int] = (0, 1),
        run: int = 1,
        **options: Any,
    ) -> None:
        super().__init__(origin=origin, **options)
        self.warmup = warmup
        self._cut = origin + (warmup.seconds or 0.0)
        self._origin = origin
        self._arrivals = 0
        # how many of this worker's arrivals are among the first warmup.requests of all
        self._warm_arrivals = share_below(warmup.requests or 0, part, run)
        self.warm_scheduled = 0
        self._warm_outcomes: Counter[str] = Counter()
        self._warm_sent = self._warm_attempts = 0
        self._first_measured: float | None = None

    def _warm(self, n: int, scheduled: float) -> bool:
        if self.warmup.requests is not None:
            return n < self.warmup.requests
        return scheduled < self._cut

    def warm_arrival(self, n: int, scheduled: float) -> bool:
        """Whether arrival number ``n`` (of the one schedule), scheduled at ``scheduled``,
        is the warmup's: what a scenario's flow is judged by (``attack/_flows.py``)."""
        return self._warm(n, scheduled)

    def _warm_arrival(self, i: int, scheduled: float) -> bool:
        """Whether this tally's ``i``-th arrival is the warmup's."""
        if self.warmup.requests is not None:
            return i < self._warm_arrivals
        return scheduled < self._cut

    def arrival(self, scheduled: float, in_flight: int) -> None:
        i = self._arrivals
        self._arrivals += 1
        if self._warm_arrival(i, scheduled):
            self.warm_scheduled += 1
            return
        if self._first_measured is None:
            self._first_measured = scheduled
        super().arrival(scheduled, in_flight)

    def dropped(self, scheduled: float, count: int, message: str) -> None:
        first = self._arrivals
        self._arrivals += count
        if self.warmup.requests is not None:
            warm = max(0, min(count, self._warm_arrivals - first))
        else:
            warm = count if scheduled < self._cut else 0
        if warm:
            self.warm_scheduled += warm
            self._warm_outcomes["dropped"] += warm
        if count > warm:
            super().dropped(scheduled, count - warm, message)

    def finished(self, attempts: list[Attempt]) -> None:
        first = attempts[0]
        if self._warm(first.request, first.scheduled):
            self._count_warm(attempts)
        else:
            super().finished(attempts)

    def finished_as(self, attempts: list[Attempt], *, warm: bool) -> None:
        """Count a finished request as the warmup's (``warm``) or as measured, as its
        caller judged: a scenario's step goes with its flow, whose arrival decides
        (:meth:`warm_arrival`), whatever the step's own number or time."""
        if warm:
            self._count_warm(attempts)
        else:
            super().finished(attempts)

    def finished_one(self, attempt: Attempt) -> None:
        if self._warm(attempt.request, attempt.scheduled):
            self._count_warm([attempt])
        else:
            super().finished_one(attempt)

    def finished_plain(self, row: PlainRow) -> None:
        if self._warm(row[0], row[1]):
            self._count_warm([row_attempt(row)])
        else:
            super().finished_plain(row)

    def _count_warm(self, attempts: list[Attempt]) -> None:
        self._warm_outcomes[attempts[-1].outcome.value] += 1
        sent = sum(1 for a in attempts if a.sent is not None)
        self._warm_attempts += sent
        self._warm_sent += 1 if sent else 0

    def merge(self, other: Tally) -> None:
        """Add ``other``'s counts, its warmup's too (another worker's tally of the same
        plan): the warmup facts then equal one tally's of both sets of arrivals."""
        super().merge(other)
        if not isinstance(other, WarmupTally):
            return
        self._arrivals += other._arrivals
        self.warm_scheduled += other.warm_scheduled
        self._warm_outcomes.update(other._warm_outcomes)
        self._warm_sent += other._warm_sent
        self._warm_attempts += other._warm_attempts
        firsts = [f for f in (self._first_measured, other._first_measured) if f is not None]
        self._first_measured = min(firsts) if firsts else None

    def rebase(self, origin: float) -> None:
        """As :meth:`Tally.rebase`, the warmup's span and first measured arrival too."""
        delta = origin - self._origin
        super().rebase(origin)
        self._origin, self._cut = origin, self._cut + delta
        if self._first_measured is not None:
            self._first_measured += delta

    def skipped_s(self, schedule_s: float) -> float:
        """The span at the start the measured figures leave out: the warmup's span, or
        up to the first measured arrival (all of ``schedule_s`` when none came)."""
        if self.warmup.seconds is not None:
            return min(self.warmup.seconds, schedule_s)
        if self._first_measured is None:
            return schedule_s
        return self._first_measured - self._origin

    def facts(self, skipped_s: float) -> WarmupFacts:
        return WarmupFacts(
            warmup=self.warmup,
            scheduled=self.warm_scheduled,
            requests=sum(self._warm_outcomes.values()),
            sent=self._warm_sent,
            sent_attempts=self._warm_attempts,
            outcomes=dict(self._warm_outcomes),
            skipped_s=skipped_s,
        )


def without_warmup(result: AttackResult, tally: Tally, full_schedule_s: float) -> AttackResult:
    """``result`` with its spans starting where the measured part starts, and its
    ``warmup`` facts; ``result`` itself when ``tally`` kept no warmup apart.
    ``full_schedule_s``: the schedule's span counting the warmup's arrivals."""
    if not isinstance(tally, WarmupTally):
        return result
    skip = tally.skipped_s(full_schedule_s)
    return replace(
        result,
        schedule_s=max(0.0, full_schedule_s - skip),
        send_span_s=max(0.0, result.send_span_s - skip),
        elapsed=max(0.0, result.elapsed - skip),
        warmup=tally.facts(skip),
    )
