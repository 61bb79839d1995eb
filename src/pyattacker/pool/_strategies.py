"""The acquire algorithms beyond ``immediate`` and ``wait``.

Each is a frozen keyword dataclass registered under its ``name``; its docstring states the
contract and the formula. They compose: the ones with a ``then`` parameter (``failover``,
``sticky``, ``quota_aware``, ``adaptive``) decide something and hand the request, perhaps
narrowed or re-pointed with ``dataclasses.replace``, to another algorithm. Every one of
them only uses what ``AcquireRequest`` offers: ``request.rng`` is the only randomness and
``request.clock`` the only time.

``adaptive``, the one with state, lives in ``_adaptive``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from pyattacker._checks import check_number
from pyattacker.errors import (
    AcquireTimeout,
    ConfigError,
    NoUsableResource,
    PoolNotFound,
    ResourceUnavailable,
)
from pyattacker.pool._algorithms import (
    AcquireAlgorithm,
    AcquireRequest,
    AlgorithmSpec,
    check_timeout,
    resolve_nested,
)
from pyattacker.pool._lease import Lease
from pyattacker.retry import JITTERS, Jitter, backoff_ceiling, jittered

if TYPE_CHECKING:
    from pyattacker.pool._pool import Pool
    from pyattacker.pool._resource import Resource

__all__ = ["Backoff", "Failover", "LeastBusy", "QuotaAware", "Sticky"]


# -- shared helpers ---------------------------------------------------------------------


def _pool_names(value: object, field: str) -> tuple[str, ...]:
    """A tuple of distinct pool names from a name or an iterable of names."""
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, Iterable):
        raise ConfigError(f"must be a list of pool names, got {value!r}", field=field)
    names = tuple(value)
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise ConfigError(f"must be a pool name, got {name!r}", field=f"{field}[{i}]")
    if len(set(names)) != len(names):
        raise ConfigError(f"names a pool twice: {list(names)!r}", field=field)
    return names


def _lookup(request: AcquireRequest, names: Iterable[str]) -> list[Pool]:
    """The named pools of the request, in order; ``PoolNotFound`` for a name it lacks."""
    found = []
    for name in names:
        pool = request.pools.get(name)
        if pool is None:
            raise PoolNotFound(name, known=list(request.pools))
        found.append(pool)
    return found


def _with_request_pool(request: AcquireRequest, names: Sequence[str]) -> list[Pool]:
    """The named pools, with the request's own pool first unless the names place it."""
    pools = _lookup(request, names)
    if request.pool not in pools:
        pools.insert(0, request.pool)
    return pools


def _not_dead_ends(request: AcquireRequest, pools: Sequence[Pool]) -> list[Pool]:
    """The pools some resource of which may still serve the request; ``NoUsableResource``
    naming every resource when there is none."""
    live = [p for p in pools if p.dead_ends(request.selector) is None]
    if live:
        return live
    if len(pools) == 1:
        pools[0].check_usable(request.selector)
    reasons = {
        f"{p.name}/{rid}": why
        for p in pools
        for rid, why in (p.dead_ends(request.selector) or {}).items()
    }
    listed = ", ".join(f"{where} {why}" for where, why in reasons.items())
    raise NoUsableResource(
        f"no usable resource in pools {', '.join(p.name for p in pools)}: {listed}",
        pool=request.pool.name,
        reasons=reasons,
    )


def _timeout_of(request: AcquireRequest, own: float | None) -> float:
    """The tighter of the call's timeout and the algorithm's own (one of them is set)."""
    return min(t for t in (request.timeout, own) if t is not None)


