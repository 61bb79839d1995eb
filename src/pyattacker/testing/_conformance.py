"""``check_algorithm``: the contract every acquire algorithm keeps, checked on virtual time.

Write an algorithm, then ``check_algorithm(MyAlgorithm())`` in a test. Each check builds a
fresh world (pools of three resources: ``r0`` kind ``a`` capacity 2 with 600 tokens of
declared quota, ``r1`` kind ``a`` capacity 1, ``r2`` kind ``b`` capacity 1 with 300) on a
fresh virtual loop, and the whole run fails with an ``AssertionError`` that says what the
algorithm did wrong. The contract:

1. From an idle pool it returns at once (no simulated time passes) a ``Lease`` taken on
   the request's behalf (``request.try_acquire``), on a resource of the world, and holds
   nothing else.
2. It honours the selector: asked for kind ``b``, it never leases an ``a``.
3. On a full pool with ``timeout=0.5`` it raises ``ResourceUnavailable`` (or
   ``AcquireTimeout``) no later than the timeout and holds nothing afterwards.
4. When a resource is released it gets a lease within 60 simulated seconds (an
   immediate-style algorithm may have raised ``ResourceUnavailable`` instead): no hang.
5. Cancelled while waiting, also in the very instant a resource comes back, it holds
   nothing, leaves no waiter parked and no task running.
6. It draws randomness from ``request.rng`` only: a contended workload run twice with the
   same seeds (and the global ``random`` seeded differently) gives the same sequence of
   leases and the same finish time.
7. On paced resources (``rpm=60``: one lease a second each) whose pacing has just been
   spent, it grants nothing before the first of them may go again (t = 1 s) and gets a
   lease within 60 simulated seconds (or raises ``ResourceUnavailable``), without spinning:
   waiting for a pacing instant is waiting on time, not a busy loop.
8. Throughout, no lease exceeds a resource's capacity, and neither pyattacker (but for the
   virtual loop's own watchdog) nor the module of the algorithm or of any algorithm nested
   in it reads the wall clock (``time.monotonic`` and friends). Other libraries are not
   watched: a test framework's garbage-collection hooks may read it at any moment.

By default the world has one pool, ``conformance``, plus every pool the algorithm's
description names (``pools`` of ``failover``/``least_busy``, nested ones too); requests go
to the first pool. Pass ``pools=[...]`` to name them yourself.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import random
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn, TypeVar

import pyattacker
from pyattacker._sim import _loops, run_virtual
from pyattacker.clock import LoopClock
from pyattacker.errors import ResourceUnavailable, SimulationStalled, WallBudgetExceeded
from pyattacker.pool import (
    AcquireAlgorithm,
    AlgorithmSpec,
    Lease,
    Pool,
    PoolEvent,
    Resource,
    Selector,
    TaskContext,
    resolve_algorithm,
)

__all__ = ["check_algorithm"]

T = TypeVar("T")

#: Virtual seconds one check may take in all before it counts as a hang.
BUDGET_S = 600.0
#: Virtual seconds an algorithm has to pick up a released resource.
RELEASE_BUDGET_S = 60.0
#: Real seconds one check may take (an algorithm that spins without yielding to time).
WALL_BUDGET_S = 5.0
#: The call timeout used where the algorithm must give up.
TIMEOUT_S = 0.5
#: Requests per minute of each resource in the pacing check: one lease a second.
PACED_RPM = 60.0

# id, kind, capacity, declared token quota (None: undeclared, so quota_aware ranks it last)
_LAYOUT = (("r0", "a", 2, 600), ("r1", "a", 1, None), ("r2", "b", 1, 300))
_WALL_CLOCK_NAMES = ("monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time")
_WALL_CLOCK = frozenset(getattr(time, n) for n in (*_WALL_CLOCK_NAMES, "time_ns", "sleep"))
_CLOCK = LoopClock()  # the running loop's time: virtual inside run_virtual


def check_algorithm(
    algorithm_or_spec: AlgorithmSpec, *, pools: Sequence[str] | None = None
) -> None:
    """Run every check on ``algorithm_or_spec``; ``AssertionError`` on the first violation.

    ``pools`` names the world's pools (the first receives the requests); by default
    ``conformance`` plus the pools the algorithm's description names. A spec the registry
    cannot resolve raises ``ConfigError`` as ``resolve_algorithm`` does.
    """
    algorithm = resolve_algorithm(algorithm_or_spec)
    names = _world_names(algorithm, pools)
    for check in (
        _grants_at_once_when_free,
        _honours_the_selector,
        _gives_up_cleanly_on_a_full_pool,
        _takes_a_released_resource,
        _cancellation_leaves_nothing_held,
    ):
        _run(check, algorithm, names)
    _run(_waits_out_pacing, algorithm, names, paced=True)
    _check_reproducible(algorithm, names)


# -- the world ----------------------------------------------------------------------------


def _resources(*, paced: bool = False) -> list[Resource]:
    return [
        Resource.create(
            kind,
            id=rid,
            capacity=capacity,
            options={"quota": {"tokens": q}} if q else {},
            rpm=PACED_RPM if paced else None,
        )
        for rid, kind, capacity, q in _LAYOUT
    ]


class _World:
    """Fresh pools for one check, watched for capacity violations."""

    def __init__(
        self, algorithm: AcquireAlgorithm, names: Sequence[str], *, paced: bool = False
    ) -> None:
        self.algorithm = algorithm
        self.pools = [Pool(name, _resources(paced=paced), deadlock_warn_s=None) for name in names]
        self.first = self.pools[0]
        self.violations: list[str] = []
        for pool in self.pools:
            pool.subscribe(self._watch)

    def _watch(self, event: PoolEvent) -> None:
        if event.kind != "lease.acquired" or event.resource is None:
            return
        pool = next(p for p in self.pools if p.name == event.pool)
        capacity = next(r.capacity for r in pool.resources if r.id == event.resource)
        if pool.active_of(event.resource) > capacity:
            self.violations.append(
                f"{event.pool}/{event.resource} had {pool.active_of(event.resource)} leases "
                f"out, capacity {capacity}"
            )

    def context(self, seed: object = 0) -> TaskContext:
        return TaskContext(
            self.pools, rng=random.Random(f"{seed}"), pool=self.first.name, algorithm=self.algorithm
        )

    @property
    def active(self) -> int:
        return sum(p.active for p in self.pools)

    def fill(self) -> list[Lease]:
        """Take every slot of every pool (first pool first), bypassing the algorithm."""
        held = []
        for pool in self.pools:
            while (lease := pool.try_acquire()) is not None:
                held.append(lease)
        return held

    def check_lease(self, lease: object, ctx: TaskContext, selector: Selector) -> Lease:
        if not isinstance(lease, Lease):
            _fail(f"returned {lease!r}, not a Lease")
        if lease.pool not in self.pools or lease.resource.id not in lease.pool:
            _fail(f"returned a lease on {lease!r}, which is not a resource of the world")
        if lease.released:
            _fail(f"returned a lease that was already released: {lease!r}")
        if not selector.matches(lease.resource):
            _fail(f"ignored the selector ({selector.describe()}): leased {lease.resource!r}")
        if lease not in ctx.held:
            _fail(
                "returned a lease not taken on the request's behalf; "
                "use request.try_acquire(), which records the owner"
            )
        return lease

    def check_idle(self, what: str, expected_active: int = 0) -> None:
        if self.active != expected_active:
            _fail(f"{what}: {self.active - expected_active} lease(s) still held")
        if any(p.waiting for p in self.pools):
            _fail(f"{what}: a waiter is still parked in {[p.name for p in self.pools]}")
        current = asyncio.current_task()
        stray = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
        if stray:
            _fail(f"{what}: {len(stray)} task(s) still running: {stray[0].get_name()}")


def _now() -> float:
    return _CLOCK.now()


async def _sleep(seconds: float) -> None:
    await _CLOCK.sleep(seconds)


def _fail(message: str) -> NoReturn:
    raise AssertionError(message)


async def _within(awaitable: Awaitable[T], seconds: float, what: str) -> T:
    try:
        async with asyncio.timeout(seconds):
            return await awaitable
    except TimeoutError:
        _fail(f"did not {what} within {seconds:g}s of simulated time")


async def _settle(task: asyncio.Task[Lease]) -> Lease | BaseException:
    """The task's lease or the exception it ended with (cancellation included)."""
    try:
        return await task
    except (asyncio.CancelledError, ResourceUnavailable) as exc:
        return exc


