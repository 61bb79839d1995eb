"""One acquisition through an algorithm: the checks made before anything waits, and the call.

Shared by ``Pool.acquire`` (a lease nobody else keeps track of) and ``TaskContext`` (a
lease the attempt's context owns, and reclaims if the task forgets it). Both check their
arguments with :func:`checked` when the call is made, so bad input raises ``ConfigError``
before anything is waited for, and acquire with :func:`acquire_through`, which builds the
``AcquireRequest`` the algorithm sees and notes how long the acquisition waited.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

from pyattacker._checks import check_number
from pyattacker.clock import Clock
from pyattacker.pool._algorithms import (
    AcquireAlgorithm,
    AcquireRequest,
    AlgorithmSpec,
    check_timeout,
    resolve_algorithm,
)
from pyattacker.pool._lease import Lease, LeaseOwner
from pyattacker.pool._resource import Resource
from pyattacker.pool._selector import Selector

if TYPE_CHECKING:  # the pool calls this module; it needs the Pool type only
    from pyattacker.pool._pool import Pool

__all__ = ["acquire_through", "checked"]


def checked(
    pool: Pool,
    spec: AlgorithmSpec | None,
    fallback: AcquireAlgorithm | None,
    timeout: float | None,
    where: Callable[[Resource], bool] | None,
    selector: dict[str, Any],
    tokens: float | None,
) -> tuple[AcquireAlgorithm, Selector]:
    """The algorithm and selector of an acquire from ``pool``, or ``ConfigError``.

    The algorithm is ``spec`` when given, else ``fallback`` (a task's), else the pool's,
    else ``Wait()``."""
    if spec is not None:
        chosen = resolve_algorithm(spec)
    else:
        chosen = fallback or pool.algorithm or resolve_algorithm(None)
    if timeout is not None:
        check_timeout(timeout, "timeout")
    wanted = Selector.build(where, **selector)
    pool.check_selector(wanted)
    if tokens is not None:
        check_number(tokens, "tokens", at_least=0, hint="the tokens the call is expected to spend")
    return chosen, wanted


async def acquire_through(
    algorithm: AcquireAlgorithm,
    pool: Pool,
    selector: Selector,
    timeout: float | None,
    tokens: float | None,
    *,
    rng: random.Random,
    clock: Clock,
    pools: Mapping[str, Pool],
    affinity: MutableMapping[str, str],
    owner: LeaseOwner | None,
) -> Lease:
    """A lease from ``pool`` through ``algorithm``; the wait is noted in the pool's
    statistics."""
    started = clock.now()
    request = AcquireRequest(
        pool=pool,
        selector=selector,
        timeout=timeout,
        rng=rng,
        clock=clock,
        pools=pools,
        affinity=affinity,
        owner=owner,
        algorithm=algorithm.name,
        started=started,
        tokens=tokens,
    )
    lease = await algorithm.acquire(request)
    lease.pool.record_wait(lease.acquired_at - started)
    return lease
