"""Stops and raising ``on_record`` callbacks on the direct and the task path: every arrival
is recorded and nothing is left running."""

from __future__ import annotations

import asyncio

import pytest

from direct_helpers import GUARD_S, NOTHING_IN_PROGRESS, Run, attack, open_plan
from http_helpers import run
from llm_server_helpers import until
from pyattacker.attack import AttackPlan, AttackResult, Engine, OpenModel, Target
from pyattacker.measure import Attempt, Outcome, RequestRecord
from pyattacker.servers import EchoServer


@pytest.mark.parametrize("raises_at", [20, 99])  # mid-run, and the very last request
def test_an_on_record_that_raises_strands_no_queued_request_as_the_task_path_does(
    raises_at: int,
) -> None:
    def on_record(record: RequestRecord) -> None:
        if record.request == raises_at:
            raise OSError("No space left on device")  # a --samples file on a full disk

    async def main() -> Run:
        plan_of = open_plan(400, 100, connections=1)  # arrivals queue behind 5 ms answers
        return await attack(plan_of, on_record=on_record, delay="fixed:5ms")

    done = run(main)  # as the task path (TaskPathSender): every request sent and answered
    assert done.result.total.by_outcome == {"ok": 100}
    assert done.served["count"] == 100


def test_a_stop_from_on_record_in_the_scheduler_step_records_every_arrival() -> None:
    # A drop's record stops the run from inside the scheduler's own step, in the turn
    # that spawned tasks for earlier arrivals: those are cancelled before their first
    # step, and must still be recorded (and counted out of in flight).
    class Slow:
        async def send(self, target: Target, attempt: Attempt) -> None:
            await asyncio.sleep(5)

    holder: list[Engine] = []

    def on_record(record: RequestRecord) -> None:
        if record.outcome is Outcome.DROPPED:
            holder[0].stop("drop seen")

    async def main() -> tuple[AttackResult, Engine]:
        plan = AttackPlan.build(
            ["http://127.0.0.1:9/"], OpenModel(rate=1e6, max_in_flight=10), requests=1000
        )
        engine = Engine(plan, Slow(), on_record=on_record)
        holder.append(engine)
        return await asyncio.wait_for(engine.run(), GUARD_S), engine

    result, engine = run(main)
    assert result.stop_reason == "drop seen"
    assert result.scheduled == result.total.requests == 11  # ten spawned, one dropped
    assert result.total.by_outcome == {"cancelled": 10, "dropped": 1}
    assert engine.statistics() == NOTHING_IN_PROGRESS


@pytest.mark.parametrize("direct", [True, False])
def test_a_stop_whose_cancelled_records_fail_to_write_still_returns_every_request(
    direct: bool,
) -> None:
    # Ctrl-C with arrivals queued behind two busy connections, and an on_record that
    # fails for each cancelled record (a --samples file on a full disk): stop() and run()
    # return, and every arrival is counted.
    def on_record(record: RequestRecord) -> None:
        if record.outcome is Outcome.CANCELLED:
            raise OSError("No space left on device")

    async def stop_soon(engine: Engine, server: EchoServer) -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: None)
        await until(lambda: engine.statistics()["queued"] >= 50)
        engine.stop("ctrl-c")

    async def main() -> Run:
        plan_of = open_plan(1000, 1000, connections=2)
        return await attack(
            plan_of, direct=direct, on_record=on_record, during=stop_soon, delay="fixed:50ms"
        )

    done = run(main)
    total, engine = done.result.total, done.engine
    assert done.result.stop_reason == "ctrl-c"
    assert total.requests == done.result.scheduled
    assert total.by_outcome["cancelled"] >= 50
    assert engine.statistics() == NOTHING_IN_PROGRESS


@pytest.mark.parametrize("direct", [True, False])
def test_requests_cut_off_by_a_stop_are_cancelled_never_failed_without_a_cause(
    direct: bool,
) -> None:
    # Stopping in the middle of a fast run catches answers that arrived but were not yet
    # counted; each request is recorded ok or cancelled, and none as a failure with no
    # error class (the task path used to record those as "failed" with nothing else).
    holder: list[Engine] = []
    records: list[RequestRecord] = []

    def on_record(record: RequestRecord) -> None:
        records.append(record)
        if len(records) == 1000:
            holder[0].stop("stop")

    async def keep(engine: Engine, server: EchoServer) -> None:
        holder.append(engine)

    async def main() -> Run:
        plan_of = open_plan(50_000, 10_000, connections=64)
        return await attack(plan_of, direct=direct, on_record=on_record, during=keep)

    done = run(main)
    assert set(done.result.total.by_outcome) <= {"ok", "cancelled"}
    assert done.result.total.requests == done.result.scheduled == len(records)
