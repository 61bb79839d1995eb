"""A scenario: the world (endpoints, cycle, outages) and the workload run against it.

Built by hand, by name from the benchmark's registry, or from a file; ``with_overrides``
returns a validated copy. Everything is declared here, nothing is hidden in the harness:
the algorithms the world cannot exercise (``unsuited``, with the reason), the retry policy
every algorithm shares, the seed.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyattacker._checks import check_number, check_whole
from pyattacker.errors import ConfigError
from pyattacker.pool import ALGORITHMS
from pyattacker.retry import Retrying
from pyattacker.world._profiles import EndpointProfile, LoadCycle, Outage

__all__ = ["Scenario"]


def _default_retry() -> Retrying:
    return Retrying(max_attempts=5, base=0.5, factor=2.0, cap=8.0, jitter="full")


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """One world and one workload.

    ``jobs`` jobs of ``steps_per_job`` sequential steps, each step ``calls_per_step``
    leases, run by ``concurrency`` workers; no job starts after ``horizon_s`` (one in flight
    finishes). ``retry`` decides after every failed step attempt, the same policy for every
    algorithm. ``acquire_timeout_s`` passes a timeout to every acquisition (simulated time).
    Endpoints with the same ``vendor`` form one pool; pools are ordered by first appearance
    and the first is where a job's leases are asked for (``failover`` and ``least_busy`` are
    given all of them).
    """

    name: str
    endpoints: tuple[EndpointProfile, ...]
    summary: str = ""
    problem: str = ""
    cycle: LoadCycle = field(default_factory=LoadCycle)
    outages: tuple[Outage, ...] = ()
    jobs: int = 3000
    steps_per_job: int = 3
    calls_per_step: int = 2
    concurrency: int = 12
    horizon_s: float = 600.0
    retry: Retrying = field(default_factory=_default_retry)
    acquire_timeout_s: float | None = None
    tokens_per_call: float = 1.0
    busy_retry_after_s: float = 1.0
    degrade_after: int = 3
    dead_after: int = 8
    cooldown_s: float = 30.0
    seed: int = 20260917
    wall_budget_s: float = 120.0
    unsuited: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"must be a non-empty string, got {self.name!r}", field="name")
        endpoints = tuple(self.endpoints)
        if not endpoints:
            raise ConfigError("a scenario needs at least one endpoint", field="endpoints")
        seen: set[str] = set()
        for index, endpoint in enumerate(endpoints):
            if not isinstance(endpoint, EndpointProfile):
                raise ConfigError(
                    f"must be an EndpointProfile, got {type(endpoint).__name__}",
                    field=f"endpoints[{index}]",
                )
            if endpoint.id in seen:
                raise ConfigError(
                    f"two endpoints named {endpoint.id!r}", field=f"endpoints[{index}].id"
                )
            seen.add(endpoint.id)
        object.__setattr__(self, "endpoints", endpoints)
        outages = tuple(self.outages)
        for index, outage in enumerate(outages):
            if not isinstance(outage, Outage):
                raise ConfigError(
                    f"must be an Outage, got {type(outage).__name__}", field=f"outages[{index}]"
                )
            unknown = [e for e in outage.endpoints if e not in seen]
            if unknown:
                raise ConfigError(
                    f"names no endpoint of this scenario: {', '.join(unknown)}",
                    field=f"outages[{index}].endpoints",
                    hint=f"endpoints: {', '.join(sorted(seen))}",
                )
        object.__setattr__(self, "outages", outages)
        if not isinstance(self.cycle, LoadCycle):
            raise ConfigError(
                f"must be a LoadCycle, got {type(self.cycle).__name__}", field="cycle"
            )
        check_whole(self.jobs, "jobs")
        check_whole(self.steps_per_job, "steps_per_job")
        check_whole(self.calls_per_step, "calls_per_step")
        check_whole(self.concurrency, "concurrency")
        check_number(self.horizon_s, "horizon_s", above=0.0)
        if not isinstance(self.retry, Retrying):
            raise ConfigError(
                f"must be a Retrying, got {type(self.retry).__name__}",
                field="retry",
                hint="Retrying(max_attempts=5, base=0.5, factor=2.0, cap=8.0, jitter='full')",
            )
        if self.acquire_timeout_s is not None:
            check_number(self.acquire_timeout_s, "acquire_timeout_s", above=0.0)
        check_number(self.tokens_per_call, "tokens_per_call", at_least=0.0)
        check_number(self.busy_retry_after_s, "busy_retry_after_s", at_least=0.0)
        check_whole(self.degrade_after, "degrade_after")
        check_whole(self.dead_after, "dead_after")
        if self.dead_after < self.degrade_after:
            raise ConfigError(
                f"must be >= degrade_after ({self.degrade_after}), got {self.dead_after}",
                field="dead_after",
                hint="an endpoint is degraded before it is declared dead",
            )
        check_number(self.cooldown_s, "cooldown_s", above=0.0)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ConfigError(f"must be a whole number, got {self.seed!r}", field="seed")
        check_number(self.wall_budget_s, "wall_budget_s", above=0.0)
        if not isinstance(self.unsuited, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.unsuited.items()
        ):
            raise ConfigError(
                "must map algorithm names to the reason the world cannot exercise them",
                field="unsuited",
            )
        for name in self.unsuited:
            if name not in ALGORITHMS:
                raise ConfigError(
                    f"names no acquire algorithm: {name!r}",
                    field=f"unsuited.{name}",
                    hint=f"known: {', '.join(ALGORITHMS)}",
                )
        # read-only, so SCENARIOS' entries cannot be changed through it
        object.__setattr__(self, "unsuited", _FrozenDict(self.unsuited))

    # -- derived facts --------------------------------------------------------------------

    @property
    def vendors(self) -> tuple[str, ...]:
        """The pools of this world, in the order their first endpoint appears."""
        return tuple(dict.fromkeys(e.vendor for e in self.endpoints))

    def endpoint(self, endpoint_id: str) -> EndpointProfile:
        for endpoint in self.endpoints:
            if endpoint.id == endpoint_id:
                return endpoint
        raise KeyError(endpoint_id)

    def capacity_seconds(self, t0: float, t1: float) -> float:
        """Capacity on offer between ``t0`` and ``t1`` (request-seconds), in closed form.

        ``Σ capacity * weight * ∫ cycle(t) * drift(t) * warmup(t) dt``: nothing while an
        outage covers an endpoint, a straight-line climb while it warms up afterwards, a
        straight-line fall while it degrades. Cut where any of those changes, each piece is
        the cycle times a polynomial, integrated exactly (``LoadCycle.weighted_integral``).
        A smooth approximation of the integer capacity the provider enforces, the same for
        every algorithm since it depends on time only.
        """
        if t1 <= t0:
            return 0.0
        total = 0.0
        for endpoint in self.endpoints:
            scale = endpoint.capacity * endpoint.weight
            for a, b in _pieces(self, endpoint, t0, t1):
                poly = _multiplier(self, endpoint, a, b)
                if poly is not None:
                    total += scale * self.cycle.weighted_integral(a, b, poly)
        return total

    def with_overrides(self, **changes: Any) -> Scenario:
        """A validated copy with ``changes`` applied (``SCENARIOS`` is left alone)."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise ConfigError(
                f"unknown scenario field(s): {', '.join(unknown)}",
                field=unknown[0],
                hint=f"known: {', '.join(sorted(known))}",
            )
        return dataclasses.replace(self, **changes)


