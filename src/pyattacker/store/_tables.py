"""How each kind of row is laid out as a tuple of plain values, shared by both stores.

A row is *encoded* once, when it is written: enums become their string values (and an
unknown state is refused), JSON-shaped fields become JSON text, artifact data must
be bytes. :class:`SQLiteStore` binds those tuples to its prepared statements;
:class:`MemoryStore` keeps the very same tuples in dicts. Both *decode* them with the same
functions, so the two stores agree on what ``rows()`` returns by construction.

The column order here is the table's column order in SQLite and the key order of the dicts
``rows()`` yields (the dataclass field order, plus ``size`` for artifacts).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pyattacker.errors import ConfigError, StoreError
from pyattacker.store._rows import (
    OK_DECISION,
    ROW_KINDS,
    ArtifactRow,
    AttemptRow,
    Batch,
    EventRow,
    PipelineRow,
    PipelineState,
    ResourceRow,
    RowKind,
    RunRow,
    RunState,
    Superseded,
    TaskRow,
    TaskState,
)

__all__ = [
    "PIPELINE_SCOPED",
    "TABLES",
    "UNKNOWN_PIPELINE",
    "EncodedBatch",
    "Table",
    "as_sqlite_stores",
    "decode",
    "encode_artifact",
    "encode_attempt",
    "encode_batch",
    "encode_event",
    "encode_pipeline",
    "encode_resource",
    "encode_run",
    "encode_superseded",
    "encode_task",
    "encoding",
    "ok_attempt",
    "resolve_kind",
    "task_artifact",
    "to_artifact",
    "to_pipeline",
    "to_run",
    "with_ok_attempts",
    "with_task_artifacts",
]

Values = tuple[Any, ...]
T = TypeVar("T")

# Plain `json.dumps`: with default arguments it reuses one cached C encoder, measurably
# faster on small dicts than any customised encoder (compact separators included).
_to_json = json.dumps
_OK_JSON = _to_json(OK_DECISION)
_BINDABLE = (type(None), int, float, str, bytes)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, slots=True)
class Table:
    """One kind of row: its column ``names`` in order, the positions of the ``required``
    (NOT NULL) ones, and the columns that hold JSON text."""

    kind: RowKind
    names: tuple[str, ...]
    required: tuple[int, ...]
    json_columns: tuple[str, ...] = ()


def _table(kind: RowKind, columns: str, json_columns: tuple[str, ...] = ()) -> Table:
    """``columns``: the names in order, a trailing ``?`` marking those that may be None."""
    names = tuple(name.rstrip("?") for name in columns.split())
    required = tuple(i for i, name in enumerate(columns.split()) if not name.endswith("?"))
    return Table(kind, names, required, json_columns)


_TASK_COLUMNS = (
    "pipeline_id seq name task_digest state attempts run_id started_at ended_at"
    " input_artifact? output_artifact? error_class? error? traceback? resources"
    " attempt_started_at? attempt_ended_at? attempt_duration_s? output_codec? output_data?"
    " usage?"
)

# The same columns as the SQL tables (`_schema`; a test holds the two together), and the
# same order as the row dataclasses' fields.
TABLES: dict[RowKind, Table] = {
    t.kind: t
    for t in (
        _table(
            RowKind.RUNS,
            "run_id state started_at ended_at? heartbeat_at? pid? host? resumes? stop_reason?"
            " config input?",
            ("config", "input"),
        ),
        _table(
            RowKind.PIPELINES,
            "pipeline_id template chain_digest seed_digest seed_artifact repeat key? state"
            " cursor ntasks run_id ordinal created_at updated_at output_artifact? error? row?",
        ),
        _table(RowKind.TASKS, _TASK_COLUMNS, ("resources", "usage")),
        _table(
            RowKind.ATTEMPTS,
            "run_id pipeline_id seq task attempt outcome started_at ended_at duration_s"
            " decision resources error_class? error? traceback? usage?",
            ("decision", "resources", "usage"),
        ),
        _table(RowKind.EVENTS, "run_id kind at pipeline_id? seq? data", ("data",)),
        _table(RowKind.ARTIFACTS, "pipeline_id seq digest codec data created_at"),
        _table(RowKind.RESOURCES, "run_id pool resource_id kind spec", ("spec",)),
        # A task row as it was, plus the run that superseded it (see ``Superseded``).
        _table(
            RowKind.TASK_HISTORY,
            f"{_TASK_COLUMNS} superseded_by superseded_at",
            ("resources", "usage"),
        ),
    )
}


# -- encoding (row -> tuple) -----------------------------------------------------------

# State -> stored text, by dict lookup: a StrEnum member hashes and compares as its value,
# so members and plain strings both find their entry, far cheaper than `PipelineState(x)`.
_RUN_STATES = {s.value: s.value for s in RunState}
_PIPELINE_STATES = {s.value: s.value for s in PipelineState}
_TASK_STATES = {s.value: s.value for s in TaskState}


def _state(states: dict[str, str], value: object) -> str:
    found = states.get(value) if isinstance(value, str) else None
    if found is None:
        raise ValueError(f"{value!r} is not a state (one of: {', '.join(states)})")
    return found


def _json_list(values: Sequence[str]) -> str:
    return _to_json(list(values)) if values else "[]"


def encode_run(r: RunRow) -> Values:
    return (r.run_id, _state(_RUN_STATES, r.state), r.started_at, r.ended_at, r.heartbeat_at,
            r.pid, r.host, r.resumes, r.stop_reason, _to_json(r.config),
            None if r.input is None else _to_json(r.input))  # fmt: skip


def encode_pipeline(p: PipelineRow) -> Values:
    return (p.pipeline_id, p.template, p.chain_digest, p.seed_digest, p.seed_artifact,
            p.repeat, p.key, _state(_PIPELINE_STATES, p.state), p.cursor, p.ntasks, p.run_id,
            p.ordinal, p.created_at, p.updated_at, p.output_artifact, p.error,
            p.row)  # fmt: skip


def encode_task(t: TaskRow) -> Values:
    return (t.pipeline_id, t.seq, t.name, t.task_digest, _state(_TASK_STATES, t.state),
            t.attempts, t.run_id, t.started_at, t.ended_at, t.input_artifact,
            t.output_artifact, t.error_class, t.error, t.traceback, _json_list(t.resources),
            t.attempt_started_at, t.attempt_ended_at, t.attempt_duration_s, t.output_codec,
            None if t.output_data is None else _blob(t.output_data),
            None if t.usage is None else _to_json(t.usage))  # fmt: skip


def encode_attempt(a: AttemptRow) -> Values:
    decision = _OK_JSON if a.decision is OK_DECISION else _to_json(a.decision)
    return (a.run_id, a.pipeline_id, a.seq, a.task, a.attempt, a.outcome, a.started_at,
            a.ended_at, a.duration_s, decision, _json_list(a.resources),
            a.error_class, a.error, a.traceback,
            None if a.usage is None else _to_json(a.usage))  # fmt: skip


def encode_event(e: EventRow) -> Values:
    return (e.run_id, e.kind, e.at, e.pipeline_id, e.seq, _to_json(e.data))


def encode_artifact(a: ArtifactRow) -> Values:
    return (a.pipeline_id, a.seq, a.digest, a.codec, _blob(a.data), a.created_at)


def encode_resource(r: ResourceRow) -> Values:
    return (r.run_id, r.pool, r.resource_id, r.kind, _to_json(r.spec))


def encode_superseded(s: Superseded) -> Values:
    """``(pipeline_id, from_seq, run_id, at)``, checked as SQLite would bind them."""
    values = (s.pipeline_id, s.from_seq, s.run_id, s.at)
    if not (isinstance(values[0], str) and type(values[1]) is int and isinstance(values[2], str)):
        raise TypeError(f"not a superseded step: {s!r}")
    return values


def _blob(data: object) -> bytes:
    if type(data) is bytes:
        return data
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"artifact data must be bytes, not {type(data).__name__}")


@dataclass(frozen=True, slots=True)
class EncodedBatch:
    """A :class:`Batch` as tuples, table by table, in the order they are written:
    pipelines before the artifacts, tasks and attempts that name them (one transaction
    holds them all, so this order costs nothing in durability)."""

    artifacts: list[Values]
    tasks: list[Values]
    pipelines: list[Values]
    attempts: list[Values]
    events: list[Values]
    resources: list[Values]
    heartbeat: tuple[str, float] | None
    superseded: list[Values] = field(default_factory=list)
    run_input: tuple[str, str] | None = None  # (run_id, the input record as JSON)

    def tables(self) -> tuple[tuple[Table, list[Values]], ...]:
        return (
            (TABLES[RowKind.PIPELINES], self.pipelines),
            (TABLES[RowKind.ARTIFACTS], self.artifacts),
            (TABLES[RowKind.TASKS], self.tasks),
            (TABLES[RowKind.ATTEMPTS], self.attempts),
            (TABLES[RowKind.EVENTS], self.events),
            (TABLES[RowKind.RESOURCES], self.resources),
        )


def encode_batch(batch: Batch) -> EncodedBatch:
    """Encode every row of ``batch``; raises ``TypeError``/``ValueError`` on a bad one."""
    return EncodedBatch(
        artifacts=[encode_artifact(a) for a in batch.artifacts],
        tasks=[encode_task(t) for t in batch.tasks],
        pipelines=[encode_pipeline(p) for p in batch.pipelines],
        attempts=[encode_attempt(a) for a in batch.attempts],
        events=[encode_event(e) for e in batch.events],
        resources=[encode_resource(r) for r in batch.resources],
        heartbeat=batch.heartbeat,
        superseded=[encode_superseded(s) for s in batch.superseded],
        run_input=None
        if batch.run_input is None
        else (batch.run_input[0], _to_json(batch.run_input[1], allow_nan=False)),
    )


#: Why a batch is refused when a task or attempt names a pipeline the store does not hold
#: (SQLite finds tasks and attempts through their pipeline's row; see ``_schema``).
UNKNOWN_PIPELINE = "a task or attempt names a pipeline that is not recorded"


def encoding(encode: Callable[[], T], location: str) -> T:
    """Run ``encode``; a row that cannot be stored becomes ``StoreError`` (nothing written)."""
    try:
        return encode()
    except (TypeError, ValueError, OverflowError) as exc:
        raise StoreError(f"a row could not be stored: {exc}", location=location) from exc


def as_sqlite_stores(table: Table, values: Values) -> Values:
    """``values`` as SQLite would store them, or the error SQLite would raise.

    ``MemoryStore`` calls it so that what SQLite refuses is refused there too and what
    SQLite changes is changed the same way: a value its binder does not take
    (``TypeError``), an int beyond 64 bits (``OverflowError``), ``None`` in a NOT NULL
    column (``TypeError``); a float NaN is bound as NULL.
    """
    for value in values:
        if not isinstance(value, _BINDABLE):
            raise TypeError(f"{table.kind}: cannot store a {type(value).__name__}")
        if isinstance(value, str):
            value.encode("utf-8")  # a lone surrogate: SQLite refuses it, so do we
        if isinstance(value, int) and not _INT64_MIN <= value <= _INT64_MAX:
            raise OverflowError(f"{table.kind}: {value} does not fit in 64 bits")
    stored = tuple(None if v != v else v for v in values)  # only NaN differs from itself
    for i in table.required:
        if stored[i] is None:
            raise TypeError(f"{table.kind}: {table.names[i]} may not be None (or NaN)")
    return stored


# -- decoding (tuple -> dict or row) ----------------------------------------------------


def decode(table: Table, values: Iterable[Any]) -> dict[str, Any]:
    """The plain dict ``rows()`` yields: JSON decoded, artifacts with their ``size``, task
    rows without their output (an artifact), task history rows with it (``output_data``:
    an old output is found nowhere else)."""
    row = dict(zip(table.names, values, strict=True))
    for name in table.json_columns:
        text = row[name]
        if text is not None:  # a nullable JSON column (usage) stays None
            row[name] = json.loads(text)
    if table.kind is RowKind.ARTIFACTS:
        row["size"] = len(row["data"])
    elif table.kind is RowKind.TASKS:
        del row["output_data"]  # the content is an artifact's: rows("artifacts") has it
    return row


_T_PIPELINE, _T_SEQ, _T_OUT, _T_ENDED, _T_CODEC, _T_DATA = (
    TABLES[RowKind.TASKS].names.index(n)
    for n in ("pipeline_id", "seq", "output_artifact", "ended_at", "output_codec", "output_data")
)


def task_artifact(values: Sequence[Any]) -> dict[str, Any] | None:
    """The artifacts-row dict of the output a raw task row carries (see ``TaskRow``)."""
    data = values[_T_DATA]
    if data is None:
        return None
    return {
        "pipeline_id": values[_T_PIPELINE],
        "seq": values[_T_SEQ],
        "digest": values[_T_OUT],
        "codec": values[_T_CODEC],
        "data": data,
        "created_at": values[_T_ENDED],
        "size": len(data),
    }


def with_task_artifacts(
    artifacts: Iterator[dict[str, Any]], tasks: Iterable[Sequence[Any]], *, scoped: bool
) -> Iterator[dict[str, Any]]:
    """Every artifact: the stored rows (seeds), then the outputs carried by task rows; for
    one pipeline (``scoped``), all of them in ``seq`` order."""
    carried = (found for found in map(task_artifact, tasks) if found is not None)
    if not scoped:
        return itertools.chain(artifacts, carried)
    return iter(sorted([*artifacts, *carried], key=lambda a: int(a["seq"])))


def to_run(row: Mapping[str, Any]) -> RunRow:
    return RunRow(**{**row, "state": RunState(row["state"])})


def to_pipeline(row: Mapping[str, Any]) -> PipelineRow:
    return PipelineRow(**{**row, "state": PipelineState(row["state"])})


def ok_attempt(task: Mapping[str, Any]) -> dict[str, Any] | None:
    """The attempts-row dict of the successful attempt a decoded task row carries (see
    ``TaskRow``), or None when it carries none."""
    if task["attempt_started_at"] is None:
        return None
    return {
        "run_id": task["run_id"],
        "pipeline_id": task["pipeline_id"],
        "seq": task["seq"],
        "task": task["name"],
        "attempt": task["attempts"],
        "outcome": "ok",
        "started_at": task["attempt_started_at"],
        "ended_at": task["attempt_ended_at"],
        "duration_s": task["attempt_duration_s"],
        "decision": dict(OK_DECISION),
        "resources": task["resources"],
        "error_class": None,
        "error": None,
        "traceback": None,
        "usage": task["usage"],
    }


def with_ok_attempts(
    attempts: Iterator[dict[str, Any]], tasks: Iterator[dict[str, Any]], *, scoped: bool
) -> Iterator[dict[str, Any]]:
    """Every attempt: the stored rows, then the successful ones carried by task rows; for
    one pipeline (``scoped``), all of them by task, then in the order they started
    (then by number: a resumed step's numbers continue after those recorded before)."""
    ok = (found for found in map(ok_attempt, tasks) if found is not None)
    if not scoped:
        return itertools.chain(attempts, ok)
    return iter(sorted([*attempts, *ok], key=lambda a: (a["seq"], a["started_at"], a["attempt"])))


def to_artifact(row: Mapping[str, Any]) -> ArtifactRow:
    return ArtifactRow(**{k: v for k, v in row.items() if k != "size"})


# -- what may be asked of rows() ---------------------------------------------------------

#: Kinds whose rows can be narrowed to one pipeline.
PIPELINE_SCOPED = frozenset(
    {
        RowKind.PIPELINES,
        RowKind.TASKS,
        RowKind.ATTEMPTS,
        RowKind.EVENTS,
        RowKind.ARTIFACTS,
        RowKind.TASK_HISTORY,
    }
)


def resolve_kind(kind: RowKind | str, pipeline_id: str | None = None) -> RowKind:
    """``kind`` as a :class:`RowKind`; ``ConfigError`` naming the valid kinds otherwise, or
    when ``pipeline_id`` is given for a kind that has no pipeline (runs, resources)."""
    try:
        resolved = RowKind(kind)
    except ValueError:
        raise ConfigError(
            f"unknown row kind {kind!r}", field="kind", hint=f"one of: {', '.join(ROW_KINDS)}"
        ) from None
    if pipeline_id is not None and resolved not in PIPELINE_SCOPED:
        scoped = ", ".join(k.value for k in RowKind if k in PIPELINE_SCOPED)
        raise ConfigError(
            f"{resolved.value} do not belong to a pipeline",
            field="pipeline_id",
            hint=f"drop pipeline_id, or ask for one of: {scoped}",
        )
    return resolved
