"""The attack engine against the calibrated echo server, over real loopback sockets.

Real-socket companions of ``benchmarks/accuracy.py``: every request we count is one the
server counted, coordinated omission made visible by a stalled server, the CLI against a
port nobody listens on, and the generator's own loop lag in the report. Every server runs
on 127.0.0.1 with a port the OS picks and is stopped by its test. Each claim holds on any
machine, however busy: bounds come from the schedule and from events that really happened
(a stall, a blocked loop), never from how fast this machine happens to be. How close our
percentiles come to the server's exact hold times is measured by the benchmark, which needs
a quiet machine.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import uvloop

from pyattacker.attack import AttackPlan, AttackResult, OpenModel, attack, run_attack
from pyattacker.clock import LoopClock
from pyattacker.measure import RequestRecord
from pyattacker.servers import EchoServer, EchoServerProcess

pytestmark = pytest.mark.slow


def test_a_lognormal_server_holds_every_request_we_count_and_none_is_lost() -> None:
    with EchoServerProcess(delay="lognormal:median=20ms,sigma=0.5") as server:
        server.reset()
        plan = AttackPlan.build([server.url + "/"], OpenModel(rate=300), duration=3.0)
        result = run_attack(plan, stop_on_signals=False)
        truth = server.stats()
    assert result.scheduled == 900
    assert result.dropped == 0
    assert result.total.by_outcome == {"ok": 900}
    assert truth["count"] == result.total.requests
    assert (truth["in_flight"], truth["dropped"]) == (0, 0)
    # Both clocks have a latency for every answer (their accuracy: benchmarks/accuracy.py).
    assert result.total.latency.count == result.total.service_time.count == 900


STALL = 1.0
RATE = 100.0
DELAY = 0.005
# A histogram percentile may read up to 1/2048 of the value low (Histogram's error bound).
LOW = 1 - 2**-11


def stalled_attack() -> tuple[AttackResult, list[RequestRecord], float, float, int]:
    """100/s for 3 s on one connection; the server stalls for 1 s at t = 1 s.

    Returns the result, the records, the clock just before and just after the server was
    told to stall (the stall began between the two), and the server's count.
    """
    records: list[RequestRecord] = []
    window: list[float] = []

    async def main() -> tuple[AttackResult, int]:
        clock = LoopClock()
        async with EchoServer(delay=f"fixed:{DELAY}s") as server:
            plan = AttackPlan.build(
                [server.url + "/"], OpenModel(rate=RATE), duration=3.0, connections=1
            )

            def stall() -> None:
                window.append(clock.now())
                server.stall(STALL)
                window.append(clock.now())

            asyncio.get_running_loop().call_later(1.0, stall)
            result = await attack(plan, on_record=records.append)
            return result, server.stats()["count"]

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        result, served = runner.run(main())
    return result, records, window[0], window[1], served


def test_a_stall_lifts_the_scheduled_clock_of_every_request_it_caught() -> None:
    # The sent clock's half of the story (it stays at the server's delay for every request
    # the stall did not hold) is exact on virtual time, in tests/test_attack_engine.py; how
    # soon a real loop gets round to the next send depends on how busy the machine is.
    result, records, before, after, served = stalled_attack()
    assert result.scheduled == len(records) == served == 300
    assert result.total.by_outcome == {"ok": 300}
    # Every request scheduled after the stall began and before it ended waits for its end:
    # it cannot be answered earlier (the stall began before `after`, lasted STALL from no
    # earlier than `before`).
    caught = [r for r in records if after <= r.scheduled < before + STALL]
    assert len(caught) >= (STALL - (after - before)) * RATE - 1
    for record in caught:
        assert record.latency is not None
        assert record.latency >= before + STALL - record.scheduled
    # So the scheduled clock's p99 (the 4th-largest of 300) is one of the first four
    # requests caught, each scheduled within 4 periods of the stall's start.
    expected_at_least = STALL - (after - before) - 4 / RATE
    assert result.total.latency.percentile(99) >= expected_at_least * LOW
    # The sent clock's p99 is at least the fixed delay (the server, on this loop, held it
    # that long after it was sent).
    assert result.total.service_time.percentile(99) >= DELAY * LOW


def refused_port() -> int:
    """A loopback port that was just free: nobody listens there now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_the_cli_reports_a_refused_port_as_connection_errors_and_exits_1(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    command = [
        sys.executable, "-m", "pyattacker", "attack", f"http://127.0.0.1:{refused_port()}/",
        "--rate", "20/s", "--duration", "0.5s", "--quiet", "--json", str(report),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "Traceback" not in done.stdout + done.stderr
    body = json.loads(report.read_text())
    assert body["summary"]["scheduled"] == 10
    assert body["summary"]["sent"] == 0
    assert body["total"]["outcomes"] == {"failed": 10}
    assert body["total"]["error_classes"] == {"connection": 10}


def test_a_generator_that_falls_behind_says_so_in_its_report() -> None:
    # Block our own loop for 30 ms after every 20th answer: the reads behind the block are
    # stamped late through no fault of the server, and the report must say so.
    from pyattacker.report import attack_text

    answers = 0

    def block(record: RequestRecord) -> None:
        nonlocal answers
        answers += 1
        if answers % 20 == 0:
            time.sleep(0.03)

    async def main() -> AttackResult:
        async with EchoServer(delay="fixed:1ms") as server:
            plan = AttackPlan.build([server.url + "/"], OpenModel(rate=200), duration=1.0)
            return await attack(plan, on_record=block)

    result = asyncio.run(main())
    lag = result.loop_lag
    assert lag is not None
    assert lag.max is not None
    # The probe's 10 ms grid has an instant at most 10 ms into each 30 ms block: it waits
    # for the rest of the block, 20 ms or more.
    assert lag.max >= 0.015
    text = attack_text(result)
    assert "Generator loop lag" in text
    assert "WARNING: the generator itself fell behind" in text


def test_every_real_attack_reports_its_generator_loop_lag() -> None:
    from pyattacker.report import attack_text

    async def main() -> AttackResult:
        async with EchoServer(delay="fixed:1ms") as server:
            plan = AttackPlan.build([server.url + "/"], OpenModel(rate=50), duration=0.5)
            return await attack(plan)

    result = asyncio.run(main())
    assert result.loop_lag is not None
    # How many probes fire depends on how busy the machine is (their pace is exact on
    # virtual time, tests/test_attack_lag.py); that some did, and are reported, does not.
    assert result.loop_lag.count > 0
    assert "Generator loop lag" in attack_text(result)
    assert result.to_dict()["summary"]["loop_lag_s"]["count"] == result.loop_lag.count
