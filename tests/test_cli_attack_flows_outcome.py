"""How a scenario's run is summed up: its exit code counts the flows (one that failed in its
own code fails no request, yet the run did not succeed), its CPU per request is over the
steps sent (with a figure per flow beside it), and its headline says which counts are
flows and which are requests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine_helpers import attack as attack_virtual
from pyattacker.attack import (
    AttackPlan,
    AttackResult,
    FlowClient,
    OpenModel,
    Scenario,
    Step,
    Target,
    attack,
)
from pyattacker.cli import run_cli
from pyattacker.clock import LoopClock
from pyattacker.http import URL, Response, Timing
from pyattacker.measure import Attempt
from pyattacker.report import attack_text
from pyattacker.servers import EchoServer, EchoServerProcess


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServerProcess]:
    with EchoServerProcess(delay="fixed:1ms") as server:
        yield server


FLOWS = """
async def raises(client, row):
    await client.get("/a", name="a")
    {}["missing"]

async def needs_a_row(client, row):
    await client.get("/a", name="a", headers={"x-user": row["user"]})

async def full_url(client, row):
    await client.get("http://127.0.0.1:9/elsewhere", name="away")

async def fine(client, row):
    await client.get("/a", name="a")
"""


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(
    ("flow", "error"),
    [
        ("raises", "KeyError: 'missing'"),
        ("needs_a_row", "TypeError"),  # run without --data: its row is None
        ("full_url", "ValueError: a step takes a path"),
    ],
)
def test_flows_that_fail_in_their_own_code_exit_1_though_no_request_failed(
    flow: str, error: str, workers: int, echo: EchoServerProcess, tmp_path: Path
) -> None:
    flows = tmp_path / "flows.py"
    flows.write_text(FLOWS)
    out = tmp_path / "report.json"
    argv = ["attack", f"{echo.url}/", "--scenario", f"{flows}:{flow}", "--rate", "50/s"]
    argv += ["--requests", "6", "-q", "--json", str(out), "--workers", str(workers)]
    assert run_cli(argv) == 1
    report = json.loads(out.read_text())
    assert report["total"]["outcomes"].get("ok", 0) == report["total"]["requests"]
    assert report["flows"]["failed_by_step"] == {"(the flow's code)": 6}
    assert report["flows"]["completed"] == 0
    assert error in report["flows"]["errors"][0]["example"]


def test_flows_that_all_complete_exit_0(echo: EchoServerProcess, tmp_path: Path) -> None:
    flows = tmp_path / "flows.py"
    flows.write_text(FLOWS)
    argv = ["attack", f"{echo.url}/", "--scenario", f"{flows}:fine", "--rate", "50/s"]
    argv += ["--requests", "6", "-q", "--workers", "2"]
    assert run_cli(argv) == 0


def test_a_threshold_still_decides_the_exit_code_of_a_run_whose_flows_failed(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    flows = tmp_path / "flows.py"
    flows.write_text(FLOWS)
    argv = ["attack", f"{echo.url}/", "--scenario", f"{flows}:raises", "--rate", "50/s"]
    argv += ["--requests", "4", "-q", "--threshold", "p99(latency) < 1ms"]
    assert run_cli(argv) == 99  # the threshold's code comes first, as for failed requests


@pytest.mark.parametrize(("flow", "code", "share"), [("raises", 99, 1.0), ("fine", 0, 0.0)])
def test_flow_failure_rate_bounds_the_flows_that_did_not_complete(
    flow: str, code: int, share: float, echo: EchoServerProcess, tmp_path: Path
) -> None:
    # error_rate cannot see a flow that failed in its own code: every request went OK
    flows = tmp_path / "flows.py"
    flows.write_text(FLOWS)
    out = tmp_path / "report.json"
    argv = ["attack", f"{echo.url}/", "--scenario", f"{flows}:{flow}", "--rate", "50/s"]
    argv += ["--requests", "4", "-q", "--json", str(out), "--threshold", "error_rate < 10%"]
    assert run_cli([*argv, "--threshold", "flow_failure_rate < 10%"]) == code
    verdicts = {t["threshold"]: t for t in json.loads(out.read_text())["thresholds"]["results"]}
    assert verdicts["error_rate < 10%"]["value"] == 0.0
    assert verdicts["flow_failure_rate < 10%"]["value"] == share


def test_flow_failure_rate_without_a_scenario_is_refused(
    echo: EchoServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["attack", f"{echo.url}/", "--rate", "50/s", "--requests", "4"]
    assert run_cli([*argv, "--threshold", "flow_failure_rate < 1%"]) == 2
    assert "error: --threshold: 'flow_failure_rate < 1%': flows are counted only with" in (
        capsys.readouterr().err
    )


# -- CPU per request and per flow ----------------------------------------------------------


async def three_steps(client: FlowClient) -> None:
    for name in ("login", "browse", "buy"):
        await client.get(f"/{name}", name=name)


def test_cpu_per_request_is_over_the_steps_sent_and_per_flow_over_the_flows() -> None:
    async def main() -> AttackResult:
        async with EchoServer(delay="fixed:1ms") as server:
            scenario = Scenario(three_steps, "test:three")
            plan = AttackPlan.build(
                [server.url], OpenModel(rate=50), requests=10, scenario=scenario
            )
            return await attack(plan)

    result = asyncio.run(main())
    cpu = result.to_dict()["cpu"]
    assert result.total.requests == 30
    assert result.flows is not None
    assert result.flows.scheduled == 10
    assert cpu["process_s"] > 0
    assert cpu["per_request_s"] == pytest.approx(cpu["process_s"] / 30)
    assert cpu["per_flow_s"] == pytest.approx(cpu["process_s"] / 10)


# -- the headline: flows and requests, each named ------------------------------------------


class Quick:
    """Answers every step 200 after 10 ms, on the loop's clock."""

    async def send(self, target: Target, attempt: Attempt) -> None:
        raise AssertionError("a scenario sends steps, never the plan's request")

    async def send_step(self, target: Target, step: Step, attempt: Attempt) -> Response:
        clock = LoopClock()
        attempt.sent = clock.now()
        await clock.sleep(0.01)
        attempt.first_byte = attempt.end = clock.now()
        response = Response(URL.parse("http://a.test/"), Timing(0.0))
        response.status = attempt.status = 200
        return response


