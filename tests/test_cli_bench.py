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
from pyattacker.cli._bench_output import _Bar
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
        # a metric's row starts at the table's indent; a wrapped description line (the
        # terminal's width decides where) is indented further, whatever word it starts with
        (line,) = [line for line in lines if line.startswith(f"  {metric.name} ")]
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
    processes = min(len(os.sched_getaffinity(0)), 4)
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


# -- --list and --scenario refuse what they would ignore ---------------------------------------


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--scenario", "nope"], "--scenario"),
        (["--algorithms", "wait", "-q"], "--algorithms, --quiet"),
        (["--seeds", "3"], "--seeds"),  # even a default value, given on purpose
    ],
)
def test_list_with_another_flag_exits_2_naming_it(
    flags: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _bench(capsys, "--list", *flags)
    assert code == 2
    assert out == ""
    assert err.startswith(
        f"error: --list: prints the lists and exits, so it takes no other flag (got {named})"
    )


def test_an_empty_scenario_name_exits_2_naming_the_valid_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _bench(capsys, "--scenario", "", *SMALL)
    assert code == 2
    assert out == ""
    assert err.startswith("error: --scenario: no scenario called ''")
    assert all(name in err for name in SCENARIOS)


# -- output paths: resolved once, distinct, written all together -------------------------------


def test_a_home_relative_output_is_written_where_it_was_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    code, _, err = _bench(capsys, *SMALL, "-q", "--json", "ok.json", "--markdown", "~/x.md")
    assert code == 0, err
    assert (home / "x.md").read_text().startswith("# Benchmark: bursty_provider")
    assert json.loads((cwd / "ok.json").read_text())["algorithms"] == ["wait", "immediate"]
    assert sorted(p.name for p in cwd.iterdir()) == ["ok.json"]  # no folder called "~"


@pytest.mark.parametrize(
    "flags",
    [
        ["--json", "r.out", "--markdown", "./r.out"],
        ["--json", "r.out", "--markdown", "sub/../r.out"],
        ["--json", "r.out", "--markdown", "link.out"],  # a symlink to r.out
        ["--json", "r.out", "--markdown", "~/r.out"],
        ["--scenario-file", "s.json", "--json", "s.json"],
        ["--scenario-file", "s.json", "--markdown", "./s.json"],
    ],
)
def test_two_flags_naming_one_file_exit_2_before_anything_runs(
    flags: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.out").symlink_to(tmp_path / "r.out")
    scenario = json.dumps({"base": "bursty_provider", "name": "mine"})
    (tmp_path / "s.json").write_text(scenario)
    code, out, err = _bench(capsys, *SMALL, *flags)
    assert code == 2
    assert out == ""
    assert err.startswith(f"error: {flags[-2]}: ")
    assert "name the same file" in err
    assert len(err.splitlines()) == 1  # no plan, no progress: nothing ran
    assert (tmp_path / "s.json").read_text() == scenario
    assert not (tmp_path / "r.out").exists()


def test_a_report_over_an_existing_file_needs_a_writable_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The file is writable, its folder is not: the rename that replaces it would fail.
    # (Simulated through os.access: the tests may run as root, whom permissions do not stop.)
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "r.json").write_text("old")
    real_access = os.access

    def access(path: Any, mode: int, **kwargs: Any) -> bool:
        return Path(path) != folder and real_access(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", access)
    code, out, err = _bench(capsys, *SMALL, "--json", str(folder / "r.json"))
    assert code == 2
    assert out == ""
    assert err.startswith(f"error: --json: cannot write {folder / 'r.json'}: the folder")
    assert len(err.splitlines()) == 1


def test_when_one_report_cannot_be_written_no_report_is_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out_json, out_md = tmp_path / "r.json", tmp_path / "r.md"
    out_json.write_text("old json")
    out_md.write_text("old markdown")
    real_fsync, calls = os.fsync, []

    def fsync(fd: int) -> None:  # the disk fills up while the second report is written
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    code, out, err = _bench(
        capsys, *SMALL, "-q", "--json", str(out_json), "--markdown", str(out_md)
    )
    assert code == 1
    assert err == f"error: could not write {out_md}: No space left on device\n"
    assert out == ""  # not even the table: all or nothing
    assert out_json.read_text() == "old json"
    assert out_md.read_text() == "old markdown"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.md"]


def test_reports_respect_the_umask_and_keep_an_existing_files_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = tmp_path / "kept.md"
    kept.write_text("old")
    kept.chmod(0o600)
    previous = os.umask(0o027)
    try:
        code, _, _ = _bench(
            capsys, *SMALL, "-q", "--json", str(tmp_path / "new.json"), "--markdown", str(kept)
        )
    finally:
        os.umask(previous)
    assert code == 0
    assert (tmp_path / "new.json").stat().st_mode & 0o777 == 0o640
    assert kept.stat().st_mode & 0o777 == 0o600
    assert kept.read_text().startswith("# Benchmark")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_by_default_one_process_per_core_this_process_may_use(
    capsys: pytest.CaptureFixture[str],
) -> None:
    default = SMALL[: SMALL.index("--jobs-parallel")]
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(allowed)})  # as `taskset -c N` or a container would
    try:
        code, _, err = _bench(capsys, *default, "--seeds", "2")
    finally:
        os.sched_setaffinity(0, allowed)
    assert code == 0
    assert err.splitlines()[0].endswith("= 4 run(s) of 40 jobs on 1 process")


def test_the_elapsed_time_goes_to_stderr_and_the_headline_does_not_call_summed_time_wall(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _bench(capsys, *SMALL)
    assert code == 0
    headline = out.splitlines()[0]
    assert " wall " not in headline
    assert "run time" in headline
    assert "summed over 2 runs" in headline
    assert any(
        line.startswith("bench: 2 run(s) in ") and line.endswith("s elapsed")
        for line in err.splitlines()
    )


# -- scenario files: reports read back, mistakes as exit 2 -------------------------------------


def test_a_json_report_repeats_its_run_when_given_as_the_scenario_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, again = tmp_path / "first.json", tmp_path / "again.json"
    assert _bench(capsys, *SMALL, "-q", "--json", str(first))[0] == 0
    flags = [*SMALL[:4], "--jobs-parallel", "1", "-q"]  # no overrides: the report has them
    code, _, err = _bench(capsys, "--scenario-file", str(first), *flags, "--json", str(again))
    assert code == 0, err
    original, repeated = json.loads(first.read_text()), json.loads(again.read_text())
    assert repeated["scenario"]["definition"]["jobs"] == 40
    assert _without_wall_time(repeated) == _without_wall_time(original)


def test_a_scenario_file_nested_too_deeply_exits_2_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 200_000)
    code, out, err = _bench(capsys, "--scenario-file", str(path), *SMALL)
    assert code == 2
    assert out == ""
    assert err.startswith(f"error: --scenario-file: {path} is nested too deeply to read")
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1


def test_no_message_counts_the_algorithms_of_the_default_sweep_as_five(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _bench(capsys, "--help")
    assert code == 0
    assert "five" not in out.lower()
