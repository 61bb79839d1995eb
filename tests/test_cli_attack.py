"""``pyattacker attack``: bad input refused before any traffic, reports written, Ctrl-C."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from pyattacker.attack import Progress
from pyattacker.cli import run_cli
from pyattacker.cli._progress import LiveProgress
from pyattacker.clock import wall_time
from pyattacker.measure import SAMPLE_COLUMNS
from pyattacker.servers import EchoServerProcess


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServerProcess]:
    with EchoServerProcess(delay="fixed:1ms") as server:
        yield server


PATIENCE_S = 90.0  # the bound on waiting for a child process to get going


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["htp://127.0.0.1:1/", "--rate", "10/s", "--duration", "1s"], "URL"),
        (["http://", "--rate", "10/s", "--duration", "1s"], "URL"),
        (["{url}", "--rate", "0/s", "--duration", "1s"], "--rate"),
        (["{url}", "--rate", "-5", "--duration", "1s"], "--rate"),
        (["{url}", "--rate", "fast", "--duration", "1s"], "--rate"),
        (["{url}", "--rate", "10/s", "--duration", "0s"], "--duration"),
        (["{url}", "--rate", "10/s"], "--duration"),
        (["{url}", "--duration", "1s"], "--rate"),
        (["{url}", "--rate", "10/s", "--clients", "2", "--duration", "1s"], "--clients"),
        (["{url}", "--rate", "10/s", "--duration", "1s", "-H", "NoColonHere"], "--header"),
        (["{url}", "--stages", "10s", "--duration", "1s"], "--stages[0]"),
        (["{url}", "--rate", "10/s", "--duration", "1s", "--algorithm", "psychic"], "--algorithm"),
        (["{url}", "--rate", "10/s", "--duration", "1s", "--retry", "forever"], "--retry"),
        (["{url}", "--rate", "10/s", "--duration", "1s", "--samples", "out.txt"], "--samples"),
        (["{url}", "--rate", "10/s", "--duration", "1s", "--body", "@/no/such/file"], "--body"),
        (["{url}", "--rate", "10/s", "--duration", "1s", "-X", "BREW"], "--method"),
        (["{url}", "--rate", "10/s", "--duration", "1s", "--key", "sk-1"], "--key"),
        (["{url}", "--rate", "10/s", "--duration", "1s", "--json", "."], "--json"),
        (["{url}", "--rate", "10/s", "--duration", "1s", "--think", "1s"], "--think"),
        (["{url}", "--clients", "2", "--duration", "1s", "--arrival", "poisson"], "--clients"),
        (["{url}", "--rate", "10/s", "--duration", "1s", "--timeout", "0s"], "--timeout"),
        (["{url}", "--stages", "1s:10/s,1s:0/banana"], "--stages[1]"),
        (["{url}", "--rate", "10/s", "--requests", "5", "-H", "Content-Length: 3"], "--header"),
        (
            ["{url}", "--rate", "1/s", "--requests", "1", "-H", "A: {key}", "--key", "k\u20ac"],
            "--key[0]",
        ),
        (["{url}", "--rate", "10/s", "--duration", "1s", "--keys-file", "nope.txt"], "--keys-file"),
        (["{url}", "--rate", "10/s", "--duration", "1s", "--preconnect", "300"], "--preconnect"),
    ],
)
def test_bad_input_exits_2_naming_the_field_and_sends_nothing(
    args: list[str],
    field: str,
    echo: EchoServerProcess,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    echo.reset()
    argv = ["attack", *(a.replace("{url}", echo.url) for a in args)]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert f"error: {field}" in err, err
    assert "Traceback" not in err
    assert echo.stats()["count"] == 0
    assert list(tmp_path.iterdir()) == []


def test_a_report_in_every_format_agrees_with_the_server_count(
    echo: EchoServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    echo.reset()
    out, md, rows = tmp_path / "r.json", tmp_path / "r.md", tmp_path / "rows.csv"
    argv = ["attack", echo.url, "--rate", "200/s", "--requests", "100", "-q"]
    argv += ["--json", str(out), "--markdown", str(md), "--samples", str(rows)]
    assert run_cli(argv) == 0
    report = json.loads(out.read_text())
    served = echo.stats()["count"]
    assert report["summary"]["sent"] == report["total"]["requests"] == served == 100
    assert report["total"]["outcomes"] == {"ok": 100}
    assert report["total"]["latency_s"]["scheduled"]["count"] == 100
    with rows.open() as f:
        reader = csv.DictReader(f)
        samples = list(reader)
    assert tuple(reader.fieldnames or ()) == SAMPLE_COLUMNS  # no LLM column in an HTTP run
    assert len(samples) == 100
    assert {row["outcome"] for row in samples} == {"ok"}
    assert "## Latency (ms)" in md.read_text()
    assert report["total"]["sent_attempts"] == 100
    assert report["errors"] == []
    text = capsys.readouterr().out
    for row in ("scheduled", "sent", "dispatch delay"):
        assert row in text
    lines = text.splitlines()
    assert "Errors: none" in lines
    assert any(line.startswith("Attempts: 100 for 100 requests, all sent (") for line in lines)


def test_a_report_that_cannot_be_written_leaves_the_previous_one_whole(
    echo: EchoServerProcess,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "r.json"
    out.write_text("the previous report\n")

    def fsync(fd: int) -> None:  # the disk fills up while the report is written
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fsync)
    argv = ["attack", echo.url, "--rate", "200/s", "--requests", "5", "-q", "--json", str(out)]
    assert run_cli(argv) == 1
    err = capsys.readouterr().err
    assert f"could not write the report to {str(out)!r}: No space left on device" in err
    assert out.read_text() == "the previous report\n"
    assert list(tmp_path.iterdir()) == [out]


def test_json_to_stdout_is_only_json(
    echo: EchoServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        run_cli(["attack", echo.url, "--clients", "2", "--requests", "20", "--json", "-", "-q"])
        == 0
    )
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["plan"]["load"] == {"model": "closed", "clients": 2, "think_time": 0.0}
    assert "Latency (ms)" in captured.err


def test_header_values_stay_out_of_the_report(
    echo: EchoServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "Bearer sk-do-not-print-me"
    argv = [
        "attack",
        echo.url,
        "--rate",
        "50/s",
        "--requests",
        "5",
        "-H",
        f"Authorization: {secret}",
    ]
    assert run_cli([*argv, "--json", "-", "-q"]) == 0
    captured = capsys.readouterr()
    assert "sk-do-not-print-me" not in captured.out + captured.err
    assert json.loads(captured.out)["plan"]["headers"] == ["Authorization"]


def test_ctrl_c_stops_the_attack_prints_what_ran_and_exits_130(echo: EchoServerProcess) -> None:
    echo.reset()  # the module's server: earlier tests' requests must not count below
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pyattacker",
            "attack",
            echo.url,
            "--rate",
            "100/s",
            "--duration",
            "60s",
            "-q",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Interrupt only once the attack is under way (requests reach the server): a busy
    # machine may take seconds just to import, so a fixed pause would not do.
    deadline = wall_time() + PATIENCE_S
    while echo.stats()["count"] == 0:
        assert proc.poll() is None, proc.communicate()
        assert wall_time() < deadline, "the attack never began"
        time.sleep(0.05)  # real time: another process is at work
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Stopped early: interrupted" in out
    assert "Traceback" not in err


def test_help_documents_every_option_and_both_clocks(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["attack", "--help"]) == 0
    text = capsys.readouterr().out
    for option in (
        "--rate",
        "--arrival",
        "--stages",
        "--clients",
        "--think",
        "--duration",
        "--requests",
        "--method",
        "--header",
        "--body",
        "--timeout",
        "--retry",
        "--algorithm",
        "--connections",
        "--preconnect",
        "--max-in-flight",
        "--feedback",
        "--window",
        "--json",
        "--markdown",
        "--samples",
        "--quiet",
    ):
        assert option in text, option
    assert "scheduled" in text
    assert "sent" in text


def test_live_progress_draws_achieved_against_planned_rate_and_both_clocks() -> None:
    screen = io.StringIO()
    live = LiveProgress(Console(file=screen, force_terminal=True, width=160))
    live.update(
        Progress(
            elapsed=2.0,
            planned=1000.0,
            scheduled=1000,
            sent=980,
            completed=970,
            in_flight=10,
            dropped=0,
            failed=3,
            throttled=2,
            latency_p50=0.021,
            latency_p99=0.080,
            service_p50=0.020,
            service_p99=0.075,
        )
    )
    live.close()
    drawn = screen.getvalue()
    assert "490/s of 500" in drawn
    assert "21.0/80.0" in drawn
    assert "20.0/75.0" in drawn
    assert "ttft" not in drawn


def test_live_progress_of_an_llm_attack_adds_ttft_and_tokens_per_second() -> None:
    screen = io.StringIO()
    live = LiveProgress(Console(file=screen, force_terminal=True, width=200))
    live.update(
        Progress(
            elapsed=4.0,
            planned=8.0,
            scheduled=8,
            sent=8,
            completed=6,
            in_flight=2,
            dropped=0,
            failed=0,
            throttled=1,
            latency_p50=1.2,
            latency_p99=1.9,
            service_p50=1.1,
            service_p99=1.8,
            ttft_p50=0.25,
            ttft_p99=0.5,
            completion_tokens=600,
        )
    )
    live.close()
    drawn = screen.getvalue()
    assert "ttft p50/p99 ms" in drawn
    assert "250.0/500.0" in drawn
    assert "150" in drawn  # 600 tokens in 4 s


def test_live_progress_on_a_narrow_terminal_wraps_and_never_cuts_a_number() -> None:
    screen = io.StringIO()
    live = LiveProgress(Console(file=screen, force_terminal=True, width=80))
    live.update(
        Progress(
            elapsed=123.4,
            planned=37020.0,
            scheduled=37020,
            sent=37019,
            completed=36990,
            in_flight=29,
            dropped=0,
            failed=1234,
            throttled=5678,
            latency_p50=0.0509,
            latency_p99=0.0801,
            service_p50=0.049,
            service_p99=0.078,
            ttft_p50=0.25,
            ttft_p99=0.5,
            completion_tokens=600_000,
        )
    )
    live.close()
    drawn = screen.getvalue()
    for figure in ("123.4s", "37019", "300/s of 300", "1234", "5678", "50.9/80.1", "49.0/78.0"):
        assert figure in drawn, figure
    assert "250.0/500.0" in drawn
    assert "4862" in drawn  # tokens/s
    assert "…" not in drawn


def test_a_keys_file_makes_one_target_per_key_and_no_key_reaches_the_report(
    echo: EchoServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("sk-first-secret\n\nsk-second-secret\n")
    argv = ["attack", echo.url, "--rate", "100/s", "--requests", "20", "--keys-file", str(keys)]
    argv += ["-H", "Authorization: Bearer {key}", "--json", "-", "-q"]
    assert run_cli(argv) == 0
    captured = capsys.readouterr()
    assert "secret" not in captured.out + captured.err
    report = json.loads(captured.out)
    assert sorted(report["targets"]) == [f"{echo.url}/ (key 1)", f"{echo.url}/ (key 2)"]
    assert report["plan"]["keys"] == 2
    assert sum(t["requests"] for t in report["targets"].values()) == 20


def test_stages_ramp_up_and_down_to_zero_and_send_what_the_ramps_plan(
    echo: EchoServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    # 0 -> 200/s over 0.5 s, then 200 -> 0/s over 0.5 s: 50 + 50 planned arrivals.
    echo.reset()
    argv = ["attack", echo.url, "--stages", "0.5s:200/s,0.5s:0/s", "--json", "-", "-q"]
    assert run_cli(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["plan"]["load"]["stages"] == [[0.5, 200.0], [0.5, 0.0]]
    assert report["summary"]["planned"] == pytest.approx(100.0)
    assert report["summary"]["scheduled"] == report["summary"]["sent"] == 100
    assert echo.stats()["count"] == 100


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_samples_on_a_full_disk_keep_the_attack_and_its_report_and_exit_1(
    echo: EchoServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    echo.reset()
    rows, out = tmp_path / "rows.csv", tmp_path / "r.json"
    rows.symlink_to("/dev/full")  # every write fails with ENOSPC
    argv = ["attack", echo.url, "--rate", "500/s", "--requests", "2000", "-q"]
    assert run_cli([*argv, "--samples", str(rows), "--json", str(out)]) == 1
    report = json.loads(out.read_text())
    assert report["total"]["outcomes"] == {"ok": 2000}  # the attack itself went on
    assert echo.stats()["count"] == 2000
    captured = capsys.readouterr()
    last = captured.err.strip().splitlines()[-1]
    assert last.startswith(f"--samples: writing {rows} failed (No space left on device)")
    assert "incomplete" in last
    assert "Traceback" not in captured.err
