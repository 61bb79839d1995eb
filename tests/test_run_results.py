"""What a user reaches for after a run: usage per attempt, one result row per item by key,
failures named by key, and an export that refuses a file type it cannot write."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from pyattacker.cli import run_cli
from pyattacker.errors import ConfigError, FatalError, RetryableError
from pyattacker.pool import Pool, Resource, TaskContext
from pyattacker.report._run import render_run_text, summarize
from pyattacker.retry import Retrying
from pyattacker.run import fanout, pipeline, task
from pyattacker.store import MemoryStore, RowKind, SQLiteStore, export_rows, results
from pyattacker.store._results import tokens_of
from run_helpers import rows, run_virtually, runner

ROWS = [{"id": f"q{i}", "text": f"question {i}"} for i in range(5)]
FLAKY, BROKEN = "q1", "q3"  # q1 fails once, then succeeds; q3 always fails


@task
def prepare(row: dict[str, str]) -> dict[str, str]:
    return {"id": row["id"], "prompt": row["text"].upper()}


@task("ask", resource="llm", retry=Retrying(max_attempts=2, base=1.0, jitter="none"))
async def ask(item: dict[str, str], ctx: TaskContext) -> dict[str, str]:
    async with ctx.acquire() as lease:
        lease.report(ok=True, usage={"prompt_tokens": 10, "completion_tokens": 5})
        if item["id"] == BROKEN:
            raise FatalError("the document is empty")
        if item["id"] == FLAKY and ctx.attempt == 1:
            raise RetryableError("HTTP 503")
        return {"answer": f"{item['prompt']}!"}


EVAL = pipeline("eval", prepare, ask)


def _pools() -> list[Pool]:
    return [Pool("llm", [Resource.create("fake", id=f"key-{i}", capacity=2) for i in range(2)])]


def _run(store: Any, **kwargs: Any) -> Any:
    specs = EVAL.map(ROWS, **kwargs)
    return run_virtually(runner(store, pools=_pools(), concurrency=4), specs)


def _by_key(store: Any) -> dict[Any, dict[str, Any]]:
    return {row["key"]: row for row in results(store)}


# -- usage, per attempt --------------------------------------------------------------------


def test_the_usage_an_attempt_reports_is_summed_into_its_attempts_row() -> None:
    @task(resource="llm")
    async def twice(x: int, ctx: TaskContext) -> int:
        async with ctx.acquire() as lease:
            lease.report(ok=True, usage={"tokens": 7})
        async with ctx.acquire() as lease:
            lease.report(ok=True, usage={"tokens": 3, "calls": 1})
        return x

    store = MemoryStore()
    run_virtually(runner(store, pools=_pools()), pipeline("p", twice).bind(1))
    (attempt,) = rows(store, RowKind.ATTEMPTS)
    assert attempt["usage"] == {"tokens": 10, "calls": 1}
    (task_row,) = rows(store, RowKind.TASKS)
    assert task_row["usage"] == {"tokens": 10, "calls": 1}


def test_the_branches_of_a_fanout_add_their_usage_to_its_one_attempt() -> None:
    def branch(name: str, tokens: int) -> Any:
        @task(name, resource="llm")
        async def call(x: int, ctx: TaskContext) -> int:
            async with ctx.acquire() as lease:
                lease.report(ok=True, usage={"tokens": tokens})
            return x

        return call

    store = MemoryStore()
    both = fanout(branch("a", 4), branch("b", 6))
    run_virtually(runner(store, pools=_pools()), pipeline("p", both).bind(1))
    (attempt,) = rows(store, RowKind.ATTEMPTS)
    assert attempt["usage"] == {"tokens": 10}


def test_a_failed_attempt_keeps_its_usage_and_an_attempt_that_reported_none_has_none() -> None:
    store = MemoryStore()
    _run(store, key_of=lambda row: row["id"])
    flaky = [a for a in rows(store, RowKind.ATTEMPTS, task="ask") if a["outcome"] == "failed"]
    assert {a["error_class"] for a in flaky} == {"retryable", "fatal"}
    assert all(a["usage"] == {"prompt_tokens": 10, "completion_tokens": 5} for a in flaky)
    assert all(a["usage"] is None for a in rows(store, RowKind.ATTEMPTS, task="prepare"))


def test_usage_survives_the_sqlite_store(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        _run(store, key_of=lambda row: row["id"])
        used = [a["usage"] for a in store.rows(RowKind.ATTEMPTS) if a["task"] == "ask"]
    assert len(used) == 6  # five items, one retried
    assert all(u == {"prompt_tokens": 10, "completion_tokens": 5} for u in used)


# -- results: one row per item -------------------------------------------------------------


def test_results_give_each_item_by_key_with_input_output_state_attempts_and_tokens() -> None:
    store = MemoryStore()
    _run(store, key_of=lambda row: row["id"])
    found = _by_key(store)
    assert sorted(found) == [row["id"] for row in ROWS]
    done = found["q0"]
    assert done["state"] == "succeeded"
    assert done["input"] == ROWS[0]
    assert done["output"] == {"answer": "QUESTION 0!"}
    assert (done["attempts"], done["tokens"]) == (2, 15)
    assert (done["step"], done["error_class"], done["error"]) == (None, None, None)
    flaky = found[FLAKY]
    assert (flaky["state"], flaky["attempts"], flaky["tokens"]) == ("succeeded", 3, 30)
    assert flaky["usage"] == {"prompt_tokens": 20, "completion_tokens": 10}
    broken = found[BROKEN]
    assert (broken["state"], broken["output"], broken["step"]) == ("failed", None, "ask")
    assert broken["error_class"] == "fatal"
    assert "the document is empty" in broken["error"]


def test_without_a_key_an_item_is_named_by_its_place_in_the_input() -> None:
    store = MemoryStore()
    _run(store)
    found = _by_key(store)
    first = min(found)  # the input row index (or, in an older store, the admission ordinal)
    assert sorted(found) == list(range(first, first + len(ROWS)))
    assert all(found[key]["input"] == ROWS[key - first] for key in found)


def test_failures_in_the_run_report_name_the_item_by_key() -> None:
    report = _run(MemoryStore(), key_of=lambda row: row["id"])
    assert [(f["key"], f["task"]) for f in report.failures] == [(BROKEN, "ask")]
    assert report.to_dict()["failures"][0]["key"] == BROKEN


def test_the_store_report_names_failed_items_by_key_in_json_and_text() -> None:
    store = MemoryStore()
    _run(store, key_of=lambda row: row["id"])
    summary = summarize(store)
    (cause,) = summary["pipelines"]["failed_because"]
    assert cause["example_keys"] == [BROKEN]
    console = Console(width=120, record=True, color_system=None)
    console.print(render_run_text(summary))
    assert f"key {BROKEN}" in console.export_text()


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "parquet"])
def test_export_rows_results_writes_one_row_per_item_in_every_format(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    db, out = tmp_path / "s.db", tmp_path / f"results.{fmt}"
    with SQLiteStore(db) as store:
        _run(store, key_of=lambda row: row["id"])
    assert run_cli(["export", str(db), str(out), "--rows", "results"]) == 0
    assert capsys.readouterr().err.startswith(f"{len(ROWS)} results rows written")
    keys: list[str]
    if fmt == "jsonl":
        keys = [json.loads(line)["key"] for line in out.read_text().splitlines()]
    elif fmt == "json":
        keys = [row["key"] for row in json.loads(out.read_text())]
    elif fmt == "csv":
        with out.open(newline="") as f:
            table = list(csv.DictReader(f))
        keys = [row["key"] for row in table]
        assert json.loads(table[0]["input"]) == ROWS[0]
        assert {row["state"] for row in table} == {"succeeded", "failed"}
    else:
        import pyarrow.parquet as pq

        keys = pq.read_table(out).column("key").to_pylist()
    assert keys == [row["id"] for row in ROWS]


def test_results_through_export_rows_match_the_python_view(tmp_path: Path) -> None:
    store = MemoryStore()
    _run(store, key_of=lambda row: row["id"])
    out = tmp_path / "r.jsonl"
    assert export_rows(store, out, kind="results") == len(ROWS)
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    assert exported == json.loads(json.dumps(list(results(store))))


def test_an_unknown_export_kind_names_results_among_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="results") as refused:
        export_rows(MemoryStore(), tmp_path / "x.jsonl", kind="outcomes")
    assert refused.value.field == "kind"


@pytest.mark.parametrize(
    ("usage", "tokens"),
    [
        (None, None),
        ({"calls": 2}, None),
        ({"tokens": 9, "total_tokens": 12}, 12),  # as pacing reads it
        ({"total_tokens": 12}, 12),
        ({"input_tokens": 3, "output_tokens": 4}, 7),
        ({"completion_tokens": 4}, 4),
    ],
)
def test_tokens_are_read_from_the_usage_names_providers_use(
    usage: dict[str, float] | None, tokens: float | None
) -> None:
    assert tokens_of(usage) == tokens


# -- export refuses a file type it does not know ---------------------------------------------


def test_export_refuses_an_unknown_extension_with_exit_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, out = tmp_path / "s.db", tmp_path / "results.xlsx"
    with SQLiteStore(db) as store:
        _run(store)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert run_cli(["export", str(db), str(out), "--rows", "results"]) == 2
    err = capsys.readouterr().err
    assert ".xlsx" in err
    for fmt in ("jsonl", "json", "csv", "parquet"):
        assert fmt in err
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_export_writes_an_unknown_extension_when_format_says_what(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, out = tmp_path / "s.db", tmp_path / "results.txt"
    with SQLiteStore(db) as store:
        _run(store)
    assert run_cli(["export", str(db), str(out), "--rows", "results", "--format", "csv"]) == 0
    assert out.read_text().startswith("key,repeat,pipeline_id,state,input,output")


def test_an_output_without_extension_is_json_lines(tmp_path: Path) -> None:
    db, out = tmp_path / "s.db", tmp_path / "results"
    with SQLiteStore(db) as store:
        _run(store)
    assert run_cli(["export", str(db), str(out), "--rows", "results"]) == 0
    assert len(out.read_text().splitlines()) == len(ROWS)


def test_export_rows_takes_the_format_from_the_extension_and_refuses_an_unknown_one(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    _run(store)
    assert export_rows(store, tmp_path / "r.csv", kind="results") == len(ROWS)
    assert (tmp_path / "r.csv").read_text().startswith("key,")
    with pytest.raises(ConfigError, match=r"\.xlsx") as refused:
        export_rows(store, tmp_path / "r.xlsx", kind="results")
    assert refused.value.field == "out"
    assert not (tmp_path / "r.xlsx").exists()
    assert export_rows(store, tmp_path / "r.xlsx", kind="results", fmt="json") == len(ROWS)


def test_the_store_report_sums_the_usage_of_every_attempt_retries_included() -> None:
    store = MemoryStore()
    _run(store, key_of=lambda row: row["id"])
    summary = summarize(store)
    # five items asked once each, one of them twice (its first attempt failed and was paid)
    assert summary["attempts"]["usage"] == {"completion_tokens": 30, "prompt_tokens": 60}
    console = Console(width=120, record=True, color_system=None)
    console.print(render_run_text(summary))
    assert "Usage reported: 30 completion_tokens, 60 prompt_tokens" in console.export_text()


def test_whole_token_counts_stay_whole() -> None:
    tokens = tokens_of({"prompt_tokens": 8, "completion_tokens": 3})
    assert (tokens, type(tokens)) == (11, int)
