"""Live or dead, told by real processes: a paused run is never taken over, a killed run is
shown crashed by every reader, and a run whose row another process took over stops writing.

The child is ``crash_child.py`` on a real SQLite file. Waits poll the store with a generous
bound; nothing asserts on how long anything took. The last test runs ``pyattacker run``
in-process, with a task that takes its own run over as another process would.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pyattacker.cli import run_cli
from pyattacker.store import RowKind, RunState, SQLiteStore

CHILD = Path(__file__).with_name("crash_child.py")
N = 20000  # several seconds of work: every test acts while the child is mid-run
STALE_S = 0.3  # the heartbeat threshold the would-be resumer is given: far below the pause
PATIENCE_S = 90.0  # the bound on every wait; a wait normally ends within a second or two


def _child(store: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, str(CHILD), str(store), str(log), str(N), *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.05)  # real I/O: another process is at work


@contextmanager
def _reader(store: Path) -> Iterator[SQLiteStore]:
    reader = SQLiteStore(store, read_only=True)
    try:
        yield reader
    finally:
        reader.close()


def _mid_run(store: Path, child: subprocess.Popen[bytes]) -> bool:
    """The child has begun its run and committed some steps (it has not finished)."""
    assert child.poll() is None, child.communicate()[1].decode()
    if not store.exists():
        return False
    try:
        with _reader(store) as reader:
            runs = reader.runs()
            done = sum(1 for row in reader.rows(RowKind.TASKS) if row["state"] == "succeeded")
    except Exception:  # the child is still creating the file and its schema
        return False
    return bool(runs) and runs[-1].state == RunState.RUNNING and done > 0


def _record(store: Path) -> tuple[Any, ...]:
    """Everything stored that a second writer could change."""
    with _reader(store) as reader:
        return (
            reader.runs(),
            reader.count_by_state(),
            list(reader.rows(RowKind.TASKS)),
            sum(1 for _ in reader.rows(RowKind.ATTEMPTS)),
        )


def _heartbeat_age(store: Path) -> float:
    with _reader(store) as reader:
        run = reader.runs()[-1]
    return time.time() - (run.heartbeat_at or run.started_at)


def _executions(log: Path) -> Counter[tuple[str, int]]:
    lines = log.read_text().splitlines()
    return Counter((pid, int(seq)) for _, pid, seq in (line.split() for line in lines))


def _json(capsys: pytest.CaptureFixture[str]) -> Any:
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_a_paused_run_is_never_taken_over_and_finishes_alone_when_it_wakes(
    tmp_path: Path,
) -> None:
    store, log = tmp_path / "paused.db", tmp_path / "effects.log"
    child = _child(store, log)
    _wait_for(lambda: _mid_run(store, child), "the child to be mid-run")
    os.kill(child.pid, signal.SIGSTOP)
    try:
        _wait_for(lambda: _heartbeat_age(store) > 3 * STALE_S, "the heartbeat to go stale")
        before = _record(store)
        resumer = subprocess.run(
            [sys.executable, str(CHILD), str(store), str(log), str(N), str(STALE_S)],
            capture_output=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            timeout=PATIENCE_S,
            check=False,
        )
        assert resumer.returncode == 2, resumer.stderr.decode()
        assert "is still live" in resumer.stderr.decode()
        assert f"pid {child.pid}" in resumer.stderr.decode()
        assert _record(store) == before  # refused: nothing written
    finally:
        os.kill(child.pid, signal.SIGCONT)
    out, err = child.communicate(timeout=PATIENCE_S)
    assert child.returncode == 0, err.decode()
    assert out.decode().startswith(f"succeeded {{'succeeded': {N}}}")
    executions = _executions(log)
    assert len(executions) == 3 * N
    assert set(executions.values()) == {1}  # every step ran once: nobody ran it twice
    with _reader(store) as reader:
        assert [run.state for run in reader.runs()] == [RunState.SUCCEEDED]


@pytest.mark.slow
def test_a_killed_run_is_shown_crashed_by_every_reader_and_a_live_one_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, log = tmp_path / "killed.db", tmp_path / "effects.log"
    child = _child(store, log)
    _wait_for(lambda: _mid_run(store, child), "the child to be mid-run")
    assert run_cli(["report", str(store), "--json"]) == 0
    (live,) = _json(capsys)["runs"]
    assert (live["state"], live["live"], live["pid"]) == ("running", True, child.pid)
    assert run_cli(["report", str(store)]) == 0
    assert f"is running (process {child.pid} on" in capsys.readouterr().out

    os.kill(child.pid, signal.SIGKILL)
    child.communicate(timeout=PATIENCE_S)
    assert run_cli(["report", str(store), "--json"]) == 0
    summary = _json(capsys)
    (dead,) = summary["runs"]
    assert (dead["state"], dead["stored_state"], dead["live"]) == ("crashed", "running", False)
    because = dead["crashed_because"]
    assert because.startswith(f"process {child.pid} gone; last heartbeat ")
    assert because.endswith(" s ago")
    pipelines = summary["pipelines"]
    assert "running" not in pipelines["by_state"]
    assert "pending" not in pipelines["by_state"]
    assert pipelines["interrupted_by_crash"] == pipelines["by_state"]["interrupted"] > 0

    assert run_cli(["report", str(store)]) == 0
    text = capsys.readouterr().out
    assert f"crashed (process {child.pid} gone; last heartbeat" in text
    assert "running when their run crashed: a resume continues them" in text

    assert run_cli(["export", str(store), "-", "--rows", "runs", "--format", "jsonl"]) == 0
    (exported,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (exported["state"], exported["stored_state"]) == ("crashed", "running")
    assert exported["crashed_because"].startswith(f"process {child.pid} gone;")

    with _reader(store) as reader:  # reading never writes: the takeover waits for a resume
        assert [run.state for run in reader.runs()] == [RunState.RUNNING]


@pytest.mark.slow
def test_a_run_taken_over_by_another_process_stops_at_its_next_write_and_exits_non_zero(
    tmp_path: Path,
) -> None:
    store, log = tmp_path / "taken.db", tmp_path / "effects.log"
    child = _child(store, log)
    _wait_for(lambda: _mid_run(store, child), "the child to be mid-run")
    edit = sqlite3.connect(store, timeout=PATIENCE_S, isolation_level=None)
    try:
        edit.execute("BEGIN IMMEDIATE")
        edit.execute(
            "UPDATE runs SET state = 'crashed', stop_reason = 'taken over by the test'"
            " WHERE state = 'running'"
        )
        (tasks_then,) = edit.execute("SELECT count(*) FROM tasks").fetchone()
        edit.execute("COMMIT")
    finally:
        edit.close()
    out, err = child.communicate(timeout=PATIENCE_S)
    assert child.returncode == 1, (out.decode(), err.decode())
    assert "another process took it over, so this one stops writing" in err.decode()
    with _reader(store) as reader:
        (run,) = reader.runs()
        assert (run.state, run.stop_reason) == (RunState.CRASHED, "taken over by the test")
        assert sum(1 for _ in reader.rows(RowKind.TASKS)) == tasks_then  # not one more


TAKEN_OVER_MIDWAY = """
import sqlite3

