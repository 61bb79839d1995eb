"""``LagProbe`` on virtual time, where the loop is never late: the probe's pace and what it
records are exact. How late a real, busy loop runs is what it measures on a real attack
(tests/test_attack_accuracy.py checks that a blocked loop shows in the report)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from pyattacker.attack._lag import LagProbe
from pyattacker.attack._time import loop_call_at
from pyattacker.testing import run_virtual


def test_a_probe_fires_every_period_and_records_zero_lag_on_a_loop_that_is_never_late() -> None:
    async def main() -> tuple[int, float | None]:
        loop = asyncio.get_running_loop()
        probe = LagProbe(loop.call_at, loop.time, every=0.01)
        probe.start()
        await asyncio.sleep(0.505)
        probe.stop()
        await asyncio.sleep(1.0)  # a stopped probe records nothing more
        return probe.lag.count, probe.lag.max

    assert run_virtual(main()) == (50, 0.0)


def test_a_probe_on_another_clocks_instants_keeps_its_pace_on_the_loops_timer() -> None:
    # loop_call_at turns the probe's instants (read on ``now``'s clock, here 100 s ahead
    # of the loop's) into the loop's: still every 10 ms, and never late.
    async def main() -> tuple[int, float | None]:
        loop = asyncio.get_running_loop()

        def now() -> float:
            return loop.time() + 100.0

        probe = LagProbe(loop_call_at(loop, now), now, every=0.01)
        probe.start()
        await asyncio.sleep(0.505)
        probe.stop()
        return probe.lag.count, probe.lag.max

    assert run_virtual(main()) == (50, 0.0)


def test_a_probe_records_how_late_the_loop_served_each_instant() -> None:
    # A loop that calls every callback 3 ms after it was due: every firing is 3 ms late,
    # and the grid stays put (due at 10, 20, 30, 40 ms: four firings in 45 ms).
    async def main() -> tuple[int, float | None, float | None]:
        loop = asyncio.get_running_loop()

        def late_call_at(deadline: float, callback: Callable[[], object]) -> asyncio.TimerHandle:
            return loop.call_at(deadline + 0.003, callback)

        probe = LagProbe(late_call_at, loop.time, every=0.01)
        probe.start()
        await asyncio.sleep(0.045)
        probe.stop()
        return probe.lag.count, probe.lag.min, probe.lag.max

    count, least, most = run_virtual(main())
    assert count == 4
    assert least == pytest.approx(0.003, abs=1e-12)
    assert most == pytest.approx(0.003, abs=1e-12)


def test_a_stalled_loop_records_every_instant_it_missed_with_its_own_lateness() -> None:
    # The instant due at 20 ms is served only at 45 ms (a stall): the instants due at 20,
    # 30 and 40 ms are recorded together, each with the time it waited (25, 15, 5 ms), as
    # reads arriving at random moments of the stall would have waited, rather than one
    # sample for the whole stall. Then the grid goes on: 50 and 60 ms, on time.
    async def main() -> tuple[list[tuple[float, int]], float]:
        loop = asyncio.get_running_loop()
        delays = iter([0.0, 0.025])

        def stalling_call_at(
            deadline: float, callback: Callable[[], object]
        ) -> asyncio.TimerHandle:
            return loop.call_at(deadline + next(delays, 0.0), callback)

        probe = LagProbe(stalling_call_at, loop.time, every=0.01)
        probe.start()
        await asyncio.sleep(0.065)
        probe.stop()
        # Each bucket's upper edge (the histogram keeps values to a tenth of a percent).
        return [(high, count) for _, high, count in probe.lag.buckets()], probe.take_recent()

    lags, recent = run_virtual(main())
    assert [count for _, count in lags] == [3, 1, 1, 1]
    assert [high for high, _ in lags] == pytest.approx([0.0, 0.005, 0.015, 0.025], abs=1e-5)
    assert recent == pytest.approx(0.025, abs=1e-9)
