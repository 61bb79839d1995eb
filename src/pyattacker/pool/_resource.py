"""``Resource``: one leasable endpoint or key, as an immutable specification.

A resource says what it is (``kind``, ``id``, ``options``, ``tags``), how much it can take at
once (``capacity``), how its health reacts to failures (``HealthPolicy``), which upstream
limit it shares with others (``quota_group``), the rate limits its leases are paced to
(``rpm``, ``tpm``, ``rpd``, ``burst``, ``tokens_per_call``; see ``_pacing``) and how to build
the client a lease hands out (``factory``). Its live state (health, leases in flight,
usage) belongs to the ``Pool`` that holds it, so one ``Resource`` can be described,
compared and logged without surprises.
Secrets in ``options`` are masked in ``spec()`` and ``repr``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pyattacker._checks import check_number, check_whole
from pyattacker._secrets import mask
from pyattacker.errors import ConfigError
from pyattacker.pool._health import HealthPolicy
from pyattacker.pool._pacing import Limits

__all__ = ["Factory", "Resource", "checked_resources"]

#: Builds the client a lease hands out; called once per resource, lazily, with the resource.
Factory = Callable[["Resource"], object]


@dataclass(frozen=True, slots=True, eq=False)
class Resource:
    kind: str
    id: str
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    tags: frozenset[str] = frozenset()
    capacity: int = 1
    factory: Factory | None = None
    health: HealthPolicy = HealthPolicy()  # noqa: RUF009 (frozen: one shared default is safe)
    quota_group: str | None = None
    meta: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    rpm: float | None = None
    tpm: float | None = None
    rpd: int | None = None
    burst: int = 1
    tokens_per_call: float | None = None

    @classmethod
    def create(
        cls,
        kind: str,
        *,
        id: str,
        options: Mapping[str, Any] | None = None,
        tags: Iterable[str] = (),
        capacity: int = 1,
        factory: Factory | None = None,
        degrade_after: int = 3,
        dead_after: int = 8,
        cooldown_s: float = 30.0,
        quota_group: str | None = None,
        rpm: float | None = None,
        tpm: float | None = None,
        rpd: int | None = None,
        burst: int = 1,
        tokens_per_call: float | None = None,
        **meta: Any,
    ) -> Resource:
        """Validate and build a resource; ``ConfigError`` names the field that is wrong.

        ``rpm``/``tpm`` (per minute) and ``rpd`` (per rolling day) pace its leases; ``burst``
        is how many calls may go back to back after a quiet spell (1: none), and
        ``tokens_per_call`` the token estimate of a call that gives none
        (``acquire(tokens=...)``). Resources of one ``quota_group`` share one pacing.
        """
        for name, value in (("kind", kind), ("id", id)):
            if not isinstance(value, str) or not value:
                raise ConfigError(f"must be a non-empty string, got {value!r}", field=name)
        check_whole(
            capacity,
            f"resources.{id}.capacity",
            hint="capacity is how many leases the resource may hand out at once",
        )
        if options is not None and not isinstance(options, Mapping):
            raise ConfigError(f"must be a mapping, got {type(options).__name__}", field="options")
        if isinstance(tags, str):
            tags = (tags,)
        if factory is not None and (not callable(factory) or inspect.iscoroutinefunction(factory)):
            raise ConfigError(
                "must be a plain callable(resource) -> client",
                field=f"resources.{id}.factory",
                hint="build async clients synchronously; connect lazily on first use",
            )
        if quota_group is not None and (not isinstance(quota_group, str) or not quota_group):
            raise ConfigError("must be a non-empty string", field=f"resources.{id}.quota_group")
        _check_limits(id, rpm, tpm, rpd, burst, tokens_per_call)
        try:
            health = HealthPolicy(degrade_after, dead_after, cooldown_s)
        except ConfigError as exc:
            raise ConfigError(exc.message, field=f"resources.{id}.{exc.field}") from None
        return cls(
            kind=kind,
            id=id,
            options=MappingProxyType(dict(options or {})),
            tags=frozenset(tags),
            capacity=capacity,
            factory=factory,
            health=health,
            quota_group=quota_group,
            meta=MappingProxyType(dict(meta)),
            rpm=None if rpm is None else float(rpm),
            tpm=None if tpm is None else float(tpm),
            rpd=rpd,
            burst=burst,
            tokens_per_call=None if tokens_per_call is None else float(tokens_per_call),
        )

    @property
    def limits(self) -> Limits | None:
        """The rate limits its leases are paced to, or None when it declares none."""
        if self.rpm is None and self.tpm is None and self.rpd is None:
            return None
        return Limits(self.rpm, self.tpm, self.rpd, self.burst, self.tokens_per_call)

    def spec(self) -> dict[str, Any]:
        """A JSON-friendly description with secrets masked: safe to log, emit or store."""
        return {
            "kind": self.kind,
            "id": self.id,
            "options": mask(self.options),
            "tags": sorted(self.tags),
            "capacity": self.capacity,
            "degrade_after": self.health.degrade_after,
            "dead_after": self.health.dead_after,
            "cooldown_s": self.health.cooldown_s,
            "quota_group": self.quota_group,
            "rpm": self.rpm,
            "tpm": self.tpm,
            "rpd": self.rpd,
            "burst": self.burst,
            "tokens_per_call": self.tokens_per_call,
            "meta": mask(self.meta),
        }

    def quota(self, unit: str = "tokens") -> float | None:
        """The declared quota in ``unit`` (``options["quota"][unit]``), or None if undeclared."""
        declared = self.options.get("quota")
        value = declared.get(unit) if isinstance(declared, Mapping) else None
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        return None

    def __repr__(self) -> str:
        parts = [f"{self.kind!r}", f"id={self.id!r}", f"capacity={self.capacity}"]
        if self.tags:
            parts.append(f"tags={sorted(self.tags)!r}")
        if self.options:
            parts.append(f"options={mask(self.options)!r}")
        if self.quota_group:
            parts.append(f"quota_group={self.quota_group!r}")
        for name in ("rpm", "tpm", "rpd"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}={value:g}")
        return f"Resource({', '.join(parts)})"


def checked_resources(pool: str, resources: Iterable[Resource]) -> Iterator[Resource]:
    """``resources`` one by one, each checked as pool ``pool`` receives it:
    ``ConfigError`` for something that is not a ``Resource``, or an id met before."""
    seen: set[str] = set()
    for i, resource in enumerate(resources):
        if not isinstance(resource, Resource):
            raise ConfigError(
                f"must be a Resource, got {type(resource).__name__}",
                field=f"{pool}.resources[{i}]",
                hint="build one with Resource.create(kind, id=..., capacity=...)",
            )
        if resource.id in seen:
            raise ConfigError(
                f"duplicate resource id {resource.id!r}", field=f"{pool}.resources[{i}].id"
            )
        seen.add(resource.id)
        yield resource


def _check_limits(
    rid: str,
    rpm: object,
    tpm: object,
    rpd: object,
    burst: object,
    tokens_per_call: object,
) -> None:
    """``ConfigError`` naming ``resources.<id>.<field>`` for a limit out of range."""
    for name, value in (("rpm", rpm), ("tpm", tpm)):
        if value is not None:
            check_number(value, f"resources.{rid}.{name}", above=0, hint="e.g. 120 per minute")
    if rpd is not None:
        check_whole(rpd, f"resources.{rid}.rpd", hint="requests per rolling day, e.g. 1000")
    check_whole(burst, f"resources.{rid}.burst", hint="calls that may go back to back, e.g. 1")
    if tokens_per_call is not None:
        check_number(
            tokens_per_call,
            f"resources.{rid}.tokens_per_call",
            at_least=0,
            hint="the tokens a call is expected to spend, e.g. 800",
        )
