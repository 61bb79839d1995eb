"""Resource health as one transition table.

The rules, all of them:

- Only an explicit ``lease.report(ok=False)`` is a FAILURE; an exception inside
  ``async with lease`` is not (the lease cannot know whose fault it was). A throttle
  (429 / ``retry_after``) is not a failure either: it blocks the resource until its
  "not before" time and leaves health alone (see ``Pool``).
- FAILURE adds one to the consecutive-failure counter. At ``dead_after`` the resource is
  DEAD; at ``degrade_after`` it is DEGRADED until ``now + cooldown_s`` (each further failure
  re-arms the cooldown); below that it keeps its state.
- SUCCESS resets the counter and makes any state but REVOKED READY again: DEAD means
  "dead until a success is reported" (by a lease granted before it died, or by an operator).
- DEGRADE (``lease.degrade(reason)``: the holder knows the resource is unwell) makes a READY
  or DEGRADED resource DEGRADED for ``cooldown_s`` without touching the counter; a DEAD one
  stays DEAD.
- REVOKE makes any state REVOKED. REVOKED is terminal: every event on it is illegal.
- A DEGRADED resource whose cooldown has passed *reads* READY (``state_at(now)``) without a
  transition, and keeps its failure counter: one more failure degrades it again at once.

Everything here is pure: ``transition`` returns a new ``HealthState`` or raises
``IllegalTransition`` and changes nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, replace

from pyattacker._checks import check_number, check_whole
from pyattacker.errors import ConfigError, IllegalTransition

__all__ = ["Health", "HealthEvent", "HealthPolicy", "HealthState", "transition"]


class Health(enum.StrEnum):
    READY = "ready"
    DEGRADED = "degraded"
    DEAD = "dead"
    REVOKED = "revoked"


class HealthEvent(enum.StrEnum):
    SUCCESS = "success"
    FAILURE = "failure"
    DEGRADE = "degrade"
    REVOKE = "revoke"


@dataclass(frozen=True, slots=True)
class HealthPolicy:
    """How many consecutive failures degrade or kill a resource, and for how long."""

    degrade_after: int = 3
    dead_after: int = 8
    cooldown_s: float = 30.0

    def __post_init__(self) -> None:
        check_whole(self.degrade_after, "degrade_after", hint="e.g. 3")
        check_whole(self.dead_after, "dead_after", hint="e.g. 8")
        if self.dead_after < self.degrade_after:
            raise ConfigError(
                f"must be >= degrade_after ({self.degrade_after}), got {self.dead_after}",
                field="dead_after",
            )
        check_number(self.cooldown_s, "cooldown_s", at_least=0, hint="seconds, e.g. 30.0")


@dataclass(frozen=True, slots=True)
class HealthState:
    state: Health = Health.READY
    failures: int = 0
    blocked_until: float | None = None

    def state_at(self, now: float) -> Health:
        """The state as seen at ``now``: an expired cooldown reads READY."""
        if (
            self.state is Health.DEGRADED
            and self.blocked_until is not None
            and now >= self.blocked_until
        ):
            return Health.READY
        return self.state

    def usable_at(self, now: float) -> bool:
        return self.state_at(now) is Health.READY


def _succeed(h: HealthState, now: float, policy: HealthPolicy) -> HealthState:
    return HealthState()


def _fail(h: HealthState, now: float, policy: HealthPolicy) -> HealthState:
    failures = h.failures + 1
    if failures >= policy.dead_after:
        return HealthState(Health.DEAD, failures, None)
    if failures >= policy.degrade_after:
        return HealthState(Health.DEGRADED, failures, now + policy.cooldown_s)
    return replace(h, failures=failures)


def _degrade(h: HealthState, now: float, policy: HealthPolicy) -> HealthState:
    return HealthState(Health.DEGRADED, h.failures, now + policy.cooldown_s)


def _stay(h: HealthState, now: float, policy: HealthPolicy) -> HealthState:
    return h


def _revoke(h: HealthState, now: float, policy: HealthPolicy) -> HealthState:
    return HealthState(Health.REVOKED, h.failures, None)


_Rule = Callable[[HealthState, float, HealthPolicy], HealthState]

#: (state, event) -> rule. A pair that is missing is illegal.
TRANSITIONS: dict[tuple[Health, HealthEvent], _Rule] = {
    (Health.READY, HealthEvent.SUCCESS): _succeed,
    (Health.READY, HealthEvent.FAILURE): _fail,
    (Health.READY, HealthEvent.DEGRADE): _degrade,
    (Health.READY, HealthEvent.REVOKE): _revoke,
    (Health.DEGRADED, HealthEvent.SUCCESS): _succeed,
    (Health.DEGRADED, HealthEvent.FAILURE): _fail,
    (Health.DEGRADED, HealthEvent.DEGRADE): _degrade,
    (Health.DEGRADED, HealthEvent.REVOKE): _revoke,
    (Health.DEAD, HealthEvent.SUCCESS): _succeed,
    (Health.DEAD, HealthEvent.FAILURE): _fail,
    (Health.DEAD, HealthEvent.DEGRADE): _stay,
    (Health.DEAD, HealthEvent.REVOKE): _revoke,
}


def transition(
    h: HealthState, event: HealthEvent, *, now: float, policy: HealthPolicy
) -> HealthState:
    """The state after ``event`` at ``now``. Raises ``IllegalTransition`` (nothing changes)."""
    rule = TRANSITIONS.get((h.state, event))
    if rule is None:
        raise IllegalTransition(
            f"{event.value} is not allowed in state {h.state.value}",
            state=h.state.value,
            event=event.value,
        )
    return rule(h, now, policy)
