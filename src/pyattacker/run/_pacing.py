"""What a run records about pacing: one ``pool.pacing`` event per paced resource.

A pool outlives a run, and its pacers count from the pool's birth; so the Runner takes the
totals when a run starts and records, when it ends, what this run added: per resource that
declares ``rpm``/``tpm``/``rpd`` (or shares a paced quota group), its limits, the leases it
granted, how often a lease left its key resting (``paced``) and for how long in all
(``paced_s``). The run report reads these events (``report._run``). Per run, not per lease:
nothing here runs on the hot path.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyattacker.pool import Pool

__all__ = ["PacingTotals", "pacing_events", "pacing_totals"]

#: (pool, resource) -> (leases, paced, paced_s) at one instant
PacingTotals = dict[tuple[str, str], tuple[int, int, float]]


def pacing_totals(pools: Iterable[Pool]) -> PacingTotals:
    """The paced resources' running totals now."""
    totals: PacingTotals = {}
    for pool in pools:
        for snap in pool.snapshot():
            if snap.pacing is not None:
                totals[(pool.name, snap.id)] = (
                    snap.leases,
                    int(snap.pacing["paced"]),
                    float(snap.pacing["paced_s"]),
                )
    return totals


def pacing_events(pools: Iterable[Pool], before: PacingTotals) -> list[dict[str, Any]]:
    """The data of one ``pool.pacing`` event per paced resource: what changed since
    ``before`` (a quota group's members each show the group's shared pacing)."""
    events = []
    for pool in pools:
        for snap in pool.snapshot():
            pacing = snap.pacing
            if pacing is None:
                continue
            leases, paced, paced_s = before.get((pool.name, snap.id), (0, 0, 0.0))
            events.append(
                {
                    "pool": pool.name,
                    "resource": snap.id,
                    "quota_group": snap.quota_group,
                    "rpm": pacing["rpm"],
                    "tpm": pacing["tpm"],
                    "rpd": pacing["rpd"],
                    "burst": pacing["burst"],
                    "leases": snap.leases - leases,
                    "paced": int(pacing["paced"]) - paced,
                    "paced_s": round(float(pacing["paced_s"]) - paced_s, 6),
                }
            )
    return events
