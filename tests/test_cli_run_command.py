"""`pyattacker run`: a user's pipeline over a JSON Lines file, durably, from the shell."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from pyattacker.cli import run_cli
from pyattacker.store import RowKind, SQLiteStore

MODULE = """
from pyattacker import Pool, Resource, TaskContext, pipeline, task

CALLS = []


@task
def prepare(row: dict) -> str:
    return row["question"].strip()


@task("ask", resource="llm")
async def ask(question: str, ctx: TaskContext) -> dict:
    CALLS.append(question)
    async with ctx.acquire() as lease:
        lease.report(ok=True)
        return {"question": question, "answer": "42"}


evaluation = pipeline("eval", prepare, ask)


def pools():
    return [Pool("llm", [Resource.create("openai", id="k1", capacity=4)])]
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evals.py").write_text(MODULE)
    rows = [{"id": i, "question": f" question {i}? "} for i in range(20)]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def _run(*args: str) -> int:
    return run_cli(["run", "evals.py:evaluation", "--pools", "evals.py:pools", *args])


def test_every_row_becomes_a_pipeline_recorded_in_the_store(project: Path) -> None:
    assert _run("--input", "items.jsonl", "--store", "eval.db") == 0
    with SQLiteStore(project / "eval.db", read_only=True) as store:
        assert store.count_by_state() == {"succeeded": 20}
        assert len(list(store.rows(RowKind.TASKS))) == 40


def test_a_second_run_needs_resume_and_then_skips_what_succeeded(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run("--input", "items.jsonl", "--store", "eval.db") == 0
    capsys.readouterr()
    assert _run("--input", "items.jsonl", "--store", "eval.db") == 2
    assert "--resume" in capsys.readouterr().err
    assert _run("--store", "eval.db", "--resume") == 0  # no input needed to continue
    with SQLiteStore(project / "eval.db", read_only=True) as store:
        assert store.count_by_state() == {"succeeded": 20}
        assert len(store.runs()) == 2


def test_a_line_that_is_not_json_is_bad_input_found_before_anything_is_written(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with (project / "items.jsonl").open("a") as f:
        f.write("{not json\n")
    assert _run("--input", "items.jsonl", "--store", "eval.db") == 2
    assert "error: --input: line 21 of items.jsonl is not JSON" in capsys.readouterr().err
    assert not (project / "eval.db").exists()


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["run", "evals.py:nope", "--input", "items.jsonl"], "TARGET"),
        (["run", "evals.py:CALLS", "--input", "items.jsonl"], "TARGET"),
        (["run", "missing.py:evaluation", "--input", "items.jsonl"], "TARGET"),
        (["run", "evals.py:evaluation", "--input", "items.jsonl"], "--pools"),
        (["run", "evals.py:evaluation", "--pools", "evals.py:pools"], "--input"),
        (
            ["run", "evals.py:evaluation", "--pools", "evals.py:pools", "--input", "no.jsonl"],
            "--input",
        ),
        (
            ["run", "evals.py:evaluation", "--pools", "evals.py:CALLS", "--input", "items.jsonl"],
            "--pools",
        ),
        (["run", "evals.py:evaluation", "--pools", "evals.py:pools", "--resume"], "--resume"),
    ],
)
def test_bad_input_exits_2_naming_the_field_and_creates_nothing(
    project: Path, capsys: pytest.CaptureFixture[str], args: list[str], field: str
) -> None:
    before = sorted(p.name for p in project.iterdir())
    assert run_cli(args) == 2
    assert f"error: {field}:" in capsys.readouterr().err
    after = sorted(p.name for p in project.iterdir() if p.name != "__pycache__")
    assert after == [n for n in before if n != "__pycache__"]


@pytest.mark.parametrize(
    ("extra_line", "args", "field"),
    [
        ('{"id": 3, "question": "another"}', ["--key", "id"], "--key"),
        ('{"question": "no id"}', ["--key", "id"], "--key"),
    ],
)
def test_key_problems_are_bad_input_naming_key(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    extra_line: str,
    args: list[str],
    field: str,
) -> None:
    with (project / "items.jsonl").open("a") as f:
        f.write(extra_line + "\n")
    assert _run("--input", "items.jsonl", "--store", "eval.db", *args) == 2
    assert f"error: {field}:" in capsys.readouterr().err


