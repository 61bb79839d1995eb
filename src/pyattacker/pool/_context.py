"""``TaskContext``: what one attempt of a task sees, and the leases it holds.

A context knows the pools by name, the attempt's ``rng`` (the only randomness an algorithm
may use, so reruns reproduce backoff delays), its ``clock`` and free-form ``meta``. It hands
out leases through the acquire algorithms and remembers every lease it handed out until that
lease comes back, so that ``reclaim_now()`` can force-return whatever a task forgot and
record the leak (or, with ``strict_leases``, raise ``LeaseLeakError``).

Inside a run (``pyattacker.run``) the Runner fills in who is running: ``run_id``,
``pipeline_id``, ``task_id``, ``seq`` (the task's index in its pipeline), ``attempt``
(1-based), the ``store``, and an ``emit`` hook that records ``emit(kind, **data)`` as an event
of the run. Outside a run those are ``None`` (``attempt`` is 1) and ``emit`` does nothing.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any

from pyattacker._rng import LazyRandom
from pyattacker.clock import Clock, LoopClock
from pyattacker.errors import ConfigError, LeaseLeakError, PoolNotFound
from pyattacker.pool._acquire import acquire_through, checked
from pyattacker.pool._algorithms import AcquireAlgorithm, AlgorithmSpec, resolve_algorithm
from pyattacker.pool._lease import AcquireCall, Lease
from pyattacker.pool._pool import Pool
from pyattacker.pool._resource import Resource
from pyattacker.pool._selector import Selector

__all__ = ["TaskContext"]

# Where the attempt's reported usage is summed: in ``meta``, which ``derive`` shares, so a
# fanout branch's leases add to the same attempt; absent until something is reported.
_USAGE = "pyattacker.usage"


class TaskContext:
    def __init__(
        self,
        pools: Mapping[str, Pool] | Iterable[Pool] = (),
        *,
        rng: random.Random | int | str | None = None,
        clock: Clock | None = None,
        meta: Mapping[str, Any] | None = None,
        pool: str | None = None,
        algorithm: AlgorithmSpec | None = None,
        strict_leases: bool = False,
        run_id: str | None = None,
        pipeline_id: str | None = None,
        task_id: str | None = None,
        seq: int | None = None,
        attempt: int = 1,
        store: object | None = None,
        emit: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> None:
        if isinstance(pools, Mapping):
            self.pools: dict[str, Pool] = dict(pools)
        else:
            self.pools = {}
            for p in pools:
                if p.name in self.pools:
                    raise ConfigError(f"two pools named {p.name!r}", field="pools")
                self.pools[p.name] = p
        if pool is not None and pool not in self.pools:
            raise PoolNotFound(pool, known=list(self.pools))
        # An int or str is a seed (None: the OS's entropy), applied on the first draw: most
        # attempts never draw, and seeding is not free (pyattacker._rng).
        self.rng: random.Random = rng if isinstance(rng, random.Random) else LazyRandom(rng)
        first = next(iter(self.pools.values()), None)
        self.clock: Clock = clock or (first.clock if first is not None else LoopClock())
        self.meta: dict[str, Any] = dict(meta or {})
        self.default_pool = pool
        self.algorithm = None if algorithm is None else resolve_algorithm(algorithm)
        self.strict_leases = strict_leases
        #: resource id remembered per pool name by affinity-minded algorithms (``sticky``).
        self.affinity: dict[str, str] = {}
        self._held: dict[Lease, None] = {}
        self.run_id = run_id
        self.pipeline_id = pipeline_id
        self.task_id = task_id
        self.seq = seq
        self.attempt = attempt
        self.store = store
        self._emit = emit
        #: ``pool/resource`` of every lease handed out through this context, in order.
        self.leased: list[str] = []

    def emit(self, kind: str, /, **data: Any) -> None:
        """Record an event of the run (``kind`` named ``<area>.<what>``); a no-op outside a
        run. ``data`` must be JSON-able; secret-looking keys are masked before storing."""
        if self._emit is not None:
            self._emit(kind, data)

    def derive(
        self, *, pool: str | None = None, algorithm: AlgorithmSpec | None = None
    ) -> TaskContext:
        """A context for a part of this attempt (a ``fanout`` branch) with its own default
        pool and algorithm, sharing everything else: ids, rng, clock, the emit hook, and the
        held-lease ledger, so ``reclaim_now()`` on this context covers the branch's leases."""
        child = TaskContext(
            self.pools,
            clock=self.clock,
            meta=self.meta,
            pool=pool if pool is not None else self.default_pool,
            algorithm=algorithm if algorithm is not None else self.algorithm,
            strict_leases=self.strict_leases,
            run_id=self.run_id,
            pipeline_id=self.pipeline_id,
            task_id=self.task_id,
            seq=self.seq,
            attempt=self.attempt,
            store=self.store,
            emit=self._emit,
        )
        child.meta = self.meta
        child.affinity = self.affinity
        child._held = self._held
        child.leased = self.leased
        child.rng = self.rng  # one sequence of draws for the whole attempt
        return child

    def pool(self, name: str | None = None) -> Pool:
        """The named pool, else the default pool, else the only pool; ``PoolNotFound`` if none."""
        name = name if name is not None else self.default_pool
        if name is None:
            if len(self.pools) == 1:
                return next(iter(self.pools.values()))
            raise ConfigError(
                f"which pool? this context has {len(self.pools)}",
                field="pool",
                hint=f"pass one of: {', '.join(self.pools) or 'none (add a pool first)'}",
            )
        found = self.pools.get(name)
        if found is None:
            raise PoolNotFound(name, known=list(self.pools))
        return found

    def acquire(
        self,
        pool: str | None = None,
        *,
        algorithm: AlgorithmSpec | None = None,
        timeout: float | None = None,
        where: Callable[[Resource], bool] | None = None,
        tokens: float | None = None,
        **selector: Any,
    ) -> AcquireCall:
        """A lease from ``pool``: ``async with ctx.acquire(...) as lease`` or ``await``.

        ``tokens`` estimates what the call will spend, for a resource paced to ``tpm``
        (default: its ``tokens_per_call``); the usage the lease reports corrects it.
        Bad input (unknown pool or algorithm, negative timeout or tokens, a selector path
        no resource has) raises ``ConfigError`` here, before anything is waited for.
        """
        target, chosen, wanted = self._checked(pool, algorithm, timeout, where, selector, tokens)
        return AcquireCall(lambda: self._acquire(target, chosen, wanted, timeout, tokens))

    async def acquire_lease(
        self,
        pool: str | None = None,
        *,
        algorithm: AlgorithmSpec | None = None,
        timeout: float | None = None,
        where: Callable[[Resource], bool] | None = None,
        tokens: float | None = None,
        **selector: Any,
    ) -> Lease:
        """The escape hatch: a lease you release yourself (``lease.release_now()``)."""
        # What ``await self.acquire(...)`` does, without the AcquireCall and its closure:
        # the benchmark harness leases through here on every simulated call.
        target, chosen, wanted = self._checked(pool, algorithm, timeout, where, selector, tokens)
        return await self._acquire(target, chosen, wanted, timeout, tokens)

    def _checked(
        self,
        pool: str | None,
        algorithm: AlgorithmSpec | None,
        timeout: float | None,
        where: Callable[[Resource], bool] | None,
        selector: dict[str, Any],
        tokens: float | None,
    ) -> tuple[Pool, AcquireAlgorithm, Selector]:
        """The pool, algorithm and selector of an acquire, or ``ConfigError`` for bad input."""
        target = self.pool(pool)
        chosen, wanted = checked(
            target, algorithm, self.algorithm, timeout, where, selector, tokens
        )
        return target, chosen, wanted

    def _acquire(
        self,
        pool: Pool,
        algorithm: AcquireAlgorithm,
        selector: Selector,
        timeout: float | None,
        tokens: float | None = None,
    ) -> Coroutine[Any, Any, Lease]:
        return acquire_through(
            algorithm, pool, selector, timeout, tokens, rng=self.rng, clock=self.clock,
            pools=self.pools, affinity=self.affinity, owner=self,
        )  # fmt: skip

    # -- lease ownership ----------------------------------------------------------------

    @property
    def held(self) -> tuple[Lease, ...]:
        """Leases handed out through this context and not yet returned."""
        return tuple(self._held)

    def _adopt(self, lease: Lease) -> None:
        self._held[lease] = None
        self.leased.append(f"{lease.pool.name}/{lease.resource.id}")

    def _forget(self, lease: Lease) -> None:
        self._held.pop(lease, None)

    @property
    def usage(self) -> dict[str, float] | None:
        """What this attempt's leases reported with ``lease.report(usage=...)``, summed by
        key (``{"tokens": 1840.0}``); None when nothing was reported."""
        found: dict[str, float] | None = self.meta.get(_USAGE)
        return found

    def _used(self, usage: Mapping[str, float]) -> None:
        total: dict[str, float] | None = self.meta.get(_USAGE)
        if total is None:
            total = self.meta[_USAGE] = {}
        for unit, amount in usage.items():
            total[unit] = total.get(unit, 0) + amount

    def reclaim_now(self) -> tuple[Lease, ...]:
        """Force-return every lease still held, record each as leaked, and return them.

        Synchronous, so it runs in ``finally`` and after cancellation. With
        ``strict_leases`` a leak then raises ``LeaseLeakError`` (after reclaiming).
        """
        leaked = tuple(self._held)
        for lease in leaked:
            lease.pool._record_leak(lease)
            lease.release_now()
        if leaked and self.strict_leases:
            first = leaked[0]
            raise LeaseLeakError(
                f"{len(leaked)} lease(s) outlived the task",
                pool=first.pool.name,
                resource=first.resource.id,
            )
        return leaked

    def __repr__(self) -> str:
        return (
            f"<TaskContext pools={list(self.pools)} held={len(self._held)} "
            f"default_pool={self.default_pool!r}>"
        )
