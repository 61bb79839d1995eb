"""How a scenario's run is summed up: its exit code counts the flows (one that failed in its
own code fails no request, yet the run did not succeed)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyattacker.cli import run_cli
from pyattacker.servers import EchoServerProcess


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
