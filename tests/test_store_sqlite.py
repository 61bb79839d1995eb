"""What only the SQLite store promises: WAL and readers beside a writer, schema versions,
refusing paths it cannot use, and surviving the death of the process that wrote."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pyattacker.errors import ConfigError, StoreError
from pyattacker.store import (
    SCHEMA_VERSION,
    ArtifactRow,
    AttemptRow,
    Batch,
    EventRow,
    MemoryStore,
    PipelineRow,
    PipelineState,
    ResourceRow,
    RowKind,
    RunRow,
    RunState,
    SQLiteStore,
    Superseded,
    TaskRow,
)
from pyattacker.store._lifecycle import this_host
from pyattacker.store._schema import _TASK_HISTORY, MIGRATIONS, Migration
from pyattacker.store._tables import TABLES
from store_helpers import attempt, checkpoint, live_run, pipeline, run, snapshot


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "run.db"


@pytest.fixture
def written(path: Path) -> Path:
    """A store file holding run r1 (ended) and one checkpoint of pipeline p1."""
    with SQLiteStore(path) as writer:
        writer.begin_run(live_run("r1"), resume=False)
        writer.write(checkpoint("p1", 0))
        writer.end_run("r1", RunState.SUCCEEDED, ended_at=1100.0, stop_reason=None)
    return path


def _raw(path: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


# -- WAL, durability settings, readers --------------------------------------------------


@pytest.mark.parametrize(("synchronous", "level"), [("normal", 1), ("full", 2)])
def test_a_store_uses_wal_and_the_synchronous_level_asked_for(
    path: Path, synchronous: str, level: int
) -> None:
    with SQLiteStore(path, synchronous=synchronous) as store:  # type: ignore[arg-type]
        assert _raw(path, "PRAGMA journal_mode") == [("wal",)]
        assert store._conn is not None
        assert store._conn.execute("PRAGMA synchronous").fetchone() == (level,)


def test_an_unknown_synchronous_level_is_refused(path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        SQLiteStore(path, synchronous="off")  # type: ignore[arg-type]
    assert refused.value.field == "synchronous"
    assert not path.exists()


def test_a_reader_beside_an_open_writer_sees_what_is_committed_and_cannot_write(
    path: Path,
) -> None:
    with SQLiteStore(path) as writer, SQLiteStore(path, read_only=True) as reader:
        writer.begin_run(live_run("r1"), resume=False)
        writer.write(checkpoint("p1", 0))
        assert snapshot(reader) == snapshot(writer)
        writer.write(checkpoint("p1", 1))
        assert reader.pipeline("p1") == writer.pipeline("p1")
        with pytest.raises(StoreError, match="read-only"):
            reader.write(checkpoint("p2", 0))
        with pytest.raises(StoreError, match="read-only"):
            reader.begin_run(run("r2", started_at=5000.0), resume=True)
        with pytest.raises(StoreError, match="read-only"):
            reader.end_run("r1", RunState.FAILED, ended_at=1.0, stop_reason=None)
        assert reader.count_pipelines() == 1


def test_data_survives_closing_and_reopening(written: Path) -> None:
    with SQLiteStore(written) as reopened:
        assert reopened.pipeline("p1") == pipeline("p1", state=PipelineState.RUNNING, cursor=1)
        assert [r.state for r in reopened.runs()] == [RunState.SUCCEEDED]


_KILLED_WRITER = textwrap.dedent(
    """
    import os, sys
    from pyattacker.store import (
        ArtifactRow, Batch, PipelineRow, PipelineState, RunRow, RunState, SQLiteStore)

    store = SQLiteStore(sys.argv[1])
    store.begin_run(RunRow(run_id="child", state=RunState.RUNNING, started_at=1000.0,
                           heartbeat_at=1000.0, pid=os.getpid(), host=sys.argv[2]),
                    resume=False)
    store.write(Batch(
        artifacts=[ArtifactRow(pipeline_id="p1", seq=0, digest="out", codec="json", data=b"42",
                               created_at=1001.0)],
        pipelines=[PipelineRow(
            pipeline_id="p1", template="t", chain_digest="c", seed_digest="s",
            seed_artifact="s", repeat=0, key=None, state=PipelineState.RUNNING, cursor=1,
            ntasks=2, run_id="child", ordinal=0, created_at=1000.0, updated_at=1001.0)],
    ))
    print("committed", flush=True)
    sys.stdin.read()  # wait here until killed
    """
)


def test_a_batch_committed_before_the_writer_is_killed_survives_and_is_resumable(
    path: Path,
) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(path), this_host()],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdin is not None
    assert child.stdout.readline() == "committed\n"
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    child.stdin.close()
    child.stdout.close()

    with SQLiteStore(path) as survivor:
        assert survivor.artifact("p1", 0) is not None
        assert [p.pipeline_id for p in survivor.unfinished(["c"])] == ["p1"]
        taken = survivor.begin_run(run("r2", started_at=1010.0), resume=True)
        assert [(r.run_id, r.state) for r in taken] == [("child", RunState.CRASHED)]
        assert survivor.count_by_state() == {"interrupted": 1}


def test_rows_stream_in_order_across_many_pages(path: Path) -> None:
    many = Batch(
        pipelines=[pipeline("p0"), pipeline("p1")],
        attempts=[attempt(f"p{i % 2}", seq=0, number=i) for i in range(1300)],
    )
    with SQLiteStore(path) as store:
        memory = MemoryStore()
        for each in (store, memory):
            each.begin_run(live_run("r1"), resume=False)
            each.write(many)
        assert list(store.rows(RowKind.ATTEMPTS)) == list(memory.rows(RowKind.ATTEMPTS))
        of_p1 = list(store.rows(RowKind.ATTEMPTS, pipeline_id="p1"))
        assert [a["attempt"] for a in of_p1] == list(range(1, 1300, 2))


def test_unfinished_yields_each_pipeline_once_while_the_runner_writes_between_rows(
    path: Path,
) -> None:
    with SQLiteStore(path) as store:
        store.begin_run(live_run("r1"), resume=False)
        store.write(Batch(pipelines=[pipeline(f"p{i}", ordinal=1500 - i) for i in range(1500)]))
        seen = []
        for row in store.unfinished(["chain-1"]):
            seen.append(row.ordinal)
            done = pipeline(row.pipeline_id, ordinal=row.ordinal, state=PipelineState.SUCCEEDED)
            store.write(Batch(pipelines=[done]))
        assert seen == list(range(1, 1501))
        assert store.count_by_state() == {"succeeded": 1500}


# -- schema versions --------------------------------------------------------------------


def test_the_migrations_create_exactly_the_columns_of_the_rows(written: Path) -> None:
    # plus `pipeline_num` (the rowid of their pipeline) where rows are found by it
    hidden = dict.fromkeys((RowKind.TASKS, RowKind.ATTEMPTS), ("pipeline_num",))
    hidden[RowKind.ARTIFACTS] = hidden[RowKind.TASK_HISTORY] = ("pipeline_num",)
    for kind, table in TABLES.items():
        info = _raw(written, f"PRAGMA table_info({kind.value})")
        # a migration's new column comes after `pipeline_num`: compare them apart
        shown = [row for row in info if row[1] not in hidden.get(kind, ())]
        assert tuple(str(row[1]) for row in shown) == table.names, kind
        assert {str(row[1]) for row in info} - set(table.names) == set(hidden.get(kind, ()))
        not_null = tuple(i for i, row in enumerate(shown) if row[3])
        assert not_null == table.required, kind
    assert _raw(written, "PRAGMA user_version") == [(SCHEMA_VERSION,)]


def test_the_columns_follow_the_fields_of_the_row_dataclasses() -> None:
    rows = {RowKind.RUNS: RunRow, RowKind.PIPELINES: PipelineRow, RowKind.TASKS: TaskRow}
    rows |= {RowKind.ATTEMPTS: AttemptRow, RowKind.EVENTS: EventRow}
    rows |= {RowKind.ARTIFACTS: ArtifactRow, RowKind.RESOURCES: ResourceRow}
    for kind, row_type in rows.items():
        assert TABLES[kind].names == tuple(f.name for f in dataclasses.fields(row_type))


@pytest.mark.parametrize("read_only", [False, True])
def test_a_store_from_a_newer_pyattacker_is_refused_and_left_unchanged(
    written: Path, read_only: bool
) -> None:
    _raw(written, f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    before = written.read_bytes()
    with pytest.raises(ConfigError) as refused:
        SQLiteStore(written, read_only=read_only)
    message = str(refused.value)
    assert str(written) in message
    assert f"schema {SCHEMA_VERSION + 1}" in message
    assert f"schema {SCHEMA_VERSION} and older" in message
    assert "upgrade pyattacker" in message
    assert written.read_bytes() == before


def test_an_older_store_gets_the_additive_migrations_and_keeps_its_data(written: Path) -> None:
    with SQLiteStore(written, read_only=True) as reader:
        before = snapshot(reader)
    note = (
        "ALTER TABLE pipelines ADD COLUMN note TEXT",
        "CREATE INDEX by_note ON pipelines (note)",
    )
    with SQLiteStore(written, migrations=(*MIGRATIONS, note)) as upgraded:
        assert snapshot(upgraded) == before
        upgraded.write(checkpoint("p2", 0))
    assert _raw(written, "PRAGMA user_version") == [(SCHEMA_VERSION + 1,)]
    assert _raw(written, "SELECT count(note) FROM pipelines") == [(0,)]
    with pytest.raises(ConfigError, match="newer pyattacker"):
        SQLiteStore(written)


def _old_store_holding_a_task(path: Path, migrations: tuple[Migration, ...]) -> None:
    """A store with only ``migrations`` that holds one pipeline and its first task row:
    the rows are written by today's store into another file, then copied over column by
    column (today's write statements name columns an old store does not have)."""
    today = path.with_name("today.db")
    with SQLiteStore(today) as store:
        store.begin_run(live_run("r1"), resume=False)
        store.write(checkpoint("p1", 0))
    SQLiteStore(path, migrations=migrations).close()
    conn = sqlite3.connect(path)
    try:
        conn.execute("ATTACH ? AS today", (str(today),))
        for table in ("runs", "pipelines", "tasks"):
            names = ", ".join(r[1] for r in conn.execute(f"PRAGMA main.table_info({table})"))
            conn.execute(f"INSERT INTO main.{table} ({names}) SELECT {names} FROM today.{table}")
        conn.commit()
    finally:
        conn.close()


def test_a_store_from_before_task_history_gains_it_and_can_move_rows_to_it(
    path: Path,
) -> None:
    _old_store_holding_a_task(path, MIGRATIONS[: MIGRATIONS.index(_TASK_HISTORY)])
    with SQLiteStore(path) as upgraded:
        move = Superseded(pipeline_id="p1", from_seq=0, run_id="r2", at=1.0)
        upgraded.write(Batch(superseded=[move]))
        moved = list(upgraded.rows(RowKind.TASK_HISTORY))
        assert [(h["pipeline_id"], h["seq"], h["superseded_by"]) for h in moved] == [
            ("p1", 0, "r2")
        ]
        assert list(upgraded.rows(RowKind.TASKS)) == []
    assert _raw(path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]


def test_opening_a_current_store_leaves_the_file_as_it_is(written: Path) -> None:
    before = written.read_bytes()
    SQLiteStore(written).close()
    assert written.read_bytes() == before


def test_a_migration_that_fails_changes_nothing(written: Path) -> None:
    broken = ("ALTER TABLE pipelines ADD COLUMN note TEXT", "ALTER TABLE nowhere ADD COLUMN x")
    with pytest.raises(StoreError, match="no such table"):
        SQLiteStore(written, migrations=(*MIGRATIONS, broken))
    assert _raw(written, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert "note" not in {row[1] for row in _raw(written, "PRAGMA table_info(pipelines)")}


# -- paths it cannot use ----------------------------------------------------------------


def _refused(open_it: Callable[[], object]) -> bool:
    try:
        open_it()
    except ConfigError as exc:
        return exc.field == "store" and exc.hint is not None
    return False


def _refused_when_unprivileged(open_it: Callable[[], object]) -> bool:
    """``_refused``, run by a user that permission bits apply to.

    Root ignores permission bits, so as root the check runs in a forked child that gives
    up root first and answers through its exit code.
    """
    if os.geteuid() != 0:
        return _refused(open_it)
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 2
        try:
            os.setgid(65534)
            os.setuid(65534)
            code = 0 if _refused(open_it) else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder everyone may enter (pytest's tmp_path is private to its owner)."""
    folder = Path(tempfile.mkdtemp())
    folder.chmod(0o755)
    yield folder
    for inner in folder.iterdir():
        inner.chmod(0o755)
    shutil.rmtree(folder)


def test_a_store_in_a_missing_folder_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "run.db"
    with pytest.raises(ConfigError) as refused:
        SQLiteStore(missing)
    assert refused.value.field == "store"
    assert "does not exist" in refused.value.message
    assert not (tmp_path / "no").exists()


def test_a_folder_is_not_a_store(tmp_path: Path) -> None:
    assert _refused(lambda: SQLiteStore(tmp_path))


def test_a_writer_is_refused_in_a_read_only_folder_and_creates_nothing(
    shared_folder: Path,
) -> None:
    locked = shared_folder / "locked"
    locked.mkdir(mode=0o555)
    locked.chmod(0o555)
    assert _refused_when_unprivileged(lambda: SQLiteStore(locked / "run.db"))
    assert list(locked.iterdir()) == []


def test_a_read_only_store_file_is_refused_to_a_writer_and_open_to_a_reader(
    shared_folder: Path,
) -> None:
    folder = shared_folder / "open"
    folder.mkdir()
    folder.chmod(0o777)
    store_file = folder / "run.db"
    with SQLiteStore(store_file) as writer:
        writer.begin_run(live_run("r1"), resume=False)
    store_file.chmod(0o444)
    before = store_file.read_bytes()
    assert _refused_when_unprivileged(lambda: SQLiteStore(store_file))
    assert store_file.read_bytes() == before
    with SQLiteStore(store_file, read_only=True) as reader:
        assert [r.run_id for r in reader.runs()] == ["r1"]


def test_a_reader_of_a_missing_file_is_refused_and_creates_nothing(path: Path) -> None:
    assert _refused(lambda: SQLiteStore(path, read_only=True))
    assert not path.exists()


def test_a_file_that_is_not_a_database_is_refused_unchanged(path: Path) -> None:
    path.write_bytes(b"these are notes, not a database\n" * 200)
    with pytest.raises(ConfigError) as refused:
        SQLiteStore(path)
    assert refused.value.field == "store"
    assert "not a SQLite database" in refused.value.message
    assert path.read_bytes() == b"these are notes, not a database\n" * 200
    assert sorted(p.name for p in path.parent.iterdir()) == ["run.db"]


def test_a_database_of_another_program_is_refused_unchanged(path: Path) -> None:
    _raw(path, "CREATE TABLE customers (name TEXT)")
    with pytest.raises(ConfigError, match="not a pyattacker store"):
        SQLiteStore(path)
    assert _raw(path, "SELECT name FROM sqlite_master") == [("customers",)]
    assert _raw(path, "PRAGMA user_version") == [(0,)]


def test_the_identity_adapters_never_replace_an_adapter_someone_registered() -> None:
    from pyattacker.store._files import _identity_adapters

    saved = dict(sqlite3.adapters)
    try:
        sqlite3.adapters.clear()
        mine = str
        sqlite3.register_adapter(type(None), mine)
        _identity_adapters.__wrapped__()
        assert sqlite3.adapters[(type(None), sqlite3.PrepareProtocol)] is mine
        assert sqlite3.adapters[(bytes, sqlite3.PrepareProtocol)] is bytes
    finally:
        sqlite3.adapters.clear()
        sqlite3.adapters.update(saved)
