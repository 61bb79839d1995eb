"""``pyattacker compare`` end to end: real loopback attacks against the echo server at
2 ms and then 6 ms are a regression; a rerun with the same server settings is not. Bench
reports compare too; bad input exits 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyattacker.cli import run_cli
from pyattacker.servers import EchoServerProcess


def attack_report(delay: str, path: Path) -> Path:
    """The JSON report of a real attack on a fresh echo server holding each request
    ``delay``: 600 requests, open model, 200/s, in 30 windows of 100 ms (the mean's
    noise bound needs windows to see bursts of slow requests)."""
    with EchoServerProcess(delay=delay) as server:
        argv = ["attack", server.url, "--rate", "200/s", "--requests", "600", "--preconnect", "4"]
        argv += ["--window", "100ms"]
        assert run_cli([*argv, "-q", "--json", str(path)]) == 0
    return path


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("compare")
    return {
        "fast": attack_report("fixed:2ms", where / "fast.json"),
        "slow": attack_report("fixed:6ms", where / "slow.json"),
        "slow_again": attack_report("fixed:6ms", where / "slow_again.json"),
    }


def test_a_slower_server_is_flagged_as_a_regression(
    reports: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cmp.json"
    argv = ["compare", str(reports["fast"]), str(reports["slow"]), "--json", str(out)]
    assert run_cli([*argv, "--fail-on-regression"]) == 1
    assert "WORSE" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["kind"] == "attack"
    # a shared machine's bursts may hide one clock's shift; never every latency figure
    latency = {
        f"{stat}({name})" for stat in ("mean", "p50") for name in ("latency", "service_time")
    }
    assert latency & set(data["regressions"]), data["regressions"]
    assert run_cli(argv) == 0  # without --fail-on-regression it only reports


def test_a_rerun_with_the_same_server_settings_is_not_flagged(
    reports: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compare", str(reports["slow"]), str(reports["slow_again"]), "--fail-on-regression"]
    code = run_cli(argv)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "regressions beyond the noise: none" in out


def test_json_to_stdout_is_only_json(
    reports: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["compare", str(reports["fast"]), str(reports["fast"]), "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["regressions"] == []
    assert "compare (attack reports)" in captured.err


def test_two_bench_reports_compare_by_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small = ["bench", "--algorithms", "wait", "--seeds", "2", "--jobs", "40", "--horizon", "30"]
    small += ["--jobs-parallel", "1", "-q"]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert run_cli([*small, "--concurrency", "4", "--json", str(a)]) == 0
    assert run_cli([*small, "--concurrency", "4", "--json", str(b)]) == 0
    capsys.readouterr()
    assert run_cli(["compare", str(a), str(b), "--fail-on-regression"]) == 0
    out = capsys.readouterr().out
    assert "compare (bench reports)" in out
    assert "jobs_done[wait]" in out
    assert "regressions beyond the noise: none" in out  # the seeded world repeats exactly


@pytest.mark.parametrize(
    ("content", "says"),
    [("not json", "not JSON"), ("[1, 2]", "not an attack or bench JSON report")],
)
def test_a_file_that_is_not_a_report_exits_2_naming_it(
    reports: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str,
    says: str,
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert run_cli(["compare", str(reports["fast"]), str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err
    assert says in err


def test_a_missing_file_and_an_unwritable_json_path_exit_2(
    reports: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["compare", str(reports["fast"]), str(tmp_path / "none.json")]) == 2
    argv = ["compare", str(reports["fast"]), str(reports["fast"]), "--json", str(tmp_path)]
    assert run_cli(argv) == 2
    assert "--json" in capsys.readouterr().err
