"""Artifact backends: outputs inline (the default), in content-addressed files beside the
store (`file`: atomic, deduplicated, read back by every reader), or not kept (`null`:
digest and size); a run killed mid-way resumes through a spilled checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pyattacker.cli import run_cli
from pyattacker.errors import ConfigError
from pyattacker.store import SPILL_AT, RowKind, SQLiteStore, check_backend, results

JOB = """
import os
from pathlib import Path

from pyattacker import TaskContext, pipeline, task


@task
async def grow(n: int, ctx: TaskContext) -> str:
    return f"{n % 5:05d}" * 400  # 2000 characters: spilled by `file`; five distinct values


@task
async def measure(text: str, ctx: TaskContext) -> dict:
    if text.startswith("00003") and not os.environ.get("PYA_GO"):
        while not Path("go").exists():  # held until the test kills the process
            await ctx.clock.sleep(0.05)
    return {"len": len(text), "head": text[:5]}


job = pipeline("big", grow, measure)
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.py").write_text(JOB)
    (tmp_path / "rows.jsonl").write_text("".join(f"{n}\n" for n in range(20)))
    return tmp_path


def _outputs(store: str) -> list[tuple[object, object]]:
    with SQLiteStore(store, read_only=True) as record:
        return sorted((r["key"], json.dumps(r["output"])) for r in results(record))


def _run(*flags: str) -> int:
    return run_cli(["run", "job.py:job", "--input", "rows.jsonl", *flags])


def test_file_artifacts_are_spilled_deduplicated_and_read_back_by_every_reader(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYA_GO", "1")
    assert _run("--store", "inline.db") == 0
    assert _run("--store", "file.db", "--artifacts", "file") == 0
    assert _outputs("file.db") == _outputs("inline.db")
    spilled = [p for p in Path("file.db.artifacts").rglob("*") if p.is_file()]
    assert len(spilled) == 5  # 20 outputs of grow, five distinct: five files
    assert not list(Path("file.db.artifacts").rglob("*.tmp"))
    assert os.path.getsize("file.db") < os.path.getsize("inline.db")
    with SQLiteStore("file.db", read_only=True) as record:
        grown = [a for a in record.rows(RowKind.ARTIFACTS) if a["seq"] == 0]
        assert {a["size"] for a in grown} == {2002}
        assert {a["codec"] for a in grown} == {"json"}
    assert run_cli(["export", "file.db", "a.jsonl", "--rows", "artifacts"]) == 0
    values = [json.loads(line) for line in Path("a.jsonl").read_text().splitlines()]
    assert {len(v["value"]) for v in values if v["seq"] == 0} == {2000}


def test_null_artifacts_keep_digest_and_size_only(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYA_GO", "1")
    assert _run("--store", "null.db", "--artifacts", "null") == 0
    with SQLiteStore("null.db", read_only=True) as record:
        items = list(results(record))
    assert len(items) == 20
    assert all(item["output"]["kept"] is None and item["output"]["size"] > 0 for item in items)
    assert not Path("null.db.artifacts").exists()


def test_a_run_killed_mid_way_resumes_through_a_spilled_checkpoint(folder: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("PYA_GO", None)
    command = [sys.executable, "-m", "pyattacker", "run", "job.py:job", "--input",
               "rows.jsonl", "--store", "k.db", "--artifacts", "file", "--json"]  # fmt: skip
    with subprocess.Popen(
        command, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ) as child:
        try:
            while not _held(folder / "k.db"):  # the held items' first steps are committed
                assert child.poll() is None, "the run ended before it was killed"
                time.sleep(0.05)
        finally:
            child.send_signal(signal.SIGKILL)
    Path("go").touch()
    assert run_cli(["run", "job.py:job", "--store", "k.db", "--resume", "--artifacts", "file"]) == 0
    Path("go").unlink()
    os.environ["PYA_GO"] = "1"
    try:
        assert _run("--store", "ref.db") == 0
    finally:
        del os.environ["PYA_GO"]
    assert _outputs("k.db") == _outputs("ref.db")
    with SQLiteStore("k.db", read_only=True) as record:
        killed, resumed = (run.run_id for run in record.runs())
        tasks = list(record.rows(RowKind.TASKS))
    held = {t["pipeline_id"] for t in tasks if t["seq"] == 1 and t["run_id"] == resumed}
    assert len(held) >= 4  # the four held items (and any the kill caught) finished later
    for t in tasks:  # ... from the first step the killed run spilled: it never ran again
        if t["pipeline_id"] in held and t["seq"] == 0:
            assert t["run_id"] == killed
            assert t["attempts"] == 1


def _held(store: Path) -> bool:
    """Whether the held items' first step (a spilled output) is committed."""
    if not store.exists():
        return False
    try:
        with SQLiteStore(store, read_only=True) as record:
            done = {t["pipeline_id"] for t in record.rows(RowKind.TASKS) if t["seq"] == 0}
            return len(done) >= 4 and any(Path(f"{store}.artifacts").rglob("*"))
    except Exception:  # created at this instant: look again
        return False


def test_an_unknown_backend_is_refused_naming_the_field(folder: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        check_backend("s3", "run.artifacts")
    assert caught.value.field == "run.artifacts"
    Path("a.yaml").write_text(
        "run: {artifacts: s3}\npipeline: {name: a, tasks: [{use: echo}]}\nsource: {range: 2}\n"
    )
    assert run_cli(["run", "-c", "a.yaml", "--store", "a.db"]) == 2
    assert not Path("a.db").exists()
    assert _run("--store", "b.db", "--artifacts", "s3") == 2
    assert not Path("b.db").exists()


def test_spill_threshold_is_a_kibibyte() -> None:
    assert SPILL_AT == 1024
