"""``pyattacker selftest``: the machine checks a user runs, and the rules they share.

The attacks here are tiny and their figures are never judged (the machine is shared):
the tests check that the truth comparison is made and reported, not that it passes.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.attack import usable_cores
from pyattacker.cli import run_cli
from pyattacker.errors import ConfigError
from pyattacker.selftest import (
    GOAL,
    MAX_PROCESSES,
    AccuracyCheck,
    Figure,
    Level,
    ScaleCheck,
    Setup,
    _neighbours,
    busy_note,
    level_problems,
    render_accuracy,
    render_scale,
    run_scale,
)

TINY_ACCURACY = ["--rate", "100/s", "--duration", "0.3s", "--delay", "fixed:5ms"]
TINY_SCALE = ["--levels", "50,100", "--hold", "0.3s"]


def run_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = run_cli(["selftest", *args, "--json", "-"])
    return code, json.loads(capsys.readouterr().out)


def test_selftest_accuracy_compares_both_clocks_with_the_servers_truth(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, document = run_json(["accuracy", *TINY_ACCURACY], capsys)
    accuracy = document["accuracy"]
    assert document["scale"] is None
    assert document["machine"]["cpus"] == os.cpu_count()
    assert accuracy["requests"] == accuracy["server_count"] == 30
    figures = accuracy["figures"]
    assert [(f["clock"], f["quantile"]) for f in figures] == [
        (clock, q) for clock in ("scheduled", "sent") for q in ("p50", "p90", "p99")
    ]
    for figure in figures:
        assert figure["truth"] >= 0.005  # the server held each request its 5 ms
        assert figure["error"] == pytest.approx(figure["ours"] - figure["truth"])
        assert figure["tolerance"] == GOAL.tolerance(figure["truth"])
    assert accuracy["passed"] is (accuracy["problems"] == []) is document["passed"]
    assert code == (0 if document["passed"] else 1)


def test_selftest_text_names_the_cpu_count_python_and_a_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = run_cli(["selftest", "accuracy", *TINY_ACCURACY])
    out = capsys.readouterr().out
    assert f"machine: {os.cpu_count()} CPUs" in out
    assert "CPython" in out or "PyPy" in out
    assert "truth ms" in out
    assert "scheduled  p99" in out
    assert "sent       p50" in out
    verdict = "PASS" if code == 0 else "FAIL"
    assert f"accuracy: {verdict}" in out
    assert f"selftest: {verdict}" in out


def test_selftest_scale_climbs_the_levels_it_is_given(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, document = run_json(["scale", *TINY_SCALE], capsys)
    scale = document["scale"]
    assert document["accuracy"] is None
    rates = [level["rate"] for level in scale["levels"]]
    assert rates in ([50.0], [50.0, 100.0])  # it stops at the first level not clean
    for level in scale["levels"]:
        assert level["clean"] is (level["problems"] == [])
        assert level["requests"] > 0
    clean = [level["rate"] for level in scale["levels"] if level["clean"]]
    assert scale["highest_clean"] == max(clean, default=0.0)
    assert code == (0 if scale["passed"] else 1)


def test_selftest_scale_with_workers_auto_counts_every_request_once_and_prices_each_level(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, document = run_json(["scale", *TINY_SCALE, "--workers", "auto"], capsys)
    scale = document["scale"]
    assert scale["workers"] == usable_cores()
    assert scale["server_processes"] == 1
    for level in scale["levels"]:
        # the workers' merged count is the server's: none lost, none counted twice
        assert level["requests"] - level["dropped"] == level["server_count"] > 0
        assert level["cpu_per_request"] > 0
    assert code == (0 if scale["passed"] else 1)


def test_selftest_accuracy_from_workers_against_a_server_of_two_processes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["accuracy", *TINY_ACCURACY, "--workers", "2", "--server-processes", "2"]
    code, document = run_json(args, capsys)
    accuracy = document["accuracy"]
    assert (accuracy["workers"], accuracy["server_processes"]) == (2, 2)
    assert accuracy["requests"] == accuracy["server_count"] == 30  # merged /stats too
    assert len(accuracy["figures"]) == 6
    assert code == (0 if document["passed"] else 1)


@pytest.mark.parametrize(
    ("setup", "flag"),
    [
        (Setup(workers=0), "--workers"),
        (Setup(server_processes=MAX_PROCESSES + 1), "--server-processes"),
    ],
)
def test_a_setup_out_of_range_is_refused_naming_its_flag_before_a_server_starts(
    setup: Setup, flag: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        run_scale([100], hold=0.1, setup=setup)
    assert refused.value.field == flag
    assert f"1 to {MAX_PROCESSES}" in str(refused.value)


def test_the_text_says_what_attacked_and_each_levels_cpu_per_request() -> None:
    level = Level(500, 500, 250, 250, 0, 0, 0.001, 0.002, [], cpu_per_request=42e-6)
    check = ScaleCheck(hold=0.5, delay="fixed:1ms", levels=[level], workers=4,
                       server_processes=2)  # fmt: skip
    text = render_scale(check)
    assert "open model, from 4 workers, echo server of 2 processes," in text
    assert "CPU   42.0 us/req" in text
    alone = render_scale(ScaleCheck(hold=0.5, delay="fixed:1ms", levels=[level]))
    assert "open model, clean" in alone  # one process, one server process: nothing said


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--workers", "0"], "--workers"),
        (["--workers", "many"], "--workers"),
        (["--workers", "257"], "--workers"),
        (["--server-processes", "auto"], "--server-processes"),
        (["--rate", "0"], "--rate"),
        (["--rate", "20000/s"], "--rate"),
        (["--duration", "0s"], "--duration"),
        (["--delay", "sometimes"], "--delay"),
        (["--levels", "100,fast"], "--levels"),
        (["--hold", "0"], "--hold"),
        (["--json", "/nonexistent-folder/selftest.json"], "--json"),
    ],
)
def test_bad_settings_exit_2_naming_the_flag_before_anything_runs(
    args: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["selftest", *args]) == 2
    captured = capsys.readouterr()
    assert flag in captured.err
    assert "machine:" not in captured.out


def test_json_to_a_file_holds_the_document_and_the_text_stays_on_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "selftest.json"
    code = run_cli(["selftest", "scale", *TINY_SCALE, "--json", str(out)])
    document = json.loads(out.read_text())
    assert code == (0 if document["passed"] else 1)
    assert document["machine"]["cpus"] == os.cpu_count()
    assert "selftest: " in capsys.readouterr().out


def test_an_unknown_part_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["selftest", "speed"]) == 2
    assert "accuracy" in capsys.readouterr().err


def test_help_names_the_parts_the_rule_and_the_exit_codes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_cli(["selftest", "--help"]) == 0
    out = capsys.readouterr().out
    assert "accuracy" in out
    assert "scale" in out
    assert "max(1 %, 0.5 ms)" in out
    assert "Exit codes: 0" in out
    assert "--workers N|auto" in out
    assert "--server-processes N" in out


rates = st.floats(min_value=1, max_value=1e6)


@given(rate=rates, share=st.floats(min_value=0.5, max_value=1.5))
def test_a_level_is_off_plan_exactly_when_its_rate_misses_by_over_2_percent(
    rate: float, share: float
) -> None:
    problems = level_problems(
        rate=rate, achieved_rate=rate * share, requests=1000, dropped=0, not_ok=0, lag_p99=0.0
    )
    assert bool(problems) is (abs(rate * share - rate) > 0.02 * rate)


@given(
    requests=st.integers(min_value=1, max_value=10**6),
    errors=st.integers(min_value=0, max_value=10**6),
    lag=st.floats(min_value=0, max_value=1),
)
def test_a_level_is_clean_only_with_few_errors_and_a_small_lag(
    requests: int, errors: int, lag: float
) -> None:
    problems = level_problems(
        rate=100, achieved_rate=100, requests=requests, dropped=0, not_ok=errors, lag_p99=lag
    )
    assert (problems == []) is (errors < 0.001 * requests and lag < 0.010)


def test_a_dropped_request_makes_a_level_not_clean() -> None:
    problems = level_problems(
        rate=100, achieved_rate=100, requests=100, dropped=1, not_ok=1, lag_p99=0.0
    )
    assert problems == ["1 dropped"]


@given(truth=st.floats(min_value=0, max_value=100), error=st.floats(min_value=-1, max_value=1))
def test_the_goal_allows_one_percent_or_half_a_millisecond_whichever_is_larger(
    truth: float, error: float
) -> None:
    ours = truth + error
    # the error as floats carry it: (truth + error) - truth may differ from error by a bit
    assert GOAL.passes(ours, truth) is (abs(ours - truth) <= max(0.01 * truth, 0.0005))


def test_an_accuracy_check_fails_on_a_count_the_server_disagrees_with() -> None:
    figure = Figure("scheduled", "p50", 0.0201, 0.0200, GOAL.tolerance(0.02), True)
    check = AccuracyCheck(
        rate=10,
        duration=1,
        delay="fixed:20ms",
        rule=GOAL.describe(),
        requests=10,
        server_count=9,
        dropped=0,
        not_ok=0,
        figures=[figure],
    )
    assert check.problems() == ["we counted 10 requests, the server 9"]
    assert "accuracy: FAIL" in render_accuracy(check)


def test_a_scale_check_passes_when_its_first_level_is_clean() -> None:
    clean = Level(100, 100, 100, 100, 0, 0, 0.001, 0.002, [])
    behind = Level(200, 150, 150, 150, 0, 0, 0.05, 0.06, ["behind"])
    check = ScaleCheck(hold=1, delay="fixed:1ms", levels=[clean, behind])
    assert check.passed
    assert check.highest_clean == 100
    assert "highest clean rate: 100 req/s" in render_scale(check)
    assert not ScaleCheck(hold=1, delay="fixed:1ms", levels=[behind]).passed


def test_a_busy_machine_is_named_in_a_note_and_an_idle_one_is_not() -> None:
    about = {"cpus": 2, "cpus_usable": 2, "load_average": [2.5, 1.0, 0.5]}
    note = busy_note(about)
    assert note is not None
    assert "load average (2.5)" in note
    assert busy_note({**about, "load_average": [0.4, 0.2, 0.1]}) is None
    assert busy_note({**about, "load_average": None}) is None


def fake_proc(
    root: Path,
    busy: int,
    idle: int,
    ours: dict[int, tuple[int, int]],
    *,
    parents: dict[int, int] | None = None,
    waited: dict[int, int] | None = None,
) -> None:
    """A /proc with the machine's ``busy`` ticks (user, system, steal) and ``idle`` ticks
    (idle, iowait), and utime/stime for each pid (a pid left out ended): its parent from
    ``parents`` (else 1), the ticks of its ended children from ``waited`` (else 0)."""
    user, system, steal = busy - busy // 2 - 10, busy // 2, 10
    (root / "stat").write_text(f"cpu  {user} 0 {system} {idle - 5} 5 0 0 {steal} 0 0\ncpu0 1\n")
    for old in root.iterdir():
        if old.name.isdigit() and int(old.name) not in ours:
            shutil.rmtree(old)
    for pid, (utime, stime) in ours.items():
        (root / str(pid)).mkdir(exist_ok=True)
        parent = (parents or {}).get(pid, 1)
        children = (waited or {}).get(pid, 0)
        fields = ["S", str(parent), *["0"] * 9, str(utime), str(stime), str(children), "0"]
        fields += ["0"] * 28
        (root / str(pid) / "stat").write_text(f"{pid} (odd) name) {' '.join(fields)}\n")


def test_others_cpu_is_the_machines_busy_time_less_ours_over_the_span(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = iter([10.0, 12.0])  # a 2 s span
    monkeypatch.setattr(_neighbours, "wall_time", lambda: next(now))
    server = 4242
    fake_proc(tmp_path, busy=1000, idle=5000, ours={os.getpid(): (50, 50), server: (20, 0)})
    others = _neighbours.OthersCpu([server], proc=str(tmp_path))
    # over the span: the machine busy 300 ticks more; we 100 + 40 of them, the rest others'
    fake_proc(tmp_path, busy=1300, idle=5100, ours={os.getpid(): (120, 80), server: (60, 0)})
    tick = os.sysconf("SC_CLK_TCK")
    assert others.cpus() == pytest.approx((300 - 100 - 40) / tick / 2.0)


def test_others_cpu_counts_what_our_workers_and_the_servers_processes_spent_as_ours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker this process forked (running, then ended and waited for) and a process
    the echo server forked are ours, not other work on the machine."""
    now = iter([10.0, 12.0])
    monkeypatch.setattr(_neighbours, "wall_time", lambda: next(now))
    me, worker, server, member = os.getpid(), 5000, 4242, 4243
    parents = {worker: me, member: server}
    fake_proc(tmp_path, busy=1000, idle=5000, parents=parents,
              ours={me: (50, 50), worker: (10, 0), server: (20, 0), member: (5, 0)})  # fmt: skip
    others = _neighbours.OthersCpu([server], proc=str(tmp_path))
    # the worker spent 20 more ticks, ended and was waited for: its 30 are now ours
    fake_proc(tmp_path, busy=1300, idle=5100, parents=parents, waited={me: 30},
              ours={me: (120, 80), server: (60, 0), member: (25, 0)})  # fmt: skip
    tick = os.sysconf("SC_CLK_TCK")
    ours = (120 + 80 + 30) - (50 + 50 + 10)  # this process and its worker
    theirs = (60 + 25) - (20 + 5)  # the server and its member
    assert others.cpus() == pytest.approx((300 - ours - theirs) / tick / 2.0)


