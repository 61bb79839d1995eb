"""Acquire algorithms: how a caller obtains a lease.

An algorithm is a small object with one coroutine, ``acquire(request) -> Lease``. It may
only use what the ``AcquireRequest`` hands it (the pool, the other pools by name, the
selector, the timeout, the caller's rng and clock, an affinity memory); it never sees the
world behind the resources. The shape every algorithm follows is "try the no-wait version,
else park": ``request.try_acquire()`` and ``request.pool.wait_slot()``.

Precedence, highest first: the algorithm passed to one ``acquire`` call, the task's, the
pool's default, ``Wait()``. ``resolve_algorithm`` turns a name, a dict with parameters (with
nested fallbacks) or an instance into an algorithm and rejects anything else with a
``ConfigError`` that lists the known names.

This module holds the contract (``AcquireRequest``, ``AcquireAlgorithm``), the registry and
the two basic algorithms; the others live in ``_strategies`` (``backoff``, ``least_busy``,
``failover``, ``sticky``, ``quota_aware``) and ``_adaptive``, which import this module and
register themselves. The package (``pyattacker.pool``) imports both, and importing any of
its modules runs the package first, so every built-in name is registered before anything
can be resolved; this module imports neither, so no module needs one that needs it.

Field names in errors: an algorithm built in Python names its own parameter
(``backoff.base``); one resolved from a spec names the path inside the spec
(``algorithm.base``, ``algorithm.then.name``), which is what the user wrote.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import random
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from pyattacker import _plugins
from pyattacker._checks import check_seconds
from pyattacker.clock import Clock
from pyattacker.errors import AcquireTimeout, ConfigError, ResourceUnavailable
from pyattacker.pool._lease import Lease, LeaseOwner
from pyattacker.pool._selector import Selector

if TYPE_CHECKING:
    from pyattacker.pool._pool import Pool, Score
    from pyattacker.pool._resource import Resource

__all__ = [
    "ALGORITHMS",
    "AcquireAlgorithm",
    "AcquireRequest",
    "AlgorithmSpec",
    "Immediate",
    "Rank",
    "Wait",
    "register_algorithm",
    "resolve_algorithm",
    "resolve_nested",
]

#: Ranks a candidate of a given pool (higher preferred, None last); see ``AcquireRequest.rank``.
Rank = Callable[["Pool", "Resource"], "float | None"]


@dataclass(slots=True)
class AcquireRequest:
    """Everything an algorithm may use to obtain one lease, and nothing more.

    ``rank`` is a preference that ``try_acquire`` applies when it is not given a ``score``
    (``quota_aware`` sets it and hands the request to its ``then``): wrapping algorithms
    compose by passing ``dataclasses.replace(request, ...)`` down.

    Treat it as read-only: change it only through ``dataclasses.replace``. It is not a
    frozen dataclass because it is built on every acquire, where a frozen one's slower
    construction showed in the cost of a lease (``benchmarks/pool_ops.py``).
    """

    pool: Pool
    selector: Selector
    timeout: float | None
    rng: random.Random
    clock: Clock
    pools: Mapping[str, Pool]
    affinity: MutableMapping[str, str]
    owner: LeaseOwner | None
    algorithm: str
    started: float
    rank: Rank | None = None
    tokens: float | None = None  # the call's token estimate, charged to a paced resource

    def try_acquire(
        self,
        pool: Pool | None = None,
        *,
        selector: Selector | None = None,
        score: Score | None = None,
        exclude: Iterable[str] = (),
    ) -> Lease | None:
        """``pool.try_acquire`` on behalf of this request's owner (default: its own pool)."""
        pool = self.pool if pool is None else pool  # not `or`: an empty Pool is falsy
        if score is None and self.rank is not None:
            score = functools.partial(self.rank, pool)
        return pool.try_acquire(
            self.selector if selector is None else selector,
            score=score,
            exclude=exclude,
            owner=self.owner,
            algorithm=self.algorithm,
            tokens=self.tokens,
        )

    def remaining(self, timeout: float | None = None) -> float | None:
        """Seconds left before the tighter of the request's and ``timeout`` (None: no limit).

        Measured against the absolute deadline ``started + limit``: ``deadline - now`` is
        exact near the deadline, where ``limit - (now - started)`` can leave a rounding
        crumb like 5.6e-17 that a timer cannot wait out (``now + crumb == now``), which on a
        simulated clock is a livelock. A remainder too small to move the clock is 0.
        """
        limits = [t for t in (self.timeout, timeout) if t is not None]
        if not limits:
            return None
        now = self.clock.now()
        left = (self.started + min(limits)) - now
        return left if now + left > now else 0.0

    def unavailable(
        self, message: str, *, timeout: float | None = None, pools: Sequence[Pool] = ()
    ) -> ResourceUnavailable:
        """The error to raise, with every resource's reason for saying no.

        With ``pools`` (several), the reasons cover each of them, keyed ``"pool/resource"``.
        """
        if pools:
            reasons = {
                f"{pool.name}/{rid}": why
                for pool in pools
                for rid, why in pool.reasons(self.selector).items()
            }
        else:
            reasons = self.pool.reasons(self.selector)
        context: dict[str, Any] = {
            "pool": self.pool.name,
            "selector": self.selector.describe(),
            "reasons": reasons,
        }
        if timeout is not None:
            return AcquireTimeout(message, timeout_s=timeout, **context)
        return ResourceUnavailable(message, **context)