from pyattacker import pipeline, task

CALLS = []


@task
def step(row: dict) -> int:
    CALLS.append(row["id"])
    if len(CALLS) == 5:  # another process takes the run over (as a resume elsewhere would)
        conn = sqlite3.connect("eval.db", timeout=30)
        with conn:
            conn.execute(
                "UPDATE runs SET state = 'crashed', stop_reason = 'taken over elsewhere'"
                " WHERE state = 'running'"
            )
        conn.close()
    return row["id"]


work = pipeline("work", step)
"""


def test_the_cli_run_stops_with_exit_1_when_its_run_is_taken_over_and_keeps_the_mark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "work.py").write_text(TAKEN_OVER_MIDWAY)
    rows = "".join(json.dumps({"id": i}) + "\n" for i in range(500))
    (tmp_path / "items.jsonl").write_text(rows)
    code = run_cli(["run", "work.py:work", "--input", "items.jsonl", "--store", "eval.db"])
    assert code == 1
    assert "another process took it over, so this one stops writing" in capsys.readouterr().err
    with _reader(tmp_path / "eval.db") as reader:
        (run,) = reader.runs()
        assert (run.state, run.stop_reason) == (RunState.CRASHED, "taken over elsewhere")
        assert sum(1 for _ in reader.rows(RowKind.TASKS)) < 500
