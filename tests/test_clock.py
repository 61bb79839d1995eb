"""The virtual-time and scaled loops of `pyattacker.testing`, timelines pinned to the float.

Nothing here sleeps for real except the ScaledClock tests, which take tens of milliseconds
and assert on real time only loosely.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import now as _now
from pyattacker import testing
from pyattacker.clock import Clock, LoopClock, is_simulated, wall_time
from pyattacker.errors import WallBudgetExceeded
from pyattacker.testing import ScaledClock, VirtualClock, VirtualEventLoop, run_virtual

Log = list[tuple[str, float]]


async def _sleep_then_log(log: Log, name: str, delay: float) -> None:
    await asyncio.sleep(delay)
    log.append((name, _now()))


# ---------------------------------------------------------------------------- the exports


def test_testing_exports_the_clocks_loops_and_runner_in_a_sorted_all() -> None:
    public = {"ScaledClock", "ScaledEventLoop", "VirtualClock", "VirtualEventLoop", "run_virtual"}
    assert public <= set(testing.__all__)
    assert testing.__all__ == sorted(testing.__all__)
    assert all(hasattr(testing, name) for name in testing.__all__)


# ------------------------------------------------------------------ timelines, exactly


def test_thirty_two_concurrent_one_second_sleeps_all_end_at_one_second() -> None:
    async def main() -> tuple[list[float], float]:
        ends: list[float] = []

        async def sleeper() -> None:
            await asyncio.sleep(1)
            ends.append(_now())

        await asyncio.gather(*(sleeper() for _ in range(32)))
        return ends, _now()

    ends, final = run_virtual(main())
    assert ends == [1.0] * 32
    assert final == 1.0


def test_timers_fire_in_deadline_order_and_ties_in_scheduling_order() -> None:
    log: Log = []

    async def main() -> None:
        await asyncio.gather(
            _sleep_then_log(log, "c", 3.0),
            _sleep_then_log(log, "a", 0.5),
            _sleep_then_log(log, "b1", 1.25),
            _sleep_then_log(log, "b2", 1.25),
        )

    run_virtual(main())
    assert log == [("a", 0.5), ("b1", 1.25), ("b2", 1.25), ("c", 3.0)]


def test_time_stands_still_while_another_task_is_working() -> None:
    log: Log = []

    async def worker() -> None:
        for _ in range(1_000):  # "work": runnable the whole time, so no timer may fire
            await asyncio.sleep(0)
        log.append(("worked", _now()))
        await _sleep_then_log(log, "worker slept", 1.0)

    async def main() -> None:
        await asyncio.gather(_sleep_then_log(log, "sleeper", 0.5), worker())

    run_virtual(main())
    assert log == [("worked", 0.0), ("sleeper", 0.5), ("worker slept", 1.0)]


def test_pure_yields_never_move_time_and_never_hang() -> None:
    async def main() -> float:
        for _ in range(10_000):
            await asyncio.sleep(0)
        return _now()

    assert run_virtual(main(), start=5.0) == 5.0


def test_wait_for_times_out_at_exactly_its_deadline() -> None:
    async def main() -> float:
        never_set = asyncio.get_running_loop().create_future()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(never_set, timeout=5)
        return _now()

    assert run_virtual(main()) == 5.0


def test_asyncio_timeout_expires_at_exactly_its_deadline() -> None:
    async def main() -> float:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(2.5):
                await asyncio.sleep(60)
        return _now()

    assert run_virtual(main(), start=100.0) == 102.5


def test_the_start_offset_is_the_first_reading_of_the_clock() -> None:
    async def main() -> list[float]:
        first = _now()
        await asyncio.sleep(0.25)
        return [first, _now()]

    assert run_virtual(main(), start=1_000.0) == [1_000.0, 1_000.25]


def test_a_timer_three_days_away_is_reached_exactly_in_24_hour_steps() -> None:
    async def main() -> float:
        await asyncio.sleep(3 * 86_400 + 0.5)
        return _now()

    assert run_virtual(main()) == 259_200.5


def test_timers_stay_exact_where_a_nanosecond_is_below_float_resolution() -> None:
    start = 1e12  # the spacing of floats here is ~1e-4 s, far above asyncio's 1e-9 margin

    async def main() -> list[float]:
        await asyncio.sleep(1.0)
        first = _now()
        await asyncio.sleep(0.5)
        return [first, _now()]

    assert run_virtual(main(), start=start) == [start + 1.0, start + 1.0 + 0.5]


@given(
    delays=st.lists(st.floats(min_value=0, max_value=1e7, allow_nan=False), max_size=25),
    start=st.floats(min_value=-1e6, max_value=1e9, allow_nan=False),
)
def test_concurrent_sleeps_end_in_deadline_order_at_exactly_their_deadlines(
    delays: list[float], start: float
) -> None:
    log: Log = []

    async def main() -> float:
        await asyncio.gather(*(_sleep_then_log(log, str(i), d) for i, d in enumerate(delays)))
        return _now()

    final = run_virtual(main(), start=start)
    deadlines = [start + d for d in delays]  # what loop.call_later computes, to the bit
    # Ties go in start order (sorted() is stable), except that sleep(0) is a plain yield,
    # not a timer: it resumes before a timer whose deadline rounded down to `start`.
    order = sorted(range(len(delays)), key=lambda i: (deadlines[i], delays[i] > 0))
    assert log == [(str(i), deadlines[i]) for i in order]
    assert final == max(deadlines, default=start)


# ------------------------------------------------------------------- the Clock protocol


def test_loop_clock_reads_and_sleeps_on_the_virtual_loop() -> None:
    async def main() -> list[float]:
        clock = LoopClock()
        first = clock.now()
        await clock.sleep(2.0)
        return [first, clock.now()]

    assert run_virtual(main(), start=42.0) == [42.0, 44.0]


def test_loop_clock_resolves_below_a_millisecond_under_uvloop() -> None:
    # uvloop's own loop.time() is a millisecond counter cached per iteration; timestamps
    # of a measurement must not inherit that grid.
    uvloop = pytest.importorskip("uvloop")

    async def two_readings_around_a_busy_wait() -> tuple[float, float]:
        clock = LoopClock()
        first = clock.now()
        while (second := clock.now()) == first:
            pass
        return first, second

    first, second = uvloop.run(two_readings_around_a_busy_wait())
    assert 0 < second - first < 0.0005


def test_sleep_until_never_returns_before_its_deadline_on_uvloop() -> None:
    # uvloop's timers fire up to ~1 ms early; sleep_until must not pass that on.
    uvloop = pytest.importorskip("uvloop")

    async def early_returns() -> list[float]:
        clock = LoopClock()
        early = []
        for gap in (0.0003, 0.0011, 0.0025, 0.004) * 5:
            deadline = clock.now() + gap
            await clock.sleep_until(deadline)
            if (now := clock.now()) < deadline:
                early.append(deadline - now)
        return early

    assert uvloop.run(early_returns()) == []


def test_sleep_until_is_exact_on_the_virtual_loop() -> None:
    async def main() -> list[float]:
        clock = LoopClock()
        await clock.sleep_until(3.25)
        first = clock.now()
        await clock.sleep_until(1.0)  # in the past: returns at once
        return [first, clock.now()]

    assert run_virtual(main(), start=0.0) == [3.25, 3.25]


def test_virtual_clock_now_and_sleep_work_inside_run() -> None:
    clock = VirtualClock(start=10.0)
    assert isinstance(clock, Clock)

    async def main() -> list[float]:
        assert isinstance(clock.loop, VirtualEventLoop)
        first = clock.now()
        await clock.sleep(1.5)
        second = clock.now()
        await clock.sleep(-3.0)  # a negative sleep just yields
        return [first, second, clock.now()]

    assert clock.run(main()) == [10.0, 11.5, 11.5]


def test_virtual_clock_is_idle_outside_run_and_reusable() -> None:
    clock = VirtualClock(start=3.0, wall_budget_s=60.0)
    assert repr(clock) == "<VirtualClock start=3.0 wall_budget_s=60.0 idle>"
    with pytest.raises(RuntimeError, match="only running inside its run"):
        clock.now()

    async def main() -> str:
        await asyncio.sleep(1)
        return repr(clock)

    assert clock.run(main()) == "<VirtualClock start=3.0 wall_budget_s=60.0 now=4.0>"
    assert clock.run(main()) == "<VirtualClock start=3.0 wall_budget_s=60.0 now=4.0>"


def test_the_loop_repr_shows_its_time() -> None:
    async def main() -> str:
        await asyncio.sleep(0.5)
        return repr(asyncio.get_running_loop())

    assert run_virtual(main(), start=2.0) == "<VirtualEventLoop now=2.5 running=True>"
    loop = VirtualEventLoop()
    loop.close()
    assert repr(loop) == "<VirtualEventLoop closed running=False>"


def test_run_reraises_the_coroutines_exception() -> None:
    async def main() -> None:
        await asyncio.sleep(1)
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        run_virtual(main())


@pytest.mark.parametrize("outer", [VirtualClock(), ScaledClock()], ids=repr)
def test_run_refuses_to_nest_inside_a_running_loop(outer: VirtualClock | ScaledClock) -> None:
    async def inner() -> None:
        pass

    async def main() -> None:
        with pytest.raises(RuntimeError, match="called from a running loop"):
            outer.run(inner())  # and no "never awaited" warning for inner()
        with pytest.raises(RuntimeError, match="called from a running loop"):
            run_virtual(inner())

    outer.run(main())


# --------------------------------------------------------------------------- ScaledClock


def test_scaled_clock_sleeps_a_virtual_second_in_a_fiftieth_of_the_real_time_it_covers() -> None:
    # Exact on any machine: each reading of the scaled clock is bracketed by two real
    # ones, so the virtual time between two readings is 50 times a real interval that
    # lies between the inner and the outer pair. How late the sleep returns depends on
    # how busy the machine is; that it is never early does not.
    clock = ScaledClock(50.0)

    async def main() -> tuple[float, ...]:
        r0, v0, r1 = wall_time(), clock.now(), wall_time()
        await clock.sleep(1.0)
        r2, v1, r3 = wall_time(), clock.now(), wall_time()
        return r0, v0, r1, r2, v1, r3

    r0, v0, r1, r2, v1, r3 = clock.run(main())
    elapsed = v1 - v0
    assert elapsed >= 1.0
    assert 50.0 * (r2 - r1) * (1 - 1e-9) <= elapsed <= 50.0 * (r3 - r0) * (1 + 1e-9)


def test_scaled_clock_allows_real_io() -> None:
    async def main() -> bytes:
        async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(await reader.readline())
            writer.close()
            await writer.wait_closed()

        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"ping\n")
            line = await reader.readline()
            writer.close()
            await writer.wait_closed()
        return line

    assert ScaledClock(10.0, wall_budget_s=10.0).run(main()) == b"ping\n"


def test_scaled_clock_enforces_its_wall_budget() -> None:
    async def main() -> None:
        await asyncio.sleep(1_000)

    started = wall_time()
    with pytest.raises(WallBudgetExceeded):
        ScaledClock(1.0, wall_budget_s=0.05).run(main())
    assert wall_time() - started < 5  # loose


def test_scaled_clock_repr_and_speedup() -> None:
    clock = ScaledClock(20.0, start=5.0)
    assert clock.speedup == 20.0
    assert repr(clock) == "<ScaledClock speedup=20.0 start=5.0 wall_budget_s=None idle>"


# ------------------------------------------------------------------- which loop is simulated


def test_only_the_testing_loops_are_simulated_and_loop_clock_reads_their_time() -> None:
    import uvloop

    async def reading() -> tuple[bool, float]:
        loop = asyncio.get_running_loop()
        return is_simulated(loop), LoopClock().now()

    simulated, now = run_virtual(reading(), start=1234.5)
    assert simulated is True
    assert now == 1234.5  # the virtual loop's time, not the machine's
    for runner in (asyncio.run, uvloop.run):
        simulated, now = runner(reading())
        assert simulated is False
        assert abs(now - time.monotonic()) < 5.0  # the machine's monotonic clock