def test_user_code_that_fails_to_import_or_to_build_pools_is_bad_input(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "broken.py").write_text("def oops(:\n")
    assert run_cli(["run", "broken.py:x", "--input", "items.jsonl"]) == 2
    assert "error: TARGET: importing broken.py failed: SyntaxError" in capsys.readouterr().err
    (project / "nokey.py").write_text("def pools():\n    raise RuntimeError('no key in env')\n")
    args = ["run", "evals.py:evaluation", "--pools", "nokey.py:pools", "--input", "items.jsonl"]
    assert run_cli(args) == 2
    assert "no key in env" in capsys.readouterr().err
    (project / "latin1.jsonl").write_bytes(b'{"question": "caf\xe9"}\n')
    args = ["run", "evals.py:evaluation", "--pools", "evals.py:pools", "--input", "latin1.jsonl"]
    assert run_cli(args) == 2
    assert "line 1 of latin1.jsonl is not UTF-8" in capsys.readouterr().err
    assert not (project / "runs").exists()


def test_a_file_named_twice_is_loaded_once_so_its_dataclasses_round_trip(
    project: Path,
) -> None:
    (project / "typed.py").write_text(
        MODULE
        + """
from dataclasses import dataclass


@dataclass
class Answer:
    text: str


@task
def answer(row: dict) -> Answer:
    return Answer(row["question"])


@task
def length(a: Answer) -> int:
    return len(a.text)


typed = pipeline("typed", answer, length)
"""
    )
    args = ["run", "typed.py:typed", "--pools", "typed.py:pools", "--input", "items.jsonl"]
    assert run_cli([*args, "--store", "typed.db"]) == 0


def test_the_resume_command_printed_is_the_one_given_plus_resume() -> None:
    from pyattacker.cli._run import _again

    given = ["run", "e.py:p", "--input", "my items.jsonl", "--pools", "e.py:pools", "--key", "id"]
    assert _again(given, "e.py:p", Path("runs/x.db")) == (
        "pyattacker run e.py:p --input 'my items.jsonl' --pools e.py:pools --key id"
        " --store runs/x.db --resume"
    )


def test_key_names_each_pipeline_by_a_row_field(project: Path) -> None:
    assert _run("--input", "items.jsonl", "--store", "eval.db", "--key", "id") == 0
    with SQLiteStore(project / "eval.db", read_only=True) as store:
        keys = sorted(int(p["key"]) for p in store.rows(RowKind.PIPELINES))
    assert keys == list(range(20))


def test_the_recorded_resume_command_works_from_any_folder(project: Path) -> None:
    """`pyattacker report` may run elsewhere; the command it shows must still resume."""
    assert _run("--input", "items.jsonl", "--store", "eval.db") == 0
    with SQLiteStore(project / "eval.db", read_only=True) as store:
        command = store.runs()[0].config["command"]
    folder, _, rest = command.partition(" && ")
    assert shlex.split(folder) == ["cd", str(project)]
    assert rest.startswith("pyattacker run ")
    assert rest.endswith("--store eval.db --resume")


def test_the_recorded_command_is_the_command_line_only_when_pyattacker_is_the_program(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Run by another program's __main__ (python -m pytest, an embedding script), its
    # arguments are not a pyattacker command: the essentials are recorded instead.
    def recorded(argv: list[str], store: str) -> str:
        monkeypatch.setattr("sys.argv", argv)
        assert _run("--input", "items.jsonl", "--store", store) == 0
        with SQLiteStore(project / store, read_only=True) as opened:
            return str(opened.runs()[0].config["command"]).partition(" && ")[2]

    ours = ["run", "evals.py:evaluation", "--pools", "evals.py:pools", "--input",
            "items.jsonl", "--store", "a.db"]  # fmt: skip
    as_module = recorded(["/venv/lib/python3.11/site-packages/pyattacker/__main__.py", *ours],
                         "a.db")  # fmt: skip
    assert as_module == shlex.join(["pyattacker", *ours, "--resume"])
    other = recorded(["/venv/lib/python3.11/site-packages/pytest/__main__.py", "-q", "t.py"],
                     "b.db")  # fmt: skip
    assert other == "pyattacker run evals.py:evaluation --store b.db --resume"
