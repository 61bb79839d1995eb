"""``Clock.reader()``: every shipped clock hands out a function that reads what ``now()`` does.

Hot paths (the attack engine, the HTTP client, the runner) take a clock's reader once per
run and call it per request, so a reader that drifted from ``now()`` would put their
timestamps on another clock than everybody else's.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from pyattacker.clock import Clock, LoopClock
from pyattacker.testing import ScaledClock, VirtualClock, run_virtual


def test_every_shipped_clock_is_a_clock_with_a_reader() -> None:
    for clock in (LoopClock(), VirtualClock(), ScaledClock()):
        assert isinstance(clock, Clock)
        assert callable(clock.reader)


def test_a_loop_clock_reader_on_a_virtual_loop_follows_the_virtual_time() -> None:
    async def main() -> list[float]:
        clock = LoopClock()
        read = clock.reader()
        seen = [read(), clock.now()]
        await asyncio.sleep(2.5)  # virtual: the reader moves with the loop
        return [*seen, read(), clock.now()]

    assert run_virtual(main(), start=7.0) == [7.0, 7.0, 9.5, 9.5]


def test_a_loop_clock_reader_outside_any_loop_is_the_real_monotonic_clock() -> None:
    assert LoopClock().reader() is time.monotonic


def test_a_virtual_clock_reader_reads_its_own_loop_inside_run() -> None:
    clock = VirtualClock(start=3.0)

    async def main() -> list[float]:
        read = clock.reader()
        first = read()
        await clock.sleep(1.25)
        return [first, read(), clock.now()]

    assert clock.run(main()) == [3.0, 4.25, 4.25]


def test_a_virtual_clock_reader_outside_run_refuses_as_now_does() -> None:
    clock = VirtualClock()
    with pytest.raises(RuntimeError):
        clock.now()
    with pytest.raises(RuntimeError):
        clock.reader()