# -- backoff ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Backoff(AcquireAlgorithm):
    """Immediate tries with growing, jittered sleeps between them; never parks on the pool.

    Before try ``n + 2`` (``n = 0, 1, …``) it sleeps on ``request.clock`` for::

        ceiling(n) = min(cap, base * factor ** n)
        full:   ceiling * u                     (u = request.rng.random(), one per sleep)
        equal:  ceiling / 2 + ceiling / 2 * u
        none:   ceiling                         (no draw)

    so the same rng state gives the same delays, always within ``[0, cap]``. With
    ``jitter="none"`` and the defaults the tries are at t = 0, 0.05, 0.15, 0.35, 0.75, …

    It gives up with ``AcquireTimeout`` at the tighter of ``max_wait`` and the call's
    timeout: the last sleep is cut short to end exactly there, one last try is made, then
    it raises. It is *not* woken by a release (that is ``wait``): it looks only when its
    sleep ends, which spreads a herd of callers over time instead of waking them together.
    """

    name: ClassVar[str] = "backoff"
    base: float = 0.05
    factor: float = 2.0
    cap: float = 2.0
    jitter: Jitter = "full"
    max_wait: float | None = None

    def __post_init__(self) -> None:
        check_number(self.base, "backoff.base", above=0, hint="seconds before the 2nd try")
        check_number(self.factor, "backoff.factor", at_least=1, hint="e.g. 2.0")
        check_number(self.cap, "backoff.cap", above=0, hint="the longest sleep, in seconds")
        if self.cap < self.base:
            raise ConfigError(
                f"must be >= base ({self.base:g}), got {self.cap!r}", field="backoff.cap"
            )
        if self.jitter not in JITTERS:
            raise ConfigError(
                f"unknown jitter {self.jitter!r}",
                field="backoff.jitter",
                hint=f"one of: {', '.join(JITTERS)}",
            )
        check_timeout(self.max_wait, "backoff.max_wait")

    def ceiling(self, attempt: int) -> float:
        """The longest sleep after ``attempt + 1`` failed tries: ``min(cap, base*factor**n)``."""
        return backoff_ceiling(attempt + 1, base=self.base, factor=self.factor, cap=self.cap)

    def delay(self, attempt: int, rng: random.Random) -> float:
        """The sleep after ``attempt + 1`` failed tries (pure but for one draw from ``rng``)."""
        return jittered(self.ceiling(attempt), self.jitter, rng)

    async def acquire(self, request: AcquireRequest) -> Lease:
        attempt = 0
        while True:
            lease = request.try_acquire()
            if lease is not None:
                return lease
            request.pool.check_usable(request.selector)  # a dead end: no point trying again
            remaining = request.remaining(self.max_wait)
            if remaining is not None and remaining <= 0:
                limit = _timeout_of(request, self.max_wait)
                raise request.unavailable(
                    f"no lease within {limit:g}s of backoff in pool {request.pool.name!r}",
                    timeout=limit,
                )
            delay = self.delay(attempt, request.rng)
            attempt += 1
            await request.clock.sleep(delay if remaining is None else min(delay, remaining))


# -- least_busy ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class LeastBusy(AcquireAlgorithm):
    """The least loaded resource across the request's pool and ``pools``; else park on all.

    Each candidate pool proposes its own pick (``pool.select``: best score, then least
    loaded); the proposal with the lowest ``active / limit`` wins, ties to the earlier pool
    (``pools`` in the order given if it names the request's pool, else the request's pool
    first, then ``pools``; as ``failover`` walks them). With nothing free it parks on every
    candidate pool at once, the first wake-up wins (the other waits are cancelled), and it
    looks again. ``timeout`` as in ``wait``. With no other pools it is
    ``wait``: one pool's own pick is already least-busy-first. ``pools`` is a list of names
    (one name alone is accepted); unknown ones raise ``PoolNotFound`` when acquiring.
    """

    name: ClassVar[str] = "least_busy"
    pools: tuple[str, ...] = ()
    timeout: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "pools", _pool_names(self.pools, "least_busy.pools"))
        check_timeout(self.timeout, "least_busy.timeout")

    def pick(self, request: AcquireRequest, pools: Sequence[Pool]) -> Lease | None:
        """A lease on the least loaded proposal, or None. Synchronous: never interrupted."""
        rank = request.rank
        proposals = []
        for order, pool in enumerate(pools):
            score = None if rank is None else functools.partial(rank, pool)
            resource = pool.select(request.selector, score=score)
            if resource is not None:
                load = pool.active_of(resource.id) / pool.limit_of(resource.id)
                proposals.append((load, order, pool))
        for _, _, pool in sorted(proposals, key=lambda p: (p[0], p[1])):
            lease = request.try_acquire(pool)
            if lease is not None:
                return lease
        return None

    async def acquire(self, request: AcquireRequest) -> Lease:
        pools = _with_request_pool(request, self.pools)
        while True:
            lease = self.pick(request, pools)
            if lease is not None:
                return lease
            remaining = request.remaining(self.timeout)
            if remaining is not None and remaining <= 0:
                limit = _timeout_of(request, self.timeout)
                names = ", ".join(p.name for p in pools)
                raise request.unavailable(
                    f"no lease within {limit:g}s in pools {names}", timeout=limit, pools=pools
                )
            live = _not_dead_ends(request, pools)
            if len(live) == 1:
                await live[0].wait_slot(request.selector, remaining)
            else:
                lease = await self._park_on_all(request, live, remaining)
                if lease is not None:
                    return lease

    async def _park_on_all(
        self, request: AcquireRequest, pools: Sequence[Pool], timeout: float | None
    ) -> Lease | None:
        """Wait on every pool at once until one wakes (None), or a lease in the meantime.

        The waits are tasks, which register only once they run: after letting them run,
        look again, so a release between the last look and the parking is not missed. The
        losing waits are cancelled; they are awaited only when no lease is held, so a
        cancellation cannot land while this holds one.
        """
        waits = [asyncio.ensure_future(p.wait_slot(request.selector, timeout)) for p in pools]
        lease = None
        try:
            await request.clock.sleep(0)
            lease = self.pick(request, pools)
            if lease is None:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
            if lease is None:
                await asyncio.wait(waits)
        return lease