# -- the checks ---------------------------------------------------------------------------


async def _grants_at_once_when_free(world: _World) -> None:
    ctx = world.context()
    started = _now()
    lease = await _within(ctx.acquire_lease(), RELEASE_BUDGET_S, "lease from an idle pool")
    world.check_lease(lease, ctx, Selector())
    if _now() != started:
        _fail(f"took {_now() - started:g}s of simulated time although a resource was free")
    if world.active != 1:
        _fail(f"holds {world.active} leases after granting one (a leak)")
    lease.release_now()
    world.check_idle("after the lease came back")


async def _honours_the_selector(world: _World) -> None:
    ctx = world.context()
    wanted = Selector.build(kind="b")
    held = []
    for _ in range(3):
        try:
            lease = await _within(
                ctx.acquire_lease(kind="b", timeout=TIMEOUT_S),
                RELEASE_BUDGET_S,
                f"return or give up with kind='b' and timeout={TIMEOUT_S}",
            )
        except ResourceUnavailable:
            continue
        held.append(world.check_lease(lease, ctx, wanted))
    if not held:
        _fail("never leased kind='b' although such a resource was free")
    for lease in held:
        lease.release_now()
    world.check_idle("after every kind='b' lease came back")


async def _gives_up_cleanly_on_a_full_pool(world: _World) -> None:
    blockers = world.fill()
    ctx = world.context()
    started = _now()
    try:
        lease = await _within(
            ctx.acquire_lease(timeout=TIMEOUT_S),
            RELEASE_BUDGET_S,
            f"give up on a full pool (the call's timeout was {TIMEOUT_S}s)",
        )
    except ResourceUnavailable:
        pass
    else:
        _fail(f"granted {lease!r} although every resource was full")
    late = _now() - started - TIMEOUT_S
    if late > 1e-9:
        _fail(f"gave up {late:g}s after the call's timeout of {TIMEOUT_S}s")
    if ctx.held:
        _fail(f"still holds {len(ctx.held)} lease(s) after raising")
    world.check_idle("after raising", expected_active=len(blockers))
    for lease in blockers:
        lease.release_now()


