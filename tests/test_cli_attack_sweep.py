"""``attack --sweep`` and ``--warmup`` from the command line, against servers on loopback:
bad input refused before any traffic, reports in every form, and every request the
servers counted accounted for (the warmup's included)."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyattacker.cli import run_cli
from pyattacker.clock import wall_time
from pyattacker.servers import EchoServerProcess, LlmServerProcess

PATIENCE_S = 90.0  # the bound on waiting for a child process to get going


@pytest.fixture(scope="module")
def llm() -> Iterator[LlmServerProcess]:
    with LlmServerProcess(models="m", ttft="fixed:5ms", itl="fixed:1ms", output_tokens=4) as s:
        yield s


LLM = ["--llm", "{url}/v1", "--model", "m", "--shape", "10:4"]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ([*LLM, "--sweep", "--rate", "5/s", "--duration", "1s"], "--rate"),
        ([*LLM, "--sweep", "--stages", "1s:5/s"], "--stages"),
        ([*LLM, "--sweep", "--duration", "1s", "--threshold", "p99(ttft) < 1s"], "--threshold"),
        ([*LLM, "--sweep", "--duration", "1s", "--abort-on-fail"], "--abort-on-fail"),
        ([*LLM, "--sweep", "--duration", "1s", "--samples", "rows.txt"], "--samples"),
        ([*LLM, "--sweep", "--duration", "1s", "--samples", "/nonexistent/rows.csv"],
         "--samples"),
        ([*LLM, "--sweep", "--duration", "1s", "--serve", "0"], "--serve"),
        ([*LLM, "--sweep", "fast", "--duration", "1s"], "--sweep"),
        ([*LLM, "--sweep", "concurrency=1,0", "--duration", "1s"], "--sweep[1]"),
        ([*LLM, "--sweep", "concurrency=1,2", "--clients", "4", "--duration", "1s"], "--clients"),
        ([*LLM, "--sweep", "--sweep-levels", "0", "--duration", "1s"], "--sweep-levels"),
        ([*LLM, "--sweep"], "--duration"),
        ([*LLM, "--sweep", "--duration", "1s", "--warmup", "1s"], "--warmup"),
        ([*LLM, "--rate", "5/s", "--duration", "1s", "--sweep-levels", "3"], "--sweep-levels"),
        ([*LLM, "--rate", "5/s", "--duration", "1s", "--warmup", "2"], None),
        ([*LLM, "--rate", "5/s", "--requests", "4", "--warmup", "4"], "--warmup"),
        ([*LLM, "--rate", "5/s", "--requests", "4", "--warmup", "1.5"], "--warmup"),
        ([*LLM, "--rate", "5/s", "--requests", "4", "--warmup", "soon"], "--warmup"),
        ([*LLM, "--sweep", "rate=1/s", "--duration", "1s", "--json", "/nonexistent/s.json"],
         "--json"),
        ([*LLM, "--sweep", "concurrency=1,2", "--sweep-levels", "3", "--duration", "1s"],
         "--sweep-levels"),
        ([*LLM, "--sweep", "--clients", "1", "--duration", "1s"], "--clients"),
        ([*LLM, "--sweep", "--clients", "200000", "--duration", "1s"], "--clients"),
        ([*LLM, "--sweep", "rate=1/s,20000000/s", "--duration", "1s"], "--sweep"),
    ],
)  # fmt: skip
def test_bad_sweep_or_warmup_input_exits_2_naming_the_flag_and_sends_nothing(
    args: list[str],
    field: str | None,
    llm: LlmServerProcess,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    llm.reset()
    argv = ["attack", *(a.replace("{url}", llm.url) for a in args), "-q"]
    code = run_cli(argv)
    err = capsys.readouterr().err
    if field is None:  # the control: the same flags, well formed, run
        assert code == 0, err
        return
    assert code == 2, err
    assert f"error: {field}" in err, err
    assert f"error: {field}: {field}" not in err, err  # the flag, named once
    assert "Traceback" not in err
    assert llm.stats()["requests"] == 0
    assert list(tmp_path.iterdir()) == []


def test_a_concurrency_sweep_reports_a_row_per_level_and_every_request_the_server_saw(
    llm: LlmServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    llm.reset()
    out, md = tmp_path / "s.json", tmp_path / "s.md"
    argv = ["attack", *(a.replace("{url}", llm.url) for a in LLM), "--sweep", "concurrency=1,3"]
    argv += ["--requests", "12", "--warmup", "2", "--json", str(out), "--markdown", str(md), "-q"]
    assert run_cli(argv) == 0
    text = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert [row["level"] for row in data["rows"]] == ["concurrency 1", "concurrency 3"]
    assert [row["requests"] for row in data["rows"]] == [10, 10]
    assert data["sweep"]["levels_run"] == 2
    sent = sum(
        level["report"]["total"]["sent_attempts"] + level["report"]["warmup"]["sent_attempts"]
        for level in data["levels"]
    )
    assert sent == llm.stats()["requests"] == 24
    assert all(level["report"]["headline"]["output_tokens_per_s"] for level in data["levels"])
    assert "concurrency 3" in text
    assert "Saturates at:" in text
    assert "| concurrency 1 |" in md.read_text()


def test_an_auto_sweep_runs_synchronous_throughput_and_the_rates_between(
    llm: LlmServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    llm.reset()
    argv = ["attack", *(a.replace("{url}", llm.url) for a in LLM), "--sweep", "--clients", "4"]
    argv += ["--sweep-levels", "2", "--duration", "0.5s", "--json", "-", "-q"]
    assert run_cli(argv) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    kinds = [row["kind"] for row in data["rows"]]
    assert kinds == ["synchronous", "rate", "rate", "throughput"]
    assert data["rows"][-1]["concurrency"] == 4
    assert data["rows"][1]["offered_rate"] < data["rows"][2]["offered_rate"]
    assert "sweep level 4/4" in captured.err
    sent = sum(level["report"]["total"]["sent_attempts"] for level in data["levels"])
    assert sent == llm.stats()["requests"]


def test_an_http_attack_with_a_warmup_says_so_and_its_counts_add_up_to_the_servers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with EchoServerProcess() as echo:
        out = tmp_path / "r.json"
        argv = ["attack", f"{echo.url}/", "--rate", "40/s", "--duration", "1s"]
        argv += ["--warmup", "0.25s", "--json", str(out), "-q"]
        assert run_cli(argv) == 0
        served = echo.stats()["count"]
    text = capsys.readouterr().out
    report = json.loads(out.read_text())
    warm = report["warmup"]
    assert warm["scheduled"] == warm["sent"] == 10
    assert report["summary"]["scheduled"] == report["total"]["requests"] == 30
    assert warm["sent_attempts"] + report["total"]["sent_attempts"] == served == 40
    assert report["summary"]["schedule_s"] == pytest.approx(0.75)
    assert "Warmup: 10 requests in the first 0.25s, excluded from every figure" in text
    assert "headline" not in report  # an HTTP attack has no LLM headline


def test_an_llm_report_leads_with_its_headline(
    llm: LlmServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    llm.reset()
    out, md = tmp_path / "r.json", tmp_path / "r.md"
    argv = ["attack", *(a.replace("{url}", llm.url) for a in LLM), "--rate", "20/s"]
    argv += ["--requests", "10", "--json", str(out), "--markdown", str(md), "-q"]
    assert run_cli(argv) == 0
    report = json.loads(out.read_text())
    head = report["headline"]
    assert head["ttft_clock"] == "scheduled"
    assert head["ttft_p99_s"] == report["llm"]["ttft_s"]["scheduled"]["p99"]
    assert head["itl_p50_s"] == report["llm"]["itl_s"]["p50"]
    span = report["summary"]["answer_span_s"]
    assert head["output_tokens_per_s"] == pytest.approx(40 / span)  # 10 answers of 4 tokens
    assert head["requests_per_s"] == pytest.approx(10 / span)
    out = capsys.readouterr().out
    lead = out[: out.index("\n\n")].splitlines()  # the lines before the first table
    assert any(line.startswith("Headline: ") for line in lead)
    assert "- Headline: " in md.read_text()


def test_help_lists_the_sweep_and_warmup_options() -> None:
    from click.testing import CliRunner

    from pyattacker.cli import cli

    shown = CliRunner().invoke(cli, ["attack", "--help"]).output
    for flag in ("--sweep", "--sweep-levels", "--warmup", "concurrency=1,8,32"):
        assert flag in shown


def test_ctrl_c_during_a_sweep_reports_the_levels_done_and_exits_130(tmp_path: Path) -> None:
    out, rows_path = tmp_path / "s.json", tmp_path / "rows.csv"
    with EchoServerProcess() as echo:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pyattacker", "attack", echo.url, "--sweep",
             "rate=1/s,10/s,100/s", "--duration", "2s", "--json", str(out), "-q",
             "--samples", str(rows_path)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert proc.stderr is not None
        deadline = wall_time() + PATIENCE_S
        while "sweep level 2/3" not in proc.stderr.readline():
            assert proc.poll() is None, proc.communicate()
            assert wall_time() < deadline, "the second level never began"
        while echo.stats()["count"] <= 2:  # the second level's first request is in
            assert wall_time() < deadline, "the second level sent nothing"
            time.sleep(0.05)  # real time: another process is at work
        proc.send_signal(signal.SIGINT)
        text, err = proc.communicate(timeout=60)
        served = echo.stats()["count"]
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    data = json.loads(out.read_text())
    assert data["sweep"]["interrupted"] is True
    assert [row["level"] for row in data["rows"]] == ["rate 1/s", "rate 10/s"]
    assert data["rows"][1]["stop_reason"] == "interrupted"
    assert [row["stopped"] for row in data["rows"]] == [False, True]
    assert "rate 10/s (stopped)" in text
    assert sum(level["report"]["total"]["sent_attempts"] for level in data["levels"]) == served
    assert "Interrupted" in text
    # the rows of both levels, the one cut short too, and no level's file left over
    with rows_path.open(newline="") as f:
        loads = [row["load"] for row in csv.DictReader(f)]
    assert loads == ["rate 1/s"] * 2 + ["rate 10/s"] * data["rows"][1]["requests"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.csv", "s.json"]


def test_a_closed_warmup_that_takes_every_request_says_nothing_was_measured_and_exits_1(
    llm: LlmServerProcess, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A closed model's requests come as fast as the answers: no check before the run can
    # tell whether 5 s of warmup leaves any of 10 requests.
    argv = ["attack", *(a.replace("{url}", llm.url) for a in LLM), "--clients", "1",
            "--requests", "10", "--warmup", "5s", "-q",
            "--json", str(tmp_path / "r.json")]  # fmt: skip
    assert run_cli(argv) == 1
    err = capsys.readouterr().err
    assert "nothing measured: the warmup took all 10 requests" in err
    headline = json.loads((tmp_path / "r.json").read_text())["headline"]
    assert headline["output_tokens_per_s"] is None
    assert headline["requests_per_s"] is None
    sweep = ["attack", *(a.replace("{url}", llm.url) for a in LLM), "--sweep",
             "concurrency=1,2", "--requests", "10", "--warmup", "5s", "-q"]  # fmt: skip
    assert run_cli(sweep) == 1
    assert "nothing measured at concurrency 1, concurrency 2" in capsys.readouterr().err


@pytest.mark.parametrize(("suffix", "workers"), [(".csv", "1"), (".jsonl", "2")])
def test_a_sweep_writes_every_levels_rows_into_one_samples_file_each_with_its_level(
    suffix: str, workers: str, llm: LlmServerProcess, tmp_path: Path
) -> None:
    llm.reset()
    rows_path, out = tmp_path / f"rows{suffix}", tmp_path / "s.json"
    argv = ["attack", *(a.replace("{url}", llm.url) for a in LLM), "--sweep", "concurrency=1,3"]
    argv += ["--requests", "12", "--warmup", "2", "--workers", workers, "-q"]
    assert run_cli([*argv, "--samples", str(rows_path), "--json", str(out)]) == 0
    if suffix == ".csv":
        with rows_path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        assert list(rows[0])[:3] == ["level", "load", "request"]
    else:
        rows = [json.loads(line) for line in rows_path.read_text().splitlines()]
    levels = json.loads(out.read_text())["rows"]
    # every measured request of each level (the warmup's are left out), named as the
    # report's rows name the levels, and nothing else left beside the file
    for number, level in enumerate(levels, start=1):
        mine = [r for r in rows if str(r["level"]) == str(number)]
        assert {r["load"] for r in mine} == {level["level"]}
        assert len(mine) == level["requests"] == 10
        assert sorted(int(r["request"]) for r in mine) == list(range(2, 12))
    assert len(rows) == 20
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([rows_path.name, "s.json"])


def test_a_sweep_on_workers_runs_each_level_on_the_workers_its_load_can_be_shared_by(
    llm: LlmServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    llm.reset()
    out = tmp_path / "s.json"
    argv = ["attack", *(a.replace("{url}", llm.url) for a in LLM), "--sweep", "concurrency=1,4"]
    argv += ["--requests", "12", "--warmup", "2", "--workers", "2", "--per-worker", "-q"]
    assert run_cli([*argv, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert [row["requests"] for row in data["rows"]] == [10, 10]
    reports = [level["report"] for level in data["levels"]]
    assert reports[0]["workers"]["count"] == 1  # one client: one worker, --per-worker shows it
    assert reports[1]["workers"]["count"] == 2
    assert [w["scheduled"] for w in reports[1]["workers"]["each"]] == [5, 5]
    sent = sum(r["total"]["sent_attempts"] + r["warmup"]["sent_attempts"] for r in reports)
    assert sent == llm.stats()["requests"] == 24
    assert "worker 1: finished" in capsys.readouterr().err
