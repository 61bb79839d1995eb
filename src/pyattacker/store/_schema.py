"""The SQLite schema, its migrations, and the prepared statements ``SQLiteStore`` runs.

Versioning: ``PRAGMA user_version`` holds how many migrations a file has had. Migrations
are ADDITIVE (new tables, new nullable columns, new indexes) and never edited once
released: migration ``n`` is frozen SQL text, so a file upgraded step by step is the same
as a file created today. :data:`SCHEMA_VERSION` is ``len(MIGRATIONS)``. A file with a
higher version was written by a newer pyattacker and is refused, unchanged.

The write statements are built once from the column lists in ``_tables`` (the current
shape); a test checks that the migrations produce exactly those columns.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyattacker.errors import ConfigError
from pyattacker.store._rows import RowKind
from pyattacker.store._tables import TABLES, Table

__all__ = [
    "COUNT_BY_STATE",
    "COUNT_PIPELINES",
    "DROP_TASKS",
    "END_RUN",
    "HEARTBEAT",
    "INSERT",
    "INTERRUPT_PIPELINES",
    "MARK_CRASHED",
    "MIGRATIONS",
    "ONE_ARTIFACT",
    "ONE_PIPELINE",
    "ONE_TASK",
    "RUNNING_RUNS",
    "RUN_EXISTS",
    "RUN_STATE",
    "SCHEMA_VERSION",
    "SET_INPUT",
    "SUPERSEDE_TASKS",
    "TEMPLATES",
    "Migration",
    "Pages",
    "check_version",
    "last_attempts",
    "migrate",
    "pages_for",
    "some_pipelines",
    "stale_pages",
    "unfinished_pages",
    "user_version",
]

#: One migration: SQL statements run in order, in one transaction with the others.
Migration = tuple[str, ...]

_V1: Migration = (
    """CREATE TABLE runs (
        run_id TEXT NOT NULL UNIQUE, state TEXT NOT NULL, started_at REAL NOT NULL,
        ended_at REAL, heartbeat_at REAL, pid INTEGER, host TEXT, resumes TEXT,
        stop_reason TEXT, config TEXT NOT NULL)""",
    """CREATE TABLE pipelines (
        pipeline_id TEXT NOT NULL UNIQUE, template TEXT NOT NULL, chain_digest TEXT NOT NULL,
        seed_digest TEXT NOT NULL, seed_artifact TEXT NOT NULL, repeat INTEGER NOT NULL,
        key TEXT, state TEXT NOT NULL, cursor INTEGER NOT NULL, ntasks INTEGER NOT NULL,
        run_id TEXT NOT NULL, ordinal INTEGER NOT NULL, created_at REAL NOT NULL,
        updated_at REAL NOT NULL, output_artifact TEXT, error TEXT)""",
    # unfinished() walks this in ordinal order; succeeded pipelines (most of a big store)
    # leave it, so a resume does not read past them.
    """CREATE INDEX pipelines_unfinished ON pipelines (ordinal)
        WHERE state <> 'succeeded'""",
    # Tasks and attempts are found by `pipeline_num`, the rowid of their pipeline, not by
    # `pipeline_id`: ids are digests, so an index on them takes each batch's rows at random
    # places, dirtying one page per row (and a WAL frame per page at commit); pipelines in
    # flight have neighbouring rowids, so these indexes grow at one end. Cost: a task or
    # attempt must name a pipeline the store holds (the insert looks its rowid up).
    """CREATE TABLE tasks (
        pipeline_id TEXT NOT NULL, seq INTEGER NOT NULL, name TEXT NOT NULL,
        task_digest TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL,
        run_id TEXT NOT NULL, started_at REAL NOT NULL, ended_at REAL NOT NULL,
        input_artifact TEXT, output_artifact TEXT, error_class TEXT, error TEXT,
        traceback TEXT, resources TEXT NOT NULL, attempt_started_at REAL,
        attempt_ended_at REAL, attempt_duration_s REAL, output_codec TEXT, output_data BLOB,
        pipeline_num INTEGER NOT NULL, UNIQUE (pipeline_num, seq))""",
    """CREATE TABLE attempts (
        run_id TEXT NOT NULL, pipeline_id TEXT NOT NULL, seq INTEGER NOT NULL,
        task TEXT NOT NULL, attempt INTEGER NOT NULL, outcome TEXT NOT NULL,
        started_at REAL NOT NULL, ended_at REAL NOT NULL, duration_s REAL NOT NULL,
        decision TEXT NOT NULL, resources TEXT NOT NULL, error_class TEXT, error TEXT,
        traceback TEXT, pipeline_num INTEGER NOT NULL)""",
    "CREATE INDEX attempts_by_pipeline ON attempts (pipeline_num)",
    """CREATE TABLE events (
        run_id TEXT NOT NULL, kind TEXT NOT NULL, at REAL NOT NULL, pipeline_id TEXT,
        seq INTEGER, data TEXT NOT NULL)""",
    """CREATE INDEX events_by_pipeline ON events (pipeline_id)
        WHERE pipeline_id IS NOT NULL""",
    # Artifacts are kept per (pipeline, seq), found like tasks; see ArtifactRow for why not
    # once per digest.
    """CREATE TABLE artifacts (
        pipeline_id TEXT NOT NULL, seq INTEGER NOT NULL, digest TEXT NOT NULL,
        codec TEXT NOT NULL, data BLOB NOT NULL, created_at REAL NOT NULL,
        pipeline_num INTEGER NOT NULL, UNIQUE (pipeline_num, seq))""",
    """CREATE TABLE resources (
        run_id TEXT NOT NULL, pool TEXT NOT NULL, resource_id TEXT NOT NULL,
        kind TEXT NOT NULL, spec TEXT NOT NULL)""",
)

# What attempts reported through `lease.report(usage=...)` (tokens, calls), summed: on
# failed/cancelled attempts rows and on the successful attempt a task row carries.
_USAGE: Migration = (
    "ALTER TABLE attempts ADD COLUMN usage TEXT",
    "ALTER TABLE tasks ADD COLUMN usage TEXT",
)

# Step history: a task row that a newer version of its step replaces (an edited step, a
# fresh run) moves here whole, output included, instead of being overwritten.
_TASK_HISTORY: Migration = (
    """CREATE TABLE task_history (
        pipeline_id TEXT NOT NULL, seq INTEGER NOT NULL, name TEXT NOT NULL,
        task_digest TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL,
        run_id TEXT NOT NULL, started_at REAL NOT NULL, ended_at REAL NOT NULL,
        input_artifact TEXT, output_artifact TEXT, error_class TEXT, error TEXT,
        traceback TEXT, resources TEXT NOT NULL, attempt_started_at REAL,
        attempt_ended_at REAL, attempt_duration_s REAL, output_codec TEXT, output_data BLOB,
        usage TEXT,
        superseded_by TEXT NOT NULL, superseded_at REAL NOT NULL,
        pipeline_num INTEGER NOT NULL)""",
    "CREATE INDEX task_history_by_pipeline ON task_history (pipeline_num, seq)",
)

# What each run read (the input record, JSON) and each pipeline's row in that input.
_INPUT: Migration = (
    "ALTER TABLE runs ADD COLUMN input TEXT",
    "ALTER TABLE pipelines ADD COLUMN row INTEGER",
)

MIGRATIONS: tuple[Migration, ...] = (_V1, _USAGE, _TASK_HISTORY, _INPUT)
SCHEMA_VERSION = len(MIGRATIONS)


def _insert(table: Table, on_conflict: str = "") -> str:
    names = ", ".join(table.names)
    marks = ", ".join(f"?{i}" for i in range(1, len(table.names) + 1))
    return f"INSERT INTO {table.kind.value} ({names}) VALUES ({marks}){on_conflict}"


def _insert_numbered(table: Table, on_conflict: str = "") -> str:
    """The insert of a task or attempt: its ``pipeline_num`` looked up from the
    ``pipeline_id`` parameter it already binds (so the row tuple stays as it is)."""
    names = ", ".join(table.names)
    marks = ", ".join(f"?{i}" for i in range(1, len(table.names) + 1))
    pipeline_id = f"?{table.names.index('pipeline_id') + 1}"
    number = f"(SELECT rowid FROM pipelines WHERE pipeline_id = {pipeline_id})"
    return (
        f"INSERT INTO {table.kind.value} ({names}, pipeline_num)"
        f" VALUES ({marks}, {number}){on_conflict}"
    )


def _on_conflict(table: Table, key: str, *unchanged: str) -> str:
    """An upsert clause replacing every column but ``unchanged``. DO UPDATE rather than
    INSERT OR REPLACE: the row keeps its rowid, so its place in ``rows()``."""
    updates = ", ".join(f"{n} = excluded.{n}" for n in table.names if n not in unchanged)
    return f" ON CONFLICT ({key}) DO UPDATE SET {updates}"


_PIPELINES, _TASKS = TABLES[RowKind.PIPELINES], TABLES[RowKind.TASKS]
_ARTIFACTS = TABLES[RowKind.ARTIFACTS]

#: The statement that writes one row of each kind, as ``write``/``begin_run`` need it.
INSERT: dict[RowKind, str] = {
    RowKind.RUNS: _insert(TABLES[RowKind.RUNS]),
    RowKind.PIPELINES: _insert(_PIPELINES, _on_conflict(_PIPELINES, "pipeline_id", "pipeline_id")),
    RowKind.TASKS: _insert_numbered(
        _TASKS, _on_conflict(_TASKS, "pipeline_num, seq", "pipeline_id", "seq")
    ),
    RowKind.ATTEMPTS: _insert_numbered(TABLES[RowKind.ATTEMPTS]),
    RowKind.EVENTS: _insert(TABLES[RowKind.EVENTS]),
    RowKind.ARTIFACTS: _insert_numbered(
        _ARTIFACTS, _on_conflict(_ARTIFACTS, "pipeline_num, seq", "pipeline_id", "seq")
    ),
    RowKind.RESOURCES: _insert(TABLES[RowKind.RESOURCES]),
}


def _columns(kind: RowKind) -> str:
    return ", ".join(TABLES[kind].names)


# Both change a run only while it is `running`: a run taken over (marked `crashed` by
# another process) is never revived by its woken owner; rowcount 0 tells the owner so.
HEARTBEAT = "UPDATE runs SET heartbeat_at = ? WHERE run_id = ? AND state = 'running'"
END_RUN = (
    "UPDATE runs SET state = ?, ended_at = ?, stop_reason = ?"
    " WHERE run_id = ? AND state = 'running'"
)
RUN_STATE = "SELECT state, stop_reason FROM runs WHERE run_id = ?"
SET_INPUT = "UPDATE runs SET input = ? WHERE run_id = ?"
MARK_CRASHED = "UPDATE runs SET state = 'crashed', ended_at = ?, stop_reason = ? WHERE run_id = ?"
INTERRUPT_PIPELINES = (
    "UPDATE pipelines SET state = 'interrupted'"
    " WHERE run_id = ? AND state IN ('running', 'pending')"
)
RUNNING_RUNS = f"SELECT {_columns(RowKind.RUNS)} FROM runs WHERE state = 'running' ORDER BY rowid"
RUN_EXISTS = "SELECT 1 FROM runs WHERE run_id = ?"
COUNT_PIPELINES = "SELECT count(*) FROM pipelines"
COUNT_BY_STATE = "SELECT state, count(*) FROM pipelines GROUP BY state ORDER BY state"
ONE_PIPELINE = f"SELECT {_columns(RowKind.PIPELINES)} FROM pipelines WHERE pipeline_id = ?"
ONE_ARTIFACT = (
    f"SELECT {_columns(RowKind.ARTIFACTS)} FROM artifacts"
    f" WHERE pipeline_num = (SELECT rowid FROM pipelines WHERE pipeline_id = ?) AND seq = ?"
)
ONE_TASK = (
    f"SELECT {_columns(RowKind.TASKS)} FROM tasks"
    f" WHERE pipeline_num = (SELECT rowid FROM pipelines WHERE pipeline_id = ?) AND seq = ?"
)


_TASK_NAMES = ", ".join(_TASKS.names)
#: Move a pipeline's task rows at ``seq >= ?`` to ``task_history``; parameters
#: ``(superseded_by, superseded_at, pipeline_id, from_seq)``, then :data:`DROP_TASKS`.
SUPERSEDE_TASKS = (
    f"INSERT INTO task_history ({_TASK_NAMES}, superseded_by, superseded_at, pipeline_num)"
    f" SELECT {_TASK_NAMES}, ?1, ?2, pipeline_num FROM tasks"
    f" WHERE pipeline_num = (SELECT rowid FROM pipelines WHERE pipeline_id = ?3) AND seq >= ?4"
)
#: Parameters ``(pipeline_id, from_seq)``.
DROP_TASKS = (
    "DELETE FROM tasks"
    " WHERE pipeline_num = (SELECT rowid FROM pipelines WHERE pipeline_id = ?) AND seq >= ?"
)
TEMPLATES = "SELECT DISTINCT template FROM pipelines ORDER BY template"


@functools.cache
def last_attempts(n: int) -> str:
    """``(pipeline_id, seq, highest attempt number)`` recorded for ``n`` pipelines, over
    attempts, task rows and task history (one query per chunk of admissions)."""
    marks = ", ".join("?" * n)
    nums = f"(SELECT rowid FROM pipelines WHERE pipeline_id IN ({marks}))"
    return (
        "SELECT p.pipeline_id, x.seq, max(x.attempt) FROM ("
        f" SELECT pipeline_num, seq, attempt FROM attempts WHERE pipeline_num IN {nums}"
        f" UNION ALL SELECT pipeline_num, seq, attempts FROM tasks WHERE pipeline_num IN {nums}"
        " UNION ALL SELECT pipeline_num, seq, attempts FROM task_history"
        f" WHERE pipeline_num IN {nums}"
        ") AS x JOIN pipelines AS p ON p.rowid = x.pipeline_num GROUP BY x.pipeline_num, x.seq"
    )


@functools.cache
def some_pipelines(n: int) -> str:
    """The pipelines among ``n`` ids (``IN`` with ``n`` parameters; cached per ``n``)."""
    marks = ", ".join("?" * n)
    return f"SELECT {_columns(RowKind.PIPELINES)} FROM pipelines WHERE pipeline_id IN ({marks})"


@dataclass(frozen=True, slots=True)
class Pages:
    """A keyset-paginated read: ``sql`` takes ``(*params, *after, limit)`` and selects the
    ``key_len`` key columns, then the table's columns, in key order. The first page is
    read with ``after = start`` (minus infinity: below every key)."""

    sql: str
    key_len: int

    @property
    def start(self) -> tuple[float, ...]:
        return (float("-inf"),) * self.key_len


def _pages(kind: RowKind, key: tuple[str, ...] = ("rowid",), where: str = "") -> Pages:
    keys = ", ".join(key)
    after = f"({keys}) > ({', '.join('?' for _ in key)})"
    condition = f"{where} AND {after}" if where else after
    return Pages(
        f"SELECT {keys}, {_columns(kind)} FROM {kind.value}"
        f" WHERE {condition} ORDER BY {keys} LIMIT ?",
        len(key),
    )


_NUMBER = "(SELECT rowid FROM pipelines WHERE pipeline_id = ?)"
_EVERY = {kind: _pages(kind) for kind in RowKind}
_OF_PIPELINE: dict[RowKind, tuple[Pages, int]] = {
    RowKind.PIPELINES: (_pages(RowKind.PIPELINES, where="pipeline_id = ?"), 1),
    RowKind.TASKS: (_pages(RowKind.TASKS, ("seq",), f"pipeline_num = {_NUMBER}"), 1),
    RowKind.ATTEMPTS: (_pages(RowKind.ATTEMPTS, where=f"pipeline_num = {_NUMBER}"), 1),
    RowKind.EVENTS: (_pages(RowKind.EVENTS, where="pipeline_id = ?"), 1),
    RowKind.ARTIFACTS: (_pages(RowKind.ARTIFACTS, ("seq",), f"pipeline_num = {_NUMBER}"), 1),
    RowKind.TASK_HISTORY: (
        _pages(RowKind.TASK_HISTORY, ("seq", "rowid"), f"pipeline_num = {_NUMBER}"),
        1,
    ),
}
# Pipelines of one template to look at again on resume: by rowid (no index serves the
# condition, and paging by rowid keeps each page a range scan).
_STALE = _pages(
    RowKind.PIPELINES, where="template = ? AND (state <> 'succeeded' OR chain_digest <> ?)"
)
_OF_TEMPLATE = _pages(RowKind.PIPELINES, where="template = ?")
# `state <> 'succeeded'` word for word as in the partial index, so SQLite can use it.
_UNFINISHED = _pages(RowKind.PIPELINES, ("ordinal", "rowid"), "state <> 'succeeded'")


def pages_for(kind: RowKind, pipeline_id: str | None) -> tuple[Pages, tuple[Any, ...]]:
    """The read behind ``rows(kind, pipeline_id=...)`` and its parameters. The caller has
    checked that ``kind`` can be narrowed to a pipeline (``_tables.resolve_kind``)."""
    if pipeline_id is None:
        return _EVERY[kind], ()
    pages, count = _OF_PIPELINE[kind]
    return pages, (pipeline_id,) * count


def unfinished_pages() -> Pages:
    """Pipelines not succeeded, in ``(ordinal, rowid)`` order."""
    return _UNFINISHED


def stale_pages(template: str, chain_digest: str | None) -> tuple[Pages, tuple[Any, ...]]:
    """The read behind ``Store.stale`` and its parameters."""
    if chain_digest is None:
        return _OF_TEMPLATE, (template,)
    return _STALE, (template, chain_digest)


def user_version(conn: sqlite3.Connection) -> int:
    version: int = conn.execute("PRAGMA user_version").fetchone()[0]
    return version


def check_version(version: int, *, known: int, location: str) -> None:
    """Refuse a file written by a newer pyattacker (``ConfigError``, field ``store``)."""
    if version > known:
        raise ConfigError(
            f"{location} was written by a newer pyattacker (store schema {version}; "
            f"this version reads schema {known} and older)",
            field="store",
            hint="upgrade pyattacker (pip install -U pyattacker) to read or resume it",
        )


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration], location: str) -> int:
    """Apply the migrations ``conn``'s file has not had yet, all in one transaction, and
    return the new version. On any failure nothing is changed."""
    if user_version(conn) == len(migrations):
        return len(migrations)  # up to date: no transaction, so the file is left as it was
    conn.execute("BEGIN IMMEDIATE")
    try:
        # read again under the write lock: another process may have upgraded meanwhile
        version = user_version(conn)
        check_version(version, known=len(migrations), location=location)
        for migration in migrations[version:]:
            for statement in migration:
                conn.execute(statement)
        if version < len(migrations):  # else write nothing: opening leaves the file as it is
            conn.execute(f"PRAGMA user_version = {len(migrations)}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return len(migrations)
