"""The attack's parts used together: a scenario reads ``--data`` rows, a mix follows
redirects hop by hop, a plan file sets the newer options; and the combinations that mean
nothing are refused before any traffic (exit 2, naming the flag)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyattacker.cli import run_cli
from pyattacker.servers import EchoServerProcess

# Each flow logs in as its row's user: the server counts each user under its own status.
BY_ROW = textwrap.dedent(
    """
    async def login(client, row):
        await client.post("/login", name="login", headers={"x-echo-status": row["status"]})
    """
)


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServerProcess]:
    with EchoServerProcess(delay="fixed:1ms") as server:
        yield server


def test_a_scenario_is_given_its_row_of_data_in_turn(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    echo.reset()
    (tmp_path / "flows.py").write_text(BY_ROW)
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"status": "201"}\n{"status": "202"}\n{"status": "203"}\n')
    out = tmp_path / "r.json"
    argv = ["attack", echo.url, "--scenario", f"{tmp_path / 'flows.py'}:login"]
    argv += ["--data", str(rows), "--rate", "200/s", "--requests", "9", "--json", str(out), "-q"]
    assert run_cli(argv) == 0
    report = json.loads(out.read_text())
    assert report["flows"]["completed"] == 9
    assert report["names"]["login"]["status"] == {"201": 3, "202": 3, "203": 3}
    assert echo.stats()["statuses"] == {"201": 3, "202": 3, "203": 3}


def test_a_mix_line_that_redirects_is_followed_as_attempts_of_the_same_named_request(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    echo.reset()
    targets = tmp_path / "mix.jsonl"
    lines = [
        {"url": "/redirect?to=/ok&code=302", "name": "moved"},
        {"url": "/plain", "name": "plain"},
    ]
    targets.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "r.json"
    argv = ["attack", echo.url, "--targets", str(targets), "--follow-redirects", "2"]
    argv += ["--rate", "200/s", "--requests", "40", "--seed", "7", "--json", str(out), "-q"]
    assert run_cli(argv) == 0
    report = json.loads(out.read_text())
    moved, plain = report["names"]["moved"], report["names"]["plain"]
    assert moved["requests"] + plain["requests"] == 40
    assert moved["attempts"] == 2 * moved["requests"]  # the redirect, then its hop
    assert plain["attempts"] == plain["requests"]
    assert echo.stats()["count"] == report["total"]["attempts"]


def test_a_mix_line_that_redirects_is_a_failed_request_unless_followed(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    targets = tmp_path / "mix.jsonl"
    targets.write_text('{"url": "/redirect?to=/ok&code=301", "name": "moved"}\n')
    out = tmp_path / "r.json"
    argv = ["attack", echo.url, "--targets", str(targets), "--rate", "100/s"]
    argv += ["--requests", "5", "--json", str(out), "-q"]
    assert run_cli(argv) == 1
    report = json.loads(out.read_text())
    assert report["names"]["moved"]["error_classes"] == {"redirect": 5}


def test_a_plan_file_sets_warmup_and_scenario_like_their_flags(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    echo.reset()
    (tmp_path / "flows.py").write_text(BY_ROW.replace('row["status"]', '"204"'))
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        f"url: {echo.url}\nscenario: flows.py:login\nrate: 200/s\nrequests: 12\nwarmup: 2\n"
    )
    out = tmp_path / "r.json"
    assert run_cli(["attack", "-c", str(plan), "--json", str(out), "-q"]) == 0
    report = json.loads(out.read_text())
    assert report["warmup"]["requests"] == 2
    assert report["names"]["login"]["requests"] == 10
    assert echo.stats()["count"] == 12


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--targets", "{targets}", "--rate", "10/s"], "--targets"),
        (["--sweep", "concurrency=1,2"], "--scenario"),
    ],
)
def test_combinations_that_mean_nothing_are_refused_before_any_traffic(
    echo: EchoServerProcess,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    flag: str,
) -> None:
    echo.reset()
    (tmp_path / "flows.py").write_text(BY_ROW)
    targets = tmp_path / "mix.jsonl"
    targets.write_text('{"url": "/a"}\n')
    extra = [arg.replace("{targets}", str(targets)) for arg in extra]
    argv = ["attack", echo.url, "--scenario", f"{tmp_path / 'flows.py'}:login", *extra]
    assert run_cli([*argv, "--requests", "3", "-q"]) == 2
    assert flag in capsys.readouterr().err
    assert echo.stats()["count"] == 0
