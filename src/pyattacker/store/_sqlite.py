"""``SQLiteStore``: the durable record in one SQLite file (stdlib ``sqlite3``).

Why stdlib ``sqlite3`` and no ORM: the write path is a handful of prepared statements run
with ``executemany`` inside one explicit transaction per batch, and that is all an ORM
would add cost to. WAL mode lets readers (report, export, dashboard) open the file
read-only beside the live run without blocking it.

How durable a committed ``write`` is: with ``synchronous="normal"`` (the default) a
committed transaction survives the process being killed (SIGKILL, OOM): the WAL frames are
in the OS page cache when ``COMMIT`` returns. It does not survive a power loss or kernel
crash until the next checkpoint; ``synchronous="full"`` fsyncs the WAL on every commit and
survives those too, at the cost of one fsync per batch.

Not thread-safe: one thread at a time (the connection is shared; nothing is locked).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Literal

from pyattacker.errors import ConfigError, StoreError
from pyattacker.store._artifact_files import ArtifactFiles
from pyattacker.store._files import check_path, connect, mapped
from pyattacker.store._lifecycle import DEFAULT_STALE_AFTER_S, not_running, plan_begin
from pyattacker.store._lock import LOCKS, WriterLock, probe
from pyattacker.store._rows import ArtifactRow, Batch, PipelineRow, RowKind, RunRow, RunState
from pyattacker.store._schema import (
    COUNT_BY_STATE,
    COUNT_PIPELINES,
    DROP_TASKS,
    END_RUN,
    HEARTBEAT,
    INSERT,
    INTERRUPT_PIPELINES,
    MARK_CRASHED,
    MIGRATIONS,
    ONE_ARTIFACT,
    ONE_PIPELINE,
    ONE_TASK,
    RUN_EXISTS,
    RUN_STATE,
    RUNNING_RUNS,
    SET_INPUT,
    SUPERSEDE_TASKS,
    TEMPLATES,
    Migration,
    Pages,
    check_version,
    last_attempts,
    migrate,
    pages_for,
    some_pipelines,
    stale_pages,
    unfinished_pages,
    user_version,
)
from pyattacker.store._tables import (
    TABLES,
    UNKNOWN_PIPELINE,
    decode,
    encode_batch,
    encode_run,
    encoding,
    resolve_kind,
    task_artifact,
    to_artifact,
    to_pipeline,
    to_run,
    with_ok_attempts,
    with_task_artifacts,
)

__all__ = ["SQLiteStore", "Synchronous"]

Synchronous = Literal["normal", "full"]
_SYNCHRONOUS = ("normal", "full")
_PAGE = 512  # rows per read query: big enough to be cheap, small enough to stream
_PIPELINES = TABLES[RowKind.PIPELINES]
_IN_CHUNK = 500  # ids per `IN (...)` query, well under SQLite's limit on parameters
_CHAIN = _PIPELINES.names.index("chain_digest")


class SQLiteStore:
    """A :class:`~pyattacker.store.Store` in the SQLite file ``path``.

    Opening creates the file (and its schema) when it does not exist, and upgrades an
    older one with the additive ``migrations`` (default: this version's; a parameter so the
    upgrade path can be tested). ``read_only=True`` opens a reader that works beside a live
    writer and refuses every write.

    Raises ``ConfigError`` (field ``store``), creating and changing nothing, when the folder
    is missing, the folder or file is not writable (for a writer), the file does not exist
    (for a reader), is not a SQLite database or not a pyattacker store, or was written by a
    newer pyattacker. ``synchronous`` is ``"normal"`` or ``"full"`` (see the module
    docstring for what each survives). ``busy_timeout_s`` is how long a write waits for
    another connection's lock before failing with ``StoreError``; ``stale_after_s`` is when
    a silent run *of another host* counts as dead, and ``lock_wait_s`` how long
    ``begin_run`` retries a lock a reader is probing (see ``begin_run``).

    The run's writer lock: ``begin_run`` takes an exclusive lock on ``<path>.lock`` and
    holds it until ``end_run`` or ``close`` (``pyattacker.store._lock``). While a process
    holds it, its run is live to every reader and no other run can begin, however old its
    heartbeat; once the process dies the OS releases it.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        read_only: bool = False,
        synchronous: Synchronous = "normal",
        busy_timeout_s: float = 5.0,
        stale_after_s: float = DEFAULT_STALE_AFTER_S,
        lock_wait_s: float = 0.5,
        migrations: tuple[Migration, ...] = MIGRATIONS,
        artifacts: str = "inline",
    ) -> None:
        if synchronous not in _SYNCHRONOUS:
            raise ConfigError(
                f"unknown synchronous mode {synchronous!r}",
                field="synchronous",
                hint="one of: normal (survives a killed process), full (also a power loss)",
            )
        self.path = Path(path)
        self.location = str(path)
        self.read_only = read_only
        self.synchronous = synchronous
        self.stale_after_s = stale_after_s
        self.lock_wait_s = lock_wait_s
        self._lock = WriterLock(self.path)
        self.artifacts = ArtifactFiles(self.path, artifacts)  # file/null outputs (see there)
        self._owner: str | None = None  # the run begun here and not yet ended
        check_path(self.path, read_only=read_only)
        self._conn: sqlite3.Connection | None = connect(
            self.path, read_only=read_only, busy_timeout_s=busy_timeout_s
        )
        try:
            self._prepare(migrations)
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else "read-only" if self.read_only else "open"
        return f"<SQLiteStore {self.location!r} {state}>"

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- the run's lifecycle ------------------------------------------------------------

    def begin_run(self, run: RunRow, *, resume: bool) -> list[RunRow]:
        """See :meth:`Store.begin_run`. Takes the writer lock first: held by another
        process, the runs it may own are live and the new run is refused (``ConfigError``,
        field ``resume``); taken, a run of this host still marked ``running`` is dead."""
        values = encoding(lambda: encode_run(run), self.location)
        if self.read_only:
            raise StoreError("the store was opened read-only", location=self.location)
        held_here = self._lock.held
        taken_now = not held_here and self._lock.acquire(wait_s=self.lock_wait_s)
        if not held_here and not taken_now:
            # Another process writes here: refuse without a write transaction, which would
            # wait for that process (it may be paused mid-transaction).
            with mapped(self.location, "could not read"):
                self._plan(self._connection(), run, resume, held=True, other_writer=True)
        try:
            with self._transaction() as conn:
                taken = self._plan(conn, run, resume, held=held_here, other_writer=False)
                crashed = [(r.ended_at, r.stop_reason, r.run_id) for r in taken]
                conn.executemany(MARK_CRASHED, crashed)
                conn.executemany(INTERRUPT_PIPELINES, [(r.run_id,) for r in taken])
                conn.execute(INSERT[RowKind.RUNS], values)
        except BaseException:
            if taken_now:
                self._lock.release()
            raise
        self._owner = run.run_id
        return taken

    def _plan(
        self, conn: sqlite3.Connection, run: RunRow, resume: bool, *, held: bool, other_writer: bool
    ) -> list[RunRow]:
        return plan_begin(
            run,
            resume=resume,
            running=[to_run(decode(TABLES[RowKind.RUNS], r)) for r in conn.execute(RUNNING_RUNS)],
            id_taken=conn.execute(RUN_EXISTS, (run.run_id,)).fetchone() is not None,
            pipelines=conn.execute(COUNT_PIPELINES).fetchone()[0],
            location=self.location,
            stale_after_s=self.stale_after_s,
            lock_held=held if LOCKS else None,
            other_writer=other_writer,
        )

    def lock_held(self) -> bool | None:
        """Whether a process (this one included) holds the store's writer lock now; None
        where there are no locks. Creates nothing (see ``pyattacker.store._lock.probe``)."""
        return True if self._lock.held else probe(self.path)

    def end_run(
        self, run_id: str, state: RunState, *, ended_at: float, stop_reason: str | None
    ) -> None:
        """See :meth:`Store.end_run`; releases the writer lock the run held, even when
        ending fails."""
        value = encoding(lambda: RunState(state).value, self.location)
        try:
            with self._transaction() as conn:
                changed = conn.execute(END_RUN, (value, ended_at, stop_reason, run_id)).rowcount
                if not changed:
                    raise self._not_running(conn, run_id, "end")
        finally:
            if run_id == self._owner:
                self._owner = None
                self._lock.release()

    def write(self, batch: Batch) -> None:
        batch = self.artifacts.spilled(batch)
        encoded = encoding(lambda: encode_batch(batch), self.location)
        try:
            with self._transaction() as conn:
                for pid, from_seq, run_id, at in encoded.superseded:
                    conn.execute(SUPERSEDE_TASKS, (run_id, at, pid, from_seq))
                    conn.execute(DROP_TASKS, (pid, from_seq))
                beat = encoded.heartbeat
                if beat is not None and not conn.execute(HEARTBEAT, (beat[1], beat[0])).rowcount:
                    raise self._not_running(conn, beat[0], "record a heartbeat of")
                if self._owner is not None and (beat is None or beat[0] != self._owner):
                    self._check_owner(conn)  # one indexed read per batch, not per row
                for table, rows in encoded.tables():
                    if rows:
                        conn.executemany(INSERT[table.kind], rows)
                if encoded.run_input is not None:
                    run_id, record = encoded.run_input
                    conn.execute(SET_INPUT, (record, run_id))
        except StoreError as exc:
            cause = exc.__cause__
            if isinstance(cause, sqlite3.IntegrityError) and "pipeline_num" in str(cause):
                # the pipeline lookup found nothing (NOT NULL): say it in the user's terms
                message = f"could not write: {UNKNOWN_PIPELINE}"
                raise StoreError(message, location=self.location) from cause
            raise

    def close(self) -> None:
        """Close the connection and release the writer lock; idempotent. A run begun here
        and not ended is left ``running``: to readers it is then dead, as if its process
        had died."""
        conn, self._conn = self._conn, None
        self._owner = None
        try:
            if conn is not None:
                conn.close()
        finally:
            self._lock.release()  # last: the next writer finds the file closed by this one

    # -- what the Runner reads ----------------------------------------------------------

    def pipeline(self, pipeline_id: str) -> PipelineRow | None:
        found = self._one(ONE_PIPELINE, pipeline_id)
        return None if found is None else to_pipeline(decode(_PIPELINES, found))

    def pipelines(self, pipeline_ids: Sequence[str]) -> dict[str, PipelineRow]:
        ids = list(dict.fromkeys(pipeline_ids))
        found: dict[str, PipelineRow] = {}
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = ids[start : start + _IN_CHUNK]
            with mapped(self.location, "could not read"):
                rows = self._connection().execute(some_pipelines(len(chunk)), chunk).fetchall()
            for row in rows:
                pipeline = to_pipeline(decode(_PIPELINES, row))
                found[pipeline.pipeline_id] = pipeline
        return found

    def artifact(self, pipeline_id: str, seq: int) -> ArtifactRow | None:
        with mapped(self.location, "could not read"):
            found = self._connection().execute(ONE_ARTIFACT, (pipeline_id, seq)).fetchone()
            if found is not None:
                return to_artifact(decode(TABLES[RowKind.ARTIFACTS], found))
            task = self._connection().execute(ONE_TASK, (pipeline_id, seq)).fetchone()
        carried = None if task is None else task_artifact(task)
        return None if carried is None else self.artifacts.read(to_artifact(carried))

    def unfinished(self, chain_digests: Collection[str]) -> Iterator[PipelineRow]:
        """See :meth:`Store.unfinished`. Paged like :meth:`rows`, so the Runner may write
        between the pipelines it gets (each is yielded once, in ``ordinal`` order)."""
        wanted = set(chain_digests)
        rows = self._paged(unfinished_pages(), ())
        return (to_pipeline(decode(_PIPELINES, r)) for r in rows if r[_CHAIN] in wanted)

    def stale(self, template: str, chain_digest: str | None) -> Iterator[PipelineRow]:
        """See :meth:`Store.stale`. Paged by rowid, so the Runner may write between the
        pipelines it gets (an updated row keeps its rowid: each is yielded once)."""
        rows = self._paged(*stale_pages(template, chain_digest))
        return (to_pipeline(decode(_PIPELINES, r)) for r in rows)

    def templates(self) -> list[str]:
        with mapped(self.location, "could not read"):
            return [row[0] for row in self._connection().execute(TEMPLATES)]

    def last_attempts(self, pipeline_ids: Sequence[str]) -> dict[str, dict[int, int]]:
        ids = list(dict.fromkeys(pipeline_ids))
        found: dict[str, dict[int, int]] = {}
        for start in range(0, len(ids), _IN_CHUNK // 3):  # the ids are bound three times
            chunk = ids[start : start + _IN_CHUNK // 3]
            with mapped(self.location, "could not read"):
                rows = self._connection().execute(last_attempts(len(chunk)), chunk * 3)
                for pid, seq, attempt in rows:
                    found.setdefault(pid, {})[seq] = attempt
        return found

    def count_pipelines(self) -> int:
        with mapped(self.location, "could not read"):
            count: int = self._connection().execute(COUNT_PIPELINES).fetchone()[0]
        return count

    def count_by_state(self) -> dict[str, int]:
        with mapped(self.location, "could not read"):
            counts = self._connection().execute(COUNT_BY_STATE).fetchall()
        return dict(counts)

    # -- what readers read --------------------------------------------------------------

    def runs(self) -> list[RunRow]:
        return [to_run(row) for row in self.rows(RowKind.RUNS)]

    def rows(self, kind: RowKind, *, pipeline_id: str | None = None) -> Iterator[dict[str, Any]]:
        """See :meth:`Store.rows`. Read a page of rows at a time, each page consistent on
        its own: beside a live run, rows written meanwhile may appear in later pages."""
        table = TABLES[resolve_kind(kind, pipeline_id)]
        self._connection()  # a closed store fails here, not at the first next()
        stored = self._decoded(table.kind, pipeline_id)
        scoped = pipeline_id is not None
        if table.kind is RowKind.ATTEMPTS:
            return with_ok_attempts(
                stored, self._decoded(RowKind.TASKS, pipeline_id), scoped=scoped
            )
        if table.kind is RowKind.ARTIFACTS:
            tasks = self._paged(*pages_for(RowKind.TASKS, pipeline_id))
            found = with_task_artifacts(stored, tasks, scoped=scoped)
            return map(self.artifacts.read_row, found)
        return stored

    def _decoded(self, kind: RowKind, pipeline_id: str | None) -> Iterator[dict[str, Any]]:
        pages, params = pages_for(kind, pipeline_id)
        return (decode(TABLES[kind], r) for r in self._paged(pages, params))

    # -- internals ----------------------------------------------------------------------

    def _prepare(self, migrations: tuple[Migration, ...]) -> None:
        conn = self._connection()
        with mapped(self.location, "could not open", not_a_database=True):
            version = user_version(conn)
            check_version(version, known=len(migrations), location=self.location)
            if self.read_only:
                _check_readable(version, known=len(migrations), location=self.location)
                return
            _check_ours(conn, version, self.location)
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"cannot use WAL mode (got {mode})", location=self.location)
            conn.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")
            if version < len(migrations):  # else no write (a paused writer may hold the lock)
                migrate(conn, migrations, self.location)

    def _check_owner(self, conn: sqlite3.Connection) -> None:
        """Refuse to write for a run that is no longer ``running``: another process took
        it over (its heartbeat went stale on another host, or the row was edited)."""
        found = conn.execute(RUN_STATE, (self._owner,)).fetchone()
        if found is None or found[0] != RunState.RUNNING.value:
            raise self._not_running(conn, str(self._owner), "write for")

    def _not_running(self, conn: sqlite3.Connection, run_id: str, what: str) -> StoreError:
        found = conn.execute(RUN_STATE, (run_id,)).fetchone()
        return not_running(run_id, found, what, self.location)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("the store is closed", location=self.location)
        return self._conn

    def _transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        if self.read_only:
            raise StoreError("the store was opened read-only", location=self.location)
        return _transaction(self._connection(), self.location)

    def _one(self, sql: str, key: str) -> tuple[Any, ...] | None:
        with mapped(self.location, "could not read"):
            found: tuple[Any, ...] | None = self._connection().execute(sql, (key,)).fetchone()
        return found

    def _paged(self, pages: Pages, params: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
        """Every row ``pages`` selects, one query per page (keyset pagination): no statement
        stays open between pages, so the writer's transactions and checkpoints are never
        held up by a slow reader."""
        after = pages.start
        while True:
            with mapped(self.location, "could not read"):
                page = self._connection().execute(pages.sql, (*params, *after, _PAGE)).fetchall()
            yield from (row[pages.key_len :] for row in page)
            if len(page) < _PAGE:
                return
            after = page[-1][: pages.key_len]


@contextmanager
def _transaction(conn: sqlite3.Connection, location: str) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, or ``ROLLBACK`` on any error (then re-raised,
    SQLite's as ``StoreError``). IMMEDIATE takes the write lock up front, so a busy store
    fails (after the busy timeout) at ``BEGIN`` rather than halfway through a batch."""
    with mapped(location, "could not write"):
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


def _check_readable(version: int, *, known: int, location: str) -> None:
    """A reader cannot migrate: refuse a file with no schema or an older one."""
    if version == 0:
        raise ConfigError(
            f"{location} is not a pyattacker store (no schema)",
            field="store",
            hint="check the path; a run creates the store",
        )
    if version < known:
        raise ConfigError(
            f"{location} has store schema {version}, older than this pyattacker's {known}",
            field="store",
            hint="open it once for writing (without read_only) to upgrade it",
        )


def _check_ours(conn: sqlite3.Connection, version: int, location: str) -> None:
    """Refuse a SQLite file some other program made: unversioned yet holding tables."""
    if version == 0 and conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone():
        raise ConfigError(
            f"{location} is a SQLite database but not a pyattacker store",
            field="store",
            hint="choose another path; pyattacker will not add its tables to it",
        )
