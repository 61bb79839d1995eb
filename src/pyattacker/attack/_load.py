"""Load models: *when* requests should start. Pure code, no clock, no I/O.

Two models, as in every serious load tester:

- :class:`OpenModel` — arrivals follow a planned rate whatever the server does. The rate is
  constant or a list of :class:`Stage` ramps (linear from the previous rate to the stage's
  target over its duration); arrivals are evenly spaced (``"constant"``) or a Poisson
  process (``"poisson"``). Arrival times are the inverse of the cumulative planned rate
  ``Λ(t) = ∫ rate``: arrival ``k`` is at ``Λ⁻¹(u_k)`` with ``u_k = k`` for even spacing and
  ``u_k`` a sum of ``k + 1`` unit exponentials for Poisson. One formula serves constant
  rates and ramps, and for a constant rate ``r`` the arrivals are exactly ``k / r``.
- :class:`ClosedModel` — ``clients`` loops, each starting its next request when its
  previous one ended (plus an optional think time). Its "scheduled" time is when the client
  became free, so a slow server slows the arrivals: that is what a closed model measures.

The engine turns these plans into requests; a request the engine could not send on time is
sent late and its lateness recorded, or dropped and counted (``max_in_flight``), never
skipped silently.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Literal

from pyattacker._checks import check_number
from pyattacker.attack._arrivals import constant_share
from pyattacker.attack._limits import MAX_RATE, check
from pyattacker.errors import ConfigError

__all__ = [
    "ARRIVALS",
    "CLUSTER_S",
    "Arrival",
    "ClosedModel",
    "LoadModel",
    "OpenModel",
    "Stage",
    "share_below",
]

Arrival = Literal["constant", "poisson"]
ARRIVALS: tuple[Arrival, ...] = ("constant", "poisson")

#: Poisson arrivals go to workers in runs of as many consecutive arrivals as come in this
#: long at the plan's peak rate (``attack/_workers.py``, ``arrival_run``).
CLUSTER_S = 20e-3


def share_below(end: int, part: tuple[int, int], run: int) -> int:
    """How many of the arrivals numbered ``0`` to ``end - 1`` are worker ``index`` of
    ``n``'s (``part``), the workers taking runs of ``run`` consecutive arrivals in turn
    (``run`` 1: arrival k is worker k mod n's)."""
    index, n = part
    cycles, rest = divmod(max(end, 0), n * run)
    return cycles * run + min(max(rest - index * run, 0), run)


@dataclass(frozen=True, slots=True)
class Stage:
    """Ramp linearly to ``rate`` (requests/s) over ``duration`` seconds."""

    duration: float
    rate: float

    def __post_init__(self) -> None:
        check("stages.duration", self.duration)
        check("stages.rate", self.rate)


@dataclass(frozen=True, slots=True)
class _Segment:
    start: float  # seconds from the start of the run
    duration: float  # math.inf for an open-ended constant rate
    rate0: float
    rate1: float
    cumulative: float  # Λ(start)

    def intensity(self) -> float:
        """Λ over the whole segment (inf when open-ended with a positive rate)."""
        if math.isinf(self.duration):
            return math.inf if self.rate0 > 0 else 0.0
        return (self.rate0 + self.rate1) / 2 * self.duration

    def invert(self, u: float) -> float:
        """The time ``t`` in this segment with ``Λ(t) = u`` (``u`` within the segment)."""
        d = u - self.cumulative
        if d <= 0:
            return self.start
        b = self.rate0
        if b > 0 and self.rate1 == b:  # constant: the root below is exactly d / b, cheaper
            return self.start + min(d / b, self.duration)
        a = 0.0 if math.isinf(self.duration) else (self.rate1 - self.rate0) / (2 * self.duration)
        # Root of a·s² + b·s - d = 0 in the form that stays exact when a → 0.
        s = 2 * d / (b + math.sqrt(max(0.0, b * b + 4 * a * d)))
        return self.start + min(s, self.duration)


@dataclass(frozen=True, slots=True)
class OpenModel:
    """Arrivals at a planned rate (see the module docstring).

    ``rate`` alone is a constant rate. With ``stages``, ``rate`` (default 0) is where the
    first ramp starts and the plan ends with the last stage. ``max_in_flight`` caps the
    requests in progress (waiting for a lease or on the wire); an arrival above it is
    dropped and counted.
    """

    rate: float = 0.0
    stages: tuple[Stage, ...] = ()
    arrival: Arrival = "constant"
    max_in_flight: int = 10_000
    _segments: tuple[_Segment, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        hint = "at most 10,000,000/s, beyond any machine"
        check_number(self.rate, "rate", at_least=0.0, at_most=MAX_RATE, hint=hint)
        if not self.stages and not self.rate > 0:
            raise ConfigError(
                f"must be > 0 requests/s, got {self.rate!r}", field="rate", hint="e.g. 500/s"
            )
        if self.arrival not in ARRIVALS:
            raise ConfigError(
                f"unknown arrival process {self.arrival!r}",
                field="arrival",
                hint=f"use one of: {', '.join(ARRIVALS)}",
            )
        check("max_in_flight", self.max_in_flight)
        object.__setattr__(self, "stages", tuple(self.stages))
        object.__setattr__(self, "_segments", self._build_segments())
        if self.stages and self.planned() <= 0:
            raise ConfigError(
                "the stages plan no request at all (every rate is 0)",
                field="stages",
                hint="give at least one stage a rate above 0, e.g. 10s:100/s",
            )

    def _build_segments(self) -> tuple[_Segment, ...]:
        if not self.stages:
            return (_Segment(0.0, math.inf, self.rate, self.rate, 0.0),)
        segments: list[_Segment] = []
        start, cumulative, previous = 0.0, 0.0, self.rate
        for stage in self.stages:
            segment = _Segment(start, stage.duration, previous, stage.rate, cumulative)
            segments.append(segment)
            start += stage.duration
            cumulative += segment.intensity()
            previous = stage.rate
        return tuple(segments)

    @property
    def duration(self) -> float | None:
        """How long the plan lasts: the stages' total, or None (open-ended constant rate)."""
        return sum(s.duration for s in self.stages) if self.stages else None

    def rate_at(self, t: float) -> float:
        """The planned rate (requests/s) ``t`` seconds into the run (0 after the last stage)."""
        for segment in self._segments:
            if t < segment.start + segment.duration:
                if math.isinf(segment.duration):
                    return segment.rate0
                fraction = max(0.0, t - segment.start) / segment.duration
                return segment.rate0 + (segment.rate1 - segment.rate0) * fraction
        return 0.0

    def planned(self, until: float | None = None) -> float:
        """Expected number of arrivals in ``[0, until)`` (``Λ(until)``); the whole plan if None."""
        end = until if until is not None else self.duration
        if end is None:
            raise ValueError("an open-ended constant rate needs `until`")
        total = 0.0
        for segment in self._segments:
            if end <= segment.start:
                break
            s = min(end - segment.start, segment.duration)
            slope = (
                0.0
                if math.isinf(segment.duration)
                else ((segment.rate1 - segment.rate0) / segment.duration)
            )
            total += segment.rate0 * s + slope * s * s / 2
        return total

    def arrivals(self, *, seed: int = 0, duration: float | None = None) -> Iterator[float]:
        """Arrival offsets (seconds from the start, non-decreasing) before ``duration``.

        Without ``duration`` a constant rate never ends; stages end with the last one.
        Poisson arrivals are reproducible from ``seed``.
        """
        end = _end_of(duration, self.duration)
        rng = random.Random(seed) if self.arrival == "poisson" else None
        u = rng.expovariate(1.0) if rng is not None else 0.0
        for segment in self._segments:
            limit, invert = segment.cumulative + segment.intensity(), segment.invert
            rate, start, cumulative = segment.rate0, segment.start, segment.cumulative
            if rng is None and rate > 0 and segment.rate1 == rate:
                # A constant rate, the usual case: `invert`'s formula written out here, as
                # this loop runs once per arrival.
                while u < limit:
                    d = u - cumulative
                    t = start + min(d / rate, segment.duration) if d > 0 else start
                    if t >= end:
                        return
                    yield t
                    u += 1.0
                continue
            while u < limit:
                t = invert(u)
                if t >= end:
                    return
                yield t
                u += rng.expovariate(1.0) if rng is not None else 1.0

    def numbered(
        self,
        *,
        seed: int = 0,
        duration: float | None = None,
        requests: int | None = None,
        part: tuple[int, int] = (0, 1),
        run: int = 1,
    ) -> Iterator[tuple[int, float]]:
        """``(k, offset)`` of arrival k of :meth:`arrivals` (the first ``requests`` only),
        for every k that is worker ``index`` of ``n``'s (``part = (index, n)``), the
        workers taking ``run`` consecutive arrivals in turn: (k // run) mod n == index
        (``run`` 1: k mod n). Only a Poisson or staged plan takes runs longer than one.

        A constant rate without stages computes its own share (arrival k is at
        ``k / rate``); any other plan draws every arrival and skips the others' (each
        Poisson draw depends on the one before), so each of N workers pays for all N
        shares' draws there."""
        index, n = part
        if self.stages or self.arrival == "poisson":
            numbered: Iterator[tuple[int, float]] = enumerate(
                self.arrivals(seed=seed, duration=duration)
            )
            if requests is not None:
                numbered = islice(numbered, requests)
            if n == 1 or run == 1:
                return numbered if n == 1 else islice(numbered, index, None, n)
            return (arrival for arrival in numbered if (arrival[0] // run) % n == index)
        if run != 1:
            raise ValueError("evenly spaced arrivals at a constant rate are dealt one by one")
        return constant_share(self.rate, _end_of(duration, None), requests, index, n)

    @property
    def peak_rate(self) -> float:
        """The highest rate the plan reaches (requests/s)."""
        return max([self.rate, *(stage.rate for stage in self.stages)])


def _end_of(duration: float | None, plan: float | None) -> float:
    if duration is None:
        return plan if plan is not None else math.inf
    return duration if plan is None else min(duration, plan)


@dataclass(frozen=True, slots=True)
class ClosedModel:
    """``clients`` loops; each starts its next request ``think_time`` s after the last ended."""

    clients: int
    think_time: float = 0.0

    def __post_init__(self) -> None:
        check("clients", self.clients)
        check("think_time", self.think_time)


LoadModel = OpenModel | ClosedModel
