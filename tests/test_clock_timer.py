"""``PreciseTimer``: the kernel timer the open model sleeps on instead of polling (its
schedule is called back by ``call_at``; other waits await ``at``).

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


def test_callbacks_are_called_in_the_order_of_their_instants_and_a_cancelled_one_never() -> None:
    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        timer = PreciseTimer.open(loop)
        assert timer is not None
        called: list[str] = []
        last = loop.create_future()
        base = time.monotonic() + 0.002
        try:
            timer.call_at(base + 0.002, lambda: called.append("c"))
            dropped = timer.call_at(base + 0.001, lambda: called.append("dropped"))
            timer.call_at(base, lambda: called.append("a"))
            timer.call_at(base + 0.003, lambda: last.set_result(None))
            dropped.cancel()
            await last
        finally:
            timer.close()
        return called

    assert uvloop.run(main()) == ["a", "c"]


def test_a_callback_that_raises_is_reported_and_the_ones_due_with_it_still_run() -> None:
    async def main() -> tuple[list[str], list[str]]:
        loop = asyncio.get_running_loop()
        reported: list[str] = []
        loop.set_exception_handler(lambda _, context: reported.append(context["message"]))
        timer = PreciseTimer.open(loop)
        assert timer is not None
        called: list[str] = []
        done = loop.create_future()
        deadline = time.monotonic() + 0.001

        def boom() -> None:
            raise RuntimeError("a bug of the caller's")

        try:
            timer.call_at(deadline, boom)
            timer.call_at(deadline, lambda: called.append("after"))
            timer.call_at(deadline + 0.001, lambda: done.set_result(None))
            await done
        finally:
            timer.close()
        return called, reported

    assert uvloop.run(main()) == (["after"], ["a PreciseTimer callback failed"])


def test_a_callback_may_set_the_timer_again_from_inside_its_call() -> None:
    async def main() -> tuple[int, bool]:
        loop = asyncio.get_running_loop()
        timer = PreciseTimer.open(loop)
        assert timer is not None
        done = loop.create_future()
        calls = 0
        early = False

        def again(deadline: float) -> None:
            nonlocal calls, early
            calls += 1
            early = early or time.monotonic() < deadline
            if calls == 50:
                done.set_result(None)
            else:
                nxt = time.monotonic() + 0.0002
                timer.call_at(nxt, lambda: again(nxt))

        first = time.monotonic()
        try:
            timer.call_at(first, lambda: again(first))
            await done
        finally:
            timer.close()
        return calls, early

    assert uvloop.run(main()) == (50, False)


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
            # 200 requests, not 0.5 s: a plan with an end drops what a host stall made
            # too late to start, and this test is about when requests go out, not that
            plan = AttackPlan.build([server.url + "/"], OpenModel(rate=400), requests=200)
            return await attack(plan, on_record=records.append)

    result = uvloop.run(main())
    assert result.scheduled == result.sent == len(records) == 200
    assert result.total.early_sends == 0
    assert all(r.attempts[0].sent >= r.attempts[0].scheduled for r in records)
    # the schedule itself is exact: arrival k at k / 400 s after the first
    first = min(r.attempts[0].scheduled for r in records)
    offsets = sorted(r.attempts[0].scheduled - first for r in records)
    assert offsets == pytest.approx([k / 400 for k in range(200)], abs=1e-9)


@pytest.mark.parametrize("loop", ["uvloop", "virtual"])
def test_a_bug_in_starting_a_request_is_the_attacks_error_whichever_way_the_schedule_waits(
    loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On uvloop the kernel timer calls the schedule back; on the virtual loop a coroutine
    # awaits each instant: either way the error ends the run as itself.
    from pyattacker.attack import AttackPlan, OpenModel, attack
    from pyattacker.attack._dispatch import DirectDispatcher, TaskDispatcher

    started = 0

    def broken(self: object, n: int, scheduled: float) -> None:
        nonlocal started
        started += 1
        if started == 3:
            raise RuntimeError("a bug of ours")

    monkeypatch.setattr(DirectDispatcher, "start", broken)
    monkeypatch.setattr(TaskDispatcher, "start", broken)

    async def main() -> None:  # (the broken start sends nothing: no server needed)
        await attack(AttackPlan.build(["http://127.0.0.1:9/"], OpenModel(rate=200), duration=0.5))

    with pytest.raises(RuntimeError, match="a bug of ours"):
        uvloop.run(main()) if loop == "uvloop" else run_virtual(main())
    assert started == 3
