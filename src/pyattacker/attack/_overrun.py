"""An attack's wall time is bounded: by its schedule's end, then by one request timeout.

Open-model arrivals are generated lazily, one at a time. At a rate the machine cannot
keep, the generator falls behind its schedule, sending late (each lateness recorded) or
dropping at ``max_in_flight``. Dispatching every arrival of the plan anyway would make a
short plan at an impossible rate run many times its duration. So, once the schedule's end
has passed, the arrivals still ahead of the generator can no longer start in time: the
engine stops generating and :func:`drop_rest` counts them as dropped (the open model's
rule: counted, never skipped silently), in bulk and window by window, each with the
message :data:`OVERRUN`. Their number is exact for evenly spaced arrivals (arrival ``k``
is at ``Λ⁻¹(k)``, see ``_load.py``) and the expected one, rounded up, for Poisson
arrivals, which are random.

After the schedule, what is in flight gets one request timeout (``timeouts.total``) to end;
then the engine stops (:data:`DRAIN_STOP`) and counts what still runs as cancelled. So an
attack with a duration and a total timeout ends by ``duration + timeout`` (plus a loop
turn), whatever the server does or how many requests wait for a connection.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable

from pyattacker.attack._load import OpenModel, share_below
from pyattacker.attack._plan import AttackPlan
from pyattacker.attack._result import DRAIN_STOP
from pyattacker.attack._tally import Tally

__all__ = ["DRAIN_STOP", "OVERRUN", "bound_wall_time", "drain_limit", "drop_rest", "schedule_end"]

OVERRUN = "dropped: the load generator could not start it before the schedule ended"


def schedule_end(plan: AttackPlan) -> float:
    """Seconds from the start at which ``plan``'s open-model schedule ends (inf if never:
    a constant rate bounded by a number of requests only)."""
    assert isinstance(plan.load, OpenModel)
    ends = [end for end in (plan.duration, plan.load.duration) if end is not None]
    return min(ends, default=math.inf)


def drain_limit(plan: AttackPlan) -> float | None:
    """How long requests may run on once the schedule has ended: the total timeout, if
    the plan has one and a duration (a plan of N requests has no end time to bound)."""
    bounded = plan.duration is not None or (
        isinstance(plan.load, OpenModel) and plan.load.duration is not None
    )
    return plan.timeouts.total if bounded else None


def bound_wall_time(
    plan: AttackPlan,
    start: float,
    wait_until: Callable[[float], Awaitable[None]],
    stop: Callable[[str], None],
) -> asyncio.Future[None]:
    """A task that calls ``stop(DRAIN_STOP)`` at ``start`` + the schedule's end + the total
    timeout (see :func:`drain_limit`), waiting with ``wait_until`` (the engine's clock);
    cancel it when the run ends. A finished future when the plan has no such bound."""
    limit = drain_limit(plan)
    if limit is None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done
    end = schedule_end(plan) if isinstance(plan.load, OpenModel) else plan.duration
    assert end is not None  # drain_limit: a closed model has a duration here

    async def watch() -> None:
        await wait_until(start + end + limit)
        stop(DRAIN_STOP)

    return asyncio.get_running_loop().create_task(watch())


def drop_rest(
    tally: Tally,
    plan: AttackPlan,
    n: int,
    offset: float,
    start: float,
    *,
    part: tuple[int, int] = (0, 1),
    run: int = 1,
) -> None:
    """Count as dropped every arrival from number ``n`` (at ``offset`` s) to the end of
    ``plan``'s schedule (and at most ``plan.requests`` in all), in ``tally``'s windows;
    ``start`` is the run's origin on the engine's clock. A worker's ``part`` (index, n)
    counts only its share: the arrivals :meth:`OpenModel.numbered` gives it (runs of
    ``run`` in turn)."""
    load = plan.load
    assert isinstance(load, OpenModel)
    end = schedule_end(plan)
    left = math.inf if plan.requests is None else plan.requests - n
    base = load.planned(offset)
    width = plan.window
    counted = 0
    index = int(offset / width)
    while left > counted and index * width < end:
        bound = min((index + 1) * width, end)
        # arrivals in [offset, bound): Λ(bound) - Λ(offset), up to float noise; an integer
        # for even spacing (arrival k at Λ⁻¹(k)), the expectation for Poisson
        due = min(math.ceil(load.planned(bound) - base - 1e-9), left)
        if due > counted:
            at = start + max(offset, index * width)
            share = _share(n + counted, n + int(due), part, run)
            if share:
                tally.dropped(at, share, OVERRUN)
            counted = int(due)
        index += 1


def _share(first: int, end: int, part: tuple[int, int], run: int) -> int:
    """How many of the arrivals numbered ``first`` to ``end - 1`` are this worker's."""
    return share_below(end, part, run) - share_below(first, part, run)
