"""``pyattacker attack --scenario``: flows against a real echo server, whose own count of
what it received is the truth every step's count must equal; bad input exits 2."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyattacker.attack import (
    AttackPlan,
    AttackResult,
    Engine,
    HttpSender,
    OpenModel,
    load_scenario,
)
from pyattacker.cli import run_cli
from pyattacker.clock import wall_time
from pyattacker.http import HttpClient
from pyattacker.servers import EchoServer, EchoServerProcess

ROOT = Path(__file__).resolve().parent.parent

# Each step asks the echo server for a status of its own, so that the server's count per
# status is its count per step; every fourth flow's browse fails (500) and ends the flow.
TAGGED = textwrap.dedent(
    """
    async def shop(client, row):
        await client.post("/login", name="login", json={"user": client.flow},
                          headers={"x-echo-status": "201"})
        browse = "500" if client.flow % 4 == 3 else "202"
        await client.get("items", name="browse", headers={"x-echo-status": browse})
        await client.post("/cart", name="checkout", headers={"x-echo-status": "203"})
    """
)


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServerProcess]:
    with EchoServerProcess(delay="fixed:1ms") as server:
        yield server


def test_each_steps_count_equals_what_the_server_received_and_a_failed_step_ends_its_flow(
    echo: EchoServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    echo.reset()
    flows = tmp_path / "flows.py"
    flows.write_text(TAGGED)
    out = tmp_path / "report.json"
    argv = ["attack", echo.url, "--scenario", f"{flows}:shop", "--rate", "100/s"]
    argv += ["--requests", "40", "-q", "--json", str(out)]
    assert run_cli(argv) == 1  # some steps failed
    report = json.loads(out.read_text())
    served = echo.stats()["statuses"]
    names = {name: stats["requests"] for name, stats in report["names"].items()}
    assert names == {
        "login": served["201"],
        "browse": served["202"] + served["500"],
        "checkout": served["203"],
    }
    assert served == {"201": 40, "202": 30, "203": 30, "500": 10}
    assert report["flows"]["failed_by_step"] == {"browse": 10}
    assert report["flows"]["completed"] == 30
    assert report["flows"]["scheduled"] == report["flows"]["started"] == 40
    assert report["summary"]["sent"] == report["total"]["requests"] == 110
    assert "Flows (flows.py:shop)" in capsys.readouterr().out


def test_the_example_flow_runs_against_the_echo_server(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    echo.reset()
    out = tmp_path / "report.json"
    example = ROOT / "examples" / "flows.py"
    argv = ["attack", echo.url, "--scenario", f"{example}:checkout", "--rate", "20/s"]
    argv += ["--requests", "6", "-q", "--json", str(out)]
    assert run_cli(argv) == 0
    report = json.loads(out.read_text())
    assert report["flows"]["completed"] == 6
    assert {n: s["outcomes"] for n, s in report["names"].items()} == {
        "login": {"ok": 6},
        "browse": {"ok": 6},
        "add to cart": {"ok": 6},
    }
    assert echo.stats()["count"] == 18


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("no-colon", "expected FILE.py:FUNCTION"),
        ("missing.py:flow", "no such file"),
        ("{file}:absent", "defines no 'absent'"),
        ("{file}:plain", "not an async function"),
        ("{file}:three", "takes 3 parameters"),
        ("{broken}:flow", "failed to load: ZeroDivisionError"),
        ("{file}:flow", "say their own method and body"),  # with -X POST below
    ],
)
def test_a_bad_scenario_exits_2_naming_the_flag_and_sends_nothing(
    spec: str,
    words: str,
    echo: EchoServerProcess,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    good, broken = tmp_path / "good.py", tmp_path / "broken.py"
    good.write_text(
        "def plain(client): pass\n"
        "async def three(client, row, extra): pass\n"
        "async def flow(client): await client.get('/')\n"
    )
    broken.write_text("1 / 0\n")
    monkeypatch.chdir(tmp_path)
    echo.reset()
    before = sorted(tmp_path.iterdir())
    argv = ["attack", echo.url, "--rate", "10/s", "--requests", "2", "--json", "out.json"]
    argv += ["--scenario", spec.format(file=good, broken=broken)]
    if "method" in words:
        argv += ["-X", "POST"]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert "error: --scenario" in err, err
    assert words in err
    assert "Traceback" not in err
    assert echo.stats()["count"] == 0
    assert sorted(tmp_path.iterdir()) == before  # no report, no __pycache__


def test_a_stop_mid_flow_counts_every_step_the_server_saw(tmp_path: Path) -> None:
    flows = tmp_path / "slow.py"
    flows.write_text(
        "async def slow(client):\n"
        "    await client.get('/a', name='a')\n"
        "    await client.get('/b', name='b', headers={'x-echo-delay': '1s'})\n"
    )
    scenario = load_scenario(f"{flows}:slow")

    async def main() -> tuple[AttackResult, int]:
        async with EchoServer(delay="fixed:100ms") as server:
            plan = AttackPlan.build(
                [server.url], OpenModel(rate=20), duration=0.5, scenario=scenario
            )
            async with HttpClient() as client:
                engine = Engine(plan, HttpSender(client))
                asyncio.get_running_loop().call_later(0.7, engine.stop, "test stop")
                result = await engine.run()
            stats = server.stats()
        return result, stats["count"] + stats["in_flight"] + stats["dropped"]

    result, server_saw = asyncio.run(main())
    flows_seen = result.flows
    assert flows_seen is not None
    assert result.sent == server_saw
    assert result.total.requests == result.sent  # nothing counted that was not sent
    assert result.by_name["b"].by_outcome.get("cancelled", 0) > 0
    assert flows_seen.cancelled + flows_seen.completed == flows_seen.started == 10
    assert flows_seen.in_progress == 0


def test_ctrl_c_ends_the_flows_and_the_report_counts_every_step_the_server_saw(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    flows = tmp_path / "slow.py"
    flows.write_text(
        "async def slow(client):\n"
        "    await client.get('/a', name='a')\n"
        "    await client.get('/b', name='b', headers={'x-echo-delay': '500ms'})\n"
    )
    out = tmp_path / "report.json"
    echo.reset()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pyattacker", "attack", echo.url, "--scenario", f"{flows}:slow",
         "--rate", "20/s", "--duration", "60s", "-q", "--json", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    # Interrupt once the flows are under way (a busy machine may take seconds to import).
    deadline = wall_time() + 90.0
    while echo.stats()["count"] < 5:
        assert proc.poll() is None, proc.communicate()
        assert wall_time() < deadline, "the attack never began"
        time.sleep(0.05)  # real time: another process is at work
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    report = json.loads(out.read_text())
    stats = echo.stats()
    assert report["summary"]["sent"] == stats["count"] + stats["in_flight"] + stats["dropped"]
    total = report["total"]
    assert report["summary"]["sent"] == total["sent_attempts"]
    # A flow that began as the stop came may have had its step cancelled before it was
    # written (on a busy machine, while its connection opened): a request, not sent.
    unsent = total["requests"] - total["sent_attempts"]
    assert 0 <= unsent <= total["outcomes"].get("cancelled", 0)
    assert report["names"]["b"]["outcomes"].get("cancelled", 0) > 0
    f = report["flows"]
    assert f["cancelled"] > 0
    assert f["in_progress"] == 0
    assert f["scheduled"] == f["completed"] + f["failed"] + f["cancelled"] + f["dropped"]


def test_help_documents_the_scenario_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["attack", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--scenario FILE.py:FUNCTION" in text
    assert "a failed step ends its flow" in text
