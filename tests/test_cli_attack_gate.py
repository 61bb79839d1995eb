"""``attack --threshold/--abort-on-fail/--goodput`` from the command line, against real
loopback servers: exit 0 when every threshold passes, 99 on a breach, 2 (nothing run) for
a bad expression; the reports carry the verdicts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyattacker.cli import run_cli
from pyattacker.servers import EchoServerProcess, LlmServerProcess

KEY = "sk-test-0123456789"


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServerProcess]:
    with EchoServerProcess(delay="fixed:1ms") as server:
        yield server


@pytest.fixture(scope="module")
def llm() -> Iterator[LlmServerProcess]:
    with LlmServerProcess(
        models="m", ttft="fixed:5ms", itl="fixed:1ms", output_tokens=4, api_keys=KEY
    ) as server:
        yield server


def attack(url: str, *extra: str) -> list[str]:
    return ["attack", url, "--rate", "100/s", "--requests", "50", "-q", *extra]


def test_a_bad_threshold_exits_2_naming_the_flag_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    code = run_cli(
        attack("http://127.0.0.1:9/", "--threshold", "p95(latency) < 250", "--json", str(out))
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "--threshold: no unit in 'p95(latency) < 250'" in err
    assert "250ms" in err  # the hint shows what was expected
    assert "attacking" not in err  # nothing was sent
    assert not out.exists()


def test_thresholds_that_pass_exit_0_and_are_in_both_reports(
    echo: EchoServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, md = tmp_path / "r.json", tmp_path / "r.md"
    gates = ["--threshold", "p99(latency) < 10s", "--threshold", "error_rate <= 0%"]
    assert run_cli(attack(echo.url, *gates, "--json", str(out), "--markdown", str(md))) == 0
    assert "| `error_rate <= 0%` | 0.000% | pass |" in md.read_text()
    text = capsys.readouterr().out
    assert "Thresholds (a breach exits 99)" in text
    assert "pass  error_rate <= 0%" in text
    section = json.loads(out.read_text())["thresholds"]
    assert section["passed"] is True
    assert [r["threshold"] for r in section["results"]] == [
        "p99(latency) < 10s",
        "error_rate <= 0%",
    ]


def test_a_breached_threshold_exits_99_with_its_measured_value(
    echo: EchoServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    code = run_cli(attack(echo.url, "--threshold", "min(service_time) < 1us", "--json", str(out)))
    assert code == 99
    assert "FAIL  min(service_time) < 1us" in capsys.readouterr().out
    (result,) = json.loads(out.read_text())["thresholds"]["results"]
    assert result["passed"] is False
    assert result["value"] >= 0.001  # the server held every request 1 ms


def test_abort_on_fail_stops_the_attack_at_the_first_live_breach(
    echo: EchoServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    argv = ["attack", echo.url, "--rate", "50/s", "--duration", "60s", "-q", "--json", str(out)]
    argv += ["--threshold", "p50(service_time) < 1us", "--abort-on-fail"]
    assert run_cli(argv) == 99
    assert "aborted by --abort-on-fail" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["summary"]["stop_reason"] == "threshold breached: p50(service_time) < 1us"
    assert report["summary"]["schedule_s"] < 60
    aborted = report["thresholds"]["aborted"]
    assert aborted["threshold"] == "p50(service_time) < 1us"
    assert aborted["value"] >= 0.001


def test_goodput_counts_the_requests_within_every_slo(
    llm: LlmServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    argv = ["attack", "--llm", f"{llm.url}/v1", "--model", "m", "--shape", "30:4", "--key", KEY]
    argv += ["--clients", "2", "--requests", "10", "-q", "--json", str(out)]
    good = [*argv, "--goodput", "ttft<10s,tpot<10s,e2e<10s", "--threshold", "goodput >= 100%"]
    assert run_cli(good) == 0
    assert "Goodput (ttft < 10s, tpot < 10s, e2e < 10s)" in capsys.readouterr().out
    md = tmp_path / "r.md"
    assert run_cli([*argv, "--goodput", "e2e<10s", "--markdown", str(md)]) == 0
    assert "## Goodput (e2e < 10s)" in md.read_text()
    section = json.loads(out.read_text())["goodput"]
    assert (section["good"], section["requests"], section["share"]) == (10, 10, 1.0)
    none = [*argv, "--goodput", "ttft<1us", "--threshold", "goodput >= 50%"]
    assert run_cli(none) == 99
    section = json.loads(out.read_text())["goodput"]
    assert (section["good"], section["missed"]) == (0, {"ttft < 1us": 10})


def test_without_thresholds_the_exit_codes_are_unchanged(echo: EchoServerProcess) -> None:
    assert run_cli(attack(echo.url)) == 0


def test_abort_on_fail_judges_the_live_time_to_first_token(
    llm: LlmServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    argv = ["attack", "--llm", f"{llm.url}/v1", "--model", "m", "--shape", "30:4", "--key", KEY]
    argv += ["--clients", "2", "--duration", "60s", "-q", "--json", str(out)]
    assert run_cli([*argv, "--threshold", "p99(ttft) < 1ms", "--abort-on-fail"]) == 99
    aborted = json.loads(out.read_text())["thresholds"]["aborted"]
    assert aborted["threshold"] == "p99(ttft) < 1ms"
    assert aborted["value"] >= 0.005  # the server waits 5 ms before the first token
    assert "aborted by --abort-on-fail" in capsys.readouterr().out
