"""``pyattacker bench``: bad input refused before any run, reports written, numbers reproducible."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from pyattacker.benchmark._metrics import METRICS
from pyattacker.benchmark._result import RunResult
from pyattacker.benchmark._scenarios import SCENARIOS
from pyattacker.cli import run_cli
from pyattacker.cli._bench import _Bar
from pyattacker.pool import ALGORITHMS

SMALL = ["--algorithms", "wait,immediate", "--seeds", "1", "--jobs", "40"]
SMALL += ["--concurrency", "4", "--horizon", "30", "--jobs-parallel", "1"]


def _bench(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = run_cli(["bench", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _without_wall_time(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_wall_time(v) for k, v in value.items() if k != "wall_s"}
    if isinstance(value, list):
        return [_without_wall_time(v) for v in value]
    return value


def test_list_shows_every_metric_with_its_unit_direction_and_gate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _bench(capsys, "--list")
    assert code == 0
    lines = out.splitlines()
    for metric in METRICS.values():
        (line,) = [line for line in lines if line.split()[:1] == [metric.name]]
        words = line.split()
        assert words[1:3] == [metric.unit, metric.better]
        assert (words[3] == "*") == metric.requires_comparable_completion, line
        assert metric.meaning.split()[0] in line


def test_list_shows_every_scenario_with_what_it_cannot_exercise_and_every_algorithm(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out, _ = _bench(capsys, "--list")
    lines = out.splitlines()
    for name, scenario in SCENARIOS.items():
        at = next(i for i, line in enumerate(lines) if line.split()[:1] == [name])
        assert " ".join(scenario.summary.split()[:4]) in lines[at]
        block = []
        for line in lines[at + 1 :]:
            if not line.startswith(" " * 6):
                break
            block.append(line)
        unsuited = [line.split("unsuited: ")[1].split()[0] for line in block if "unsuited:" in line]
        assert unsuited == list(scenario.unsuited), name
    for algorithm in ALGORITHMS:
        assert any(line.split()[:1] == [algorithm] for line in lines), algorithm


def test_an_unknown_scenario_exits_2_naming_the_valid_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _bench(capsys, "--scenario", "bursty_providr", *SMALL)
    assert code == 2
    assert out == ""
    assert err.startswith("error: --scenario: no scenario called 'bursty_providr'")
    assert all(name in err for name in SCENARIOS)
    assert len(err.splitlines()) == 1


def test_an_unknown_algorithm_exits_2_naming_the_valid_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _bench(capsys, *SMALL, "--algorithms", "wait,psychic")
    assert code == 2
    assert out == ""
    assert err.startswith("error: --algorithms: unknown algorithm(s): psychic")
    assert all(name in err for name in ALGORITHMS)
    assert len(err.splitlines()) == 1


def test_a_small_run_prints_a_row_for_every_metric_and_a_line_per_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _bench(capsys, *SMALL)
    assert code == 0
    assert "40 jobs x 3 steps x 2 calls, 4 workers" in out  # the overrides reached the scenario
    rows = {line.split()[0] for line in out.splitlines() if line.strip()}
    assert set(METRICS) <= rows
    header = next(line for line in out.splitlines() if line.startswith("metric"))
    assert header.split() == ["metric", "wait", "immediate", "best"]
    progress = [line for line in err.splitlines() if line.startswith("bench [")]
    assert [line.split()[:4] for line in progress] == [
        ["bench", "[1/2]", "wait", f"seed={SCENARIOS['bursty_provider'].seed}"],
        ["bench", "[2/2]", "immediate", f"seed={SCENARIOS['bursty_provider'].seed}"],
    ]
    assert all("jobs_done=" in line and "wall_s=" in line for line in progress)


def test_quiet_prints_no_progress(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _bench(capsys, *SMALL, "--quiet")
    assert code == 0
    assert err == ""
    assert "jobs_done" in out


def test_json_to_stdout_is_only_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _bench(capsys, *SMALL, "--json", "-")
    assert code == 0
    report = json.loads(out)
    assert report["algorithms"] == ["wait", "immediate"]
    assert set(report["metrics"]) == set(METRICS)
    assert "jobs_done" in err  # the table went to stderr


def test_markdown_to_stdout_replaces_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _bench(capsys, *SMALL, "--markdown", "-", "-q")
    assert code == 0
    assert out.startswith("# Benchmark: bursty_provider")
    assert err == ""  # quiet: neither progress nor the table's copy


def test_the_reports_are_written_to_files_and_nothing_else_is_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json, out_md = tmp_path / "r.json", tmp_path / "r.md"
    out_json.write_text("old")  # replaced, not appended to
    code, out, _ = _bench(capsys, *SMALL, "--json", str(out_json), "--markdown", str(out_md))
    assert code == 0
    assert "jobs_done" in out
    assert set(json.loads(out_json.read_text())["metrics"]) == set(METRICS)
    assert out_md.read_text().startswith("# Benchmark: bursty_provider")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.md"]


def test_by_default_the_runs_are_shared_by_one_process_per_core(
    capsys: pytest.CaptureFixture[str],
) -> None:
    default = SMALL[: SMALL.index("--jobs-parallel")]
    assert "--jobs-parallel" not in default
    code, _, err = _bench(capsys, *default, "--seeds", "2")
    assert code == 0
    plan = err.splitlines()[0]
    processes = min(os.cpu_count() or 1, 4)
    expected = "1 process" if processes == 1 else f"{processes} processes"
    assert plan.endswith(f"= 4 run(s) of 40 jobs on {expected}")


def test_processes_give_the_serial_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [*SMALL, "--seeds", "2", "-q", "--json"]  # SMALL runs in one process
    assert _bench(capsys, *args, str(tmp_path / "serial.json"))[0] == 0
    assert _bench(capsys, *args, str(tmp_path / "parallel.json"), "--jobs-parallel", "2")[0] == 0
    serial = json.loads((tmp_path / "serial.json").read_text())
    parallel = json.loads((tmp_path / "parallel.json").read_text())
    assert len(serial["runs"]) == 4
    assert _without_wall_time(parallel) == _without_wall_time(serial)


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (["--json", "{tmp}/missing/r.json"], "--json"),
        (["--markdown", "{tmp}/missing/r.md"], "--markdown"),
        (["--json", "{tmp}"], "--json"),
        (["--json", "-", "--markdown", "-"], "--markdown"),
        (["--json", "{tmp}/r", "--markdown", "{tmp}/r"], "--markdown"),
        (["--horizon", "0"], "--horizon"),
        (["--horizon", "soon"], "--horizon"),
        (["--wall-budget", "0"], "--wall-budget"),
        (["--speedup", "5"], "--speedup"),
        (["--scenario", "multi_vendor", "--scenario-file", "{tmp}/s.toml"], "--scenario-file"),
        (["--scenario-file", "{tmp}/none.toml"], "--scenario-file"),
        (["--scenario-file", "{tmp}/s.ini"], "--scenario-file"),
    ],
)
def test_bad_input_exits_2_naming_the_flag_before_anything_runs(
    flags: list[str], field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _bench(capsys, *SMALL, *(f.replace("{tmp}", str(tmp_path)) for f in flags))
    assert code == 2
    assert out == ""
    assert err.startswith(f"error: {field}: "), err
    assert len(err.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_a_scenario_file_is_benchmarked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(
        'name = "mine"\nbase = "thundering_herd"\njobs = 500\n\n'
        '[[endpoints]]\nid = "only"\ncapacity = 3\n'
    )
    code, out, _ = _bench(capsys, "--scenario-file", str(path), *SMALL[:4], "--json", "-", "-q")
    assert code == 0
    report = json.loads(out)
    assert report["scenario"]["name"] == "mine"
    assert [run["endpoint_admitted"].keys() for run in report["runs"]] == [{"only"}, {"only"}]


def test_a_mistake_in_a_scenario_file_exits_2_naming_the_key_and_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"base": "bursty_provider", "endpoints": [{"id": "a"}, {}]}))
    code, out, err = _bench(capsys, "--scenario-file", str(path), *SMALL)
    assert code == 2
    assert out == ""
    assert err.startswith("error: endpoints[1].id: required, but missing")
    assert str(path) in err


def test_a_run_that_cannot_finish_exits_1_with_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["--algorithms", "wait", "--seeds", "1", "--wall-budget", "0.001", "--json", "-"]
    code, out, err = _bench(capsys, *args)
    assert code == 1
    assert out == ""
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1
    assert "wait on bursty_provider" in errors[0]
    assert "Traceback" not in err


@pytest.mark.parametrize("processes", ["1", "2"])
@pytest.mark.parametrize("whole_group", [False, True], ids=["parent", "process-group"])
def test_ctrl_c_stops_the_sweep_and_exits_130(processes: str, whole_group: bool) -> None:
    """Ctrl-C at a terminal signals the whole process group, workers included; either way
    the parent stops every worker, prints no table and no traceback, and exits 130."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pyattacker", "bench", "--seeds", "5", "--jobs-parallel", processes],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("bench [1/"):
            break
    if whole_group:
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert out == ""  # no table of a sweep that did not finish
    assert "interrupted" in err.splitlines()
    assert "Traceback" not in err
    assert "never retrieved" not in err


def test_on_a_terminal_progress_is_a_bar_naming_the_last_run() -> None:
    stream = io.StringIO()
    bar = _Bar(2, Console(file=stream, force_terminal=True, width=120))
    with bar:
        bar.finished(RunResult("s", "wait", 7, {"jobs_done": 3.0, "wall_s": 0.25}))
    shown = stream.getvalue()
    assert "1/2" in shown
    assert "wait seed=7 jobs_done=3 wall_s=0.25" in shown
