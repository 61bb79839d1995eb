"""Frozen snapshots of a pool: what ``statistics()`` and ``snapshot()`` return."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyattacker.pool._health import Health
from pyattacker.pool._pacing import Pacer
from pyattacker.pool._slot import Slot

__all__ = [
    "PoolStatistics",
    "ResourceSnapshot",
    "percentile",
    "pool_statistics",
    "resource_snapshot",
]


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of already sorted values, nearest-rank; 0.0 when empty."""
    if not ordered:
        return 0.0
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True, slots=True)
class PoolStatistics:
    """The pool at one instant. Counts are of resources unless named otherwise.

    ``capacity`` sums the resources that can still serve (not DEAD, not REVOKED);
    ``leases``, ``failures``, ``throttles`` and ``leaked`` count since the pool was built;
    the wait figures (seconds) cover the most recent 10,000 acquisitions, ``wait_max_s`` all.
    Pacing (resources declaring ``rpm``/``tpm``/``rpd``): ``paced`` counts the leases after
    which a key had to rest, ``paced_s`` the seconds keys rested in all (one quota group
    counts once), ``paced_now`` the resources resting at this instant.
    """

    name: str
    resources: int
    ready: int
    degraded: int
    dead: int
    revoked: int
    active: int
    capacity: int
    waiting: int
    leases: int
    failures: int
    throttles: int
    leaked: int
    wait_p50_s: float
    wait_p95_s: float
    wait_max_s: float
    paced: int = 0
    paced_s: float = 0.0
    paced_now: int = 0

    def summary(self) -> str:
        text = (
            f"{self.name!r} resources={self.resources} ready={self.ready} "
            f"degraded={self.degraded} dead={self.dead} revoked={self.revoked} "
            f"active={self.active}/{self.capacity} waiting={self.waiting} "
            f"leases={self.leases} failures={self.failures} leaked={self.leaked}"
        )
        if self.paced:
            text += f" paced={self.paced} ({self.paced_s:.1f}s, {self.paced_now} now)"
        return text


@dataclass(frozen=True, slots=True)
class ResourceSnapshot:
    """One resource's live state; ``usage`` is the running total of reported usage;
    ``pacing`` its limits and pacing totals (``Pacer.describe``), None when unpaced."""

    id: str
    kind: str
    state: str
    failures: int
    active: int
    capacity: int
    limit: int
    blocked_until: float | None
    not_before: float | None
    leases: int
    usage: Mapping[str, float]
    quota_group: str | None
    pacing: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def pool_statistics(
    name: str,
    slots: Sequence[Slot],
    now: float,
    *,
    pacers: Iterable[Pacer],
    waiting: int,
    leases: int,
    failures: int,
    throttles: int,
    leaked: int,
    waits: Iterable[float],
    wait_max_s: float,
) -> PoolStatistics:
    """The pool's snapshot from its slots and counters (``Pool.statistics``)."""
    states = [s.health.state_at(now) for s in slots]
    live = [s for s in slots if s.health.state not in (Health.DEAD, Health.REVOKED)]
    ordered = sorted(waits)
    pacers = list(pacers)
    return PoolStatistics(
        name=name,
        resources=len(slots),
        ready=states.count(Health.READY),
        degraded=states.count(Health.DEGRADED),
        dead=states.count(Health.DEAD),
        revoked=states.count(Health.REVOKED),
        active=sum(s.active for s in slots),
        capacity=sum(s.resource.capacity for s in live),
        waiting=waiting,
        leases=leases,
        failures=failures,
        throttles=throttles,
        leaked=leaked,
        wait_p50_s=percentile(ordered, 0.50),
        wait_p95_s=percentile(ordered, 0.95),
        wait_max_s=wait_max_s,
        paced=sum(p.paced for p in pacers),
        paced_s=sum(p.paced_s for p in pacers),
        paced_now=sum(1 for s in slots if s.pacer is not None and s.pacer.ready_at > now),
    )


def resource_snapshot(s: Slot, now: float) -> ResourceSnapshot:
    """One slot's live state at ``now`` (``Pool.snapshot``)."""
    return ResourceSnapshot(
        id=s.resource.id,
        kind=s.resource.kind,
        state=s.health.state_at(now).value,
        failures=s.health.failures,
        active=s.active,
        capacity=s.resource.capacity,
        limit=s.limit,
        blocked_until=s.health.blocked_until,
        not_before=None if s.not_before == -math.inf else s.not_before,
        leases=s.leases,
        usage=dict(s.usage),
        quota_group=s.resource.quota_group,
        pacing=None if s.pacer is None else s.pacer.describe(now),
    )
