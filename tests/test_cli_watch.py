"""``pyattacker watch STORE``, and ``serve`` beside a live run: a run held live by a gate
file is watched and scraped while it runs, then seen to end."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import IO

import pytest

from pyattacker.cli import run_cli
from pyattacker.cli._watch import Look, _show, status_lines
from serve_helpers import (
    assert_metrics_equal_the_report,
    child,
    fetch,
    finished_store,
    leases_in_use,
    run_arguments,
    samples,
    served,
)


def test_watching_a_finished_failed_run_prints_its_report_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    store, code = finished_store(tmp_path, range(1, 11))
    assert code == 1
    capsys.readouterr()
    assert run_cli(["watch", str(store)]) == 1
    out = capsys.readouterr().out
    assert "pyattacker run report" in out
    assert "10 pipelines: 8 succeeded, 2 failed" in out


def test_watching_a_finished_successful_run_exits_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    store, code = finished_store(tmp_path, range(1, 5))
    assert code == 0
    assert run_cli(["watch", str(store), "--every", "100ms"]) == 0


def test_watch_refuses_a_missing_store_and_a_zero_period(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["watch", str(tmp_path / "none.db")]) == 2
    assert "STORE" in capsys.readouterr().err
    assert run_cli(["watch", str(tmp_path / "none.db"), "--every", "0s"]) == 2
    assert "--every" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_rate_needs_two_looks_and_counts_pipelines_per_second_between_them() -> None:
    look = Look()
    assert look.rate(10.0, 4) is None
    assert look.rate(12.0, 10) == 3.0
    assert look.rate(12.0, 11) is None  # no time passed: no rate
    assert look.rate(13.0, 9) == 0.0  # fewer done (a resume reclassified some): not negative


def test_the_status_shows_progress_of_the_inputs_rows_with_rate_and_eta() -> None:
    summary = {
        "runs": [{"run_id": "r1", "state": "running", "live": True,
                  "consumed": {"rows_total": 100}}],
        "pipelines": {"total": 40, "by_state": {"succeeded": 30, "failed": 5, "running": 5}},
        "attempts": {"total": 50, "by_outcome": {"ok": 30, "failed": 20},
                     "by_error_class": {"rate_limit": 12, "fatal": 8},
                     "by_resource": {"llm/k1": {"throttled": 12}, "llm/k2": {"throttled": 0}}},
    }  # fmt: skip
    lines = status_lines(summary, 5.0)
    assert lines[0].endswith("run r1 running (live)")
    assert lines[1:] == [
        "pipelines 35/100 done (30 succeeded, 5 failed, 5 running) 5.0/s, ETA 13 s",
        "attempts 50 (30 ok, 20 failed)",
        "errors by class: 12 rate_limit, 8 fatal",
        "throttled: 12 llm/k1",
    ]


@pytest.mark.slow
def test_a_live_run_is_watched_and_scraped_as_it_goes_then_seen_to_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = child(tmp_path, *run_arguments(tmp_path, range(1, 9), gated=True))
    watch = None
    try:
        while not (tmp_path / "eval.db").exists():
            assert run.poll() is None, run.communicate()
            time.sleep(0.05)
        watch = child(tmp_path, "watch", "eval.db", "--every", "50ms")
        assert watch.stdout is not None
        live = _read_until(watch.stdout, "(live)")
        assert "\x1b" not in live  # a pipe gets plain lines
        assert "pipelines 0/8 done" in live
        with served(tmp_path, tmp_path / "eval.db") as (url, _):
            found = samples(fetch(f"{url}/metrics")[2].decode())
            assert found["pyattacker_run_live"] == [({}, 1.0)]
            assert json.loads(fetch(f"{url}/report.json")[2])["live"]["done"] is False
            # the gated items hold both of k1's leases: the run records that at a heartbeat
            _wait_for_leases(url, {"llm/k1": 2.0})
            (tmp_path / "go").touch()
            rest, _ = watch.communicate(timeout=120)
            assert watch.returncode == 1  # item 5 fails on purpose
            assert "8 pipelines: 7 succeeded, 1 failed" in rest
            assert run.wait(timeout=120) == 1
            capsys.readouterr()
            assert run_cli(["report", str(tmp_path / "eval.db"), "--json"]) == 0
            report = json.loads(capsys.readouterr().out)
            metrics = fetch(f"{url}/metrics")[2].decode()
            assert_metrics_equal_the_report(metrics, report)
            assert leases_in_use(metrics) == {"llm/k1": 0.0}  # no run is live: none out
    finally:
        for process in (run, watch):
            if process is not None and process.poll() is None:
                process.kill()
            if process is not None:
                process.communicate()


def _wait_for_leases(url: str, expected: dict[str, float]) -> None:
    """Until ``url``'s /metrics gauge of leases in use reads ``expected`` (the live run
    records its leases at the first heartbeat after they change); fails after a minute."""
    found: dict[str, float] = {}
    for _ in range(1200):
        found = leases_in_use(fetch(f"{url}/metrics")[2].decode())
        if found == expected:
            return
        time.sleep(0.05)
    raise AssertionError(f"leases in use stayed {found}, never {expected}")


def _read_until(stream: IO[str], text: str) -> str:
    """Lines of ``stream`` up to the first holding ``text`` (that line included)."""
    seen = ""
    for line in stream:
        seen += line
        if text in line:
            return seen
    raise AssertionError(f"never saw {text!r} in:\n{seen}")


def test_a_terminal_is_redrawn_in_place_and_a_pipe_gets_one_plain_line_per_look(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _show(["12:00:00 run r1 running (live)", "pipelines 3/9 done"], terminal=True)
    assert (
        capsys.readouterr().out
        == "\x1b[H\x1b[2J12:00:00 run r1 running (live)\npipelines 3/9 done\n"
    )
    _show(["12:00:00 run r1 running (live)", "pipelines 3/9 done"], terminal=False)
    assert capsys.readouterr().out == "12:00:00 run r1 running (live) | pipelines 3/9 done\n"
