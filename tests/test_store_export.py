"""``export_rows``: every format gives back what ``Store.rows`` holds, atomically."""

from __future__ import annotations

import base64
import csv
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyattacker.errors import ConfigError, StoreError
from pyattacker.store import (
    EXPORT_FORMATS,
    ROW_KINDS,
    Batch,
    MemoryStore,
    RowKind,
    SQLiteStore,
    Store,
    TaskState,
    export_rows,
)
from store_helpers import artifact, attempt, checkpoint, event, live_run, pipeline, resource, task

# Exported exactly as Store.rows yields them (runs gain how each run is judged: see below).
FLAT_KINDS = [RowKind.TASKS, RowKind.ATTEMPTS, RowKind.EVENTS, RowKind.RESOURCES]


def fill(store: Store) -> Store:
    """p1: two tasks, the first retried once; p2: pending with an attempt in flight."""
    store.begin_run(live_run("r1", config={"workers": 2}), resume=False)
    failed = attempt(
        "p1", 0, 1, outcome="failed", error="429", decision={"retry": True, "wait_s": 2.0}
    )
    store.write(Batch(pipelines=[pipeline("p1")], attempts=[failed], events=[event("run.started")]))
    store.write(checkpoint("p1", 0))
    store.write(checkpoint("p1", 1))
    store.write(
        Batch(
            artifacts=[artifact("raw", b"\x00\xffbytes", codec="bytes", pipeline_id="p2", seq=-1)],
            pipelines=[pipeline("p2", ordinal=1)],
            attempts=[attempt("p2", 0, 1, outcome="cancelled")],
            events=[event("task.succeeded", pipeline_id="p1", seq=1, data={"ms": 12.5})],
            resources=[resource("key-1"), resource("key-2", spec={"rpm": 10, "tags": ["a"]})],
        )
    )
    return store


@pytest.fixture
def filled() -> Store:
    return fill(MemoryStore())


def as_json(rows: Any) -> Any:
    """What JSON makes of ``rows``: tuples become lists, nothing else changes."""
    return json.loads(json.dumps(rows))


def read(out: Path, fmt: str) -> list[dict[str, Any]]:
    text = out.read_text(encoding="utf-8")
    if fmt == "jsonl":
        return [json.loads(line) for line in text.splitlines()]
    loaded: list[dict[str, Any]] = json.loads(text)
    return loaded


# -- JSONL and JSON ---------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
@pytest.mark.parametrize("kind", FLAT_KINDS)
def test_a_flat_kind_round_trips_through_json_formats(
    filled: Store, tmp_path: Path, kind: RowKind, fmt: str
) -> None:
    out = tmp_path / f"out.{fmt}"
    expected = as_json(list(filled.rows(kind)))
    assert export_rows(filled, out, kind=kind, fmt=fmt) == len(expected) > 0
    assert read(out, fmt) == expected


def test_runs_are_exported_as_stored_with_the_state_every_reader_shows(
    filled: Store, tmp_path: Path
) -> None:
    out = tmp_path / "runs.json"
    (stored,) = as_json(list(filled.rows(RowKind.RUNS)))
    assert export_rows(filled, out, kind="runs", fmt="json") == 1
    (exported,) = read(out, "json")
    assert {k: exported[k] for k in stored} == stored  # the live run r1, as stored
    assert (exported["stored_state"], exported["live"], exported["crashed_because"]) == (
        "running",
        True,
        None,
    )
    assert "heartbeat_age_s" not in exported  # a moving figure: an export is a record


def test_pipelines_are_exported_with_their_tasks_and_each_tasks_attempts(
    filled: Store, tmp_path: Path
) -> None:
    out = tmp_path / "pipelines.json"
    assert export_rows(filled, out, kind="pipelines", fmt="json") == 2
    p1, p2 = read(out, "json")
    stored_p1, _ = as_json(list(filled.rows(RowKind.PIPELINES)))
    assert {k: v for k, v in p1.items() if k != "tasks"} == stored_p1
    assert [(t["seq"], t["state"]) for t in p1["tasks"]] == [(0, "succeeded"), (1, "succeeded")]
    assert [a["outcome"] for a in p1["tasks"][0]["attempts"]] == ["failed", "ok"]
    assert p1["tasks"][0]["attempts"][0]["decision"] == {"retry": True, "wait_s": 2.0}
    assert [a["outcome"] for a in p1["tasks"][1]["attempts"]] == ["ok"]
    # p2's attempt belongs to a task with no row yet: it still shows, under a stub
    assert p2["tasks"] == [
        {
            "seq": 0,
            "name": "task-0",
            "state": None,
            "attempts": as_json(list(filled.rows(RowKind.ATTEMPTS, pipeline_id="p2"))),
        }
    ]