class AcquireAlgorithm(abc.ABC):
    """Base of every acquire algorithm. Subclasses are (usually frozen) dataclasses."""

    name: ClassVar[str]

    @abc.abstractmethod
    async def acquire(self, request: AcquireRequest) -> Lease:
        """A lease from ``request``, or ``ResourceUnavailable``/``AcquireTimeout``."""

    def describe(self) -> dict[str, Any]:
        """The name and parameters, JSON-friendly (what ``resolve_algorithm`` accepts)."""
        params: dict[str, Any] = {"name": self.name}
        for name in _parameters(type(self)):
            value = getattr(self, name)
            params[name] = value.describe() if isinstance(value, AcquireAlgorithm) else value
        return params


def _parameters(cls: type) -> list[str]:
    """The public init parameters of an algorithm class (none unless it is a dataclass)."""
    if not dataclasses.is_dataclass(cls):
        return []
    return [f.name for f in dataclasses.fields(cls) if f.init and not f.name.startswith("_")]


AlgorithmSpec: TypeAlias = "str | Mapping[str, Any] | AcquireAlgorithm"

#: name -> class. ``pyattacker.pool._registry`` enters the built-in algorithms when the
#: package loads; ``register_algorithm`` adds yours.
ALGORITHMS: dict[str, type[AcquireAlgorithm]] = {}


