"""``MemoryStore``: the durable record's contract kept in dicts and lists, for tests and
throwaway runs. Nothing survives the process.

It keeps the very tuples :class:`SQLiteStore` would bind (``_tables``), so both stores
agree on what ``rows()`` returns. All-or-nothing comes from doing every fallible step first:
a batch is encoded and checked completely (JSON, states, bytes, the values SQLite could
bind, NOT NULL columns) before anything is applied, and applying cannot fail.

Not thread-safe: call it from one thread at a time (the Runner's event loop).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from pyattacker.errors import StoreError
from pyattacker.store._lifecycle import DEFAULT_STALE_AFTER_S, not_running, plan_begin
from pyattacker.store._rows import (
    ArtifactRow,
    Batch,
    PipelineRow,
    PipelineState,
    RowKind,
    RunRow,
    RunState,
)
from pyattacker.store._tables import (
    TABLES,
    UNKNOWN_PIPELINE,
    EncodedBatch,
    Values,
    as_sqlite_stores,
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

__all__ = ["MemoryStore"]

_RUNS, _PIPELINES = TABLES[RowKind.RUNS], TABLES[RowKind.PIPELINES]
_TASKS = TABLES[RowKind.TASKS]
# Column positions the store itself reads or changes.
_RUN_STATE, _RUN_ENDED, _RUN_HEARTBEAT, _RUN_STOP, _RUN_INPUT = (
    _RUNS.names.index(n) for n in ("state", "ended_at", "heartbeat_at", "stop_reason", "input")
)
_P_STATE, _P_RUN, _P_ORDINAL, _P_CHAIN = (
    _PIPELINES.names.index(n) for n in ("state", "run_id", "ordinal", "chain_digest")
)
_P_TEMPLATE = _PIPELINES.names.index("template")
_A_PIPELINE, _A_SEQ, _A_ATTEMPT = (
    TABLES[RowKind.ATTEMPTS].names.index(n) for n in ("pipeline_id", "seq", "attempt")
)
_T_ATTEMPTS = _TASKS.names.index("attempts")
_IN_FLIGHT = frozenset({PipelineState.RUNNING.value, PipelineState.PENDING.value})


class MemoryStore:
    """A :class:`~pyattacker.store.Store` in memory (``location`` is ``":memory:"``).

    Same semantics as :class:`SQLiteStore`, including the refusals of ``begin_run`` and
    all-or-nothing ``write``; ``read_only=True`` gives an empty store that refuses writes.
    It needs no OS lock (only this process can reach it): the run begun here and not yet
    ended holds it, as far as ``begin_run`` and readers are concerned (``lock_held``).
    """

    location = ":memory:"

    def __init__(
        self, *, read_only: bool = False, stale_after_s: float = DEFAULT_STALE_AFTER_S
    ) -> None:
        self.read_only = read_only
        self.stale_after_s = stale_after_s
        self._closed = False
        self._owner: str | None = None  # the run begun here and not yet ended
        self._runs: dict[str, Values] = {}
        self._pipelines: dict[str, Values] = {}
        self._tasks: dict[tuple[str, int], Values] = {}
        self._tasks_of: dict[str, dict[int, Values]] = {}
        self._artifacts: dict[tuple[str, int], Values] = {}
        self._attempts: list[Values] = []
        self._task_history: list[Values] = []
        self._events: list[Values] = []
        self._resources: list[Values] = []

    def __repr__(self) -> str:
        return (
            f"<MemoryStore runs={len(self._runs)} pipelines={len(self._pipelines)}"
            f" artifacts={len(self._artifacts)}{' read-only' if self.read_only else ''}>"
        )

    # -- the run's lifecycle ------------------------------------------------------------

    def begin_run(self, run: RunRow, *, resume: bool) -> list[RunRow]:
        self._check_writable()
        encoded = encoding(lambda: as_sqlite_stores(_RUNS, encode_run(run)), self.location)
        taken = plan_begin(
            run,
            resume=resume,
            running=[r for r in self.runs() if r.state == RunState.RUNNING],
            id_taken=run.run_id in self._runs,
            pipelines=len(self._pipelines),
            location=self.location,
            stale_after_s=self.stale_after_s,
            lock_held=self._owner is not None,
        )
        for crashed in taken:
            self._runs[crashed.run_id] = encode_run(crashed)
        self._interrupt_pipelines_of({r.run_id for r in taken})
        self._runs[run.run_id] = encoded
        self._owner = run.run_id
        return taken

    def lock_held(self) -> bool:
        """Whether a run begun here has not ended yet (this store's stand-in for the
        SQLite store's writer lock)."""
        return self._owner is not None

    def end_run(
        self, run_id: str, state: RunState, *, ended_at: float, stop_reason: str | None
    ) -> None:
        self._check_writable()
        if run_id == self._owner:
            self._owner = None
        self._check_running(run_id, "end")
        self._runs[run_id] = self._run_changed(
            run_id, {_RUN_STATE: RunState(state), _RUN_ENDED: ended_at, _RUN_STOP: stop_reason}
        )

    def write(self, batch: Batch) -> None:
        self._check_writable()
        encoded = encoding(lambda: _as_stored(encode_batch(batch)), self.location)
        self._check_pipelines_known(encoded)
        if encoded.heartbeat is not None:
            self._check_running(encoded.heartbeat[0], "record a heartbeat of")
        if self._owner is not None:
            self._check_running(self._owner, "write for")
        beat = self._beat(encoded.heartbeat)  # may fail too: before anything changes
        read = self._read(encoded.run_input, beat)
        for pid, from_seq, run_id, at in encoded.superseded:
            self._supersede(pid, from_seq, (run_id, at))
        for values in encoded.artifacts:
            self._artifacts[(values[0], values[1])] = values
        for values in encoded.tasks:
            self._tasks[(values[0], values[1])] = values
            self._tasks_of.setdefault(values[0], {})[values[1]] = values
        for values in encoded.pipelines:
            self._pipelines[values[0]] = values
        self._attempts.extend(encoded.attempts)
        self._events.extend(encoded.events)
        self._resources.extend(encoded.resources)
        for changed in (beat, read):
            if changed is not None:
                self._runs[changed[0]] = changed[1]

    def close(self) -> None:
        self._closed = True
        self._owner = None

    # -- what the Runner reads ----------------------------------------------------------

    def pipeline(self, pipeline_id: str) -> PipelineRow | None:
        self._check_open()
        values = self._pipelines.get(pipeline_id)
        return None if values is None else to_pipeline(decode(_PIPELINES, values))

    def pipelines(self, pipeline_ids: Sequence[str]) -> dict[str, PipelineRow]:
        self._check_open()
        found = ((pid, self._pipelines.get(pid)) for pid in pipeline_ids)
        return {pid: to_pipeline(decode(_PIPELINES, v)) for pid, v in found if v is not None}

    def artifact(self, pipeline_id: str, seq: int) -> ArtifactRow | None:
        self._check_open()
        values = self._artifacts.get((pipeline_id, seq))
        if values is not None:
            return to_artifact(decode(TABLES[RowKind.ARTIFACTS], values))
        task = self._tasks.get((pipeline_id, seq))
        carried = None if task is None else task_artifact(task)
        return None if carried is None else to_artifact(carried)

    def unfinished(self, chain_digests: Collection[str]) -> Iterator[PipelineRow]:
        self._check_open()
        wanted = set(chain_digests)
        found = [
            v
            for v in self._pipelines.values()
            if v[_P_STATE] != PipelineState.SUCCEEDED.value and v[_P_CHAIN] in wanted
        ]
        found.sort(key=lambda v: v[_P_ORDINAL])  # stable: ties stay in first-write order
        return (to_pipeline(decode(_PIPELINES, v)) for v in found)

    def stale(self, template: str, chain_digest: str | None) -> Iterator[PipelineRow]:
        self._check_open()
        found = [
            v
            for v in self._pipelines.values()
            if v[_P_TEMPLATE] == template
            and (
                chain_digest is None
                or v[_P_STATE] != PipelineState.SUCCEEDED.value
                or v[_P_CHAIN] != chain_digest
            )
        ]
        return (to_pipeline(decode(_PIPELINES, v)) for v in found)

    def templates(self) -> list[str]:
        self._check_open()
        return sorted({v[_P_TEMPLATE] for v in self._pipelines.values()})

    def last_attempts(self, pipeline_ids: Sequence[str]) -> dict[str, dict[int, int]]:
        self._check_open()
        wanted = set(pipeline_ids)
        found: dict[str, dict[int, int]] = {}
        numbered = [(v[_A_PIPELINE], v[_A_SEQ], v[_A_ATTEMPT]) for v in self._attempts]
        for values in (*self._tasks.values(), *self._task_history):
            numbered.append((values[0], values[1], values[_T_ATTEMPTS]))
        for pid, seq, attempt in numbered:
            if pid in wanted:
                by_seq = found.setdefault(pid, {})
                by_seq[seq] = max(attempt, by_seq.get(seq, attempt))
        return found

    def count_pipelines(self) -> int:
        self._check_open()
        return len(self._pipelines)

    def count_by_state(self) -> dict[str, int]:
        self._check_open()
        counts = Counter(v[_P_STATE] for v in self._pipelines.values())
        return dict(sorted(counts.items()))

    # -- what readers read --------------------------------------------------------------

    def runs(self) -> list[RunRow]:
        self._check_open()
        return [to_run(decode(_RUNS, v)) for v in self._runs.values()]

    def rows(self, kind: RowKind, *, pipeline_id: str | None = None) -> Iterator[dict[str, Any]]:
        """See :meth:`Store.rows`. The rows are those held when it is called."""
        table = TABLES[resolve_kind(kind, pipeline_id)]
        self._check_open()
        values = list(self._select(table.kind, pipeline_id))
        stored = (decode(table, v) for v in values)
        scoped = pipeline_id is not None
        if table.kind is RowKind.ATTEMPTS:
            tasks = [decode(_TASKS, v) for v in self._select(RowKind.TASKS, pipeline_id)]
            return with_ok_attempts(stored, iter(tasks), scoped=scoped)
        if table.kind is RowKind.ARTIFACTS:
            raw = list(self._select(RowKind.TASKS, pipeline_id))
            return with_task_artifacts(stored, raw, scoped=scoped)
        return stored

    # -- internals ----------------------------------------------------------------------

    def _select(self, kind: RowKind, pipeline_id: str | None) -> Collection[Values]:
        if pipeline_id is None:
            return self._everything(kind)
        if kind is RowKind.PIPELINES:
            return [v for v in (self._pipelines.get(pipeline_id),) if v is not None]
        if kind is RowKind.TASKS:
            by_seq = self._tasks_of.get(pipeline_id, {})
            return [by_seq[seq] for seq in sorted(by_seq)]
        if kind is RowKind.ARTIFACTS:
            return sorted(
                (v for key, v in self._artifacts.items() if key[0] == pipeline_id),
                key=lambda v: int(v[1]),
            )
        if kind is RowKind.TASK_HISTORY:
            mine = (v for v in self._task_history if v[0] == pipeline_id)
            return sorted(mine, key=lambda v: int(v[1]))  # stable: oldest first per seq
        rows = self._attempts if kind is RowKind.ATTEMPTS else self._events
        position = TABLES[kind].names.index("pipeline_id")
        return [v for v in rows if v[position] == pipeline_id]

    def _everything(self, kind: RowKind) -> Collection[Values]:
        return {
            RowKind.RUNS: self._runs.values,
            RowKind.PIPELINES: self._pipelines.values,
            RowKind.TASKS: self._tasks.values,
            RowKind.ATTEMPTS: self._attempts.copy,
            RowKind.EVENTS: self._events.copy,
            RowKind.ARTIFACTS: self._artifacts.values,
            RowKind.RESOURCES: self._resources.copy,
            RowKind.TASK_HISTORY: self._task_history.copy,
        }[kind]()

    def _supersede(self, pipeline_id: str, from_seq: int, marks: Values) -> None:
        """Move the task rows at ``seq >= from_seq`` to the history (see ``Superseded``)."""
        by_seq = self._tasks_of.get(pipeline_id, {})
        for seq in sorted(s for s in by_seq if s >= from_seq):
            self._task_history.append(by_seq.pop(seq) + marks)
            del self._tasks[(pipeline_id, seq)]

    def _check_pipelines_known(self, encoded: EncodedBatch) -> None:
        arriving = {values[0] for values in encoded.pipelines}
        named = [values[0] for values in encoded.tasks]
        named += [values[0] for values in encoded.artifacts]
        named += [values[_A_PIPELINE] for values in encoded.attempts]
        if not all(pid in self._pipelines or pid in arriving for pid in named):
            raise StoreError(f"could not write: {UNKNOWN_PIPELINE}", location=self.location)

    def _beat(self, heartbeat: tuple[str, float] | None) -> tuple[str, Values] | None:
        """The run row a heartbeat makes."""
        if heartbeat is None:
            return None
        run_id, at = heartbeat
        return run_id, self._run_changed(run_id, {_RUN_HEARTBEAT: at})

    def _read(
        self, run_input: tuple[str, str] | None, beat: tuple[str, Values] | None
    ) -> tuple[str, Values] | None:
        """The run row an input record makes (after the heartbeat ``beat``, if any)."""
        if run_input is None or run_input[0] not in self._runs:
            return None
        run_id, record = run_input
        if beat is not None and beat[0] == run_id:
            return run_id, _replaced(beat[1], {_RUN_INPUT: record})
        return run_id, self._run_changed(run_id, {_RUN_INPUT: record})

    def _run_changed(self, run_id: str, changes: dict[int, Any]) -> Values:
        def change() -> Values:
            values = _replaced(self._runs[run_id], changes)
            state = RunState(values[_RUN_STATE]).value  # refuses an unknown state
            return as_sqlite_stores(_RUNS, _replaced(values, {_RUN_STATE: state}))

        return encoding(change, self.location)

    def _check_running(self, run_id: str, what: str) -> None:
        """``StoreError`` unless ``run_id`` is a ``running`` run (see SQLiteStore)."""
        values = self._runs.get(run_id)
        if values is None or values[_RUN_STATE] != RunState.RUNNING.value:
            found = None if values is None else (values[_RUN_STATE], values[_RUN_STOP])
            raise not_running(run_id, found, what, self.location)

    def _interrupt_pipelines_of(self, run_ids: set[str]) -> None:
        for pipeline_id, v in self._pipelines.items():
            if v[_P_RUN] in run_ids and v[_P_STATE] in _IN_FLIGHT:
                interrupted = {_P_STATE: PipelineState.INTERRUPTED.value}
                self._pipelines[pipeline_id] = _replaced(v, interrupted)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the store is closed", location=self.location)

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise StoreError("the store was opened read-only", location=self.location)


def _as_stored(encoded: EncodedBatch) -> EncodedBatch:
    def stored(kind: RowKind, rows: list[Values]) -> list[Values]:
        return [as_sqlite_stores(TABLES[kind], values) for values in rows]

    return EncodedBatch(
        artifacts=stored(RowKind.ARTIFACTS, encoded.artifacts),
        tasks=stored(RowKind.TASKS, encoded.tasks),
        pipelines=stored(RowKind.PIPELINES, encoded.pipelines),
        attempts=stored(RowKind.ATTEMPTS, encoded.attempts),
        events=stored(RowKind.EVENTS, encoded.events),
        resources=stored(RowKind.RESOURCES, encoded.resources),
        heartbeat=encoded.heartbeat,
        superseded=encoded.superseded,
        run_input=encoded.run_input,
    )


def _replaced(values: Values, changes: dict[int, Any]) -> Values:
    return tuple(changes.get(i, v) for i, v in enumerate(values))
