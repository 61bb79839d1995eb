"""`pyattacker run`: input formats, the recorded input on resume, limits and stops, and
refusals that write nothing."""

from __future__ import annotations

import hashlib
import io
import json
import shlex
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pyattacker.cli import run_cli
from pyattacker.cli._run_input import duration
from pyattacker.store import RowKind, SQLiteStore

MODULE = """
from pathlib import Path

from pyattacker import pipeline, task

LOG = Path(__file__).with_name("effects.log")


@task
def work(row: dict) -> str:
    with LOG.open("a") as log:
        log.write(f"{row['id']}\\n")
    if str(row.get("fail")) == "1":
        raise ValueError("this row fails")
    return str(row["id"])


job = pipeline("job", work)
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.py").write_text(MODULE)
    _write(tmp_path / "items.jsonl", [{"id": i} for i in range(30)])
    return tmp_path


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _run(*args: str) -> int:
    return run_cli(["run", "job.py:job", "--concurrency", "1", *args])


def _effects(project: Path) -> Counter[str]:
    log = project / "effects.log"
    return Counter(log.read_text().split()) if log.exists() else Counter()


def _store(project: Path) -> SQLiteStore:
    return SQLiteStore(project / "s.db", read_only=True)


def _record(project: Path) -> dict[str, Any]:
    with _store(project) as store:
        found = store.runs()[-1].input
    assert found is not None
    return dict(found)


def _digest(path: Path) -> str:
    """The store file's bytes and its WAL's, if any: a refusal leaves both as they were."""
    wal = path.with_name(path.name + "-wal")
    data = path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    return hashlib.sha256(data).hexdigest()


def _stopped_early(project: Path) -> None:
    """A first run stopped by its first failure (row 2), well before the end of the file."""
    _write(project / "items.jsonl", [{"id": i, "fail": int(i == 2)} for i in range(30)])
    assert _run("--input", "items.jsonl", "--store", "s.db", "--stop-after-failures", "1") == 130
    assert _record(project)["exhausted"] is False


def test_a_resume_without_input_reads_the_recorded_file_where_the_last_run_stopped(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _stopped_early(project)
    read = _record(project)["rows_read"]
    assert read < 30
    assert _run("--store", "s.db", "--resume") == 1  # row 2 fails again; the rest succeed
    record = _record(project)
    assert (record["rows_read"], record["exhausted"], record["rows_total"]) == (30, True, 30)
    with _store(project) as store:
        assert store.count_by_state() == {"failed": 1, "succeeded": 29}
        assert store.runs()[0].config["command"].endswith("--store s.db --resume")
    effects = _effects(project)
    assert {row for row, n in effects.items() if n > 1} == {"2"}  # only the failed one again
    assert set(effects) == {str(i) for i in range(30)}


def test_a_changed_or_missing_input_is_refused_on_resume_and_the_store_is_left_as_it_was(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _stopped_early(project)
    capsys.readouterr()
    before = _digest(project / "s.db")
    items = project / "items.jsonl"
    original = items.read_bytes()
    items.write_bytes(original.replace(b'"id": 0', b'"id": 99'))
    assert _run("--store", "s.db", "--resume") == 2
    err = capsys.readouterr().err
    assert "error: --input:" in err
    assert str(items.resolve()) in err
    assert "rows were not read yet" in err
    items.unlink()
    assert _run("--store", "s.db", "--resume") == 2
    assert "is missing" in capsys.readouterr().err
    assert _digest(project / "s.db") == before


def test_another_input_on_resume_needs_consent(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _stopped_early(project)
    _write(project / "other.jsonl", [{"id": f"o{i}"} for i in range(3)])
    before = _digest(project / "s.db")
    assert _run("--input", "other.jsonl", "--store", "s.db", "--resume") == 2
    assert "--input-changed" in capsys.readouterr().err
    assert _digest(project / "s.db") == before
    args = ("--input", "other.jsonl", "--store", "s.db", "--resume", "--input-changed")
    assert _run(*args) == 1  # the stored failed pipeline is retried and fails again
    assert {"o0", "o1", "o2"} <= set(_effects(project))
    with _store(project) as store:
        assert "--input-changed" not in store.runs()[-1].config["command"]


def test_the_same_input_given_again_on_resume_is_accepted(project: Path) -> None:
    _stopped_early(project)
    assert _run("--input", "items.jsonl", "--store", "s.db", "--resume") == 1
    assert _record(project)["exhausted"] is True


def test_limit_makes_the_first_n_rows_the_input_and_a_resume_keeps_it(project: Path) -> None:
    assert _run("--input", "items.jsonl", "--store", "s.db", "--limit", "5") == 0
    record = _record(project)
    assert (record["rows_read"], record["limit"], record["exhausted"]) == (5, 5, True)
    assert _run("--store", "s.db", "--resume") == 0
    with _store(project) as store:
        assert store.count_by_state() == {"succeeded": 5}
    assert _run("--store", "s.db", "--resume", "--limit", "8") == 0
    with _store(project) as store:
        assert store.count_by_state() == {"succeeded": 8}
    assert sorted(_effects(project).values()) == [1] * 8
    assert _run("--store", "s.db", "--resume", "--limit", "2") == 2  # fewer rows: no


def test_a_resume_of_a_store_that_records_no_run_is_refused(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    SQLiteStore(project / "s.db").close()  # a first run killed right after creating it
    assert _run("--store", "s.db", "--resume") == 2
    assert "records no run" in capsys.readouterr().err


def test_a_resume_of_an_empty_store_file_is_refused_never_a_success_with_no_rows(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "s.db").write_bytes(b"")  # a first run killed before the schema was written
    assert _run("--store", "s.db", "--resume") == 2
    assert "records no run" in capsys.readouterr().err
    assert (project / "s.db").read_bytes() == b""
    assert _run("--input", "items.jsonl", "--store", "s.db", "--resume") == 0  # the fix
    assert sorted(_effects(project).values()) == [1] * 30


def test_a_bad_row_past_the_limit_is_never_read(project: Path) -> None:
    with (project / "items.jsonl").open("a") as items:
        items.write("{not json\n")
    assert _run("--input", "items.jsonl", "--store", "s.db", "--limit", "30") == 0
    assert _record(project)["rows_read"] == 30


def test_csv_rows_are_dicts_of_strings(project: Path) -> None:
    (project / "items.csv").write_text("id,fail\n" + "".join(f"{i},0\n" for i in range(4)))
    assert _run("--input", "items.csv", "--store", "s.db", "--key", "id") == 0
    with _store(project) as store:
        keys = sorted(p["key"] for p in store.rows(RowKind.PIPELINES))
        seeds = [a for a in store.rows(RowKind.ARTIFACTS) if a["seq"] == -1]
    assert keys == ["0", "1", "2", "3"]
    assert json.loads(seeds[0]["data"])["fail"] == "0"
    assert _record(project)["format"] == "csv"


def test_parquet_rows_run(project: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"id": list(range(6))}), project / "items.parquet")
    assert _run("--input", "items.parquet", "--store", "s.db") == 0
    assert _record(project)["rows_read"] == 6
    assert set(_effects(project)) == {str(i) for i in range(6)}


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_stdin_is_read_and_recorded_as_stdin(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stdin(monkeypatch, (project / "items.jsonl").read_bytes())
    assert _run("--input", "-", "--store", "s.db") == 0
    record = _record(project)
    assert (record["source"], record["path"], record["rows_read"]) == ("stdin", None, 30)


def test_an_unfinished_stdin_cannot_be_resumed_without_it(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(project / "items.jsonl", [{"id": i, "fail": int(i == 2)} for i in range(30)])
    _stdin(monkeypatch, (project / "items.jsonl").read_bytes())
    assert _run("--input", "-", "--store", "s.db", "--stop-after-failures", "1") == 130
    capsys.readouterr()
    assert _run("--store", "s.db", "--resume") == 2
    err = capsys.readouterr().err
    assert "rows of stdin" in err
    assert "of 30 rows" in err
    _stdin(monkeypatch, (project / "items.jsonl").read_bytes())
    assert _run("--input", "-", "--store", "s.db", "--resume") == 1  # the same data: read on
    assert _record(project)["exhausted"] is True


@pytest.mark.parametrize(
    ("rows", "args", "field"),
    [
        ([{"id": 1}, {"id": 2}, {"id": 1}], ["--key", "id"], "--key"),
        ([{"id": 1}, {"id": float("nan")}], [], "--input"),
        ([{"id": 1}, {"id": float("inf")}], [], "--input"),
    ],
)
def test_a_refused_run_creates_no_store(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    rows: list[dict[str, Any]],
    args: list[str],
    field: str,
) -> None:
    _write(project / "items.jsonl", rows)
    assert _run("--input", "items.jsonl", "--store", "s.db", *args) == 2
    assert f"error: {field}:" in capsys.readouterr().err
    assert not (project / "s.db").exists()
    del rows[-1]
    _write(project / "items.jsonl", rows)
    assert _run("--input", "items.jsonl", "--store", "s.db", *args) == 0  # the corrected one


def test_a_store_refused_for_lack_of_resume_is_left_byte_identical(project: Path) -> None:
    assert _run("--input", "items.jsonl", "--store", "s.db", "--limit", "3") == 0
    before = _digest(project / "s.db")
    assert _run("--input", "items.jsonl", "--store", "s.db") == 2
    assert _digest(project / "s.db") == before


def test_stop_after_takes_a_duration(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert [duration(t) for t in ("90", "90s", "5m", "1.5h", "250ms")] == [
        90.0,
        90.0,
        300.0,
        5400.0,
        0.25,
    ]
    assert _run("--input", "items.jsonl", "--stop-after", "soon") == 2
    assert "error: --stop-after:" in capsys.readouterr().err
    assert _run("--input", "items.jsonl", "--store", "s.db", "--stop-after", "0s") == 130
    assert _record(project)["exhausted"] is False


def test_an_incomplete_run_prints_the_command_that_finishes_it(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pyattacker.cli._run import _outcome
    from pyattacker.run import RunReport
    from pyattacker.store import RunState

    stats = {"pipelines": {"by_state": {"succeeded": 3}, "duplicates": 0}}
    report = RunReport(
        run_id="r1",
        state=RunState.INCOMPLETE,
        location="s.db",
        elapsed_s=1.0,
        stats=stats,
        failures=[],
        input={"rows_read": 3, "rows_total": 10, "exhausted": False},
    )
    assert report.exit_code == 1
    again = "pyattacker run job.py:job --store s.db --resume"
    text = _outcome(report, Path("s.db"), again)
    assert "incomplete" in text
    assert "7 of 10 rows not read" in text
    assert text.endswith(again)


def test_a_resume_with_the_input_names_its_rows_as_the_run_did(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{"id": i, "n": f"n{i}", "fail": int(i == 2)} for i in range(30)]
    _write(project / "items.jsonl", rows)
    args = ("--input", "items.jsonl", "--store", "s.db")
    assert _run(*args, "--key", "id", "--repeats", "2", "--stop-after-failures", "1") == 130
    before = _digest(project / "s.db")
    assert _run(*args, "--resume", "--key", "n") == 2  # every row named anew: paid twice
    assert "error: --key:" in capsys.readouterr().err
    assert _digest(project / "s.db") == before
    assert _run(*args, "--resume") == 1  # --key id and --repeats 2, as recorded
    with _store(project) as store:
        assert store.count_pipelines() == 60
    effects = _effects(project)
    assert {row for row, n in effects.items() if n > 2} == {"2"}  # only the failed one again


def test_a_resume_with_input_but_without_key_keeps_the_recorded_key_and_reruns_nothing(
    project: Path,
) -> None:
    assert _run("--input", "items.jsonl", "--store", "s.db", "--key", "id") == 0
    assert _run("--input", "items.jsonl", "--store", "s.db", "--resume") == 0
    with _store(project) as store:
        assert store.count_by_state() == {"succeeded": 30}  # not 30 more, named by row index
    assert sorted(_effects(project).values()) == [1] * 30  # no row paid for twice


def test_a_resume_naming_its_rows_by_another_key_is_refused_and_writes_nothing(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run("--input", "items.jsonl", "--store", "s.db") == 0  # named by row index
    before = _digest(project / "s.db")
    capsys.readouterr()
    assert _run("--input", "items.jsonl", "--store", "s.db", "--resume", "--key", "id") == 2
    err = capsys.readouterr().err
    assert "error: --key:" in err
    assert "row index" in err
    assert _digest(project / "s.db") == before
    assert sorted(_effects(project).values()) == [1] * 30


def test_a_row_without_the_recorded_key_names_the_recorded_key_not_a_flag_never_given(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run("--input", "items.jsonl", "--store", "s.db", "--key", "id") == 0
    _write(project / "other.jsonl", [{"name": "x"}])
    capsys.readouterr()
    args = ("--input", "other.jsonl", "--store", "s.db", "--resume", "--input-changed")
    assert _run(*args) == 2
    err = capsys.readouterr().err
    assert "has no field 'id'" in err
    assert "first run's --key" in err
    assert "leave --key out" not in err


def test_the_command_printed_after_a_stop_on_failures_does_continue_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """q17 of the example fails every time, in its first (local) step: with
    --stop-after-failures 1 kept, the printed command retried it first and stopped again
    at once, every time, leaving 33 items interrupted for ever."""
    shutil.copytree(Path(__file__).parents[1] / "examples" / "eval", tmp_path / "eval")
    monkeypatch.chdir(tmp_path / "eval")
    args = ["run", "pipeline.py:evaluation", "--input", "items.jsonl"]
    args += ["--pools", "pipeline.py:pools", "--key", "id", "--store", "s.db"]
    first = [*args, "--stop-after-failures", "1"]
    monkeypatch.setattr(sys, "argv", ["pyattacker", *first])  # as from the shell
    assert run_cli(first) == 130
    err = capsys.readouterr().err
    command = err.split("Continue with:\n", 1)[1].strip().splitlines()[0]
    words = shlex.split(command)
    assert words[:2] == ["pyattacker", "run"]
    assert run_cli(words[1:]) == 1  # q17 failed again; every other item succeeded
    with SQLiteStore(tmp_path / "eval" / "s.db", read_only=True) as store:
        assert store.count_by_state() == {"failed": 1, "succeeded": 49}


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--repeats", str(10**23)], "--repeats"),
        (["--limit", str(10**23)], "--limit"),
        (["--concurrency", str(10**14)], "--concurrency"),
    ],
)
def test_run_refuses_absurd_counts_naming_the_flag(
    args: list[str], flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": 1}\n')
    code = run_cli(["run", "nowhere:job", "--input", str(rows), *args])
    assert code == 2
    assert flag in capsys.readouterr().err


def test_an_input_that_is_a_directory_says_so(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "rows").mkdir()
    assert _run("--input", "rows") == 2
    err = capsys.readouterr().err
    assert "--input" in err
    assert "is a directory" in err


def test_a_store_that_needs_resume_says_pass_the_flag_not_the_library_argument(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run("--input", "items.jsonl", "--store", "run.db") == 0
    capsys.readouterr()
    assert _run("--input", "items.jsonl", "--store", "run.db") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --resume:"), err
    assert "pass --resume" in err
    assert "resume=True" not in err
