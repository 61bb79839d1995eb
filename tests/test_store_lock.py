"""The writer lock of a SQLite store: held for a run's life, probed by readers without a
trace, and what ``begin_run``, ``write`` and ``end_run`` do with it."""

from __future__ import annotations

import fcntl
import io
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from pyattacker.errors import ConfigError, StoreError
from pyattacker.report._run import render_run_text, summarize
from pyattacker.store import Batch, PipelineState, RunState, SQLiteStore, export_rows
from pyattacker.store._lock import WriterLock, lock_path, probe
from store_helpers import checkpoint, live_run, pipeline, run, snapshot


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "eval.db"


@pytest.fixture
def writer(path: Path) -> Iterator[SQLiteStore]:
    """A store on which this process began run r1 (so it holds the lock)."""
    store = SQLiteStore(path, lock_wait_s=0.0)
    store.begin_run(live_run("r1"), resume=False)
    yield store
    store.close()


def _edit(path: Path, sql: str) -> None:
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.execute(sql)
    finally:
        conn.close()


# -- holding it -----------------------------------------------------------------------------


def test_a_run_holds_the_lock_from_begin_run_until_end_run(path: Path) -> None:
    with SQLiteStore(path) as store:
        assert probe(path) is False  # no lock file yet: opening alone takes nothing
        store.begin_run(live_run("r1"), resume=False)
        assert lock_path(path).name == "eval.db.lock"
        assert probe(path) is True
        assert store.lock_held() is True
        store.end_run("r1", RunState.SUCCEEDED, ended_at=1100.0, stop_reason=None)
        assert probe(path) is False
        assert store.lock_held() is False


def test_another_writer_is_refused_while_the_lock_is_held_however_old_the_heartbeat(
    writer: SQLiteStore, path: Path
) -> None:
    before = snapshot(writer)
    second = SQLiteStore(path, stale_after_s=0.001, lock_wait_s=0.0)
    with second, pytest.raises(ConfigError, match="'r1' is still live") as refused:
        second.begin_run(run("r2", started_at=1e9), resume=True)
    assert refused.value.field == "resume"
    assert "holding the store's lock" in refused.value.message
    assert snapshot(writer) == before


def test_a_writer_holding_the_lock_without_a_running_row_still_keeps_others_out(
    writer: SQLiteStore, path: Path
) -> None:
    _edit(path, "UPDATE runs SET state = 'succeeded'")  # the row says ended; the lock says not
    second = SQLiteStore(path, lock_wait_s=0.0)
    with second, pytest.raises(ConfigError, match="another process is writing") as refused:
        second.begin_run(run("r2", started_at=2000.0), resume=True)
    assert refused.value.field == "resume"


def test_a_store_closed_without_ending_its_run_leaves_it_dead_to_readers_and_resumable(
    path: Path,
) -> None:
    first = SQLiteStore(path)
    first.begin_run(live_run("r1"), resume=False)
    first.write(Batch(pipelines=[pipeline("p1", state=PipelineState.RUNNING)]))
    first.close()  # as if the process had died: the OS lets go of its lock
    with SQLiteStore(path, read_only=True) as reader:
        (shown,) = summarize(reader)["runs"]
        assert (shown["state"], shown["stored_state"]) == ("crashed", "running")
        assert shown["crashed_because"].startswith(f"process {os.getpid()} holds no lock")
        assert [r.state for r in reader.runs()] == [RunState.RUNNING]  # reading wrote nothing
    with SQLiteStore(path) as second:
        taken = second.begin_run(run("r2", started_at=2000.0), resume=True)
        assert [(r.run_id, r.state) for r in taken] == [("r1", RunState.CRASHED)]
        assert second.count_by_state() == {"interrupted": 1}


# -- probing it -----------------------------------------------------------------------------