def test_artifacts_are_exported_with_json_decoded_and_other_bytes_in_base64(
    filled: Store, tmp_path: Path
) -> None:
    filled.write(Batch(artifacts=[artifact("broken", b"{not json", seq=5)]))
    out = tmp_path / "artifacts.jsonl"
    export_rows(filled, out, kind=RowKind.ARTIFACTS, fmt="jsonl")
    by_digest = {row["digest"]: row for row in read(out, "jsonl")}
    assert by_digest["out-p1-0"] == {
        "pipeline_id": "p1",
        "seq": 0,
        "digest": "out-p1-0",
        "codec": "json",
        "size": 14,
        "created_at": 1002.0,
        "value": {"answer": 42},
    }
    assert base64.b64decode(by_digest["raw"]["data_base64"]) == b"\x00\xffbytes"
    assert base64.b64decode(by_digest["broken"]["data_base64"]) == b"{not json"


# -- CSV --------------------------------------------------------------------------------


def read_csv(out: Path) -> list[dict[str, str]]:
    with out.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def from_cell(cell: str, like: Any) -> Any:
    """Read a CSV cell back as the type of the value it was written from."""
    if like is None or cell == "":
        return None if cell == "" else cell
    if isinstance(like, dict | list | bool):
        return json.loads(cell)
    return type(like)(cell)


@pytest.mark.parametrize("kind", FLAT_KINDS)
def test_a_flat_kind_round_trips_through_csv(filled: Store, tmp_path: Path, kind: RowKind) -> None:
    out = tmp_path / "out.csv"
    rows = list(filled.rows(kind))
    assert export_rows(filled, out, kind=kind, fmt="csv") == len(rows)
    read_back = read_csv(out)
    assert [row.pop("extra") for row in read_back] == [""] * len(rows)
    assert [list(row) for row in read_back] == [list(row) for row in rows]
    assert [
        {
            k: from_cell(cell, like)
            for (k, cell), like in zip(back.items(), row.values(), strict=True)
        }
        for back, row in zip(read_back, rows, strict=True)
    ] == rows


def test_csv_puts_keys_first_seen_in_later_rows_into_a_final_extra_column(
    filled: Store, tmp_path: Path
) -> None:
    out = tmp_path / "artifacts.csv"
    export_rows(filled, out, kind="artifacts", fmt="csv")
    with out.open(encoding="utf-8", newline="") as f:
        header = next(csv.reader(f))
    keys = ["pipeline_id", "seq", "digest", "codec", "size", "created_at", "value", "extra"]
    assert header == keys
    rows = {row["digest"]: row for row in read_csv(out)}
    assert json.loads(rows["out-p1-0"]["value"]) == {"answer": 42}
    assert rows["out-p1-0"]["extra"] == ""
    assert rows["raw"]["value"] == ""
    assert json.loads(rows["raw"]["extra"]) == {
        "data_base64": base64.b64encode(b"\x00\xffbytes").decode()
    }


def test_csv_of_nested_pipelines_holds_the_tasks_as_json(filled: Store, tmp_path: Path) -> None:
    out = tmp_path / "pipelines.csv"
    export_rows(filled, out, kind="pipelines", fmt="csv")
    p1 = read_csv(out)[0]
    assert [t["seq"] for t in json.loads(p1["tasks"])] == [0, 1]
    assert p1["key"] == ""


# -- Parquet ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [*FLAT_KINDS, RowKind.RUNS, RowKind.PIPELINES])
def test_a_kind_round_trips_through_parquet(filled: Store, tmp_path: Path, kind: RowKind) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "out.parquet"
    expected = as_json(list(_exported(filled, tmp_path, kind)))
    assert export_rows(filled, out, kind=kind, fmt="parquet") == len(expected)
    loaded = pq.read_table(out).to_pylist()
    assert [{k: _unflat(v) for k, v in row.items()} for row in loaded] == expected


