"""Crash test: a child process is SIGKILLed at random points, several times over; each resume
finishes the rest, and no task whose checkpoint had committed ever runs again."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from pyattacker.store import RowKind, SQLiteStore

CHILD = Path(__file__).with_name("crash_child.py")
N = 20000  # about 7 s of work for the child here: five kills within 0.8 s of its first effect
PATIENCE_S = 90.0  # the bound on waiting for a child to begin its work


def _effects(log: Path) -> list[tuple[int, str, int]]:
    if not log.exists():
        return []
    lines = log.read_text().splitlines()
    return [(int(p), pid, int(seq)) for p, pid, seq in (line.split() for line in lines)]


def _committed(store_path: Path) -> set[tuple[str, int]]:
    if not store_path.exists():
        return set()
    store = SQLiteStore(store_path, read_only=True)
    try:
        return {
            (row["pipeline_id"], row["seq"])
            for row in store.rows(RowKind.TASKS)
            if row["state"] == "succeeded"
        }
    finally:
        store.close()


def _runs(store_path: Path) -> list[str]:
    """The states of the store's runs, oldest first."""
    if not store_path.exists():
        return []
    store = SQLiteStore(store_path, read_only=True)
    try:
        return [run.state.value for run in sorted(store.runs(), key=lambda r: r.started_at)]
    finally:
        store.close()


def _killed_mid_run(before: list[str], after: list[str]) -> bool:
    """Whether a SIGKILL landed mid-run: the child began a run (one more than before) and
    left it ``running``, not during its imports (no run yet) nor after it had finished its
    run and was only exiting."""
    return len(after) > len(before) and after[-1] == "running"


def _child(store: Path, log: Path, *, output: int = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(store), str(log), str(N)],
        stdout=output,
        stderr=output,
        env=env,
    )


@pytest.mark.slow
def test_sigkill_at_random_points_loses_nothing_and_reruns_no_committed_task(
    tmp_path: Path,
) -> None:
    store, log = tmp_path / "crash.db", tmp_path / "effects.log"
    rng = random.Random(20261130)
    kills = 0  # kills that landed mid-run
    for _ in range(5):
        committed_before = _committed(store)
        seen_before = len(_effects(log))
        runs_before = _runs(store)
        written_before = log.stat().st_size if log.exists() else 0
        child = _child(store, log)
        # Mid-run once it has done some work (however long a busy machine takes to
        # import), then a random while longer.
        deadline = time.monotonic() + PATIENCE_S
        while (log.stat().st_size if log.exists() else 0) == written_before:
            if child.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.02)  # real time: another process is at work
        time.sleep(rng.uniform(0.0, 0.8))
        if child.poll() is not None:
            break
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        kills += _killed_mid_run(runs_before, _runs(store))
        rerun = [(p, s) for _, p, s in _effects(log)[seen_before:] if (p, s) in committed_before]
        assert rerun == [], f"tasks whose checkpoint had committed ran again: {rerun[:5]}"
    assert kills >= 3, "the child finished before it could be killed: raise N"
    committed_before = _committed(store)
    seen_before = len(_effects(log))
    final = _child(store, log, output=subprocess.PIPE)
    out, err = final.communicate(timeout=120)
    assert final.returncode == 0, err.decode()
    assert out.decode().startswith(f"succeeded {{'succeeded': {N}}}"), out.decode()
    rerun = [(p, s) for _, p, s in _effects(log)[seen_before:] if (p, s) in committed_before]
    assert rerun == []
    executions = Counter((p, s) for _, p, s in _effects(log))
    assert len(executions) == 3 * N  # every task of every pipeline ran, at least once
    reader = SQLiteStore(store, read_only=True)
    try:
        assert reader.count_by_state() == {"succeeded": N}
        states = Counter(run.state.value for run in reader.runs())
        assert states["crashed"] == kills
        assert states["succeeded"] >= 1  # the last, and any child that finished unkilled
    finally:
        reader.close()
