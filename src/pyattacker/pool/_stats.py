"""Frozen snapshots of a pool: what ``statistics()`` and ``snapshot()`` return."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["PoolStatistics", "ResourceSnapshot", "percentile"]


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

    def summary(self) -> str:
        return (
            f"{self.name!r} resources={self.resources} ready={self.ready} "
            f"degraded={self.degraded} dead={self.dead} revoked={self.revoked} "
            f"active={self.active}/{self.capacity} waiting={self.waiting} "
            f"leases={self.leases} failures={self.failures} leaked={self.leaked}"
        )


@dataclass(frozen=True, slots=True)
class ResourceSnapshot:
    """One resource's live state; ``usage`` is the running total of reported usage."""

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

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}
