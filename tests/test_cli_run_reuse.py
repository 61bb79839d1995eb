"""`pyattacker run --resume` after an edit, `--fresh`, and a store of another pipeline."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from pyattacker.cli import run_cli
from pyattacker.store import RowKind, SQLiteStore

MODULE = """
from pathlib import Path

from pyattacker import Pool, Resource, TaskContext, pipeline, task

RAN = []


@task
def prepare(row: dict) -> str:
    RAN.append("prepare")
    return row["question"].strip()


@task("classify", resource="llm")
async def classify(question: str, ctx: TaskContext) -> str:
    RAN.append("classify")  # the paid step
    if Path("endpoint-down").exists() and question.endswith("1?"):
        raise RuntimeError("the endpoint fell over")
    async with ctx.acquire() as lease:
        lease.report(ok=True)
        return question.upper()


@task("finalize", version=VERSION)
def finalize(label: str) -> dict:
    RAN.append("finalize")
    return {"label": label, "version": VERSION}


triage = pipeline("triage", prepare, classify, finalize)
other = pipeline("summarize", prepare)


def pools():
    return [Pool("llm", [Resource.create("openai", id="k1", capacity=4)])]
"""
ROWS = 12


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for version in (1, 2):  # two files: the CLI imports a file once per process
        (tmp_path / f"v{version}.py").write_text(MODULE.replace("VERSION", str(version)))
    rows = [{"id": i, "question": f" question {i}? "} for i in range(ROWS)]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def _run(module: str, *args: str, target: str = "triage") -> int:
    return run_cli(["run", f"{module}.py:{target}", "--pools", f"{module}.py:pools", *args])


def _ran(module: str) -> list[str]:
    return list(sys.modules[f"pyattacker_user_{module}"].RAN)


def _store(project: Path) -> Any:
    return SQLiteStore(project / "eval.db", read_only=True)


@pytest.mark.parametrize(
    ("key", "again"),
    [
        ([], ["--resume"]),
        ([], ["--resume", "--input", "items.jsonl"]),
        (["--key", "id"], ["--resume", "--input", "items.jsonl"]),
    ],
)
def test_resume_after_editing_the_last_step_runs_only_it(
    project: Path, key: list[str], again: list[str]
) -> None:
    assert _run("v1", "--input", "items.jsonl", "--store", "eval.db", *key) == 0
    assert _run("v2", "--store", "eval.db", *again, *key) == 0
    assert sorted(set(_ran("v2"))) == ["finalize"]  # classify ran 0 more times
    assert len(_ran("v2")) == ROWS
    with _store(project) as store:
        assert store.count_by_state() == {"succeeded": ROWS}  # no new pipelines
        assert len(list(store.rows(RowKind.TASK_HISTORY))) == ROWS
    assert run_cli(["export", "eval.db", "old.jsonl", "--rows", "task_history"]) == 0
    old = [json.loads(line) for line in (project / "old.jsonl").read_text().splitlines()]
    assert sorted(row["output_value"]["version"] for row in old) == [1] * ROWS


def test_the_report_says_how_many_steps_were_reused_and_ran(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run("v1", "--input", "items.jsonl", "--store", "eval.db") == 0
    capsys.readouterr()
    assert _run("v2", "--store", "eval.db", "--resume", "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["run"]["stats"]["steps"] == {"reused": 2 * ROWS, "ran": ROWS}
    assert out["report"]["steps"][out["run"]["run_id"]] == {"reused": 2 * ROWS, "ran": ROWS}


def test_after_an_edit_the_retry_hint_reruns_the_failed_ones_from_their_checkpoint(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "endpoint-down").write_text("")
    assert _run("v1", "--input", "items.jsonl", "--store", "eval.db") == 1
    assert "Retry the failed ones from their last checkpoint: " in capsys.readouterr().err
    (project / "endpoint-down").unlink()
    assert _run("v2", "--store", "eval.db", "--resume") == 0
    failed = sum(1 for i in range(ROWS) if str(i).endswith("1"))
    # failed: classify again, then the new finalize; succeeded: only the new finalize
    assert sorted(_ran("v2")) == ["classify"] * failed + ["finalize"] * ROWS
    with _store(project) as store:
        assert store.count_by_state() == {"succeeded": ROWS}


def test_fresh_reruns_every_step_and_keeps_the_old_outputs(project: Path) -> None:
    assert _run("v1", "--input", "items.jsonl", "--store", "eval.db") == 0
    assert _run("v2", "--store", "eval.db", "--fresh") == 0
    assert len(_ran("v2")) == 3 * ROWS
    with _store(project) as store:
        assert store.count_by_state() == {"succeeded": ROWS}
        assert len(list(store.rows(RowKind.TASK_HISTORY))) == 3 * ROWS


def test_another_pipeline_on_the_store_exits_2_unchanged_unless_added(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run("v1", "--input", "items.jsonl", "--store", "eval.db") == 0
    before = hashlib.sha256((project / "eval.db").read_bytes()).hexdigest()
    capsys.readouterr()
    args = ("--input", "items.jsonl", "--store", "eval.db", "--resume")
    assert _run("v1", *args, target="other") == 2
    err = capsys.readouterr().err
    assert "error: --add-pipeline:" in err
    assert "'triage'" in err
    assert hashlib.sha256((project / "eval.db").read_bytes()).hexdigest() == before
    assert _run("v1", *args, "--add-pipeline", target="other") == 0
    with _store(project) as store:
        assert store.templates() == ["summarize", "triage"]
        assert store.count_by_state() == {"succeeded": 2 * ROWS}


def test_add_pipeline_alone_adds_to_an_existing_store_as_its_help_says(project: Path) -> None:
    assert _run("v1", "--input", "items.jsonl", "--store", "eval.db") == 0
    args = ("--input", "items.jsonl", "--store", "eval.db", "--add-pipeline")
    assert _run("v1", *args, target="other") == 0  # no --resume needed on top
    with _store(project) as store:
        assert store.templates() == ["summarize", "triage"]
