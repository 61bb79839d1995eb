"""``pyattacker demo``, ``report`` and ``export``: in-process, on real SQLite stores."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from pyattacker._run_demo import DEMO, DEMO_POOLS, SimulatedEndpoint, demo_runner, demo_specs
from pyattacker.cli import run_cli
from pyattacker.cli._demo import _outcome
from pyattacker.cli._run_progress import RunProgress, progress_counts
from pyattacker.clock import LoopClock
from pyattacker.run import RunReport
from pyattacker.store import EXPORT_FORMATS, ROW_KINDS, RunRow, RunState, SQLiteStore

PIPELINES = 16


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished demo run, shared by the read-only tests."""
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    with demo_runner(path, seed=7, concurrency=8, handle_signals=False) as runner:
        runner.run(demo_specs(PIPELINES))
    return path


def _json(capsys: pytest.CaptureFixture[str]) -> Any:
    return json.loads(capsys.readouterr().out)


# -- demo ------------------------------------------------------------------------------------


def test_the_demo_exits_as_its_report_says_and_report_reads_the_same_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "d.db"
    code = run_cli(["demo", "--pipelines", "20", "--store", str(db), "--json"])
    document = _json(capsys)
    run, report = document["run"], document["report"]
    by_state = report["pipelines"]["by_state"]
    assert report["pipelines"]["total"] == 20
    assert by_state.get("succeeded", 0) + by_state.get("failed", 0) == 20
    assert code == (1 if by_state.get("failed") else 0)
    assert run["state"] == ("failed" if code else "succeeded")
    assert report["tasks"]["score"]["succeeded"] == by_state.get("succeeded", 0)
    assert run_cli(["report", str(db), "--json"]) == 0
    assert _json(capsys) == report


def test_the_demo_records_to_a_new_file_under_runs_and_says_how_to_look_closer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code = run_cli(["demo", "--pipelines", "10", "--seed", "3"])
    out = capsys.readouterr().out
    (db,) = (tmp_path / "runs").glob("demo-*.db")
    assert code in (0, 1)
    assert "10 pipelines:" in out
    assert "Tasks (durations over every attempt)" in out
    assert f"pyattacker report {db.relative_to(tmp_path)}" in out
    assert f"pyattacker export {db.relative_to(tmp_path)} attempts.csv" in out


def test_a_resumed_demo_continues_the_same_pipelines_and_adds_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "d.db")
    run_cli(["demo", "--pipelines", "12", "--store", db, "--json"])
    first = _json(capsys)["report"]
    code = run_cli(["demo", "--pipelines", "12", "--store", db, "--resume", "--json"])
    second = _json(capsys)
    assert second["report"]["pipelines"]["total"] == 12
    assert len(second["report"]["runs"]) == 2
    assert second["run"]["stats"]["pipelines"]["skipped"] == first["pipelines"]["by_state"].get(
        "succeeded", 0
    )
    assert code == (1 if second["report"]["pipelines"]["by_state"].get("failed") else 0)


def test_empty_documents_fail_their_pipelines_without_a_retry_as_the_seed_decides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = SimulatedEndpoint(DEMO_POOLS["retrieval"][0], seed=6, clock=LoopClock())
    empty = [i for i in range(20) if endpoint.document_words(i) == 0]
    assert len(empty) == 2
    db = str(tmp_path / "d.db")
    run_cli(["demo", "--pipelines", "20", "--seed", "6", "--store", db, "--json"])
    report = _json(capsys)["report"]
    (invalid,) = [e for e in report["errors"] if e["error_class"] == "invalid"]
    assert (invalid["count"], invalid["gave_up"], invalid["tasks"]) == (2, 2, ["ask"])
    assert report["attempts"]["decisions"]["policy_declined"] == 2


def test_a_report_beside_a_live_run_reads_it_without_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "live.db"
    writer = SQLiteStore(db)
    try:
        writer.begin_run(
            RunRow(run_id="live", state=RunState.RUNNING, started_at=1.0), resume=False
        )
        assert run_cli(["report", str(db), "--json"]) == 0
        (run,) = _json(capsys)["runs"]
        assert (run["run_id"], run["state"], run["elapsed_s"]) == ("live", "running", None)
        assert run_cli(["report", str(db)]) == 0
        assert "No pipelines recorded yet." in capsys.readouterr().out
    finally:
        writer.close()


def test_an_interrupted_run_ends_with_the_command_that_resumes_it() -> None:
    report = RunReport(
        run_id="r",
        state=RunState.INTERRUPTED,
        location="x.db",
        elapsed_s=1.0,
        stats={"pipelines": {"by_state": {"succeeded": 3, "interrupted": 5}}},
        failures=[],
        stop_reason="SIGINT received",
    )
    text = _outcome(report, Path("runs/x.db"), requested=20)
    assert report.exit_code == 130
    assert "3 of 20 pipelines succeeded, 17 unfinished." in text
    assert "Interrupted (SIGINT received)" in text
    assert "pyattacker demo --store runs/x.db --resume" in text


def test_the_progress_bar_shows_done_failed_in_flight_parked_and_throttled() -> None:
    stats = {
        "elapsed_s": 1.5,
        "in_flight": 7,
        "pipelines": {"skipped": 2, "parked": 3, "ended": {"succeeded": 9, "failed": 1}},
        "attempts": {"total": 40, "retries": 6, "by_error_class": {"rate_limit": 4}},
    }
    counts = progress_counts(stats)
    assert (counts["done"], counts["succeeded"], counts["failed"]) == (12, 11, 1)
    assert (counts["in_flight"], counts["parked"], counts["throttled"]) == (7, 3, 4)
    out = io.StringIO()
    console = Console(file=out, width=120, color_system=None)
    console.print(RunProgress(console, lambda: stats, total=20, label="demo").render())
    text = out.getvalue()
    for figure in ("12/20 pipelines", "1 failed", "7 in flight", "3 parked", "4 throttled"):
        assert figure in text


