"""The CPU an attack cost, in its JSON report: ``cpu.process_s`` and ``cpu.per_request_s``."""

from __future__ import annotations

import asyncio

import pytest

from pyattacker.attack import AttackPlan, AttackResult, Engine, OpenModel, attack
from pyattacker.attack._plan import Target
from pyattacker.clock import LoopClock
from pyattacker.measure import Attempt
from pyattacker.servers import EchoServer
from pyattacker.testing import run_virtual


class Instant:
    """Answers every attempt 10 ms after it is sent, on the loop's clock."""

    async def send(self, target: Target, attempt: Attempt) -> None:
        clock = LoopClock()
        attempt.sent = clock.now()
        await clock.sleep(0.01)
        attempt.first_byte = attempt.end = clock.now()
        attempt.status = 200


def test_a_simulated_run_reports_no_cpu_figures_so_its_report_is_reproducible() -> None:
    plan = AttackPlan.build(["http://127.0.0.1:9/"], OpenModel(rate=100), duration=1.0)

    async def main() -> AttackResult:
        return await Engine(plan, Instant()).run()

    result = run_virtual(main(), start=0.0)
    assert result.scheduled == 100
    assert result.cpu_s is None
    assert result.to_dict()["cpu"] == {"process_s": None, "per_request_s": None}


@pytest.mark.slow
def test_a_real_run_reports_its_cpu_seconds_and_their_share_per_request() -> None:
    async def main() -> AttackResult:
        async with EchoServer(delay="fixed:1ms") as server:
            plan = AttackPlan.build([server.url + "/"], OpenModel(rate=100), duration=0.3)
            return await attack(plan)

    result = asyncio.run(main())
    cpu = result.to_dict()["cpu"]
    assert result.scheduled == 30
    assert cpu["process_s"] is not None
    assert cpu["process_s"] > 0
    assert cpu["per_request_s"] == pytest.approx(cpu["process_s"] / 30)