def test_others_cpu_is_unknown_without_a_proc_to_read(tmp_path: Path) -> None:
    assert _neighbours.OthersCpu(proc=str(tmp_path / "none")).cpus() is None


def test_others_cpu_reads_this_machines_proc() -> None:
    cpus = _neighbours.OthersCpu().cpus()
    assert cpus is None or cpus >= 0.0  # (its size depends on what else runs here)


def test_a_failed_check_with_other_work_running_says_the_failure_may_be_the_machines() -> None:
    behind = Level(200, 150, 150, 150, 0, 0, 0.05, 0.06, ["behind"])
    busy = ScaleCheck(hold=1, delay="fixed:1ms", levels=[behind], others_cpus=0.8)
    text = render_scale(busy)
    assert "other processes: 0.80 CPUs busy on average while it ran" in text
    assert "the failure may be the machine's" in text
    idle = ScaleCheck(hold=1, delay="fixed:1ms", levels=[behind], others_cpus=0.01)
    assert "other processes: 0.01 CPUs" in render_scale(idle)
    assert "may be the machine's" not in render_scale(idle)
    clean = Level(100, 100, 100, 100, 0, 0, 0.001, 0.002, [])
    passed = ScaleCheck(hold=1, delay="fixed:1ms", levels=[clean], others_cpus=0.8)
    assert "may be the machine's" not in render_scale(passed)
    assert "other processes" not in render_scale(ScaleCheck(hold=1, delay="fixed:1ms"))


