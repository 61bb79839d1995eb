"""``PreciseTimer``: the kernel timer the open model sleeps on instead of polling.

Real time on uvloop (the timer exists for real loops only), asserting order and "never
before", never how late: the machine is shared.
"""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from pyattacker.clock import PreciseTimer
from pyattacker.testing import run_virtual

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timerfd: Linux")
uvloop = pytest.importorskip("uvloop")


def test_a_waiter_is_never_woken_before_its_instant() -> None:
    async def early_wakes() -> list[float]:
        timer = PreciseTimer.open(asyncio.get_running_loop())
        assert timer is not None
        early = []
        try:
            for gap in (0.0, 0.00005, 0.0003, 0.0011, 0.0025) * 4:
                deadline = time.monotonic() + gap
                await timer.at(deadline)
                if (now := time.monotonic()) < deadline:
                    early.append(deadline - now)
        finally:
            timer.close()
        return early

    assert uvloop.run(early_wakes()) == []


def test_waiters_set_out_of_order_wake_in_the_order_of_their_instants() -> None:
    async def order() -> list[int]:
        timer = PreciseTimer.open(asyncio.get_running_loop())
        assert timer is not None
        woken: list[int] = []
        base = time.monotonic() + 0.002
        gaps = [0.003, 0.001, 0.002, 0.0, 0.001]  # a tie keeps the order set in

        async def wait(i: int, gap: float) -> None:
            await timer.at(base + gap)
            woken.append(i)

        try:
            await asyncio.gather(*(wait(i, gap) for i, gap in enumerate(gaps)))
        finally:
            timer.close()
        return woken

    assert uvloop.run(order()) == [3, 1, 4, 2, 0]


def test_a_cancelled_waiter_does_not_hold_up_the_ones_after_it() -> None:
    async def main() -> bool:
        timer = PreciseTimer.open(asyncio.get_running_loop())
        assert timer is not None
        try:
            first = timer.at(time.monotonic() + 0.001)
            second = timer.at(time.monotonic() + 0.002)
            first.cancel()
            await second
            return second.done() and not second.cancelled()
        finally:
            timer.close()

    assert uvloop.run(main()) is True


def test_closing_the_timer_cancels_what_still_waits_and_is_idempotent() -> None:
    async def main() -> bool:
        timer = PreciseTimer.open(asyncio.get_running_loop())
        assert timer is not None
        pending = timer.at(time.monotonic() + 3600.0)
        timer.close()
        timer.close()
        return pending.cancelled()

    assert uvloop.run(main()) is True


def test_no_timer_is_made_for_a_simulated_loop() -> None:
    async def main() -> PreciseTimer | None:
        return PreciseTimer.open(asyncio.get_running_loop())

    assert run_virtual(main()) is None


@pytest.mark.slow
def test_an_open_model_attack_sleeping_on_the_timer_sends_nothing_before_its_time() -> None:
    from pyattacker.attack import AttackPlan, AttackResult, OpenModel, attack
    from pyattacker.measure import RequestRecord
    from pyattacker.servers import EchoServer

    records: list[RequestRecord] = []

    async def main() -> AttackResult:
        async with EchoServer(delay="fixed:1ms") as server:
            plan = AttackPlan.build([server.url + "/"], OpenModel(rate=400), duration=0.5)
            return await attack(plan, on_record=records.append)

    result = uvloop.run(main())
    assert result.scheduled == result.sent == len(records) == 200
    assert result.total.early_sends == 0
    assert all(r.attempts[0].sent >= r.attempts[0].scheduled for r in records)
    # the schedule itself is exact: arrival k at k / 400 s after the first
    first = min(r.attempts[0].scheduled for r in records)
    offsets = sorted(r.attempts[0].scheduled - first for r in records)
    assert offsets == pytest.approx([k / 400 for k in range(200)], abs=1e-9)