def _flow_plan(**options: object) -> AttackPlan:
    scenario = Scenario(three_steps, "test:three")
    return AttackPlan.build(
        ["http://a.test/"],
        OpenModel(rate=10),
        scenario=scenario,
        **options,  # type: ignore[arg-type]
    )


def test_the_headline_says_which_counts_are_flows_and_which_are_requests() -> None:
    result, _ = attack_virtual(_flow_plan(requests=5), Quick())
    headline = attack_text(result).splitlines()[1]
    assert "flows planned 5 · scheduled 5 (10.0/s planned)" in headline
    assert "requests (their steps) sent 15 (" in headline
    assert " of 10.0/s planned" not in headline  # never steps a second against flows


@pytest.mark.parametrize("scenario", [True, False])
def test_a_span_cut_between_two_arrivals_plans_as_many_as_were_scheduled(
    scenario: bool,
) -> None:
    # Arrivals at 0, 0.1, ..., 1.0: 11 of them before a stop at 1.05 s, where the plan's
    # expected count is 10.5 (the headline used to say "planned 10 · scheduled 11").
    if scenario:
        result, _ = attack_virtual(_flow_plan(duration=5.0), Quick(), stop_at=1.05)
    else:
        plain = AttackPlan.build(["http://a.test/"], OpenModel(rate=10), duration=5.0)
        result, _ = attack_virtual(plain, PlainQuick(), stop_at=1.05)
    assert result.scheduled == 11
    assert result.planned == 11
    assert result.planned_rate == pytest.approx(10.0)  # the plan's rate, not 11 / 1.05
    assert result.schedule_s == pytest.approx(1.05)


def test_an_uncut_span_plans_every_arrival_it_scheduled() -> None:
    # 3/s over 1.5 s: arrivals at 0, 1/3, 2/3, 1, 4/3: five, where the expectation is 4.5
    plan = AttackPlan.build(["http://a.test/"], OpenModel(rate=3), duration=1.5)
    result, _ = attack_virtual(plan, PlainQuick())
    assert result.scheduled == 5
    assert result.planned == 5
    assert result.planned_rate == pytest.approx(3.0)


class PlainQuick:
    """Answers every plain request 200 after 10 ms."""

    async def send(self, target: Target, attempt: Attempt) -> None:
        clock = LoopClock()
        attempt.sent = clock.now()
        await clock.sleep(0.01)
        attempt.first_byte = attempt.end = clock.now()
        attempt.status = 200