async def _takes_a_released_resource(world: _World) -> None:
    blockers = world.fill()
    ctx = world.context()
    task = asyncio.create_task(ctx.acquire_lease())
    await _sleep(1.0)
    blockers.pop(0).release_now()
    try:
        lease = await _within(task, RELEASE_BUDGET_S, "lease the resource released at +1s")
    except ResourceUnavailable:
        pass  # immediate-style: it said no before anything was released
    else:
        world.check_lease(lease, ctx, Selector()).release_now()
    for blocker in blockers:
        blocker.release_now()
    world.check_idle("after the released resource came back")


async def _cancellation_leaves_nothing_held(world: _World) -> None:
    blockers = world.fill()
    ctx = world.context()
    # None: cancelled while parked. k: a resource comes back, k loop turns pass, then the
    # cancel lands (0 is the same instant; later ones catch work done while holding a lease).
    for turns in (None, 0, 1, 2, 3, 5, 8):
        task = asyncio.create_task(ctx.acquire_lease())
        await _sleep(0.5)
        if turns is not None:
            blockers.pop().release_now()
            for _ in range(turns):
                await _sleep(0)
        task.cancel()
        outcome = await _settle(task)
        if isinstance(outcome, Lease):
            world.check_lease(outcome, ctx, Selector()).release_now()
        if ctx.held:
            _fail(f"holds {len(ctx.held)} lease(s) after being cancelled while waiting")
        blockers += world.fill()
    for blocker in blockers:
        blocker.release_now()
    await _sleep(0)
    world.check_idle("after cancellation")


async def _waits_out_pacing(world: _World) -> None:
    spent = world.fill()  # one lease per resource: each is now paced out until t + 1 s
    for lease in spent:
        lease.release_now()
    started = _now()
    ready = started + 60.0 / PACED_RPM
    ctx = world.context()
    try:
        lease = await _within(ctx.acquire_lease(), RELEASE_BUDGET_S, "lease a paced resource")
    except ResourceUnavailable:
        return  # immediate-style: nothing could go at once
    world.check_lease(lease, ctx, Selector())
    if _now() < ready:
        _fail(f"granted {lease!r} at t={_now() - started:g}s, before any pacing allowed it")
    lease.release_now()
    world.check_idle("after the paced lease came back")


# -- reproducibility ----------------------------------------------------------------------


async def _workload(world: _World) -> tuple[list[tuple[Any, ...]], float]:
    """Six workers, four acquisitions each, on capacity four: contention and refusals."""
    started = _now()
    log: list[tuple[Any, ...]] = []

    async def worker(w: int) -> None:
        for n in range(4):
            ctx = world.context(seed=f"{w}:{n}")
            try:
                lease = await ctx.acquire_lease(timeout=5.0)
            except ResourceUnavailable as exc:
                log.append((_now() - started, w, n, type(exc).__name__))
                await _sleep(0.2)
                continue
            world.check_lease(lease, ctx, Selector())
            log.append((_now() - started, w, n, lease.pool.name, lease.resource.id))
            await _sleep(0.1 * (1 + (w + n) % 3))
            if (4 * w + n) % 5 == 0:
                lease.report(ok=False, retry_after=0.3)
            else:
                lease.report(ok=True, usage={"tokens": 10.0 * (w + 1)})
            lease.release_now()

    await asyncio.gather(*(worker(w) for w in range(6)))
    return log, _now() - started


