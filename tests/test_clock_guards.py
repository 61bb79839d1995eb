"""How a virtual run refuses and ends: stalls, wall budgets, real I/O and threads refused,
leftovers cleaned up, bad arguments."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import math
import socket
import subprocess
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest

from helpers import now as _now
from pyattacker.clock import wall_time
from pyattacker.errors import ConfigError, SimulationError, SimulationStalled, WallBudgetExceeded
from pyattacker.testing import (
    ScaledClock,
    ScaledEventLoop,
    VirtualClock,
    VirtualEventLoop,
    run_virtual,
)

# ------------------------------------------------------------------ stalls and budgets


def test_waiting_for_a_future_nobody_sets_raises_stalled_with_counts() -> None:
    async def main() -> None:
        never_set = asyncio.get_running_loop().create_future()
        helper = asyncio.create_task(asyncio.wait_for(never_set, None), name="helper")
        await asyncio.sleep(1)
        assert not helper.done()
        await never_set

    started = wall_time()
    with pytest.raises(SimulationStalled) as info:
        run_virtual(main(), start=7.0)
    assert info.value.context["tasks"] == 2
    assert info.value.context["timers"] == 0
    assert info.value.context["now"] == 8.0
    assert "helper wait_for" in info.value.context["waiting"]
    assert wall_time() - started < 10  # loose: it must not hang until pytest's timeout


def test_sleeping_forever_is_a_stall_not_an_endless_march_of_24_hour_steps() -> None:
    async def main() -> None:
        await asyncio.sleep(math.inf)

    with pytest.raises(SimulationStalled) as info:
        run_virtual(main())
    assert info.value.context["tasks"] == 1
    assert info.value.context["timers"] == 1
    assert info.value.context["now"] == 0.0


def test_an_endless_sleeper_runs_out_of_its_wall_budget_quickly() -> None:
    async def forever() -> None:
        while True:  # noqa: ASYNC110  # an endless sleeper is what this test is about
            await asyncio.sleep(1)

    started = wall_time()
    with pytest.raises(WallBudgetExceeded) as info:
        run_virtual(forever(), wall_budget_s=0.2)
    assert info.value.context["wall_budget_s"] == 0.2
    assert info.value.context["real_s"] >= 0.2
    assert info.value.context["now"] > 100  # it simulated a lot of time meanwhile
    assert wall_time() - started < 10  # loose


# ------------------------------------------------------------- no real I/O, no threads


async def _open_connection() -> None:
    await asyncio.open_connection("127.0.0.1", 9)


async def _add_reader() -> None:
    left, right = socket.socketpair()
    try:
        asyncio.get_running_loop().add_reader(left, print)
    finally:
        left.close()
        right.close()


async def _sock_connect() -> None:
    with socket.socket() as sock:
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", 9))


async def _start_server() -> None:
    await asyncio.start_server(print, "127.0.0.1", 0)


async def _subprocess() -> None:
    await asyncio.create_subprocess_exec("true", stdout=subprocess.DEVNULL)


async def _resolve_name() -> None:
    await asyncio.get_running_loop().getaddrinfo("localhost", 80)


async def _run_in_executor() -> None:
    await asyncio.get_running_loop().run_in_executor(None, print)


async def _to_thread() -> None:
    await asyncio.to_thread(print)


@pytest.mark.parametrize(
    ("attempt", "message"),
    [
        (_open_connection, "opens no sockets"),
        (_add_reader, "opens no sockets"),
        (_sock_connect, "opens no sockets"),
        (_start_server, "opens no sockets"),
        (_subprocess, "opens no sockets"),
        (_resolve_name, "opens no sockets"),
        (_run_in_executor, "runs no threads"),
        (_to_thread, "runs no threads"),
    ],
)
def test_real_io_and_threads_are_refused_with_a_clear_error(
    attempt: Callable[[], Coroutine[Any, Any, None]], message: str
) -> None:
    with pytest.raises(SimulationError, match=message):
        run_virtual(attempt())


# ------------------------------------------------------------------------------ cleanup


def _assert_nothing_logged(caplog: pytest.LogCaptureFixture) -> None:
    gc.collect()  # "Task was destroyed but it is pending!" is logged at collection
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_leftover_tasks_are_cancelled_and_nothing_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cancelled_at: list[float] = []

    async def leftover() -> None:
        try:
            await asyncio.sleep(1_000)
        except asyncio.CancelledError:
            cancelled_at.append(_now())
            raise

    async def main() -> str:
        task = asyncio.create_task(leftover())
        await asyncio.sleep(2)
        assert not task.done()
        return "done"

    assert run_virtual(main()) == "done"
    assert cancelled_at == [2.0]
    _assert_nothing_logged(caplog)


def test_a_stalled_run_still_cancels_its_tasks_and_logs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        never_set = asyncio.get_running_loop().create_future()
        waiters = [asyncio.create_task(asyncio.wait_for(never_set, None)) for _ in range(3)]
        await asyncio.gather(never_set, *waiters)

    with pytest.raises(SimulationStalled):
        run_virtual(main())
    _assert_nothing_logged(caplog)


def test_a_task_that_swallows_cancellation_fails_the_run_instead_of_hanging(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def stubborn() -> None:
        while True:  # the bug under test: it swallows cancellation and waits again
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.get_running_loop().create_future()

    async def main() -> None:
        task = asyncio.create_task(stubborn())
        await asyncio.sleep(0)
        assert not task.done()

    with pytest.raises(SimulationError, match="did not finish after cancellation"):
        run_virtual(main())
    _assert_nothing_logged(caplog)


def test_open_async_generators_are_closed_at_the_end_of_run() -> None:
    closed_at: list[float] = []

    async def ticks() -> AsyncIterator[int]:
        try:
            for i in range(10):
                await asyncio.sleep(1)
                yield i
        finally:
            closed_at.append(_now())

    async def main() -> int:
        gen = ticks()
        return await anext(gen)

    assert run_virtual(main()) == 0
    assert closed_at == [1.0]


# ------------------------------------------------------------------ argument validation


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: ScaledClock(0), "speedup"),
        (lambda: ScaledClock(-2.0), "speedup"),
        (lambda: ScaledClock(math.nan), "speedup"),
        (lambda: ScaledEventLoop(0), "speedup"),
        (lambda: VirtualClock(wall_budget_s=-1.0), "wall_budget_s"),
        (lambda: VirtualClock(wall_budget_s=0), "wall_budget_s"),
        (lambda: VirtualEventLoop(wall_budget_s=-1.0), "wall_budget_s"),
        (lambda: ScaledClock(wall_budget_s=-1.0), "wall_budget_s"),
        (lambda: VirtualClock(start=math.inf), "start"),
    ],
)
def test_bad_arguments_raise_a_config_error_naming_the_field(
    make: Callable[[], Any], field: str
) -> None:
    with pytest.raises(ConfigError) as info:
        make()
    assert info.value.field == field


def test_run_virtual_with_bad_arguments_does_not_leak_the_coroutine() -> None:
    async def main() -> None:
        pass

    with pytest.raises(ConfigError):  # and no "coroutine was never awaited" warning
        run_virtual(main(), wall_budget_s=-5)