def test_a_reader_probes_the_lock_without_creating_it_or_changing_the_store(path: Path) -> None:
    with SQLiteStore(path) as store:
        store.write(Batch(pipelines=[pipeline("p1", state=PipelineState.RUNNING)]))
    before = path.read_bytes()
    with SQLiteStore(path, read_only=True) as reader:
        assert reader.lock_held() is False
        summarize(reader)
    assert not lock_path(path).exists()
    assert path.read_bytes() == before


def test_a_writer_that_meets_a_readers_probe_waits_for_it_instead_of_failing(path: Path) -> None:
    lock_path(path).touch()
    reader = os.open(lock_path(path), os.O_RDONLY)
    fcntl.flock(reader, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a reader caught mid-probe
    pauses: list[float] = []

    def pause(seconds: float) -> None:
        pauses.append(seconds)
        os.close(reader)  # the probe ends (closing releases its shared lock)

    lock = WriterLock(path)
    assert lock.acquire(wait_s=0.5, pause=pause)
    assert (lock.held, len(pauses)) == (True, 1)
    lock.release()


def test_a_lock_held_longer_than_the_wait_is_another_writers(path: Path) -> None:
    holder = WriterLock(path)
    assert holder.acquire()
    pauses: list[float] = []
    assert not WriterLock(path).acquire(wait_s=0.05, pause=pauses.append)
    assert pauses == [0.01] * 5  # tried six times, pausing between tries
    holder.release()
    assert WriterLock(path).acquire(wait_s=0.0)


# -- a run taken over -----------------------------------------------------------------------


def test_a_run_marked_crashed_by_another_process_can_no_longer_write_beat_or_end(
    writer: SQLiteStore, path: Path
) -> None:
    writer.write(checkpoint("p1", 0))
    _edit(path, "UPDATE runs SET state = 'crashed', stop_reason = 'taken over by r2'")
    before = snapshot(writer)
    for batch in (checkpoint("p1", 1), Batch(heartbeat=("r1", 1500.0))):
        with pytest.raises(StoreError, match="another process took it over") as refused:
            writer.write(batch)
        assert "no longer running but crashed (taken over by r2)" in refused.value.message
    with pytest.raises(StoreError, match="another process took it over"):
        writer.end_run("r1", RunState.SUCCEEDED, ended_at=1100.0, stop_reason=None)
    assert snapshot(writer) == before  # the takeover's mark stays
    assert writer.lock_held() is False  # ending, even refused, let go of the lock


def test_the_report_shows_a_live_run_and_how_to_resume_a_dead_one(path: Path) -> None:
    record = {"source": "file", "path": "/data/items.jsonl", "rows_read": 1673}
    record |= {"rows_total": 2000, "exhausted": False}
    command = "pyattacker run evals.py:p --pools evals.py:pools --store eval.db --resume"
    store = SQLiteStore(path)
    store.begin_run(live_run("r1", input=record, config={"command": command}), resume=False)
    with SQLiteStore(path, read_only=True) as reader:
        summary = summarize(reader)
    (shown,) = summary["runs"]
    assert (shown["state"], shown["live"], shown["resume_command"]) == ("running", True, None)
    assert "paused or blocked: it still holds the store" in _text(summary)  # its beat is old
    store.close()
    with SQLiteStore(path, read_only=True) as reader:
        summary = summarize(reader)
    (shown,) = summary["runs"]
    assert shown["resume_command"] == command
    assert shown["consumed"]["rows_read"] == 1673
    text = _text(summary)
    assert "Input: 1,673 of 2,000 rows read from /data/items.jsonl (not to the end)." in text
    assert f"Resume it with: {command}" in text


def _text(summary: dict[str, object]) -> str:
    out = io.StringIO()
    Console(file=out, width=200).print(render_run_text(summary))
    return out.getvalue()


def test_an_export_over_the_stores_lock_file_is_refused(writer: SQLiteStore, path: Path) -> None:
    with pytest.raises(ConfigError, match="is the store itself") as refused:
        export_rows(writer, lock_path(path), kind="runs", fmt="jsonl")
    assert refused.value.field == "out"
    assert writer.lock_held() is True