def _exported(store: Store, folder: Path, kind: RowKind) -> list[dict[str, Any]]:
    export_rows(store, folder / "reference.jsonl", kind=kind, fmt="jsonl")
    return read(folder / "reference.jsonl", "jsonl")


def _unflat(value: Any) -> Any:
    """Parquet holds dict and list values as JSON text."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        return json.loads(value)
    return value


def test_parquet_without_pyarrow_is_refused_with_the_install_hint(
    filled: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if it were not installed
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ConfigError) as refused:
        export_rows(filled, tmp_path / "out.parquet", kind="tasks", fmt="parquet")
    assert refused.value.field == "format"
    assert refused.value.hint == "pip install 'pyattacker[parquet]'"
    assert list(tmp_path.iterdir()) == []


# -- refusals and atomicity -------------------------------------------------------------


def test_an_unknown_kind_or_format_is_refused_naming_the_valid_ones(
    filled: Store, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError) as bad_kind:
        export_rows(filled, tmp_path / "out.json", kind="pipeline", fmt="json")
    assert bad_kind.value.field == "kind"
    assert all(kind in str(bad_kind.value.hint) for kind in ROW_KINDS)
    with pytest.raises(ConfigError) as bad_format:
        export_rows(filled, tmp_path / "out.xml", kind="tasks", fmt="xml")
    assert bad_format.value.field == "format"
    assert all(fmt in str(bad_format.value.hint) for fmt in EXPORT_FORMATS)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_output_folder_is_refused(filled: Store, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        export_rows(filled, tmp_path / "nope" / "out.json", kind="tasks", fmt="json")
    assert refused.value.field == "out"
    assert not (tmp_path / "nope").exists()


class BreaksMidway(MemoryStore):
    """A store whose reads fail after the first row, as a disk error would."""

    def rows(self, kind: RowKind, *, pipeline_id: str | None = None) -> Iterator[dict[str, Any]]:
        rows = super().rows(kind, pipeline_id=pipeline_id)
        yield next(rows)
        raise StoreError("disk I/O error", location=self.location)


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv"])
def test_a_failing_export_leaves_the_existing_file_untouched_and_no_temporary_file(
    tmp_path: Path, fmt: str
) -> None:
    out = tmp_path / f"tasks.{fmt}"
    out.write_text("the previous export\n")
    with pytest.raises(StoreError, match="disk I/O error"):
        export_rows(fill(BreaksMidway()), out, kind="attempts", fmt=fmt)
    assert out.read_text() == "the previous export\n"
    assert list(tmp_path.iterdir()) == [out]


def test_an_export_replaces_an_existing_file_whole(filled: Store, tmp_path: Path) -> None:
    out = tmp_path / "tasks.jsonl"
    out.write_text("x" * 100_000)
    export_rows(filled, out, kind="tasks", fmt="jsonl")
    assert read(out, "jsonl") == as_json(list(filled.rows(RowKind.TASKS)))
    assert list(tmp_path.iterdir()) == [out]


@pytest.mark.parametrize(("fmt", "text"), [("jsonl", ""), ("json", "[]\n"), ("csv", "")])
def test_an_empty_store_exports_an_empty_file(tmp_path: Path, fmt: str, text: str) -> None:
    out = tmp_path / f"out.{fmt}"
    assert export_rows(MemoryStore(), out, kind="tasks", fmt=fmt) == 0
    assert out.read_text() == text


def test_a_sqlite_store_read_beside_its_writer_exports_the_same_as_memory(
    filled: Store, tmp_path: Path
) -> None:
    with SQLiteStore(tmp_path / "run.db") as writer:
        fill(writer)
        writer.write(Batch(tasks=[task("p2", 0, state=TaskState.FAILED, error="boom")]))
        filled.write(Batch(tasks=[task("p2", 0, state=TaskState.FAILED, error="boom")]))
        with SQLiteStore(tmp_path / "run.db", read_only=True) as reader:
            for kind in RowKind:
                export_rows(reader, tmp_path / "a.jsonl", kind=kind, fmt="jsonl")
                export_rows(filled, tmp_path / "b.jsonl", kind=kind, fmt="jsonl")
                assert read(tmp_path / "a.jsonl", "jsonl") == read(tmp_path / "b.jsonl", "jsonl")
