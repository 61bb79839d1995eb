"""Pool events: frozen facts named ``<area>.<what>``, delivered to subscribers.

Kinds emitted by the pool:

========================  ========================================================
``pool.published``        a resource joined (``spec``: masked)
``pool.revoked``          a resource was revoked for good
``pool.stuck``            a waiter waited ``deadlock_warn_s`` with no lease in flight
``lease.acquired``        a lease was handed out (``active``, ``algorithm``)
``lease.released``        a lease came back (``held_s``)
``lease.reported``        the holder reported an outcome (``ok``, ``error_class``, ``usage``…)
``lease.leaked``          a lease outlived its task and was force-returned
``resource.health``       a health transition (``from``, ``to``, ``failures``, ``until``)
``resource.throttled``    a "not before" time was set by a refusal (``until``, ``source``)
``resource.paced``        a lease (or a report) left a paced key resting ``until``
``resource.retries_off``  a vendor SDK client's retries were turned off (``max_retries``)
``resource.limit``        an algorithm changed a resource's usable capacity (``from``, ``to``)
``resource.factory``      the resource's client factory failed (``error``)
========================  ========================================================

Subscribers must be quick and must not raise; an exception from one is logged and does
not reach the pool's caller. Event data never holds a secret: resource specs are masked.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["EventBus", "PoolEvent", "Subscriber"]

log = logging.getLogger("pyattacker.pool")


@dataclass(frozen=True, slots=True)
class PoolEvent:
    kind: str
    pool: str
    at: float
    resource: str | None = None
    data: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "pool": self.pool,
            "at": self.at,
            "resource": self.resource,
            **self.data,
        }


Subscriber = Callable[[PoolEvent], None]


class _Every:
    """The kinds heard when a subscriber takes every kind: all of them."""

    __slots__ = ()

    def __contains__(self, kind: object) -> bool:
        return True


class EventBus:
    """An ordered list of subscribers, each with the kinds it wants (``None``: all).

    ``heard`` holds the kinds someone listens for: ``kind in bus.heard`` (or
    ``wants(kind)``) is the check the pool makes before building an event, with nobody
    listening for ``kind`` no event object is made at all. A membership test and not a
    call, since a load test takes and returns a lease per request.
    """

    __slots__ = ("_subscribers", "heard")

    def __init__(self) -> None:
        self._subscribers: list[tuple[Subscriber, frozenset[str] | None]] = []
        self.heard: Container[str] = frozenset()

    @property
    def active(self) -> bool:
        return bool(self._subscribers)

    def wants(self, kind: str) -> bool:
        return kind in self.heard

    def subscribe(self, fn: Subscriber, kinds: Iterable[str] | None = None) -> Callable[[], None]:
        entry = (fn, None if kinds is None else frozenset(kinds))
        self._subscribers.append(entry)
        self._reindex()

        def unsubscribe() -> None:
            if entry in self._subscribers:
                self._subscribers.remove(entry)
                self._reindex()

        return unsubscribe

    def _reindex(self) -> None:
        if any(kinds is None for _, kinds in self._subscribers):
            self.heard = _Every()
        else:
            self.heard = frozenset(k for _, kinds in self._subscribers if kinds for k in kinds)

    def publish(self, event: PoolEvent) -> None:
        for fn, kinds in tuple(self._subscribers):
            if kinds is not None and event.kind not in kinds:
                continue
            try:
                fn(event)
            except Exception:  # a broken subscriber must not break leasing
                log.exception("event subscriber %r failed on %s", fn, event.kind)