# -- failover -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Failover(AcquireAlgorithm):
    """Walk the pools in order with one immediate try each; if all refuse, ``then`` on the first.

    The walk is ``pools`` in the order given when the request's pool is among them, else
    the request's pool followed by ``pools``. The fallback runs ``then`` (any algorithm spec,
    default ``wait``) on the *first* pool of the walk that is not a dead end (every resource
    it has for the selector dead or revoked), with the call's selector and timeout; when
    every pool is one, it raises ``NoUsableResource`` at once. If the fallback fails too,
    it raises the same kind of error (``AcquireTimeout`` or ``ResourceUnavailable``) with
    the reasons of every resource of every pool of the walk, keyed ``"pool/resource"``.
    ``pools`` is a list of names (one name alone is accepted); unknown ones raise
    ``PoolNotFound`` when acquiring. With no ``pools`` it is one immediate try, then
    ``then``.
    """

    name: ClassVar[str] = "failover"
    pools: tuple[str, ...] = ()
    then: AlgorithmSpec = "wait"
    _then: AcquireAlgorithm = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pools", _pool_names(self.pools, "failover.pools"))
        then = resolve_nested(self.then, "failover.then")
        object.__setattr__(self, "then", then)
        object.__setattr__(self, "_then", then)

    async def acquire(self, request: AcquireRequest) -> Lease:
        walk = _with_request_pool(request, self.pools)
        for pool in walk:
            lease = request.try_acquire(pool)
            if lease is not None:
                return lease
        first = _not_dead_ends(request, walk)[0]  # waiting on a dead end would fail at once
        try:
            return await self._then.acquire(dataclasses.replace(request, pool=first))
        except NoUsableResource:
            raise  # a dead end is a dead end: its own class, so no policy retries it
        except ResourceUnavailable as exc:
            timeout = exc.timeout_s if isinstance(exc, AcquireTimeout) else None
            names = ", ".join(p.name for p in walk)
            raise request.unavailable(
                f"failover found nothing in pools {names}, nor by {self._then.name} on "
                f"{first.name!r}",
                timeout=timeout,
                pools=walk,
            ) from exc


# -- sticky -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Sticky(AcquireAlgorithm):
    """Return to the resource this attempt used last in this pool; else ``then`` and remember.

    ``request.affinity[pool name]`` holds the resource id (the affinity lives as long as the
    ``TaskContext``, i.e. one attempt of a task). If the remembered resource is usable and
    matches the selector, it is leased at once (one immediate try, selector narrowed to its
    id); otherwise ``then`` (default ``wait``) obtains a lease and the resource it got is
    remembered for the pool that lease came from. ``pool.acquire()`` builds a fresh context
    per call, so stickiness needs ``ctx.acquire``.
    """

    name: ClassVar[str] = "sticky"
    then: AlgorithmSpec = "wait"
    _then: AcquireAlgorithm = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        then = resolve_nested(self.then, "sticky.then")
        object.__setattr__(self, "then", then)
        object.__setattr__(self, "_then", then)

    async def acquire(self, request: AcquireRequest) -> Lease:
        pool = request.pool
        remembered = request.affinity.get(pool.name)
        wanted = request.selector.id
        if remembered is not None and remembered in pool and wanted in (None, remembered):
            narrowed = dataclasses.replace(request.selector, id=remembered)
            lease = request.try_acquire(selector=narrowed)
            if lease is not None:
                return lease
        lease = await self._then.acquire(request)
        request.affinity[lease.pool.name] = lease.resource.id
        return lease


# -- quota_aware --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotaAware(AcquireAlgorithm):
    """Prefer the resource with the most declared quota left; acquire like ``then``.

    ``score = resource.quota(unit) - pool.usage_of(id)[unit]`` (declared in
    ``options["quota"][unit]``, used as reported through ``lease.report(usage=...)``);
    higher wins, then the pool's usual least-loaded order. A resource without a declared
    quota scores None and ranks after every number. A preference, not a limit: an exhausted
    quota (a negative score) still gets leases when nothing better is free. The score rides
    on the request (``rank``) into ``then`` (default ``wait``), so any waiting style works.
    """

    name: ClassVar[str] = "quota_aware"
    unit: str = "tokens"
    then: AlgorithmSpec = "wait"
    _then: AcquireAlgorithm = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.unit, str) or not self.unit:
            raise ConfigError(
                f"must be a non-empty unit name, got {self.unit!r}",
                field="quota_aware.unit",
                hint='e.g. "tokens", as in options={"quota": {"tokens": 1200}}',
            )
        then = resolve_nested(self.then, "quota_aware.then")
        object.__setattr__(self, "then", then)
        object.__setattr__(self, "_then", then)

    def remaining_quota(self, pool: Pool, resource: Resource) -> float | None:
        """Declared quota minus reported usage in ``unit``; None when none is declared."""
        quota = resource.quota(self.unit)
        if quota is None:
            return None
        return quota - pool.usage_of(resource.id).get(self.unit, 0.0)

    async def acquire(self, request: AcquireRequest) -> Lease:
        return await self._then.acquire(dataclasses.replace(request, rank=self.remaining_quota))
