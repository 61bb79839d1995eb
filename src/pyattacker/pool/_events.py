"""Pool events: frozen facts named ``<area>.<what>``, delivered to subscribers.

Kinds emitted by the pool:

=====================  ===========================================================
``pool.published``     a resource joined (``spec``: masked)
``pool.revoked``       a resource was revoked for good
``pool.stuck``         a waiter waited ``deadlock_warn_s`` with no lease in flight
``lease.acquired``     a lease was handed out (``active``, ``algorithm``)
``lease.released``     a lease came back (``held_s``)
``lease.reported``     the holder reported an outcome (``ok``, ``error_class``, ``usage``…)
``lease.leaked``       a lease outlived its task and was force-returned
``resource.health``    a health transition (``from``, ``to``, ``failures``, ``until``)
``resource.throttled`` a "not before" time was set by a refusal (``until``, ``source``)
``resource.limit``     an algorithm changed a resource's usable capacity (``from``, ``to``)
``resource.factory``   the resource's client factory failed (``error``)
=====================  ===========================================================

Subscribers must be quick and must not raise; an exception from one is logged and does
not reach the pool's caller. Event data never holds a secret: resource specs are masked.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
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


class EventBus:
    """An ordered list of subscribers; ``active`` is False when nobody listens (cheap path)."""

    __slots__ = ("_subscribers",)

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []

    @property
    def active(self) -> bool:
        return bool(self._subscribers)

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        self._subscribers.append(fn)

        def unsubscribe() -> None:
            if fn in self._subscribers:
                self._subscribers.remove(fn)

        return unsubscribe

    def publish(self, event: PoolEvent) -> None:
        for fn in tuple(self._subscribers):
            try:
                fn(event)
            except Exception:  # a broken subscriber must not break leasing
                log.exception("event subscriber %r failed on %s", fn, event.kind)
