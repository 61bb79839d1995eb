"""The run report: every figure computed from hand-built rows, on both stores."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from pyattacker.errors import ConfigError
from pyattacker.report._run import render_run_text, summarize
from pyattacker.store import (
    AttemptRow,
    Batch,
    EventRow,
    MemoryStore,
    PipelineRow,
    PipelineState,
    RunRow,
    RunState,
    SQLiteStore,
    Store,
    TaskRow,
    TaskState,
)

OK = {"retry": False, "reason": "ok"}


def _pipeline(pid: str, state: PipelineState, error: str | None = None) -> PipelineRow:
    return PipelineRow(
        pipeline_id=pid,
        template="t",
        chain_digest="chain",
        seed_digest=f"seed-{pid}",
        seed_artifact=f"seed-{pid}",
        repeat=0,
        key=None,
        state=state,
        cursor=0,
        ntasks=2,
        run_id="r1",
        ordinal=int(pid[1:]),
        created_at=1000.0,
        updated_at=1001.0,
        error=error,
    )


def _task(pid: str, seq: int, name: str, state: TaskState, attempts: int = 1) -> TaskRow:
    return TaskRow(
        pipeline_id=pid,
        seq=seq,
        name=name,
        task_digest=f"digest-{name}",
        state=state,
        attempts=attempts,
        run_id="r1",
        started_at=1000.0,
        ended_at=1001.0,
        input_artifact=None,
    )


def _attempt(
    pid: str,
    seq: int,
    task: str,
    attempt: int,
    outcome: str,
    duration_s: float,
    resources: tuple[str, ...],
    decision: dict[str, Any] = OK,
    error_class: str | None = None,
    error: str | None = None,
) -> AttemptRow:
    return AttemptRow(
        run_id="r1",
        pipeline_id=pid,
        seq=seq,
        task=task,
        attempt=attempt,
        outcome=outcome,
        started_at=1000.0,
        ended_at=1000.0 + duration_s,
        duration_s=duration_s,
        decision=decision,
        resources=resources,
        error_class=error_class,
        error=error,
    )


def _retry(reason: str, delay_s: float = 0.0) -> dict[str, Any]:
    return {"retry": reason == "retryable", "reason": reason, "delay_s": delay_s}


E429, E503, EMPTY = "EndpointError: HTTP 429", "EndpointError: HTTP 503", "ValueError: empty"
RF, RM, RS = "llm/flaky", "llm/metered", "llm/slow"
RA, RB = "retrieval/a", "retrieval/b"

BATCH = Batch(
    pipelines=[
        _pipeline("p1", PipelineState.SUCCEEDED),
        _pipeline("p2", PipelineState.FAILED, error=EMPTY),
        _pipeline("p3", PipelineState.FAILED, error=E429),
        _pipeline("p4", PipelineState.INTERRUPTED),
    ],
    tasks=[
        _task("p1", 0, "fetch", TaskState.SUCCEEDED),
        _task("p1", 1, "ask", TaskState.SUCCEEDED, attempts=2),
        _task("p2", 0, "fetch", TaskState.SUCCEEDED),
        _task("p2", 1, "ask", TaskState.FAILED),
        _task("p3", 0, "fetch", TaskState.SUCCEEDED),
        _task("p3", 1, "ask", TaskState.FAILED, attempts=2),
        _task("p4", 0, "fetch", TaskState.INTERRUPTED),
    ],
    attempts=[
        _attempt("p1", 0, "fetch", 1, "ok", 0.010, (RA,)),
        _attempt(
            "p1", 1, "ask", 1, "failed", 0.050, (RF,), _retry("retryable", 0.1), "upstream", E503
        ),
        _attempt("p1", 1, "ask", 2, "ok", 0.020, (RS,)),
        _attempt("p2", 0, "fetch", 1, "ok", 0.030, (RA,)),
        _attempt(
            "p2", 1, "ask", 1, "failed", 0.001, (), _retry("policy_declined"), "invalid", EMPTY
        ),
        _attempt("p3", 0, "fetch", 1, "ok", 0.020, (RB,)),
        _attempt(
            "p3", 1, "ask", 1, "failed", 0.002, (RM,), _retry("retryable", 0.25), "rate_limit", E429
        ),
        _attempt(
            "p3",
            1,
            "ask",
            2,
            "failed",
            0.003,
            (RM,),
            _retry("attempts_exhausted"),
            "rate_limit",
            E429,
        ),
        _attempt(
            "p4", 0, "fetch", 1, "cancelled", 0.5, (RA,), {"retry": False, "reason": "cancelled"}
        ),
    ],
    events=[
        EventRow(run_id="r1", kind="resource.throttled", at=1000.5),
        EventRow(run_id="r1", kind="resource.throttled", at=1000.6),
        EventRow(run_id="r1", kind="resource.health", at=1000.7),
    ],
)


def _fill(store: Store) -> Store:
    store.begin_run(RunRow(run_id="r1", state=RunState.RUNNING, started_at=1000.0), resume=False)
    store.write(BATCH)
    store.end_run("r1", RunState.FAILED, ended_at=1010.0, stop_reason=None)
    store.begin_run(
        RunRow(run_id="r2", state=RunState.RUNNING, started_at=2000.0, resumes="r1"), resume=True
    )
    store.end_run("r2", RunState.INTERRUPTED, ended_at=2002.5, stop_reason="SIGINT received")
    return store


@pytest.fixture
def memory() -> Store:
    return _fill(MemoryStore())


def test_runs_are_listed_oldest_first_with_how_each_ended(memory: Store) -> None:
    runs = summarize(memory)["runs"]
    assert [(r["run_id"], r["state"], r["elapsed_s"]) for r in runs] == [
        ("r1", "failed", 10.0),
        ("r2", "interrupted", 2.5),
    ]
    assert runs[1]["resumes"] == "r1"
    assert runs[1]["stop_reason"] == "SIGINT received"
    assert runs[0]["started_at"] == 1000.0
    assert runs[0]["ended_at"] == 1010.0


def test_pipelines_are_counted_by_state_with_the_errors_that_ended_them(memory: Store) -> None:
    pipelines = summarize(memory)["pipelines"]
    assert pipelines["total"] == 4
    assert list(pipelines["by_state"].items()) == [
        ("failed", 2),
        ("interrupted", 1),
        ("succeeded", 1),
    ]
    assert pipelines["failed_because"] == [
        {"error": E429, "count": 1, "example_pipeline_id": "p3", "example_keys": [3]},
        {"error": EMPTY, "count": 1, "example_pipeline_id": "p2", "example_keys": [2]},
    ]


def test_tasks_come_in_pipeline_order_with_states_attempts_and_durations(memory: Store) -> None:
    tasks = summarize(memory)["tasks"]
    assert list(tasks) == ["fetch", "ask"]
    fetch, ask = tasks["fetch"], tasks["ask"]
    assert (fetch["succeeded"], fetch["failed"], fetch["interrupted"], fetch["attempts"]) == (
        3,
        0,
        1,
        4,
    )
    assert (ask["succeeded"], ask["failed"], ask["interrupted"], ask["attempts"]) == (1, 2, 0, 5)
    # Every attempt counts, failed ones included:
    # fetch [.01 .02 .03 .5], ask [.001 .002 .003 .02 .05].
    assert fetch["duration_s"]["count"] == 4
    assert fetch["duration_s"]["p50"] == pytest.approx(0.020, rel=1e-3)
    assert fetch["duration_s"]["p95"] == 0.5
    assert fetch["duration_s"]["max"] == 0.5
    assert ask["duration_s"]["count"] == 5
    assert ask["duration_s"]["p50"] == pytest.approx(0.003, rel=1e-3)
    assert ask["duration_s"]["p95"] == 0.05
    assert ask["duration_s"]["max"] == 0.05


def test_attempts_are_counted_by_outcome_class_and_decision(memory: Store) -> None:
    attempts = summarize(memory)["attempts"]
    assert attempts["total"] == 9
    assert list(attempts["by_outcome"].items()) == [("failed", 4), ("ok", 4), ("cancelled", 1)]
    assert list(attempts["by_error_class"].items()) == [
        ("rate_limit", 2),
        ("invalid", 1),
        ("upstream", 1),
    ]
    assert list(attempts["decisions"].items()) == [
        ("ok", 4),
        ("retryable", 2),
        ("attempts_exhausted", 1),
        ("cancelled", 1),
        ("policy_declined", 1),
    ]
    assert attempts["retries"] == 2
    assert attempts["retry_wait_s"] == pytest.approx(0.35)


def test_each_resource_counts_the_attempts_that_leased_it(memory: Store) -> None:
    by_resource = summarize(memory)["attempts"]["by_resource"]
    columns = ("attempts", "ok", "failed", "cancelled", "throttled")
    assert {name: tuple(row[c] for c in columns) for name, row in by_resource.items()} == {
        RF: (1, 0, 1, 0, 0),
        RM: (2, 0, 2, 0, 2),
        RS: (1, 1, 0, 0, 0),
        RA: (3, 2, 0, 1, 0),
        RB: (1, 1, 0, 0, 0),
    }


def test_top_errors_rank_failed_attempt_messages_and_say_which_ended_a_task(
    memory: Store,
) -> None:
    summary = summarize(memory)
    assert summary["errors_distinct"] == 3
    assert summary["errors"] == [
        {
            "error_class": "rate_limit",
            "message": E429,
            "count": 2,
            "gave_up": 1,
            "tasks": ["ask"],
            "example_pipeline_id": "p3",
        },
        {
            "error_class": "invalid",
            "message": EMPTY,
            "count": 1,
            "gave_up": 1,
            "tasks": ["ask"],
            "example_pipeline_id": "p2",
        },
        {
            "error_class": "upstream",
            "message": E503,
            "count": 1,
            "gave_up": 0,
            "tasks": ["ask"],
            "example_pipeline_id": "p1",
        },
    ]


def test_events_are_counted_by_kind(memory: Store) -> None:
    assert summarize(memory)["events"] == {"resource.throttled": 2, "resource.health": 1}


def test_errors_limits_both_error_lists_and_zero_hides_them(memory: Store) -> None:
    one = summarize(memory, errors=1)
    assert [e["message"] for e in one["errors"]] == [E429]
    assert [c["error"] for c in one["pipelines"]["failed_because"]] == [E429]
    assert one["errors_distinct"] == 3
    none = summarize(memory, errors=0)
    assert none["errors"] == []
    assert none["pipelines"]["failed_because"] == []


@pytest.mark.parametrize("bad", [-1, 1.5, True, "5"])
def test_a_bad_errors_count_is_a_config_error(memory: Store, bad: Any) -> None:
    with pytest.raises(ConfigError, match="errors"):
        summarize(memory, errors=bad)


def test_a_sqlite_store_read_only_gives_the_same_summary_as_memory(
    memory: Store, tmp_path: Path
) -> None:
    path = tmp_path / "run.db"
    _fill(SQLiteStore(path)).close()
    reader = SQLiteStore(path, read_only=True)
    try:
        from_file = summarize(reader)
    finally:
        reader.close()
    from_memory = summarize(memory)
    assert from_file.pop("store") == str(path)
    assert from_memory.pop("store") == ":memory:"
    assert from_file == from_memory


def test_the_summary_is_plain_json(memory: Store) -> None:
    summary = summarize(memory)
    assert json.loads(json.dumps(summary, allow_nan=False)) == summary


def test_an_empty_store_summarizes_to_zeros() -> None:
    summary = summarize(MemoryStore())
    assert summary["runs"] == []
    assert summary["pipelines"] == {
        "total": 0,
        "by_state": {},
        "interrupted_by_crash": 0,
        "failed_because": [],
    }
    assert summary["tasks"] == {}
    assert summary["attempts"]["total"] == 0
    assert summary["errors"] == []
    assert summary["events"] == {}
    assert summary["steps"] == {}
    assert "No pipelines recorded yet." in _text(summary)


def _text(summary: dict[str, Any], width: int = 120) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(render_run_text(summary))
    return out.getvalue()


def test_the_text_report_shows_the_same_figures(memory: Store) -> None:
    text = _text(summarize(memory))
    assert "4 pipelines: 2 failed, 1 interrupted, 1 succeeded" in text
    assert "SIGINT received" in text
    assert "Attempts: 9 — 4 failed, 4 ok, 1 cancelled" in text
    assert "2 retries, waiting 350 ms in total" in text
    for line in ("fetch", "ask", RM, E429, EMPTY, "resource.throttled"):
        assert line in text


def test_the_text_report_fits_a_narrow_terminal(memory: Store) -> None:
    assert all(len(line) <= 80 for line in _text(summarize(memory), width=80).splitlines())
