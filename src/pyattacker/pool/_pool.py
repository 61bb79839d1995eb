"""``Pool``: a named set of resources, the only state shared between work items.

The pool owns each resource's live state (health, leases in flight, usable limit, "not
before" time, usage totals, the lazily built client) and one synchronous allocator:

- ``select``/``try_acquire`` pick, among the resources the selector accepts and that are
  usable *now* (READY, or DEGRADED with its cooldown over; not throttled; below its limit),
  the one with the best ``score`` (if given, higher first; None ranks last), then the least
  loaded (``active / limit``), ties broken round-robin. No await: a decision cannot be
  interrupted halfway by cancellation.
- ``wait_slot`` parks a caller until something may let *its* selector proceed; the wait
  queue (``_waiting.py``) explains the three kinds of wake-up and the cooldown notifier.
  When every resource the selector accepts is REVOKED, or DEAD with no lease out (nothing
  can revive it), it raises ``NoUsableResource`` instead of parking forever.
- A resource declaring ``rpm``/``tpm``/``rpd`` is paced (``_pacing.py``): it is not usable
  before its pacer's ``ready_at``, which the cooldown notifier wakes waiters for; a grant
  charges the pacer and ``report(usage=..., headers=...)`` corrects it.

Timeouts (``wait_slot(timeout=...)``) use the running loop's timers, which is what the
default ``LoopClock`` reads; under the virtual loop they fire at the simulated instant.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any

from pyattacker._rng import LazyRandom
from pyattacker.clock import Clock, LoopClock
from pyattacker.errors import (
    ConfigError,
    ResourceError,
)
from pyattacker.pool._acquire import acquire_through, checked
from pyattacker.pool._algorithms import AcquireAlgorithm, AlgorithmSpec, resolve_algorithm
from pyattacker.pool._clients import build_client
from pyattacker.pool._events import EventBus, PoolEvent, Subscriber
from pyattacker.pool._feedback import Feedback
from pyattacker.pool._health import Health, HealthEvent
from pyattacker.pool._lease import AcquireCall, Lease, LeaseOwner
from pyattacker.pool._paced import PoolPacing
from pyattacker.pool._pacing import Pacers
from pyattacker.pool._resource import Resource, checked_resources
from pyattacker.pool._selector import ANY, Selector
from pyattacker.pool._slot import READY, Slot, hopeless, pick, reason
from pyattacker.pool._stats import (
    PoolStatistics,
    ResourceSnapshot,
    pool_statistics,
    resource_snapshot,
)
from pyattacker.pool._waiting import WaitQueue

__all__ = ["Pool", "Score"]

log = logging.getLogger("pyattacker.pool")
_NOTHING: frozenset[str] = frozenset()

#: Ranks a candidate: higher is preferred, None ranks after every number.
Score = Callable[[Resource], float | None]

_WAIT_WINDOW = 10_000  # wait percentiles cover the most recent acquisitions (bounded memory)


class Pool(PoolPacing):
    """A named set of resources and their live state; see the module docstring.

    Bad arguments (an empty name, a non-resource, an id twice, a bad ``deadlock_warn_s``
    or algorithm) raise ``ConfigError`` naming the field.
    """

    def __init__(
        self,
        name: str,
        resources: Iterable[Resource] = (),
        *,
        algorithm: AlgorithmSpec | None = None,
        clock: Clock | None = None,
        deadlock_warn_s: float | None = 5.0,
        on_event: Subscriber | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"must be a non-empty string, got {name!r}", field="pool.name")
        if deadlock_warn_s is not None and not deadlock_warn_s > 0:
            raise ConfigError(
                f"must be > 0 seconds or None, got {deadlock_warn_s!r}", field="deadlock_warn_s"
            )
        self.name = name
        self.clock: Clock = clock if clock is not None else LoopClock()
        self.algorithm: AcquireAlgorithm | None = (
            None if algorithm is None else resolve_algorithm(algorithm)
        )
        self.deadlock_warn_s = deadlock_warn_s
        self._slots: list[Slot] = []
        self._by_id: dict[str, Slot] = {}
        self._pacers = Pacers()
        for resource in checked_resources(name, resources):
            self._add_slot(resource)
        self._pacers.attach(self._slots, name)
        self._queue = WaitQueue(
            name,
            self.clock,
            lambda: self._slots,
            warn_after_s=deadlock_warn_s,
            is_stuck=self._is_stuck,
            on_stuck=self._warn_stuck,
        )
        self._rr = 0
        self._granted = 0
        self._leaked = 0
        self._waits: deque[float] = deque(maxlen=_WAIT_WINDOW)
        self._wait_max = 0.0
        self._bus = EventBus()
        if on_event is not None:
            self._bus.subscribe(on_event)
        self._feedback = Feedback(name, self._slots, self._queue, self._bus, self._emit, self.clock)

    # -- membership ---------------------------------------------------------------------

    def _add_slot(self, resource: Resource) -> None:
        slot = Slot(resource, len(self._slots))
        self._slots.append(slot)
        self._by_id[resource.id] = slot

    @property
    def resources(self) -> tuple[Resource, ...]:
        return tuple(s.resource for s in self._slots)

    def __len__(self) -> int:
        return len(self._slots)

    def __contains__(self, resource_id: object) -> bool:
        return resource_id in self._by_id

    def _slot_of(self, resource_id: str) -> Slot:
        slot = self._by_id.get(resource_id)
        if slot is None:
            known = ", ".join(self._by_id) or "none"
            raise ResourceError(
                f"no resource {resource_id!r} in pool (known: {known})",
                pool=self.name,
                resource=resource_id,
            )
        return slot

    def publish(self, resource: Resource) -> None:
        """Add a resource (or bring back a revoked id with a fresh state); wakes every waiter."""
        if not isinstance(resource, Resource):
            raise ConfigError(
                f"must be a Resource, got {type(resource).__name__}", field="resource"
            )
        self._pacers.check(resource, self.name)  # before anything changes
        existing = self._by_id.get(resource.id)
        if existing is not None and existing.health.state is not Health.REVOKED:
            raise ConfigError(
                f"resource {resource.id!r} is already in pool {self.name!r}",
                field="resource.id",
                hint="revoke it first, or give the new one another id",
            )
        if existing is not None:
            if existing.active:
                raise ResourceError(
                    "a revoked resource with leases still out cannot be republished yet",
                    pool=self.name,
                    resource=resource.id,
                )
            self._slots.remove(existing)
            for i, slot in enumerate(self._slots):
                slot.index = i
        self._add_slot(resource)
        self._pacers.attach(self._slots, self.name)
        self._emit("pool.published", resource.id, spec=resource.spec())
        self._queue.wake_all()

    def revoke(self, resource_id: str, reason: str = "") -> None:
        """Retire a resource for good; leases already out stay valid until released."""
        slot = self._slot_of(resource_id)
        if slot.health.state is Health.REVOKED:
            return
        self._feedback.apply(slot, HealthEvent.REVOKE, self.clock.now(), reason or "revoked")
        self._emit("pool.revoked", resource_id, reason=reason)

    # -- events -------------------------------------------------------------------------

    def subscribe(self, fn: Subscriber, kinds: Iterable[str] | None = None) -> Callable[[], None]:
        """Call ``fn(event)`` for every future event (of ``kinds`` only, when given: the
        pool then builds no event nobody wants); returns the unsubscribe function."""
        return self._bus.subscribe(fn, kinds)

    def _emit(self, kind: str, resource: str | None = None, **data: Any) -> None:
        if self._bus.wants(kind):
            self._bus.publish(PoolEvent(kind, self.name, self.clock.now(), resource, data))

    # -- the allocator ------------------------------------------------------------------

    def select(
        self,
        selector: Selector = ANY,
        *,
        score: Score | None = None,
        exclude: Iterable[str] = (),
    ) -> Resource | None:
        """The resource ``try_acquire`` would take now, without taking it."""
        slot = pick(self._slots, selector, score, frozenset(exclude), self.clock.now(), self._rr)
        return None if slot is None else slot.resource

    def try_acquire(
        self,
        selector: Selector = ANY,
        *,
        score: Score | None = None,
        exclude: Iterable[str] = (),
        owner: LeaseOwner | None = None,
        algorithm: str | None = None,
        tokens: float | None = None,
    ) -> Lease | None:
        """A lease on the best usable resource now, or None. Never waits.

        ``tokens`` is the call's estimate, charged to a paced resource's ``tpm`` (default:
        its ``tokens_per_call``) and corrected by the usage the lease reports."""
        now = self.clock.now()
        skip = frozenset(exclude) if exclude else _NOTHING
        only = self._only_ready(now) if score is None and selector is ANY and not skip else None
        if only is not None:  # one resource and no choice to make: granted at once
            slot, client = only, only.client
        else:
            found = self._usable(selector, score, skip, now)
            if found is None:
                self._queue.missed_at = now  # the instant a wait_slot that follows looks from
                return None
            slot, client = found
        lease = Lease(self, slot, client, now, owner, algorithm)  # positional: once a request
        if owner is not None:
            owner._adopt(lease)
        self._grant(slot, algorithm)
        if slot.pacer is not None:
            self._pace(slot, lease, now, tokens)
        return lease

    def _usable(
        self, selector: Selector, score: Score | None, skip: frozenset[str], now: float
    ) -> tuple[Slot, object] | None:
        """The slot ``try_acquire`` takes now and its client, or None: the best usable slot
        (``pick``) whose client can be had; one whose factory fails is skipped."""
        while True:
            slot = pick(self._slots, selector, score, skip, now, self._rr)
            if slot is None:
                return None
            client = self._client_of(slot, now)
            if client is not None:
                return slot, client
            skip = skip | {slot.resource.id}

    def _client_of(self, slot: Slot, now: float) -> object | None:
        """The slot's client, built on first use (a vendor SDK's with its retries off,
        ``_clients``). None: the factory failed (a health failure)."""
        if slot.client is not None:
            return slot.client
        client, error, retries_off = build_client(slot.resource)
        if client is not None:
            slot.client = client
            if retries_off is not None:
                self._emit("resource.retries_off", slot.resource.id, **retries_off)
            return client
        log.warning("pool %s: client factory for %s failed: %s", self.name, slot.resource.id, error)
        self._emit("resource.factory", slot.resource.id, error=error)
        self._feedback.fail(slot, now, "factory failed")
        return None

    # -- waiting ------------------------------------------------------------------------

    async def wait_slot(self, selector: Selector = ANY, timeout: float | None = None) -> bool:
        """Park until something may let ``selector`` proceed. False if ``timeout`` ran out.

        Waiters are served first come, first served. When a release frees a unit that a
        parked waiter's selector accepts, that unit is *held* for the first such waiter until
        it runs again, so a caller arriving meanwhile cannot barge in; the hold ends when
        this coroutine returns, so call ``try_acquire`` straight away, with no await between.
        Any other wake-up (health, membership, a cooldown ending) is a hint for everyone.

        Raises ``NoUsableResource`` at once when every resource ``selector`` accepts is
        REVOKED, or DEAD with no lease out: no cooldown, release or report can bring one
        back, so waiting would never end (``publish`` still could; it is not waited for).
        """
        self.check_usable(selector)
        return await self._queue.wait(selector, timeout)

    def _is_stuck(self) -> bool:
        return self.active == 0

    def _warn_stuck(self, waited: float) -> None:
        stats = self.statistics()
        log.warning(
            "pool %s: a caller has waited %.1fs with no lease in flight and nothing "
            "scheduled to come back (%s); does any resource match what it asks for?",
            self.name,
            waited,
            stats.summary(),
        )
        self._emit("pool.stuck", None, waited_s=waited, waiting=stats.waiting)

    # -- what leases tell the pool ------------------------------------------------------

    def _only_ready(self, now: float) -> Slot | None:
        """The slot of the pool's only resource when a unit of it can be granted now
        without looking further (a load test's one URL, the usual case, met on every
        request): ready, with room, its client built, not paced. None otherwise."""
        slots = self._slots
        if len(slots) != 1:
            return None
        only = slots[0]
        if (
            only.client is not None
            and only.health.state is READY
            and only.active + only.reserved < only.limit
            and only.not_before <= now
            and only.pacer is None
        ):
            return only
        return None

    def take_unit(self, now: float, algorithm: str | None = None) -> object | None:
        """A unit of the pool's only resource, taken at ``now`` (this pool's clock) without
        a :class:`Lease`: its client, or None when :meth:`try_acquire` would have to look
        further (more than one resource; not ready, full, paced, no client yet). For a
        caller that makes many short calls and tells the health model nothing
        (``Lease.report``), such as a load test's direct path. Counted as a lease
        (``active``, ``leases``, the ``lease.acquired`` event when someone listens); give
        it back with :meth:`give_unit`."""
        slot = self._only_ready(now)
        if slot is None:
            return None
        self._grant(slot, algorithm)
        return slot.client

    def _grant(self, slot: Slot, algorithm: str | None) -> None:
        """Count a unit of ``slot`` as taken (a lease's, or :meth:`take_unit`'s) and say
        so to whoever listens."""
        slot.active += 1
        slot.leases += 1
        self._granted += 1
        self._rr = slot.index + 1
        if "lease.acquired" in self._bus.heard:  # no keyword dict when nobody listens
            self._emit("lease.acquired", slot.resource.id, active=slot.active, algorithm=algorithm)

    def give_unit(self, acquired_at: float) -> None:
        """Give back a unit :meth:`take_unit` took at ``acquired_at`` (as a lease's
        release does: a parked waiter may be handed it)."""
        self._give_back(self._slots[0], acquired_at)

    def _give_back(self, slot: Slot, acquired_at: float) -> None:
        """A unit of ``slot``, held since ``acquired_at``, comes back."""
        slot.active -= 1
        if "lease.released" in self._bus.heard:
            held_s = self.clock.now() - acquired_at
            self._emit("lease.released", slot.resource.id, held_s=held_s)
        self._queue.hand_over(slot)
        if slot.pacer is not None and len(self._queue):
            # A unit came back while its key rests (a member of its quota group spent the
            # pace): no hand-over now, so its waiters need the notifier for that instant.
            self._queue.arm_notifier()
        if not slot.active and hopeless(slot):
            self._queue.wake_all()  # its last lease is back: its waiters must hear it is over

    def set_limit(self, resource_id: str, limit: int, *, reason: str = "") -> int:
        """Set how many leases a resource may have out (1..capacity); returns the new limit."""
        slot = self._slot_of(resource_id)
        new = max(1, min(slot.resource.capacity, int(limit)))
        old, slot.limit = slot.limit, new
        if new != old:
            self._emit("resource.limit", resource_id, reason=reason, **{"from": old, "to": new})
            if new > old:
                self._queue.hand_over(slot)
        return new

    # -- acquiring ----------------------------------------------------------------------

    def acquire(
        self,
        where: Callable[[Resource], bool] | None = None,
        *,
        algorithm: AlgorithmSpec | None = None,
        timeout: float | None = None,
        tokens: float | None = None,
        **selector: Any,
    ) -> AcquireCall:
        """A lease through the acquire algorithm (per call, else the pool's, else ``Wait()``).

        Await it for a lease you release yourself, or ``async with`` it. ``tokens``: the
        call's estimate for a resource paced to ``tpm`` (see ``TaskContext.acquire``).
        """
        chosen, wanted = checked(self, algorithm, None, timeout, where, selector, tokens)
        return AcquireCall(lambda: self._acquire_unowned(chosen, wanted, timeout, tokens))

    def _acquire_unowned(
        self,
        algorithm: AcquireAlgorithm,
        selector: Selector,
        timeout: float | None,
        tokens: float | None,
    ) -> Coroutine[Any, Any, Lease]:
        # Nobody keeps track of the lease but its holder: no owner, a fresh rng and affinity.
        return acquire_through(
            algorithm, self, selector, timeout, tokens, rng=LazyRandom(None),
            clock=self.clock, pools={self.name: self}, affinity={}, owner=None,
        )  # fmt: skip

    def record_wait(self, seconds: float) -> None:
        """Note how long an acquisition waited (feeds ``statistics()``)."""
        self._waits.append(seconds)
        self._wait_max = max(self._wait_max, seconds)

    def _record_leak(self, lease: Lease) -> None:
        self._leaked += 1
        log.warning("pool %s: lease on %s leaked; reclaimed", self.name, lease.resource.id)
        self._emit("lease.leaked", lease.resource.id, held_s=self.clock.now() - lease.acquired_at)

    def check_selector(self, selector: Selector) -> None:
        """Raise ``ConfigError`` for a field path that no resource of this pool has."""
        if selector is ANY or not selector.fields or not self._slots:
            return
        missing = selector.unknown_paths(s.resource for s in self._slots)
        if missing:
            raise ConfigError(
                f"no resource in pool {self.name!r} has {missing[0]!r}",
                field=f"selector.{missing[0]}",
                hint="field paths are looked up in each resource's options, then meta",
            )

    # -- looking at it ------------------------------------------------------------------

    def reasons(self, selector: Selector = ANY) -> dict[str, str]:
        """Why each resource cannot serve ``selector`` right now ("free" when it can)."""
        now = self.clock.now()
        return {s.resource.id: reason(s, selector, now) for s in self._slots}

    @property
    def active(self) -> int:
        return sum(s.active for s in self._slots)

    @property
    def waiting(self) -> int:
        return len(self._queue)

    def statistics(self) -> PoolStatistics:
        return pool_statistics(
            self.name,
            self._slots,
            self.clock.now(),
            pacers=self._pacers.all(),
            waiting=len(self._queue),
            leases=self._granted,
            failures=self._feedback.failures,
            throttles=self._feedback.throttles,
            leaked=self._leaked,
            waits=self._waits,
            wait_max_s=self._wait_max,
        )

    def snapshot(self) -> tuple[ResourceSnapshot, ...]:
        now = self.clock.now()
        return tuple(resource_snapshot(s, now) for s in self._slots)

    def usage_of(self, resource_id: str) -> Mapping[str, float]:
        return dict(self._slot_of(resource_id).usage)

    def active_of(self, resource_id: str) -> int:
        return self._slot_of(resource_id).active

    def limit_of(self, resource_id: str) -> int:
        return self._slot_of(resource_id).limit

    def client_of(self, resource_id: str) -> object | None:
        """The client the resource's leases hand out (its factory's, else the resource
        itself), or None until a lease has built it: never builds one."""
        return self._slot_of(resource_id).client

    def __repr__(self) -> str:
        return f"<Pool {self.statistics().summary()}>"