def test_a_climb_clean_at_every_level_says_the_ceiling_may_be_higher() -> None:
    low = Level(500, 500, 500, 500, 0, 0, 0.001, 0.002, [])
    top = Level(1_000, 1_000, 1_000, 1_000, 0, 0, 0.001, 0.002, [])
    check = ScaleCheck(hold=1, delay="fixed:1ms", levels=[low, top])
    text = render_scale(check)
    assert "clean at every level tried, up to 1,000 req/s" in text
    assert "the ceiling may be higher: add higher --levels" in text
    assert "highest clean rate" not in text
    assert check.to_dict()["every_level_clean"] is True
    behind = Level(2_000, 1_500, 1_500, 1_500, 0, 0, 0.05, 0.06, ["behind"])
    stopped = ScaleCheck(hold=1, delay="fixed:1ms", levels=[low, top, behind])
    assert "highest clean rate: 1,000 req/s" in render_scale(stopped)
    assert "ceiling may be higher" not in render_scale(stopped)
    assert stopped.to_dict()["every_level_clean"] is False


@pytest.mark.parametrize("flag", ["--hold", "--duration"])
@pytest.mark.parametrize("value", ["-1s", "0s", "soon"])
def test_a_duration_that_is_not_above_0_is_refused_with_the_same_words(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["selftest", flag, value]) == 2
    err = capsys.readouterr().err
    assert f"{flag} must be" in err
    assert "above 0" in err
    assert ">= 0" not in err


@pytest.mark.parametrize(("levels", "bad"), [("0,5", "'0'"), ("5,-1", "'-1'"), ("5,,6", "''")])
def test_a_bad_level_is_named_and_rates_must_be_above_0(
    levels: str, bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["selftest", "scale", "--levels", levels]) == 2
    err = capsys.readouterr().err
    assert f"--levels has {bad}" in err
    assert "above 0" in err
    assert "machine:" not in err


def test_a_level_above_the_limit_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["selftest", "scale", "--levels", "500,2000000"]) == 2
    assert "2,000,000/s" in capsys.readouterr().err