# -- export ------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", EXPORT_FORMATS)
@pytest.mark.parametrize("kind", ROW_KINDS)
def test_every_kind_exports_in_every_format(
    kind: str, fmt: str, store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    out = tmp_path / f"{kind}.{fmt}"
    assert run_cli(["export", str(store), str(out), "--rows", kind, "--format", fmt]) == 0
    written = int(capsys.readouterr().err.split()[0])
    assert out.is_file()
    if fmt == "jsonl":
        assert len(out.read_text().splitlines()) == written
    elif fmt == "json":
        assert len(json.loads(out.read_text())) == written
    elif fmt == "csv":
        with out.open(newline="") as f:
            assert len(list(csv.DictReader(f))) == written


def test_export_counts_agree_with_the_report(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["report", str(store), "--json"]) == 0
    summary = _json(capsys)
    expected = {"pipelines": PIPELINES, "attempts": summary["attempts"]["total"], "runs": 1}
    for kind, count in expected.items():
        out = tmp_path / f"{kind}.jsonl"
        assert run_cli(["export", str(store), str(out), "--rows", kind]) == 0
        assert capsys.readouterr().err.strip() == f"{count} {kind} rows written to {out}"


def test_export_takes_the_format_from_the_file_name(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "tasks.csv"
    assert run_cli(["export", str(store), str(out), "--rows", "tasks"]) == 0
    with out.open(newline="") as f:
        assert {"pipeline_id", "seq", "name", "state"} <= set(next(csv.reader(f)))


def test_export_to_dash_writes_the_rows_on_stdout(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["export", str(store), "-", "--rows", "runs"]) == 0
    captured = capsys.readouterr()
    (run,) = [json.loads(line) for line in captured.out.splitlines()]
    assert run["state"] in {"succeeded", "failed"}
    assert captured.err.strip() == "1 runs rows written to stdout"
    assert run_cli(["export", str(store), "-", "--rows", "runs", "--format", "parquet"]) == 2


def test_duplicate_input_rows_count_as_done_on_the_bar() -> None:
    stats = {
        "elapsed_s": 0.5,
        "in_flight": 0,
        "pipelines": {"skipped": 0, "parked": 0, "duplicates": 9, "ended": {"succeeded": 1}},
        "attempts": {"total": 1, "retries": 0, "by_error_class": {}},
    }
    assert progress_counts(stats)["done"] == 10


# -- bad input: exit 2, a message naming the problem, nothing created ---------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "{missing}"],
        ["report", "{missing}", "--json"],
        ["export", "{missing}", "{out}", "--rows", "attempts", "--format", "csv"],
    ],
)
def test_a_missing_store_exits_2_naming_it_and_creates_nothing(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing, out = tmp_path / "nope.db", tmp_path / "out.csv"
    args = [a.format(missing=missing, out=out) for a in argv]
    assert run_cli(args) == 2
    err = capsys.readouterr().err
    assert f"{missing} does not exist" in err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_row_kind_exits_2_naming_the_valid_ones(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x.csv"
    assert run_cli(["export", str(store), str(out), "--rows", "requests"]) == 2
    err = capsys.readouterr().err
    assert "--rows" in err
    for kind in ROW_KINDS:
        assert kind in err
    assert not out.exists()


def test_an_unknown_format_exits_2_naming_the_valid_ones(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x.xml"
    assert run_cli(["export", str(store), str(out), "--rows", "runs", "--format", "xml"]) == 2
    err = capsys.readouterr().err
    for fmt in EXPORT_FORMATS:
        assert fmt in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["--resume"], "--resume"),
        (["--resume", "--store", "runs/none.db"], "--store"),
        (["--pipelines", "0"], "--pipelines"),
        (["--concurrency", "-1"], "--concurrency"),
        (["--store", "no/such/folder/x.db"], "store"),
    ],
)
def test_bad_demo_input_exits_2_naming_the_option_and_creates_nothing(
    argv: list[str],
    field: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_cli(["demo", *argv]) == 2
    err = capsys.readouterr().err
    assert field in err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_the_demo_refuses_a_used_store_without_resume_and_leaves_it_as_it_was(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["report", str(store), "--json"]) == 0
    before = _json(capsys)
    assert run_cli(["demo", "--pipelines", "3", "--store", str(store)]) == 2
    assert "--resume" in capsys.readouterr().err
    reader = SQLiteStore(store, read_only=True)
    try:
        assert len(reader.runs()) == 1
        assert reader.count_pipelines() == PIPELINES
    finally:
        reader.close()
    assert run_cli(["report", str(store), "--json"]) == 0
    assert _json(capsys) == before


# -- help ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["demo", "report", "export"])
def test_help_has_an_example(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "Examples:" in out
    assert f"pyattacker {command} " in out


def test_the_demo_template_is_fetch_ask_judge_score() -> None:
    assert [t.name for t in DEMO.tasks] == ["fetch", "ask", "judge", "score"]
    assert [t.resource for t in DEMO.tasks] == ["retrieval", "llm", "llm", None]
