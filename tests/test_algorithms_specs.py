"""Acquire algorithms from specs (``resolve_algorithm``, ``describe``, precedence) and the
conformance check, which every builtin passes and each broken algorithm fails."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any, ClassVar

import pytest

from helpers import res, run
from pyattacker.errors import ConfigError
from pyattacker.pool import (
    ALGORITHMS,
    AcquireAlgorithm,
    AcquireRequest,
    Adaptive,
    Backoff,
    Failover,
    Immediate,
    Lease,
    LeastBusy,
    Pool,
    QuotaAware,
    Sticky,
    TaskContext,
    Wait,
    resolve_algorithm,
)
from pyattacker.testing import check_algorithm

# -- resolve_algorithm --------------------------------------------------------------------


def test_resolve_accepts_a_name_a_nested_dict_and_an_instance() -> None:
    assert resolve_algorithm(None) == Wait()
    assert resolve_algorithm("backoff") == Backoff()
    instance = Sticky(then="immediate")
    assert resolve_algorithm(instance) is instance
    nested = resolve_algorithm(
        {
            "name": "failover",
            "pools": ["primary", "backup"],
            "then": {"name": "backoff", "max_wait": 5},
        }
    )
    assert nested == Failover(pools=("primary", "backup"), then=Backoff(max_wait=5))
    assert isinstance(nested, Failover)
    assert nested.then == Backoff(max_wait=5)


def test_an_unknown_name_is_a_config_error_listing_the_known_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_algorithm("fastest")
    assert caught.value.field == "algorithm"
    assert caught.value.hint is not None
    for name in ALGORITHMS:
        assert name in caught.value.hint


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"name": "backoff", "base": 0}, "algorithm.base"),
        ({"name": "backoff", "factor": 0.5}, "algorithm.factor"),
        ({"name": "backoff", "base": 1.0, "cap": 0.5}, "algorithm.cap"),
        ({"name": "backoff", "jitter": "some"}, "algorithm.jitter"),
        ({"name": "backoff", "max_wait": -1}, "algorithm.max_wait"),
        ({"name": "backoff", "retries": 3}, "algorithm.retries"),
        ({"name": "least_busy", "pools": [""]}, "algorithm.pools[0]"),
        ({"name": "least_busy", "timeout": float("nan")}, "algorithm.timeout"),
        ({"name": "failover", "pools": ["a", "a"]}, "algorithm.pools"),
        ({"name": "failover", "then": "nope"}, "algorithm.then"),
        ({"name": "failover", "then": {"name": "nope"}}, "algorithm.then.name"),
        ({"name": "failover", "then": {"jitter": "full"}}, "algorithm.then.name"),
        ({"name": "sticky", "then": {"name": "backoff", "base": -1}}, "algorithm.then.base"),
        ({"name": "quota_aware", "unit": ""}, "algorithm.unit"),
        ({"name": "adaptive", "decrease": 1.0}, "algorithm.decrease"),
        ({"name": "adaptive", "increase": True}, "algorithm.increase"),
        ({"name": "adaptive", "min_limit": 0}, "algorithm.min_limit"),
        (
            {"name": "adaptive", "then": {"name": "sticky", "then": {"name": "wait", "x": 1}}},
            "algorithm.then.then.x",
        ),
        ({"backoff": {}}, "algorithm.name"),
        (42, "algorithm"),
    ],
)
def test_a_bad_spec_is_a_config_error_naming_the_field(spec: Any, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_algorithm(spec)
    assert caught.value.field == field


def test_an_algorithm_built_in_python_names_its_own_parameter() -> None:
    with pytest.raises(ConfigError) as caught:
        Backoff(base=-1.0)
    assert caught.value.field == "backoff.base"
    with pytest.raises(ConfigError) as caught:
        Failover(then={"name": "backoff", "cap": "long"})
    assert caught.value.field == "failover.then.cap"


@pytest.mark.parametrize(
    "algorithm",
    [
        Immediate(),
        Wait(timeout=3.0),
        Backoff(base=0.1, factor=3.0, cap=4.0, jitter="equal", max_wait=9.0),
        LeastBusy(pools=("q", "r"), timeout=2.0),
        Failover(pools=("q",), then=Backoff(jitter="none")),
        Sticky(then=Failover(pools=("q",), then="immediate")),
        QuotaAware(unit="requests", then=LeastBusy(pools=("q",))),
        Adaptive(increase=2.0, decrease=0.25, min_limit=2, then=Sticky()),
    ],
    ids=lambda a: a.name,
)
def test_describe_round_trips_through_resolve(algorithm: AcquireAlgorithm) -> None:
    described = algorithm.describe()
    assert described["name"] == algorithm.name
    assert resolve_algorithm(described) == algorithm
    assert resolve_algorithm(described).describe() == described


def test_precedence_is_call_then_task_then_pool_then_wait() -> None:
    async def main() -> list[str | None]:
        plain = Pool("plain", [res("a", capacity=9)])
        with_default = Pool("default", [res("a", capacity=9)], algorithm="backoff")
        leases = [
            await TaskContext([plain]).acquire_lease(),
            await TaskContext([with_default]).acquire_lease(),
            await TaskContext([with_default], algorithm="sticky").acquire_lease(),
            await TaskContext([with_default], algorithm="sticky").acquire_lease(
                algorithm="immediate"
            ),
        ]
        return [lease.algorithm for lease in leases]

    assert run(main) == ["wait", "backoff", "sticky", "immediate"]


# -- the conformance check ----------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        *sorted(ALGORITHMS),
        {"name": "failover", "pools": ["backup"]},
        {"name": "least_busy", "pools": ["other"]},
        {"name": "sticky", "then": "backoff"},
        {"name": "quota_aware", "then": {"name": "failover", "pools": ["x"], "then": "immediate"}},
        {"name": "adaptive", "then": {"name": "least_busy", "pools": ["y"]}},
    ],
    ids=str,
)
def test_every_builtin_algorithm_passes_the_conformance_check(spec: Any) -> None:
    check_algorithm(spec)


class LeaksALease(AcquireAlgorithm):
    """Broken on purpose: takes a second lease as a 'probe' and forgets it."""

    name: ClassVar[str] = "leaks_a_lease"

    async def acquire(self, request: AcquireRequest) -> Lease:
        request.try_acquire()
        return await Wait().acquire(request)


class IgnoresTheSelector(AcquireAlgorithm):
    """Broken on purpose: leases whatever is least loaded, whatever the caller asked for."""

    name: ClassVar[str] = "ignores_the_selector"

    async def acquire(self, request: AcquireRequest) -> Lease:
        lease = request.pool.try_acquire(owner=request.owner)
        if lease is None:
            raise request.unavailable("nothing free")
        return lease


class ReadsTheWallClock(AcquireAlgorithm):
    """Broken on purpose: decides with real time instead of ``request.clock``."""

    name: ClassVar[str] = "reads_the_wall_clock"

    async def acquire(self, request: AcquireRequest) -> Lease:
        time.monotonic()
        return await Wait().acquire(request)


class UsesTheGlobalRandom(AcquireAlgorithm):
    """Broken on purpose: picks with the module-level random, not ``request.rng``."""

    name: ClassVar[str] = "uses_the_global_random"

    async def acquire(self, request: AcquireRequest) -> Lease:
        ids = sorted(r.id for r in request.pool.resources)
        lease = request.try_acquire(exclude=[random.choice(ids)])
        return lease or await Wait().acquire(request)


class SpinsOnAPacedResource(AcquireAlgorithm):
    """Broken on purpose: while a resource it accepts has room it polls without letting
    time pass, which never ends on a resource that has room but is paced out."""

    name: ClassVar[str] = "spins_on_a_paced_resource"

    async def acquire(self, request: AcquireRequest) -> Lease:
        pool = request.pool

        def room() -> bool:
            return any(
                pool.active_of(r.id) < r.capacity
                for r in pool.resources
                if request.selector.matches(r)
            )

        while room():
            lease = request.try_acquire()
            if lease is not None:
                return lease
            await asyncio.sleep(0)
        return await Wait().acquire(request)


@pytest.mark.parametrize(
    ("broken", "complaint"),
    [
        pytest.param(SpinsOnAPacedResource(), "waits out pacing.*spins", id="spins_on_pacing"),
        pytest.param(LeaksALease(), "holds 2 leases after granting one", id="leaks"),
        pytest.param(IgnoresTheSelector(), "ignored the selector", id="ignores_selector"),
        pytest.param(ReadsTheWallClock(), "read the wall clock", id="wall_clock"),
        pytest.param(UsesTheGlobalRandom(), "same seeds differ", id="global_random"),
    ],
)
def test_a_broken_algorithm_fails_the_conformance_check(
    broken: AcquireAlgorithm, complaint: str
) -> None:
    with pytest.raises(AssertionError, match=complaint):
        check_algorithm(broken)
