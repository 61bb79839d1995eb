"""``LagProbe`` on virtual time, where the loop is never late: the probe's pace and what it
records are exact. How late a real, busy loop runs is what it measures on a real attack
(tests/test_attack_accuracy.py checks that a blocked loop shows in the report)."""

from __future__ import annotations

import asyncio

import pytest

from pyattacker.attack._lag import LagProbe
from pyattacker.testing import run_virtual


def test_a_probe_fires_every_period_and_records_zero_lag_on_a_loop_that_is_never_late() -> None:
    async def main() -> tuple[int, float | None]:
        loop = asyncio.get_running_loop()
        probe = LagProbe(loop, loop.time, every=0.01)
        probe.start()
        await asyncio.sleep(0.505)
        probe.stop()
        await asyncio.sleep(1.0)  # a stopped probe records nothing more
        return probe.lag.count, probe.lag.max

    assert run_virtual(main()) == (50, 0.0)


def test_a_probe_records_how_late_its_clock_says_it_ran() -> None:
    # The probe reads lateness off the clock it is given: one that reads 3 ms later at
    # every firing than when the firing was armed makes each firing 3 ms late.
    async def main() -> tuple[int, float | None, float | None]:
        loop = asyncio.get_running_loop()
        readings = 0

        def now() -> float:  # read once to arm, once to fire, in turn
            nonlocal readings
            readings += 1
            return loop.time() + (0.003 if readings % 2 == 0 else 0.0)

        probe = LagProbe(loop, now, every=0.01)
        probe.start()
        await asyncio.sleep(0.045)
        probe.stop()
        return probe.lag.count, probe.lag.min, probe.lag.max

    count, least, most = run_virtual(main())
    assert count == 4
    assert least == pytest.approx(0.003, abs=1e-12)
    assert most == pytest.approx(0.003, abs=1e-12)
