"""A resource's live state inside one pool, and how that state reads at an instant."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Sequence

from pyattacker.pool._health import Health, HealthState
from pyattacker.pool._pacing import Pacer
from pyattacker.pool._resource import Resource
from pyattacker.pool._selector import ANY, Selector

__all__ = ["Slot", "hopeless", "hopeless_reasons", "pick", "reason"]

# Read on every acquire and release (here and by the pool): module names, since on Python
# 3.11 reading an Enum member off its class goes through the enum's metaclass hook, about
# a call's cost.
READY, DEAD, REVOKED = Health.READY, Health.DEAD, Health.REVOKED


class Slot:
    """A resource's live state inside one pool."""

    __slots__ = (
        "active",
        "client",
        "health",
        "index",
        "leases",
        "limit",
        "not_before",
        "pacer",
        "reserved",
        "resource",
        "usage",
    )

    def __init__(self, resource: Resource, index: int, pacer: Pacer | None = None) -> None:
        self.resource = resource
        self.pacer = pacer  # shared by the slots of one quota group
        self.index = index
        self.health = HealthState()
        self.active = 0
        self.reserved = 0  # freed units held for a woken waiter until it runs (no barging)
        self.limit = resource.capacity
        self.not_before = -math.inf
        self.client: object | None = None
        self.leases = 0
        self.usage: dict[str, float] = {}

    def usable(self, now: float) -> bool:
        h = self.health
        if h.state is not READY and h.state_at(now) is not READY:
            return False
        if self.pacer is not None and self.pacer.ready_at > now:
            return False
        return self.active + self.reserved < self.limit and self.not_before <= now

    def comes_back_at(self, now: float) -> float | None:
        """The future instant this slot stops being blocked by time, if it is."""
        h = self.health
        if h.state is Health.DEAD or h.state is Health.REVOKED:
            return None
        until = self.not_before
        if h.state is Health.DEGRADED and h.blocked_until is not None and h.blocked_until > until:
            until = h.blocked_until
        if self.pacer is not None and self.pacer.ready_at > until:
            until = self.pacer.ready_at
        return until if until > now else None


def reason(slot: Slot, selector: Selector, now: float) -> str:
    h = slot.health
    state = h.state_at(now)
    if not selector.matches(slot.resource):
        return "does not match"
    if state is Health.DEGRADED:
        return f"degraded until t={h.blocked_until:.3f}"
    if state is not Health.READY:
        return state.value
    if slot.not_before > now:
        return f"throttled until t={slot.not_before:.3f}"
    if slot.pacer is not None and slot.pacer.ready_at > now:
        return f"paced until t={slot.pacer.ready_at:.3f}"
    if slot.active >= slot.limit:
        return f"full ({slot.active}/{slot.limit})"
    if slot.active + slot.reserved >= slot.limit:
        return f"held for a waiter ({slot.active}/{slot.limit} in use)"
    return "free"


def hopeless(slot: Slot) -> bool:
    """Revoked, or dead with no lease out (whose success would revive it): nothing but an
    operator (``publish``) can bring it back."""
    state = slot.health.state
    return state is REVOKED or (state is DEAD and slot.active == 0)


def hopeless_reasons(slots: Iterable[Slot], selector: Selector) -> dict[str, str] | None:
    """Why each resource ``selector`` accepts can never serve again, when that is so of
    every one of them (and there is at least one); None while any of them may."""
    reasons: dict[str, str] = {}
    for slot in slots:
        if not selector.matches(slot.resource):
            continue
        if not hopeless(slot):
            return None
        h = slot.health
        if h.state is Health.DEAD:
            reasons[slot.resource.id] = f"dead ({h.failures} consecutive failures)"
        else:
            reasons[slot.resource.id] = "revoked"
    return reasons or None


def pick(
    slots: Sequence[Slot],
    selector: Selector,
    score: Callable[[Resource], float | None] | None,
    exclude: Collection[str],
    now: float,
    start: int,
) -> Slot | None:
    """The slot an acquire takes now, or None: among the usable slots whose resource
    ``selector`` accepts and that are not in ``exclude``, the best ``score`` (higher first,
    None last), then the least loaded (``active / limit``); ties go to the first met
    going round from ``start`` (the pool's round-robin position)."""
    n = len(slots)
    if n == 0:
        return None
    if n == 1 and score is None:  # one resource (a load test's one URL): no ranking
        slot = slots[0]
        if not slot.usable(now) or (exclude and slot.resource.id in exclude):
            return None
        return slot if selector is ANY or selector.matches(slot.resource) else None
    best: Slot | None = None
    best_key: tuple[float, float] = (math.inf, math.inf)
    any_selector = selector is ANY
    start = start % n
    for i in range(n):
        slot = slots[(start + i) % n]
        if not slot.usable(now):
            continue
        resource = slot.resource
        if exclude and resource.id in exclude:
            continue
        if not any_selector and not selector.matches(resource):
            continue
        rank = 0.0
        if score is not None:
            value = score(resource)
            rank = math.inf if value is None else -value
        key = (rank, slot.active / slot.limit)
        if key < best_key:
            best, best_key = slot, key
    return best
