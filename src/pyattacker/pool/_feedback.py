"""What leases tell a pool, and what the pool does about it: the health model's input.

A lease's ``report`` adds usage to its resource's totals, corrects a paced resource's
charge (or follows an unpaced one's rate-limit headers), and moves the resource's health:
a success heals it, a failure counts against it, a refusal with a ``retry_after`` blocks
it (and its quota group) for everyone until then and leaves health alone. Every change
is an event, and wakes the waiters it may concern (``WaitQueue``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from pyattacker.clock import Clock
from pyattacker.errors import ConfigError, ErrorClass, error_class_of, retry_after_of
from pyattacker.pool._events import EventBus
from pyattacker.pool._health import Health, HealthEvent, transition
from pyattacker.pool._pacing import rate_limit_headers, rest_for, settle, tokens_of
from pyattacker.pool._slot import Slot
from pyattacker.pool._waiting import WaitQueue

if TYPE_CHECKING:  # a lease is reported on; this module needs its type only
    from pyattacker.pool._lease import Lease

__all__ = ["Feedback"]

log = logging.getLogger("pyattacker.pool")


class Feedback:
    """One pool's reaction to what its leases report; counts failures and throttles."""

    def __init__(
        self,
        name: str,
        slots: Sequence[Slot],
        queue: WaitQueue,
        bus: EventBus,
        emit: Callable[..., None],
        clock: Clock,
    ) -> None:
        self._name = name
        self._slots = slots  # the pool's own list: members come and go
        self._queue = queue
        self._bus = bus
        self._emit = emit
        self._clock = clock
        self.failures = 0
        self.throttles = 0

    def fail(self, slot: Slot, now: float, reason: str) -> None:
        """A failure the pool found itself (a client factory that failed)."""
        self.failures += 1
        self.apply(slot, HealthEvent.FAILURE, now, reason)

    def report(
        self,
        slot: Slot,
        *,
        ok: bool,
        latency_ms: float | None,
        usage: Mapping[str, float] | None,
        error: BaseException | None,
        retry_after: float | None,
        headers: object = None,
        lease: Lease | None = None,
    ) -> None:
        now = self._clock.now()
        if usage:
            self._add_usage(slot, usage)
        if slot.pacer is not None and (usage or headers is not None):
            self._correct_pace(slot, usage, headers, lease, now)
        elif headers is not None:
            self._follow_headers(slot, headers, now)
        error_class: str | None = None
        if not ok and error is not None:
            error_class = error_class_of(error)
            if retry_after is None:
                retry_after = retry_after_of(error)
        if not ok and retry_after is not None:
            error_class = ErrorClass.RATE_LIMIT
        if self._bus.wants("lease.reported"):
            self._emit(
                "lease.reported",
                slot.resource.id,
                ok=ok,
                latency_ms=latency_ms,
                usage=dict(usage) if usage else None,
                error_class=error_class,
                retry_after=retry_after,
            )
        if slot.health.state is Health.REVOKED:
            return
        if ok:
            if slot.health.failures or slot.health.state is not Health.READY:
                self.apply(slot, HealthEvent.SUCCESS, now, "success")
        elif error_class == ErrorClass.RATE_LIMIT:
            self.throttles += 1
            if retry_after is not None:
                self.throttle(slot, now + max(0.0, retry_after), now)
        else:
            self.failures += 1
            self.apply(slot, HealthEvent.FAILURE, now, error_class or "reported failure")

    def _add_usage(self, slot: Slot, usage: Mapping[str, float]) -> None:
        for unit, amount in usage.items():
            if not isinstance(amount, int | float) or isinstance(amount, bool):
                raise ConfigError(f"must be a number, got {amount!r}", field=f"usage.{unit}")
            slot.usage[unit] = slot.usage.get(unit, 0.0) + amount

    def throttle(self, slot: Slot, until: float, now: float) -> None:
        group = slot.resource.quota_group
        targets = (
            [slot] if group is None else [s for s in self._slots if s.resource.quota_group == group]
        )
        for target in targets:
            if until > target.not_before:
                target.not_before = until
                self._emit(
                    "resource.throttled",
                    target.resource.id,
                    until=until,
                    group=group,
                    source=slot.resource.id,
                )
        self._queue.arm_notifier()

    def degrade(self, slot: Slot, reason: str) -> None:
        if slot.health.state is not Health.REVOKED:
            self.apply(slot, HealthEvent.DEGRADE, self._clock.now(), reason)

    def apply(self, slot: Slot, event: HealthEvent, now: float, reason: str) -> None:
        before = slot.health
        after = transition(before, event, now=now, policy=slot.resource.health)
        slot.health = after
        if after.state is before.state and after.blocked_until == before.blocked_until:
            return
        self._emit(
            "resource.health",
            slot.resource.id,
            **{"from": before.state.value, "to": after.state.value},
            failures=after.failures,
            until=after.blocked_until,
            reason=reason,
        )
        if after.state is not before.state:
            if after.state is Health.DEAD:
                log.warning("pool %s: %s is DEAD (%s)", self._name, slot.resource.id, reason)
            self._queue.wake_all()
        self._queue.arm_notifier()

    def _correct_pace(
        self,
        slot: Slot,
        usage: Mapping[str, float] | None,
        headers: object,
        lease: Lease | None,
        now: float,
    ) -> None:
        pacer = slot.pacer
        assert pacer is not None
        before = pacer.ready_at
        estimate = 0.0
        if lease is not None and tokens_of(usage) is not None:  # its first usage settles it
            estimate, lease._tokens = lease._tokens, 0.0
        settle(pacer, now, usage=usage, headers=headers, estimate=estimate)
        if pacer.ready_at != before:
            if pacer.ready_at > now:
                self._emit("resource.paced", slot.resource.id, until=pacer.ready_at)
            self._queue.arm_notifier()

    def _follow_headers(self, slot: Slot, headers: object, now: float) -> None:
        """An unpaced resource still rests when its server says none remain: until the
        reset, as a ``Retry-After`` would have it (and its quota group with it)."""
        seen = rate_limit_headers(headers)
        for unit in ("requests", "tokens"):
            rest = rest_for(seen, unit, 1.0)
            if rest is not None and rest > 0:
                self.throttle(slot, now + rest, now)
