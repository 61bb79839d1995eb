"""An attack's wall time is bounded by its schedule's end plus one request timeout.

On virtual time. A generator that takes time per arrival is a clock whose every read
costs ``cost`` seconds: the schedule then runs ahead of it, as it does of a real one at
a rate beyond the machine.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pyattacker.attack import AttackPlan, Engine, OpenModel, Target
from pyattacker.attack._overrun import DRAIN_STOP, OVERRUN
from pyattacker.clock import LoopClock
from pyattacker.http import Timeouts
from pyattacker.measure import Attempt
from pyattacker.testing import run_virtual

URL = "http://127.0.0.1:9/"


class CostlyClock:
    """The loop's virtual time, plus ``cost`` seconds for every read."""

    def __init__(self, cost: float) -> None:
        self.cost = cost
        self.spent = 0.0

    def now(self) -> float:
        self.spent += self.cost
        return asyncio.get_running_loop().time() + self.spent

    async def sleep(self, seconds: float) -> None:
        await LoopClock().sleep(seconds)

    def reader(self) -> Callable[[], float]:
        return self.now  # every read pays the cost


class Server:
    """Answers every request after ``latency`` seconds, stamped on ``clock``."""

    def __init__(self, latency: float, clock: CostlyClock | LoopClock | None = None) -> None:
        self.latency = latency
        self.clock = clock or LoopClock()
        self.calls = 0

    async def send(self, target: Target, attempt: Attempt) -> None:
        attempt.sent = self.clock.now()
        self.calls += 1
        await LoopClock().sleep(self.latency)
        attempt.first_byte = attempt.end = self.clock.now()
        attempt.status = 200


def test_arrivals_a_slow_generator_cannot_start_by_the_schedules_end_are_dropped_and_counted() -> (
    None
):
    # 100,000/s for 2 s, from a generator that spends 100 µs a clock read: it reaches a
    # few thousand arrivals a second. Before: it dispatched all 200,000, for ~20-40 s.
    plan = AttackPlan.build(
        [URL], OpenModel(rate=100_000), duration=2.0, timeouts=Timeouts(total=1.0)
    )
    clock = CostlyClock(cost=100e-6)
    server = Server(latency=0.01, clock=clock)
    ended: list[float] = []

    async def main():  # type: ignore[no-untyped-def]
        result = await Engine(plan, server, clock=clock).run()
        ended.append(asyncio.get_running_loop().time())
        return result

    result = run_virtual(main())
    assert ended[0] <= 2.0 + 1.0  # the loop's time: the generator's own cost left out
    assert result.scheduled == 200_000  # every planned arrival, counted
    assert result.total.requests == 200_000
    assert sum(w.scheduled for w in result.windows) == 200_000
    assert sum(w.dropped for w in result.windows) == result.dropped
    overrun = {g.key: g.count for g in result.errors}
    assert overrun.get(OVERRUN, 0) > 150_000  # most were never reached
    assert result.total.by_outcome["ok"] == server.calls  # what was sent was answered
    assert result.stop_reason is None


def test_requests_still_running_a_timeout_after_the_schedule_are_cancelled_and_counted() -> None:
    # A server that never answers (within the test), and a sender that does not time out
    # by itself: the attack still ends at duration + timeout.
    plan = AttackPlan.build([URL], OpenModel(rate=100), duration=2.0, timeouts=Timeouts(total=1.5))
    server = Server(latency=1e6)

    async def main():  # type: ignore[no-untyped-def]
        return await Engine(plan, server).run()

    result = run_virtual(main())
    assert result.elapsed == 2.0 + 1.5
    assert result.stop_reason == DRAIN_STOP
    assert result.scheduled == 200
    assert result.total.by_outcome == {"cancelled": 200}


def test_a_backlog_waiting_for_one_connection_does_not_outlive_the_timeout() -> None:
    # 200 arrivals queue for one connection held 0.5 s a request: draining them took 100 s
    plan = AttackPlan.build(
        [URL], OpenModel(rate=100), duration=2.0, connections=1, timeouts=Timeouts(total=0.9)
    )

    async def main():  # type: ignore[no-untyped-def]
        return await Engine(plan, Server(latency=0.5)).run()

    result = run_virtual(main())
    assert result.elapsed == 2.9
    assert result.total.by_outcome == {"ok": 5, "cancelled": 195}


def test_a_plan_of_n_requests_without_a_duration_has_no_drain_bound() -> None:
    plan = AttackPlan.build([URL], OpenModel(rate=100), requests=3, timeouts=Timeouts(total=1.0))

    async def main():  # type: ignore[no-untyped-def]
        return await Engine(plan, Server(latency=5.0)).run()

    result = run_virtual(main())
    assert result.total.by_outcome == {"ok": 3}
    assert result.stop_reason is None