def register_algorithm(cls: type[AcquireAlgorithm]) -> type[AcquireAlgorithm]:
    """Make ``cls`` resolvable by its ``name`` (usable as a class decorator)."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise ConfigError("an algorithm class needs a non-empty `name`", field="name")
    ALGORITHMS[name] = cls
    return cls


def check_timeout(value: float | None, field: str) -> None:
    """``ConfigError`` naming ``field`` unless ``value`` is None or seconds >= 0."""
    check_seconds(value, field)


@dataclass(frozen=True, slots=True)
class Immediate(AcquireAlgorithm):
    """One try, no waiting: a lease now or ``ResourceUnavailable`` with every reason."""

    name: ClassVar[str] = "immediate"

    async def acquire(self, request: AcquireRequest) -> Lease:
        lease = request.try_acquire()
        if lease is None:
            raise request.unavailable(f"no resource free now in pool {request.pool.name!r}")
        return lease


@dataclass(frozen=True, slots=True)
class Wait(AcquireAlgorithm):
    """Try; else park until a release, health change or cooldown end may let us in; repeat.

    ``timeout`` (seconds on the pool's clock; the call's own timeout may be tighter) ends
    the wait with ``AcquireTimeout``. The default algorithm.
    """

    name: ClassVar[str] = "wait"
    timeout: float | None = None

    def __post_init__(self) -> None:
        check_timeout(self.timeout, "wait.timeout")

    async def acquire(self, request: AcquireRequest) -> Lease:
        while True:
            lease = request.try_acquire()
            if lease is not None:
                return lease
            remaining = request.remaining(self.timeout)
            if remaining is not None and remaining <= 0:
                limit = min(t for t in (request.timeout, self.timeout) if t is not None)
                raise request.unavailable(
                    f"no lease within {limit:g}s in pool {request.pool.name!r}", timeout=limit
                )
            await request.pool.wait_slot(request.selector, remaining)


def resolve_algorithm(spec: AlgorithmSpec | None) -> AcquireAlgorithm:
    """An algorithm from a name, a ``{"name": ..., **params}`` dict, or an instance.

    ``None`` gives ``Wait()``. Nested algorithm parameters (``then``) may be specs
    themselves. Raises ``ConfigError`` naming the field (``algorithm``, ``algorithm.name``,
    ``algorithm.<param>``, ``algorithm.then.name``…) for anything unknown or out of range.
    """
    return _resolve(spec, "algorithm")


def resolve_nested(spec: AlgorithmSpec | None, field: str) -> AcquireAlgorithm:
    """``resolve_algorithm`` for a parameter that is itself an algorithm; errors name ``field``.

    For use in ``__post_init__``: ``resolve_nested(self.then, "failover.then")``.
    """
    return _resolve(spec, field)


#: Algorithms resolved from a bare name, reused: they are immutable, and resolving one per
#: acquire would cost more than the acquire itself.
_BY_NAME: dict[tuple[str, type[AcquireAlgorithm]], AcquireAlgorithm] = {}


def _resolve(spec: AlgorithmSpec | None, field: str) -> AcquireAlgorithm:
    if spec is None:
        spec = "wait"
    if isinstance(spec, AcquireAlgorithm):
        return spec
    if isinstance(spec, str):
        cls = ALGORITHMS.get(spec)
        cached = _BY_NAME.get((spec, cls)) if cls is not None else None
        if cached is None:
            cached = _build(spec, {}, field, name_field=field)
            _BY_NAME[(spec, type(cached))] = cached
        return cached
    if isinstance(spec, Mapping):
        params = dict(spec)
        name = params.pop("name", None)
        if not isinstance(name, str):
            raise ConfigError(
                "an algorithm given as a dict needs a 'name'",
                field=f"{field}.name",
                hint=f"one of: {', '.join(sorted(ALGORITHMS))}",
            )
        return _build(name, params, field, name_field=f"{field}.name")
    raise ConfigError(
        f"must be a name, a dict or an AcquireAlgorithm, got {type(spec).__name__}",
        field=field,
        hint=f"one of: {', '.join(sorted(ALGORITHMS))}",
    )


def _build(name: str, params: dict[str, Any], field: str, *, name_field: str) -> AcquireAlgorithm:
    cls = ALGORITHMS.get(name) or _plugin_algorithm(name, name_field)
    if cls is None:
        raise ConfigError(
            f"unknown algorithm {name!r}",
            field=name_field,
            hint=f"known algorithms: {', '.join(sorted(ALGORITHMS))}",
        )
    accepted = set(_parameters(cls))
    for key in params:
        if key not in accepted:
            raise ConfigError(
                f"{name} has no parameter {key!r}",
                field=f"{field}.{key}",
                hint=f"its parameters: {', '.join(sorted(accepted)) or 'none'}",
            )
    try:
        return cls(**params)
    except ConfigError as exc:
        own = f"{name}."
        if exc.field is None or not exc.field.startswith(own):
            raise
        # The instance named its own parameter ("backoff.base"); name the spec's path.
        raise ConfigError(
            exc.message, field=f"{field}.{exc.field[len(own) :]}", hint=exc.hint
        ) from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc), field=field) from None


def _plugin_algorithm(name: str, field: str) -> type[AcquireAlgorithm] | None:
    """The algorithm an installed plugin declares under ``name`` (entry point group
    ``pyattacker.algorithms``), registered on first use; None when none does."""
    found = _plugins.load("pyattacker.algorithms", name, field=field)
    if found is None:
        return None
    if not (isinstance(found, type) and issubclass(found, AcquireAlgorithm)):
        raise ConfigError(
            f"the plugin algorithm {name!r} is a {type(found).__name__}, "
            "not an AcquireAlgorithm subclass",
            field=field,
        )
    register_algorithm(found)
    return found
