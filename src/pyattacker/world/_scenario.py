"""A scenario: the world (endpoints, cycle, outages) and the workload run against it.

Built by hand, by name from the benchmark's registry, or from a file; ``with_overrides``
returns a validated copy. Everything is declared here, nothing is hidden in the harness:
the algorithms the world cannot exercise (``unsuited``, with the reason), the retry policy
every algorithm shares, the seed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyattacker._checks import check_number, check_whole
from pyattacker.errors import ConfigError
from pyattacker.pool import ALGORITHMS
from pyattacker.retry import Retrying
from pyattacker.world._profiles import EndpointProfile, LoadCycle, Outage, RateLimitProfile

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
        endpoints = _checked_endpoints(self.endpoints)
        object.__setattr__(self, "endpoints", endpoints)
        ids = {endpoint.id for endpoint in endpoints}
        object.__setattr__(self, "outages", _checked_outages(self.outages, ids))
        if not isinstance(self.cycle, LoadCycle):
            raise ConfigError(
                f"must be a LoadCycle, got {type(self.cycle).__name__}", field="cycle"
            )
        self._check_workload()
        self._check_health()
        check_number(self.wall_budget_s, "wall_budget_s", above=0.0)
        # read-only, so SCENARIOS' entries cannot be changed through it
        object.__setattr__(self, "unsuited", _FrozenDict(_checked_unsuited(self.unsuited)))

    def _check_workload(self) -> None:
        """The jobs, their shape, the retry policy and what a call costs."""
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

    def _check_health(self) -> None:
        """The pools' health thresholds and the seed of every die."""
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

    # -- derived facts --------------------------------------------------------------------

    @property
    def vendors(self) -> tuple[str, ...]:
        """The pools of this world, in the order their first endpoint appears."""
        return tuple(dict.fromkeys(e.vendor for e in self.endpoints))

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


def _checked_endpoints(given: tuple[EndpointProfile, ...]) -> tuple[EndpointProfile, ...]:
    """``given`` as a tuple: at least one, each an EndpointProfile, no two with one id, and
    the endpoints of a rate group agreeing on their bucket."""
    endpoints = tuple(given)
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
    _check_rate_groups(endpoints)
    return endpoints


def _checked_outages(given: tuple[Outage, ...], ids: set[str]) -> tuple[Outage, ...]:
    """``given`` as a tuple of Outages, each naming only endpoints in ``ids``."""
    outages = tuple(given)
    for index, outage in enumerate(outages):
        if not isinstance(outage, Outage):
            raise ConfigError(
                f"must be an Outage, got {type(outage).__name__}", field=f"outages[{index}]"
            )
        unknown = [e for e in outage.endpoints if e not in ids]
        if unknown:
            raise ConfigError(
                f"names no endpoint of this scenario: {', '.join(unknown)}",
                field=f"outages[{index}].endpoints",
                hint=f"endpoints: {', '.join(sorted(ids))}",
            )
    return outages


def _checked_unsuited(unsuited: Mapping[str, str]) -> Mapping[str, str]:
    """``unsuited`` if it maps known algorithm names to reasons (strings)."""
    if not isinstance(unsuited, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in unsuited.items()
    ):
        raise ConfigError(
            "must map algorithm names to the reason the world cannot exercise them",
            field="unsuited",
        )
    for name in unsuited:
        if name not in ALGORITHMS:
            raise ConfigError(
                f"names no acquire algorithm: {name!r}",
                field=f"unsuited.{name}",
                hint=f"known: {', '.join(ALGORITHMS)}",
            )
    return unsuited


def _check_rate_groups(endpoints: tuple[EndpointProfile, ...]) -> None:
    """Endpoints sharing a bucket must describe the same bucket."""
    first: dict[str, RateLimitProfile | None] = {}
    for index, endpoint in enumerate(endpoints):
        group = endpoint.rate_group
        if group is None:
            continue
        limit = first.setdefault(group, endpoint.rate_limit)
        if endpoint.rate_limit is None or endpoint.rate_limit != limit:
            raise ConfigError(
                f"endpoints of rate_group {group!r} share one bucket, so they need the same "
                "rate_limit",
                field=f"endpoints[{index}].rate_limit",
                hint="give every endpoint of the group the same rate_limit table",
            )
