"""The virtual-time loop as the benchmark uses it: hand-computed timelines.

Time moves only when nothing is runnable, and then straight to the earliest timer, which is
due exactly. So 32 concurrent one-second sleeps end at 1.0 (not 32.0, which is what a fake
clock that advances inside the sleeper would give), a coroutine that is still working holds
time back, and yielding alone never moves time and never hangs.
"""

from __future__ import annotations

import asyncio

import pytest

from pyattacker.errors import SimulationStalled
from pyattacker.testing import run_virtual

Log = list[tuple[str, float]]


def _now() -> float:
    return asyncio.get_running_loop().time()


def test_thirty_two_concurrent_one_second_sleeps_leave_the_clock_at_one() -> None:
    async def main() -> tuple[list[float], float]:
        ends: list[float] = []

        async def sleeper() -> None:
            await asyncio.sleep(1.0)
            ends.append(_now())

        await asyncio.gather(*(sleeper() for _ in range(32)))
        return ends, _now()

    ends, final = run_virtual(main(), wall_budget_s=10.0)
    assert ends == [1.0] * 32
    assert final == 1.0


def test_timers_fire_in_deadline_order_while_a_working_worker_holds_time_back() -> None:
    """Timeline, by hand: the sleepers are scheduled 3, 1, 2 (out of order) and fire at 1,
    2, 3. The worker yields 200 times first: all of that happens at 0.0, before any timer
    fires. It then sleeps 1.5 (so it wakes between the 1 s and 2 s timers) and works again,
    still at 1.5, before the 2 s timer fires."""

    async def main() -> Log:
        log: Log = []

        async def sleeper(name: str, delay: float) -> None:
            await asyncio.sleep(delay)
            log.append((name, _now()))

        async def worker() -> None:
            for _ in range(200):
                await asyncio.sleep(0)
                log.append(("work", _now()))
            log.append(("worker parks", _now()))
            await asyncio.sleep(1.5)
            for _ in range(50):
                await asyncio.sleep(0)
                log.append(("work", _now()))
            log.append(("worker done", _now()))

        await asyncio.gather(sleeper("t3", 3.0), sleeper("t1", 1.0), sleeper("t2", 2.0), worker())
        return log

    log = run_virtual(main(), wall_budget_s=10.0)
    compact = [entry for entry in log if entry[0] != "work"]
    assert compact == [
        ("worker parks", 0.0),
        ("t1", 1.0),
        ("worker done", 1.5),
        ("t2", 2.0),
        ("t3", 3.0),
    ]
    work_times = [t for name, t in log if name == "work"]
    assert work_times == [0.0] * 200 + [1.5] * 50


def test_pure_yields_never_move_time_and_never_hang() -> None:
    async def main() -> tuple[float, int]:
        spins = 0

        async def spinner(n: int) -> None:
            nonlocal spins
            for _ in range(n):
                await asyncio.sleep(0)
                spins += 1

        await asyncio.gather(*(spinner(2_500) for _ in range(4)))
        return _now(), spins

    now, spins = run_virtual(main(), wall_budget_s=10.0)
    assert spins == 10_000
    assert now == 0.0


def test_pure_yields_alongside_a_timer_still_do_not_move_time_until_they_stop() -> None:
    async def main() -> Log:
        log: Log = []

        async def sleeper() -> None:
            await asyncio.sleep(0.25)
            log.append(("timer", _now()))

        async def spinner() -> None:
            for _ in range(1_000):
                await asyncio.sleep(0)
            log.append(("spinner done", _now()))

        await asyncio.gather(sleeper(), spinner())
        return log

    assert run_virtual(main(), wall_budget_s=10.0) == [("spinner done", 0.0), ("timer", 0.25)]


def test_a_timeout_fires_at_its_simulated_instant() -> None:
    """What an acquisition timeout rests on: ``asyncio.wait_for`` deadlines are timers of
    the virtual loop like any other, so they fire at the exact simulated instant."""

    async def main() -> float:
        never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(never, 2.5)
        return _now()

    assert run_virtual(main(), wall_budget_s=10.0) == 2.5


def test_a_wait_nothing_can_end_is_reported_instead_of_hanging() -> None:
    async def main() -> None:
        await asyncio.get_running_loop().create_future()

    with pytest.raises(SimulationStalled):
        run_virtual(main(), wall_budget_s=10.0)
