"""What a run records about the leases it holds: one ``run.leases`` event when they change.

The attempts rows say which ``pool/resource`` each attempt leased, once it has ended; how
many leases are out *now* is known only to the live pools. So at each heartbeat (every
``heartbeat_s``, one second by default) the Runner looks at its pools and, when the count
of leases out or the limit of any resource differs from the last it recorded, records one
``run.leases`` event::

    {"in_use": {"llm/k1": 2, "llm/k2": 0}, "limit": {"llm/k1": 2, "llm/k2": 4}}

It goes out with the heartbeat's flush, so the store lags the pools by at most about one
heartbeat; a steady run records nothing more; the cost is one look at each resource per
heartbeat, never per task. ``pyattacker serve``'s ``/metrics`` reads the last such event of
a live run as its gauge of leases in use (none out once no run is live).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pyattacker.pool import Pool

__all__ = ["LEASES_EVENT", "LeaseLog"]

#: the event's kind
LEASES_EVENT = "run.leases"


class LeaseLog:
    """Records ``run.leases`` through ``record(kind, data)`` when the pools' leases change."""

    __slots__ = ("_last", "_pools", "_record")

    def __init__(
        self, pools: Iterable[Pool], record: Callable[[str, Mapping[str, Any]], None]
    ) -> None:
        self._pools = tuple(pools)
        self._record = record
        self._last: dict[str, dict[str, int]] | None = None

    def look(self) -> None:
        """Record the leases out and limits now, if they differ from the last recorded."""
        now = leases_now(self._pools)
        if now != self._last:
            self._last = now
            self._record(LEASES_EVENT, now)

    def last_look(self) -> None:
        """At the run's end: :meth:`look` again, when the run recorded any leases before
        (so their chart ends where the run did); a run shorter than a heartbeat records
        none."""
        if self._last is not None:
            self.look()


def leases_now(pools: Iterable[Pool]) -> dict[str, dict[str, int]]:
    """``{"in_use": {"pool/resource": n}, "limit": {...}}`` for every resource of ``pools``."""
    in_use: dict[str, int] = {}
    limit: dict[str, int] = {}
    for pool in pools:
        for resource in pool.resources:
            name = f"{pool.name}/{resource.id}"
            in_use[name] = pool.active_of(resource.id)
            limit[name] = pool.limit_of(resource.id)
    return {"in_use": in_use, "limit": limit}