def _check_reproducible(algorithm: AcquireAlgorithm, names: Sequence[str]) -> None:
    state = random.getstate()
    try:
        random.seed(1)
        first = _run(_workload, algorithm, names)
        random.seed(2)
        second = _run(_workload, algorithm, names)
    finally:
        random.setstate(state)
    if first != second:
        diff = next(
            (f"{a} != {b}" for a, b in zip(first[0], second[0], strict=False) if a != b),
            f"finished at {first[1]:g}s and {second[1]:g}s",
        )
        raise AssertionError(
            f"{_label(algorithm)} failed 'reproducible from request.rng': two runs with the "
            f"same seeds differ (is it using another source of randomness?): {diff}"
        )


# -- running ------------------------------------------------------------------------------


def _run(
    check: Callable[[_World], Awaitable[T]],
    algorithm: AcquireAlgorithm,
    names: Sequence[str],
    *,
    paced: bool = False,
) -> T:
    label = f"{_label(algorithm)} failed '{check.__name__.strip('_').replace('_', ' ')}'"

    async def main() -> T:
        world = _World(algorithm, names, paced=paced)
        async with asyncio.timeout(BUDGET_S):
            result = await check(world)
        if world.violations:
            _fail(f"exceeded capacity: {world.violations[0]}")
        return result

    try:
        with _wall_clock_reads(algorithm) as reads:
            result = run_virtual(main(), wall_budget_s=WALL_BUDGET_S)
    except AssertionError as exc:
        raise AssertionError(f"{label}: {exc}") from None
    except TimeoutError:
        raise AssertionError(
            f"{label}: still running after {BUDGET_S:g}s of simulated time"
        ) from None
    except SimulationStalled as exc:
        raise AssertionError(f"{label}: it hangs (nothing runnable, no timer): {exc}") from None
    except WallBudgetExceeded:
        raise AssertionError(
            f"{label}: it spins without letting simulated time pass "
            f"({WALL_BUDGET_S:g} real seconds)"
        ) from None
    except Exception as exc:
        raise AssertionError(f"{label}: raised {exc!r}") from exc
    if reads:
        raise AssertionError(f"{label}: read the wall clock ({reads[0]}); use request.clock")
    return result


def _label(algorithm: AcquireAlgorithm) -> str:
    if _parameter_names(algorithm):
        return repr(algorithm)
    return f"{type(algorithm).__name__} (algorithm {algorithm.name!r})"


def _world_names(algorithm: AcquireAlgorithm, pools: Sequence[str] | None) -> tuple[str, ...]:
    if pools is not None:
        names = tuple(pools)
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"pools must be a non-empty list of pool names, got {pools!r}")
        return names
    found = ["conformance"]
    for name in _named_pools(algorithm.describe()):
        if name not in found:
            found.append(name)
    return tuple(found)


def _named_pools(description: object) -> Iterator[str]:
    """Pool names in an algorithm's description: ``pools`` entries, nested specs included."""
    if not isinstance(description, dict):
        return
    for key, value in description.items():
        if key == "pools" and isinstance(value, list | tuple):
            yield from (v for v in value if isinstance(v, str))
        elif isinstance(value, dict):
            yield from _named_pools(value)


def _watched_files(algorithm: AcquireAlgorithm) -> tuple[str, ...]:
    """Source files whose wall-clock reads count: pyattacker's and the algorithms' modules."""
    files = {str(Path(pyattacker.__file__).parent)}
    pending: list[object] = [algorithm]
    while pending:
        item = pending.pop()
        if isinstance(item, AcquireAlgorithm):
            with contextlib.suppress(TypeError, OSError):
                files.add(inspect.getfile(type(item)))
            pending.extend(getattr(item, name) for name in _parameter_names(item))
    return tuple(files)


def _parameter_names(algorithm: AcquireAlgorithm) -> list[str]:
    cls: type = type(algorithm)
    if not dataclasses.is_dataclass(cls):
        return []
    return [f.name for f in dataclasses.fields(cls)]


@contextlib.contextmanager
def _wall_clock_reads(algorithm: AcquireAlgorithm) -> Iterator[list[str]]:
    """Record wall-clock calls made from pyattacker's code or the algorithm's modules."""
    watched = _watched_files(algorithm)
    loop_file = _loops.__file__
    reads: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "c_call" and arg in _WALL_CLOCK:
            filename = frame.f_code.co_filename
            if filename.startswith(watched) and filename != loop_file:
                name = getattr(arg, "__name__", "?")
                reads.append(f"time.{name} from {Path(filename).name}:{frame.f_lineno}")

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield reads
    finally:
        sys.setprofile(previous)
