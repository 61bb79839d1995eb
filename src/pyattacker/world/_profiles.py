"""The assumptions a provider is built from, one frozen dataclass per kind of assumption.

Each profile is a value: hashable, comparable, validated when built (a bad number is a
:class:`~pyattacker.errors.ConfigError` naming the field). Every time-dependent property is
a pure function of ``t`` (the world's mood does not depend on who is calling), which is what
makes two algorithms' runs comparable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pyattacker._checks import check_number, check_whole
from pyattacker.errors import ConfigError

__all__ = [
    "CacheProfile",
    "Degradation",
    "EndpointProfile",
    "FailureProfile",
    "LatencyProfile",
    "LoadCycle",
    "Outage",
    "RateLimitProfile",
]

_TAU = 2.0 * math.pi


def _check_rate(value: object, field: str) -> float:
    return check_number(value, field, at_least=0.0, at_most=1.0, hint="a probability, e.g. 0.05")


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadCycle:
    """The provider's own load as a capacity factor between ``trough`` and ``peak``.

    ``factor(t) = trough + (peak - trough) * (1 - cos(2π (t / period_s + phase))) / 2``:
    a smooth cycle that starts at the trough (``phase=0``) and peaks half a period later.
    ``period_s=0`` is not allowed; a flat world is ``trough == peak``.
    """

    period_s: float = 120.0
    trough: float = 0.35
    peak: float = 1.0
    phase: float = 0.0

    def __post_init__(self) -> None:
        check_number(self.period_s, "cycle.period_s", above=0.0)
        check_number(self.trough, "cycle.trough", above=0.0)
        check_number(self.peak, "cycle.peak", at_least=self.trough)
        check_number(self.phase, "cycle.phase", at_least=0.0, below=1.0)

    def factor(self, t: float) -> float:
        """The capacity factor at simulated time ``t``."""
        swing = (self.peak - self.trough) * 0.5
        return self.trough + swing * (1.0 - math.cos(_TAU * (t / self.period_s + self.phase)))

    def integral(self, t0: float, t1: float) -> float:
        """``∫ factor(t) dt`` from ``t0`` to ``t1``, in closed form: the smooth capacity
        share a cycle offers over a span (for sizing a scenario; the benchmark's
        utilisation divides by the integer capacity the provider actually enforced)."""
        swing = (self.peak - self.trough) * 0.5
        k = _TAU / self.period_s
        phi = _TAU * self.phase

        def antiderivative(t: float) -> float:
            return (self.trough + swing) * t - swing * math.sin(k * t + phi) / k

        return antiderivative(t1) - antiderivative(t0)


@dataclass(frozen=True, slots=True, kw_only=True)
class LatencyProfile:
    """Service time: a log-normal body (``median_s``, ``sigma``) and a slow tail.

    A request is in the tail with probability ``tail_rate``, and then takes ``tail_factor``
    times its body draw.
    """

    median_s: float = 0.5
    sigma: float = 0.5
    tail_rate: float = 0.02
    tail_factor: float = 6.0

    def __post_init__(self) -> None:
        check_number(self.median_s, "latency.median_s", above=0.0)
        check_number(self.sigma, "latency.sigma", at_least=0.0)
        _check_rate(self.tail_rate, "latency.tail_rate")
        check_number(self.tail_factor, "latency.tail_factor", at_least=1.0)

    def sample(self, u1: float, u2: float, u3: float) -> float:
        """The service time for three uniforms in ``[0, 1)`` (Box-Muller for the body)."""
        z = math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(_TAU * u2)
        seconds = self.median_s * math.exp(self.sigma * z)
        return seconds * self.tail_factor if u3 < self.tail_rate else seconds


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureProfile:
    """Independent blips (``error_rate``) plus storms: correlated bad weather.

    Time is cut into windows of ``storm_duration_s``; each (seed, endpoint, window) is a
    storm with probability ``storm_rate``, and a storm lasts its whole window, during which
    an admitted request fails with probability ``storm_error_rate``.
    """

    error_rate: float = 0.01
    storm_rate: float = 0.05
    storm_duration_s: float = 30.0
    storm_error_rate: float = 0.5

    def __post_init__(self) -> None:
        _check_rate(self.error_rate, "failures.error_rate")
        _check_rate(self.storm_rate, "failures.storm_rate")
        check_number(self.storm_duration_s, "failures.storm_duration_s", above=0.0)
        _check_rate(self.storm_error_rate, "failures.storm_error_rate")


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLimitProfile:
    """A token bucket that tightens when pushed.

    Tokens refill at ``allowance * per_window / window_s`` per second up to ``burst``. Every
    refusal multiplies the allowance by ``tightening`` (never below ``tightening_floor``);
    it recovers by ``recovery_per_window`` per ``window_s``, up to 1. A refusal asks the
    client to come back after ``retry_after_s``, or (``None``) when the next token is due.
    """

    per_window: float = 600.0
    window_s: float = 60.0
    burst: float = 20.0
    tightening: float = 0.5
    tightening_floor: float = 0.25
    recovery_per_window: float = 3.0
    retry_after_s: float | None = 1.0

    def __post_init__(self) -> None:
        check_number(self.per_window, "rate_limit.per_window", above=0.0)
        check_number(self.window_s, "rate_limit.window_s", above=0.0)
        check_number(self.burst, "rate_limit.burst", at_least=1.0)
        check_number(self.tightening, "rate_limit.tightening", above=0.0, at_most=1.0)
        check_number(self.tightening_floor, "rate_limit.tightening_floor", above=0.0, at_most=1.0)
        check_number(self.recovery_per_window, "rate_limit.recovery_per_window", at_least=0.0)
        if self.retry_after_s is not None:
            check_number(self.retry_after_s, "rate_limit.retry_after_s", at_least=0.0)

    @property
    def rate(self) -> float:
        """Tokens per second at full allowance."""
        return self.per_window / self.window_s


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheProfile:
    """A per-endpoint cache keyed by what the client sends (the job, like a prompt prefix).

    A request whose key this endpoint served within ``ttl_s`` is a hit: it takes
    ``hit_latency_factor`` of its drawn latency and costs ``hit_cost_factor`` of the usual
    tokens. The endpoint remembers its ``entries`` most recent keys.
    """

    hit_latency_factor: float = 0.3
    hit_cost_factor: float = 0.25
    ttl_s: float = 120.0
    entries: int = 512

    def __post_init__(self) -> None:
        check_number(self.hit_latency_factor, "cache.hit_latency_factor", above=0.0)
        check_number(self.hit_cost_factor, "cache.hit_cost_factor", at_least=0.0)
        check_number(self.ttl_s, "cache.ttl_s", above=0.0)
        check_whole(self.entries, "cache.entries")


@dataclass(frozen=True, slots=True, kw_only=True)
class Degradation:
    """An endpoint getting worse over time: a linear ramp from ``start_s`` to ``end_s``.

    At ``end_s`` (and after) its capacity is ``capacity_factor`` of normal and
    ``error_rate`` is added to its failure probability; before ``start_s`` nothing changes.
    """

    start_s: float = 0.0
    end_s: float = 300.0
    capacity_factor: float = 0.2
    error_rate: float = 0.3

    def __post_init__(self) -> None:
        check_number(self.start_s, "degradation.start_s", at_least=0.0)
        check_number(self.end_s, "degradation.end_s", above=self.start_s)
        check_number(self.capacity_factor, "degradation.capacity_factor", at_least=0.0)
        _check_rate(self.error_rate, "degradation.error_rate")

    def progress(self, t: float) -> float:
        """0 before ``start_s``, 1 from ``end_s`` on, linear in between."""
        if t <= self.start_s:
            return 0.0
        if t >= self.end_s:
            return 1.0
        return (t - self.start_s) / (self.end_s - self.start_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class Outage:
    """Every named endpoint (all of them when ``endpoints`` is empty) is down together.

    From ``start_s`` for ``duration_s`` seconds (repeating every ``every_s`` if given) a
    request fails fast with a connection error after ``fail_after_s``. The provider comes
    back cold: its capacity climbs linearly from nothing to normal over ``warmup_s``, and
    its rate limiter restarts with an empty bucket.
    """

    start_s: float
    duration_s: float
    every_s: float | None = None
    endpoints: tuple[str, ...] = ()
    fail_after_s: float = 0.05
    warmup_s: float = 0.0

    def __post_init__(self) -> None:
        check_number(self.start_s, "outage.start_s", at_least=0.0)
        check_number(self.duration_s, "outage.duration_s", above=0.0)
        if self.every_s is not None:
            check_number(
                self.every_s,
                "outage.every_s",
                above=self.duration_s,
                hint="longer than duration_s, or null for a single outage",
            )
        check_number(self.fail_after_s, "outage.fail_after_s", at_least=0.0)
        check_number(self.warmup_s, "outage.warmup_s", at_least=0.0)
        given: object = self.endpoints  # a lone string is one name, not its letters
        names = (given,) if isinstance(given, str) else tuple(self.endpoints)
        for name in names:
            if not isinstance(name, str) or not name:
                raise ConfigError(
                    f"must name endpoints by their id (strings), got {name!r}",
                    field="outage.endpoints",
                )
        object.__setattr__(self, "endpoints", names)

    def _since_end(self, endpoint: str, t: float) -> float | None:
        """Seconds since the latest end of this outage at or before ``t`` (None: none yet)."""
        if self.endpoints and endpoint not in self.endpoints:
            return None
        since = t - self.start_s - self.duration_s
        if since < 0.0:
            return None
        if self.every_s is not None:
            since %= self.every_s
            if since > self.every_s - self.duration_s:  # inside the next outage
                return None
        return since

    def warmup(self, endpoint: str, t: float) -> float:
        """The share of normal capacity ``endpoint`` has at ``t``: below 1 only while it
        warms up after this outage."""
        if self.warmup_s <= 0.0:
            return 1.0
        since = self._since_end(endpoint, t)
        if since is None or since >= self.warmup_s:
            return 1.0
        return since / self.warmup_s

    def last_end(self, endpoint: str, t: float) -> float | None:
        """When this outage last ended for ``endpoint``, at or before ``t``."""
        since = self._since_end(endpoint, t)
        return None if since is None else t - since

    def covers(self, endpoint: str, t: float) -> bool:
        """Whether ``endpoint`` is down at ``t``."""
        if self.endpoints and endpoint not in self.endpoints:
            return False
        since = t - self.start_s
        if since < 0.0:
            return False
        if self.every_s is not None:
            since %= self.every_s
        return since < self.duration_s

    def recoveries(self, until: float) -> list[float]:
        """The instants up to ``until`` at which this outage ends."""
        ends = []
        start = self.start_s
        while start + self.duration_s <= until:
            ends.append(start + self.duration_s)
            if self.every_s is None:
                break
            start += self.every_s
        return ends


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointProfile:
    """One endpoint: its capacity, character and limits, and the vendor (pool) it belongs to.

    Capacity at ``t`` is ``max(1, round(capacity * weight * cycle.factor(t) * drift))``
    requests in flight. ``quota_units`` is declared metadata (``options["quota"]["tokens"]``
    on the resource), not what the provider enforces. Endpoints with the same
    ``rate_group`` (keys of one account) share one token bucket, and the client knows it:
    their resources are declared in one ``quota_group``, so a refusal on one blocks all.
    """

    id: str
    capacity: int = 8
    weight: float = 1.0
    latency: LatencyProfile = field(default_factory=LatencyProfile)
    failures: FailureProfile = field(default_factory=FailureProfile)
    rate_limit: RateLimitProfile | None = None
    cache: CacheProfile | None = None
    degradation: Degradation | None = None
    quota_units: float | None = None
    vendor: str = "provider"
    rate_group: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ConfigError(f"must be a non-empty string, got {self.id!r}", field="id")
        check_whole(self.capacity, "capacity")
        check_number(self.weight, "weight", above=0.0)
        if self.quota_units is not None:
            check_number(self.quota_units, "quota_units", at_least=0.0)
        if not isinstance(self.vendor, str) or not self.vendor:
            raise ConfigError(f"must be a non-empty string, got {self.vendor!r}", field="vendor")
        if self.rate_group is not None and (
            not isinstance(self.rate_group, str) or not self.rate_group
        ):
            raise ConfigError(
                f"must be a non-empty string or null, got {self.rate_group!r}", field="rate_group"
            )
        for name, kind in (
            ("latency", LatencyProfile),
            ("failures", FailureProfile),
            ("rate_limit", RateLimitProfile),
            ("cache", CacheProfile),
            ("degradation", Degradation),
        ):
            value = getattr(self, name)
            if not isinstance(value, kind) and not (value is None and name not in _REQUIRED):
                raise ConfigError(
                    f"must be a {kind.__name__}, got {type(value).__name__}", field=name
                )


_REQUIRED = frozenset({"latency", "failures"})
