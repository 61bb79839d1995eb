"""SIGINT and SIGTERM stop a run gracefully: exit 130, the resume hint, the run recorded as
interrupted with every finished step kept; a second signal cancels what still runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pyattacker.store import RowKind, RunState, SQLiteStore


def _demo(store: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    code = "import sys; from pyattacker.cli import main; sys.argv[0] = 'pyattacker'; main()"
    return subprocess.Popen(
        [sys.executable, "-c", code, "demo", "--pipelines", "5000", "--store", str(store)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _wait_for_work(store: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if store.exists():
            try:
                with SQLiteStore(store, read_only=True) as reader:
                    if reader.count_by_state().get("succeeded", 0) > 0:
                        return
            except Exception:  # the file may not have its schema yet
                pass
        time.sleep(0.1)
    raise AssertionError("the demo never got going")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_run_gracefully_with_a_hint_to_resume(
    tmp_path: Path, signum: signal.Signals
) -> None:
    store = tmp_path / "demo.db"
    child = _demo(store)
    _wait_for_work(store)
    child.send_signal(signum)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert f"--store {store} --resume" in out + err
    with SQLiteStore(store, read_only=True) as reader:
        (run,) = reader.runs()
        assert run.state is RunState.INTERRUPTED
        assert run.stop_reason == f"{signum.name} received"
        states = reader.count_by_state()
        assert set(states) <= {"succeeded", "failed", "interrupted"}
        assert states["succeeded"] < 5000
        for task in reader.rows(RowKind.TASKS):
            if task["state"] == "succeeded":
                assert reader.artifact(task["pipeline_id"], task["seq"]) is not None


def test_a_second_signal_cancels_what_still_runs(tmp_path: Path) -> None:
    store = tmp_path / "demo.db"
    child = _demo(store)
    _wait_for_work(store)
    child.send_signal(signal.SIGINT)
    time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    with SQLiteStore(store, read_only=True) as reader:
        (run,) = reader.runs()
        assert run.state is RunState.INTERRUPTED
        assert "running" not in reader.count_by_state()
        outcomes = {a["outcome"] for a in reader.rows(RowKind.ATTEMPTS)}
        assert "cancelled" in outcomes  # the second signal did not wait for the grace period