class _FrozenDict(dict[str, str]):
    """A dict that refuses changes (and still pickles, unlike ``MappingProxyType``)."""

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("a scenario is immutable: use with_overrides(unsuited=...)")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]
    __ior__ = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple[object, ...]:
        return (_FrozenDict, (dict(self),))


def _pieces(
    scenario: Scenario, endpoint: EndpointProfile, t0: float, t1: float
) -> list[tuple[float, float]]:
    """``[t0, t1]`` cut wherever the endpoint's capacity curve changes shape."""
    cuts = {t0, t1}
    for outage in scenario.outages:
        cuts.update(outage.breakpoints(endpoint.id, t0, t1))
    d = endpoint.degradation
    if d is not None:
        cuts.update(t for t in (d.start_s, d.end_s) if t0 < t < t1)
    ordered = sorted(cuts)
    return [(a, b) for a, b in itertools.pairwise(ordered) if b > a]


def _multiplier(
    scenario: Scenario, endpoint: EndpointProfile, a: float, b: float
) -> tuple[float, ...] | None:
    """The capacity multiplier on ``[a, b]`` as a polynomial in ``s = t - a`` (None: the
    endpoint is down). Within one piece nothing changes shape, so the middle decides."""
    middle = (a + b) / 2.0
    poly: tuple[float, ...] = (1.0,)
    for outage in scenario.outages:
        if outage.covers(endpoint.id, middle):
            return None
        ended = outage.last_end(endpoint.id, middle)
        if outage.warmup_s > 0.0 and ended is not None and middle - ended < outage.warmup_s:
            poly = _times(poly, ((a - ended) / outage.warmup_s, 1.0 / outage.warmup_s))
    d = endpoint.degradation
    if d is not None and middle > d.start_s:
        drop = 1.0 - d.capacity_factor
        if middle >= d.end_s:
            poly = _times(poly, (d.capacity_factor,))
        else:
            length = d.end_s - d.start_s
            poly = _times(poly, (1.0 - drop * (a - d.start_s) / length, -drop / length))
    return poly


def _times(p: tuple[float, ...], q: tuple[float, ...]) -> tuple[float, ...]:
    product = [0.0] * (len(p) + len(q) - 1)
    for i, x in enumerate(p):
        for j, y in enumerate(q):
            product[i + j] += x * y
    return tuple(product)
