"""``Store``: what the Runner needs from a durable record, and what readers get from one.

Two implementations ship: :class:`MemoryStore` (``":memory:"``; for tests and throwaway
runs) and :class:`SQLiteStore` (a file; WAL, one writer, read-only readers beside a live
run). A shared server database for runs spread over several machines would be a third.

The write side is deliberately small: the Runner builds rows (``pyattacker.store._rows``)
and hands a whole :class:`Batch` to :meth:`Store.write`, which commits it as one transaction
or raises :class:`StoreError` having committed nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from pyattacker.store._rows import ArtifactRow, Batch, PipelineRow, RowKind, RunRow, RunState

__all__ = ["Store"]


@runtime_checkable
class Store(Protocol):
    #: ``":memory:"`` or the database file's path, for messages.
    location: str
    #: True for a reader opened beside a live run: every write method raises.
    read_only: bool

    # -- the run's lifecycle ------------------------------------------------------------

    def begin_run(self, run: RunRow, *, resume: bool) -> list[RunRow]:
        """Record ``run`` as started and return the earlier runs it takes over.

        Refuses with ``ConfigError`` (field ``resume``), writing nothing, when:

        - ``resume`` is false and the store already holds pipelines (hint: pass
          ``resume=True`` / ``--resume``, or use another store);
        - another run is live, as ``pyattacker.store._lifecycle.judge`` rules: on this
          host, its process still holds the store's writer lock (however old its
          heartbeat); on another host, its heartbeat is fresh.

        With ``resume``, earlier runs still marked ``running`` (their process died) become
        ``crashed``, and their ``running``/``pending`` pipelines become ``interrupted``:
        that is the takeover. The returned list names every run taken over. The new run
        holds the store (its lock) until ``end_run`` or ``close``.
        """
        ...

    def end_run(
        self, run_id: str, state: RunState, *, ended_at: float, stop_reason: str | None
    ) -> None:
        """Mark the run ended (after the Runner's last ``write``) and let go of the store.
        ``StoreError`` when the run is unknown or no longer ``running`` (another process
        took it over: its mark stays)."""
        ...

    def write(self, batch: Batch) -> None:
        """Commit everything in ``batch`` as one transaction; all or nothing.

        ``batch.superseded`` moves task rows to the task history first (see
        ``Superseded``). Pipeline, task and artifact rows are upserts (the row is replaced
        whole: a task by ``(pipeline_id, seq)``, an artifact likewise); attempts, events and
        resources are appended. Artifacts, tasks and attempts must name a pipeline the
        store holds or the batch brings. ``batch.heartbeat`` sets the run's
        ``heartbeat_at``. A failure raises ``StoreError`` with the cause, and the store
        is as it was before the call; so does a batch of a run begun on this store, or a
        heartbeat, when that run is no longer ``running`` (taken over by another process).
        """
        ...

    def close(self) -> None:
        """Release the connection and the store's lock; idempotent."""
        ...

    def lock_held(self) -> bool | None:
        """Whether a process holds this store's writer lock now (None: the store has
        none, and readers fall back to heartbeats). Creates and changes nothing."""
        ...

    # -- what the Runner reads ----------------------------------------------------------

    def pipeline(self, pipeline_id: str) -> PipelineRow | None: ...

    def pipelines(self, pipeline_ids: Sequence[str]) -> dict[str, PipelineRow]:
        """The stored rows of those of ``pipeline_ids`` the store holds, by id: one query
        for a chunk of admissions instead of one each."""
        ...

    def artifact(self, pipeline_id: str, seq: int) -> ArtifactRow | None:
        """The output of task ``seq`` of the pipeline (``seq`` -1: its seed), if stored."""
        ...

    def unfinished(self, chain_digests: Collection[str]) -> Iterator[PipelineRow]:
        """Pipelines not ``succeeded`` whose ``chain_digest`` is in ``chain_digests``, in
        ``ordinal`` order; streamed (a store may hold millions)."""
        ...

    def stale(self, template: str, chain_digest: str | None) -> Iterator[PipelineRow]:
        """Pipelines of ``template`` (its name) to look at again on resume: those not
        ``succeeded`` and those recorded with a chain other than ``chain_digest`` (an
        edited step); every pipeline of ``template`` when ``chain_digest`` is None (a fresh
        run). In first-write order; streamed."""
        ...

    def templates(self) -> list[str]:
        """The template names of the pipelines held, sorted."""
        ...

    def last_attempts(self, pipeline_ids: Sequence[str]) -> dict[str, dict[int, int]]:
        """The highest attempt number recorded for each task of those pipelines (in
        attempts, task rows and task history), ``{pipeline_id: {seq: attempt}}``; one query
        for a chunk of admissions."""
        ...

    def count_pipelines(self) -> int: ...

    def count_by_state(self) -> dict[str, int]:
        """Pipelines by state (``{"succeeded": 4999, "failed": 1}``), states with none left out."""
        ...

    # -- what readers (report, export) read ---------------------------------------------

    def runs(self) -> list[RunRow]:
        """Every run, oldest first."""
        ...

    def rows(self, kind: RowKind, *, pipeline_id: str | None = None) -> Iterator[dict[str, Any]]:
        """Rows of one kind as plain dicts (JSON-shaped fields decoded, enums as strings,
        artifacts with ``data`` as bytes and a ``size``), optionally only those of one
        pipeline. Streamed.

        Oldest first, with two kinds made of two parts (see ``TaskRow``): ``attempts`` are
        the stored ones oldest first, then the successful ones task rows carry, in task
        order; ``artifacts`` the seeds, then the outputs task rows carry. For one pipeline
        both come by ``seq`` (attempts then by start time)."""
        ...
