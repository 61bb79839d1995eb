"""The input record: what a run read and how far, and resuming from it (Python side)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pyattacker.errors import ConfigError
from pyattacker.pool import TaskContext
from pyattacker.run import Runner, pipeline, read_rows, task
from pyattacker.run._input import InputTracker
from pyattacker.store import MemoryStore, RowKind, RunState, SQLiteStore


def _jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _counting(calls: Counter[int], stop_at: int | None = None, runner: list[Runner] = []):  # noqa: B006
    @task
    def work(row: dict) -> int:
        calls[row["i"]] += 1
        if stop_at is not None and sum(calls.values()) == stop_at:
            runner[0].stop("enough for now")
        return int(row["i"])

    return pipeline("count", work)


def _runner(store: Any) -> Runner:
    return Runner(store, concurrency=1, admission=1, handle_signals=False)


def test_the_input_record_says_where_the_rows_came_from_and_how_far_they_were_read(
    tmp_path: Path,
) -> None:
    path = _jsonl(tmp_path / "items.jsonl", [{"i": i} for i in range(6)])
    source = read_rows(path)
    source.check()
    with _runner(MemoryStore()) as runner:
        report = runner.run(_counting(Counter()).map(source, repeats=2), resume=False)
        (run,) = runner.store.runs()
        rows = sorted((p["row"], p["repeat"]) for p in runner.store.rows(RowKind.PIPELINES))
    data = path.read_bytes()
    assert run.input == {
        "source": "file",
        "path": str(path.resolve()),
        "format": "jsonl",
        "size": len(data),
        "mtime": path.stat().st_mtime,
        "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
        "bytes_read": len(data),
        "rows_read": 6,
        "rows_total": 6,
        "exhausted": True,
        "repeats": 2,
        "key": None,
        "limit": None,
    }
    assert report.input == run.input
    assert report.source_exhausted is True
    assert report.to_dict()["source_exhausted"] is True
    assert rows == [(i, r) for i in range(6) for r in (0, 1)]


def test_a_python_iterable_is_recorded_by_its_count_and_a_bind_has_no_row() -> None:
    with _runner(MemoryStore()) as runner:
        runner.run(_counting(Counter()).map({"i": i} for i in range(3)))
        record = runner.store.runs()[0].input
        assert record is not None
        assert (record["source"], record["rows_read"], record["exhausted"]) == (
            "python iterable",
            3,
            True,
        )
        assert record["digest"] is None


def test_a_row_counts_as_read_only_once_every_repeat_of_it_was_admitted() -> None:
    template = _counting(Counter())
    specs, tracker = InputTracker.of(template.map([{"i": 0}, {"i": 1}], repeats=3))
    assert tracker is not None
    pulled = iter(specs)
    seen = [next(pulled) for _ in range(6)]
    tracker.admitted(seen[4])  # row 1, repeat 1: row 1 is not read yet
    assert tracker.record()["rows_read"] == 1
    tracker.admitted(seen[5])
    assert tracker.record()["rows_read"] == 2
    assert tracker.exhausted is False  # the iteration has not seen the end yet
    assert next(pulled, None) is None
    assert tracker.exhausted is True


def _stopped_run(store: Path, path: Path, calls: Counter[int], stop_at: int) -> Any:
    holder: list[Runner] = []
    template = _counting(calls, stop_at, holder)
    with _runner(store) as runner:
        holder.append(runner)
        report = runner.run(template.map(read_rows(path)))
    return template, report


def test_a_resume_without_rows_reads_the_recorded_file_from_where_it_stopped(
    tmp_path: Path,
) -> None:
    path = _jsonl(tmp_path / "items.jsonl", [{"i": i} for i in range(20)])
    store, calls = tmp_path / "s.db", Counter[int]()
    template, first = _stopped_run(store, path, calls, stop_at=5)
    assert first.state is RunState.INTERRUPTED
    assert first.source_exhausted is False
    assert 5 <= first.input["rows_read"] < 20
    with _runner(store) as runner:
        second = runner.run(template, resume=True)
        by_state = runner.store.count_by_state()
    assert second.state is RunState.SUCCEEDED
    assert second.source_exhausted is True
    assert by_state == {"succeeded": 20}
    assert calls == Counter(range(20))  # every row ran, and none twice


def test_resuming_an_unfinished_python_iterable_without_its_rows_is_refused(
    tmp_path: Path,
) -> None:
    holder: list[Runner] = []
    calls: Counter[int] = Counter()
    template = _counting(calls, 3, holder)
    with _runner(tmp_path / "s.db") as runner:
        holder.append(runner)
        runner.run(template.map({"i": i} for i in range(10)))
    with _runner(tmp_path / "s.db") as runner, pytest.raises(ConfigError) as refused:
        runner.run(template, resume=True)
    message = str(refused.value)
    assert "a Python iterable" in message
    assert "template.map(rows)" in message
    rows_read = runner.store.runs()[0].input["rows_read"]  # type: ignore[index]
    assert f"read {rows_read} rows" in message
    assert len(SQLiteStore(tmp_path / "s.db", read_only=True).runs()) == 1


def test_a_changed_file_is_refused_and_a_file_that_only_grew_is_read_on(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "items.jsonl", [{"i": i} for i in range(20)])
    store, calls = tmp_path / "s.db", Counter[int]()
    template, _ = _stopped_run(store, path, calls, stop_at=4)
    original = path.read_bytes()
    path.write_bytes(original.replace(b'{"i": 0}', b'{"i": 100}'))
    with _runner(store) as runner, pytest.raises(ConfigError, match="changed since it was read"):
        runner.run(template, resume=True)
    path.write_bytes(original + b'{"i": 20}\n')
    with _runner(store) as runner:
        report = runner.run(template, resume=True)
    assert report.state is RunState.SUCCEEDED
    assert calls == Counter(range(21))


def test_repeats_split_across_admission_chunks_never_lose_a_repeat_on_resume(
    tmp_path: Path,
) -> None:
    path = _jsonl(tmp_path / "items.jsonl", [{"i": i} for i in range(9)])
    store, calls = tmp_path / "s.db", Counter[int]()
    holder: list[Runner] = []
    template = _counting(calls, 7, holder)
    with Runner(store, concurrency=2, admission=2, handle_signals=False) as runner:
        holder.append(runner)
        runner.run(template.map(read_rows(path), repeats=3))  # chunks of 2: rows split
    with _runner(store) as runner:
        report = runner.run(template, resume=True)
        pipelines = list(runner.store.rows(RowKind.PIPELINES))
    assert report.state is RunState.SUCCEEDED
    assert sorted((p["row"], p["repeat"]) for p in pipelines) == [
        (i, r) for i in range(9) for r in range(3)
    ]
    assert calls == Counter(dict.fromkeys(range(9), 3))


def test_other_specs_on_resume_leave_an_unfinished_input_incomplete_never_succeeded(
    tmp_path: Path,
) -> None:
    path = _jsonl(tmp_path / "items.jsonl", [{"i": i} for i in range(10)])
    store, calls = tmp_path / "s.db", Counter[int]()
    template, _ = _stopped_run(store, path, calls, stop_at=2)
    with _runner(store) as runner:
        report = runner.run([template.bind({"i": 50})], resume=True)
    assert report.state is RunState.INCOMPLETE
    assert report.exit_code == 1
    assert report.source_exhausted is False
    assert report.resume_hint is not None
    assert "read only up to row" in report.resume_hint
    from pyattacker.cli import run_cli

    assert run_cli(["report", str(store)]) == 0  # readers show the state


def test_csv_values_are_strings_and_a_bom_is_not_part_of_the_first_name(tmp_path: Path) -> None:
    path = tmp_path / "items.csv"
    path.write_bytes(b'\xef\xbb\xbfid,text\r\n1,"two\r\nlines"\r\n\r\n2,\r\n')
    source = read_rows(path)
    assert source.check() == 2
    assert list(source) == [{"id": "1", "text": "two\r\nlines"}, {"id": "2", "text": ""}]


def test_parquet_rows_are_read_and_digested_by_their_canonical_json(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "items.parquet"
    pq.write_table(pa.table({"i": list(range(5)), "q": [f"q{i}" for i in range(5)]}), path)
    source = read_rows(path, limit=3)
    assert source.check() == 3
    rows = list(source)
    source.commit(3)
    assert rows == [{"i": i, "q": f"q{i}"} for i in range(3)]
    expected = b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in rows)
    assert source.digest == "sha256:" + hashlib.sha256(expected).hexdigest()
    assert source.exhausted


def test_a_source_reopened_at_its_record_goes_on_after_the_rows_read(tmp_path: Path) -> None:
    for name, text in (
        ("a.jsonl", "".join(json.dumps({"i": i}) + "\n\n" for i in range(5))),
        ("a.csv", "i\n" + "".join(f"{i}\n" for i in range(5))),
    ):
        path = tmp_path / name
        path.write_text(text)
        first = read_rows(path)
        taken = [row for row, _ in zip(first, range(2), strict=False)]
        first.commit(2)
        again = read_rows(path)
        again.check(resume_at=first.record())
        assert [str(r["i"]) for r in [*taken, *again]] == [str(i) for i in range(5)]
        again.commit(5)
        whole = read_rows(path)
        list(whole)
        whole.commit(5)
        assert again.digest == whole.digest
        assert again.exhausted


def test_unknown_formats_and_a_missing_file_are_config_errors(tmp_path: Path) -> None:
    (tmp_path / "x.xlsx").write_text("")
    with pytest.raises(ConfigError, match="cannot tell the format"):
        read_rows(tmp_path / "x.xlsx")
    with pytest.raises(ConfigError, match="does not exist"):
        read_rows(tmp_path / "nope.jsonl")


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_both_stores_write_the_input_record_with_a_batch_and_the_heartbeat(
    tmp_path: Path, kind: str
) -> None:
    from pyattacker.store import Batch, RunRow

    store = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "s.db")
    started = RunRow(run_id="r1", state=RunState.RUNNING, started_at=1.0, input={"rows_read": 0})
    store.begin_run(started, resume=False)
    store.write(Batch(heartbeat=("r1", 2.0), run_input=("r1", {"rows_read": 7})))
    (run,) = store.runs()
    assert (run.heartbeat_at, run.input) == (2.0, {"rows_read": 7})
    store.write(Batch(run_input=("r1", {"rows_read": 9})))
    assert store.runs()[0].input == {"rows_read": 9}
    store.close()


def test_a_pipeline_bound_to_one_seed_has_no_row() -> None:
    with _runner(MemoryStore()) as runner:
        runner.run([_counting(Counter()).bind({"i": 1})])
        (row,) = runner.store.rows(RowKind.PIPELINES)
        assert row["row"] is None
        assert runner.store.runs()[0].input is None


def test_a_key_clash_within_a_chunk_is_refused_before_any_of_it_is_stored() -> None:
    template = _counting(Counter())
    rows = [{"i": 1}, {"i": 2}, {"i": 1, "x": 0}]
    with _runner(MemoryStore()) as runner:
        runner.settings = dataclasses.replace(runner.settings, admission=8)
        with pytest.raises(ConfigError, match="names two different rows"):
            runner.run(template.map(rows, key_of=lambda r: str(r["i"])))
        assert runner.store.count_pipelines() == 0
        corrected = runner.run(template.map(rows[:2], key_of=lambda r: str(r["i"])))
    assert corrected.state is RunState.SUCCEEDED


class _Watching(MemoryStore):
    """A store that checks, at every write carrying an input record, that every repeat of
    every row the record counts as read is stored (in this write or an earlier one)."""

    def __init__(self, repeats: int) -> None:
        super().__init__()
        self.repeats, self.records = repeats, 0

    def write(self, batch: Any) -> None:
        super().write(batch)
        if batch.run_input is None:
            return
        self.records += 1
        read = batch.run_input[1]["rows_read"]
        stored = {(p["row"], p["repeat"]) for p in self.rows(RowKind.PIPELINES)}
        missing = {(r, k) for r in range(read) for k in range(self.repeats)} - stored
        assert not missing, f"the record counts rows whose pipelines are not stored: {missing}"


def test_the_recorded_position_never_runs_ahead_of_the_stored_pipelines() -> None:
    from run_helpers import run_virtually

    @task
    async def slow(row: dict, ctx: TaskContext) -> int:
        await ctx.clock.sleep(0.3)
        return int(row["i"])

    store = _Watching(repeats=3)
    runner = Runner(store, concurrency=2, admission=4, heartbeat_s=0.5, handle_signals=False)
    report = run_virtually(
        runner, pipeline("slow", slow).map(({"i": i} for i in range(40)), repeats=3)
    )
    assert report.state is RunState.SUCCEEDED
    assert store.records > 10  # the heartbeat wrote it many times along the way


def test_an_input_that_cannot_be_opened_is_bad_input_naming_it(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "items.jsonl", [{"x": 1}])
    source = read_rows(path)
    path.unlink()
    path.mkdir()  # gone between naming it and reading it (or unreadable to this user)
    with pytest.raises(ConfigError) as refused:
        source.check()
    assert refused.value.field == "input"
    assert str(path.name) in refused.value.message


def test_a_resume_whose_rows_are_named_otherwise_than_the_store_records_is_refused(
    tmp_path: Path,
) -> None:
    path = _jsonl(tmp_path / "items.jsonl", [{"i": i} for i in range(6)])
    calls: Counter[int] = Counter()
    template = _counting(calls)
    with _runner(tmp_path / "s.db") as runner:
        runner.run(template.map(read_rows(path), key_of=lambda row: str(row["i"])))
    with _runner(tmp_path / "s.db") as runner, pytest.raises(ConfigError) as refused:
        runner.run(template.map(read_rows(path)), resume=True)  # key_of forgotten
    assert refused.value.field == "key"
    assert "key_of function" in str(refused.value)
    assert calls == Counter(range(6))  # nothing ran twice
    with _runner(tmp_path / "s.db") as runner:  # named the same way: nothing to do
        again = runner.run(template.map(read_rows(path), key_of=lambda r: str(r["i"])), resume=True)
    assert again.state is RunState.SUCCEEDED
    assert calls == Counter(range(6))
