"""Acceptance: `pyattacker run` is SIGKILLed at random instants (admission included), then
resumed WITHOUT `--input`, several times over. A run that ends on its own exits 0 only when
every row of the file ended; the last resume finishes every row."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from pyattacker.store import SQLiteStore

N = 4000  # about 2.5 s of work for the child here

MODULE = """
import os
from pathlib import Path

from pyattacker import TaskContext, pipeline, task

LOG = os.open(Path(__file__).with_name("effects.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)


@task
async def work(row: dict, ctx: TaskContext) -> int:
    await ctx.clock.sleep(0.004)
    os.write(LOG, f"{row['id']}\\n".encode())
    return row["id"]


job = pipeline("job", work)
"""


def _command(folder: Path, *, resume: bool, repeats: int) -> list[str]:
    words = [sys.executable, "-m", "pyattacker", "run", "job.py:job", "--store", "s.db"]
    words += ["--concurrency", "8", "--json"]
    if resume:  # without --input (and --repeats): the store knows them
        return [*words, "--resume"]
    return [*words, "--input", "items.jsonl", "--repeats", str(repeats)]


def _recorded(folder: Path) -> bool:
    """Whether the store holds a run that recorded its input (else: start again)."""
    if not (folder / "s.db").exists():
        return False
    try:
        store = SQLiteStore(folder / "s.db", read_only=True)
    except Exception:  # killed while the file was being created
        return False
    try:
        return any(run.input is not None for run in store.runs())
    finally:
        store.close()


def _by_state(folder: Path) -> dict[str, int]:
    with SQLiteStore(folder / "s.db", read_only=True) as store:
        return store.count_by_state()


def _start(folder: Path, repeats: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    resume = _recorded(folder)
    if not resume and (folder / "s.db").exists():
        for name in ("s.db", "s.db-wal", "s.db-shm"):
            (folder / name).unlink(missing_ok=True)
    return subprocess.Popen(
        _command(folder, resume=resume, repeats=repeats),
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


@pytest.mark.slow
@pytest.mark.parametrize("repeats", [1, 3])
def test_kills_then_resumes_without_input_never_exit_0_on_a_partial_dataset(
    tmp_path: Path, repeats: int
) -> None:
    (tmp_path / "job.py").write_text(MODULE)
    rows = "".join(json.dumps({"id": i}) + "\n" for i in range(N // repeats))
    total = (N // repeats) * repeats
    (tmp_path / "items.jsonl").write_text(rows)
    rng = random.Random(20261201)
    kills = 0
    for _ in range(6):
        child = _start(tmp_path, repeats)
        time.sleep(rng.uniform(0.3, 2.0))  # imports ~0.4 s, then admission and the work
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.communicate()
            kills += 1
            continue
        _, err = child.communicate()
        if child.returncode == 0:  # ended on its own: only with every row ended
            assert _by_state(tmp_path) == {"succeeded": total}, err.decode()
        else:
            assert child.returncode != 0
    assert kills >= 3, "the runs ended before they could be killed: raise N"
    final = _start(tmp_path, repeats)
    _, err = final.communicate(timeout=120)
    assert final.returncode == 0, err.decode()
    assert _by_state(tmp_path) == {"succeeded": total}
    effects = Counter((tmp_path / "effects.log").read_text().split())
    assert set(effects) == {str(i) for i in range(N // repeats)}  # every row ran
    assert min(effects.values()) >= repeats  # every repeat of it
    with SQLiteStore(tmp_path / "s.db", read_only=True) as store:
        last = store.runs()[-1]
    assert last.input is not None
    assert (last.input["rows_read"], last.input["exhausted"]) == (N // repeats, True)
