"""``adaptive``: learn each resource's usable capacity from refusals (AIMD).

The algorithm itself only acquires (like its ``then``); the learning happens in a
controller subscribed to the pool's ``lease.reported`` events, which turns each report into
a ``Pool.set_limit`` through the pure ``Adaptive.step``. One controller per pool, kept in a
module-level ``WeakKeyDictionary`` keyed by the ``Pool`` (it lives exactly as long as the
pool), so two ``acquire(algorithm="adaptive")`` calls drive the same limits even though
each resolves a fresh, equal ``Adaptive``.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from pyattacker._checks import check_number
from pyattacker.errors import ConfigError
from pyattacker.pool._algorithms import (
    AcquireAlgorithm,
    AcquireRequest,
    AlgorithmSpec,
    resolve_nested,
)
from pyattacker.pool._events import PoolEvent
from pyattacker.pool._lease import Lease

if TYPE_CHECKING:
    from pyattacker.pool._pool import Pool

__all__ = ["Adaptive"]

# Credit a hair below a whole window still counts as the window: 1/3 + 1/3 + 1/3 may sum to
# 0.9999999999999999, and a window of `limit` successes must grow the limit by exactly one.
_WHOLE = 1e-9


@dataclass(frozen=True, slots=True, kw_only=True)
class Adaptive(AcquireAlgorithm):
    """Learn each resource's usable capacity from refusals (AIMD); acquire like ``then``.

    On every ``lease.reported`` event of a pool it has acquired from, per resource::

        refusal (error_class "rate_limit"):  limit = max(min_limit, floor(limit * decrease))
                                             credit = 0
        success:                             credit += increase / limit
                                             each whole credit: limit += 1, credit -= 1
        any other failure:                   nothing (the health model handles it)

    i.e. +``increase`` per window of ``limit`` successes, TCP-style, the fraction kept per
    resource. ``Pool.set_limit`` bounds the limit to 1..capacity (growth at capacity is
    dropped, not banked) and records every change as a ``resource.limit`` event with the
    reason. Refusals of leases already out each count, so a burst of them shrinks faster.

    State: one controller per pool, created at the first acquire through that pool and
    kept for the pool's lifetime in a ``WeakKeyDictionary``. Equal configurations share it
    (so ``algorithm="adaptive"`` per call learns across calls); a *different* configuration
    on a pool that already has one is a ``ConfigError``, since two controllers would fight.
    """

    name: ClassVar[str] = "adaptive"
    increase: float = 1.0
    decrease: float = 0.5
    min_limit: int = 1
    then: AlgorithmSpec = "wait"
    _then: AcquireAlgorithm = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_number(self.increase, "adaptive.increase", above=0, hint="slots per window")
        check_number(self.decrease, "adaptive.decrease", above=0, below=1, hint="e.g. 0.5")
        if not isinstance(self.min_limit, int) or isinstance(self.min_limit, bool):
            raise ConfigError(
                f"must be a whole number, got {self.min_limit!r}", field="adaptive.min_limit"
            )
        if self.min_limit < 1:
            raise ConfigError(f"must be >= 1, got {self.min_limit!r}", field="adaptive.min_limit")
        then = resolve_nested(self.then, "adaptive.then")
        object.__setattr__(self, "then", then)
        object.__setattr__(self, "_then", then)

    def step(self, limit: int, credit: float, *, ok: bool, rate_limited: bool) -> tuple[int, float]:
        """The next ``(limit, credit)`` after one report (pure; capacity is the pool's job)."""
        if rate_limited:
            return max(self.min_limit, math.floor(limit * self.decrease)), 0.0
        if not ok:
            return limit, credit
        credit += self.increase / limit
        grown = math.floor(credit + _WHOLE)
        return limit + grown, max(0.0, credit - grown)

    async def acquire(self, request: AcquireRequest) -> Lease:
        _controller(self, request.pool)
        return await self._then.acquire(request)


class _Controller:
    """One pool's AIMD state; subscribed to that pool's events for the pool's lifetime."""

    __slots__ = ("__weakref__", "config", "credit", "pool")

    def __init__(self, config: Adaptive, pool: Pool) -> None:
        self.config = config
        self.credit: dict[str, float] = {}
        # Weak: the pool holds this controller (as a subscriber), never the other way round.
        self.pool = weakref.ref(pool)
        pool.subscribe(self.on_event)

    def on_event(self, event: PoolEvent) -> None:
        if event.kind != "lease.reported" or event.resource is None:
            return
        pool = self.pool()
        rid = event.resource
        if pool is None or rid not in pool:
            return
        ok = bool(event.data.get("ok"))
        rate_limited = not ok and event.data.get("error_class") == "rate_limit"
        limit = pool.limit_of(rid)
        target, credit = self.config.step(
            limit, self.credit.get(rid, 0.0), ok=ok, rate_limited=rate_limited
        )
        if target != limit:
            if rate_limited:
                reason = f"adaptive: rate limited, x{self.config.decrease:g}"
            else:
                reason = f"adaptive: +{target - limit} after a window of successes"
            if pool.set_limit(rid, target, reason=reason) != target:
                credit = 0.0  # clamped at capacity: growth there is dropped, not banked
        self.credit[rid] = credit


_CONTROLLERS: weakref.WeakKeyDictionary[Pool, _Controller] = weakref.WeakKeyDictionary()


def _controller(config: Adaptive, pool: Pool) -> _Controller:
    """The pool's controller, created on first use; ``ConfigError`` on a conflicting config."""
    found = _CONTROLLERS.get(pool)
    if found is None:
        found = _CONTROLLERS[pool] = _Controller(config, pool)
    elif found.config != config:
        raise ConfigError(
            f"pool {pool.name!r} is already governed by {found.config!r}",
            field="algorithm",
            hint="use one adaptive configuration per pool",
        )
    return found
