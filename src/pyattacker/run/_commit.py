"""Group commit: many pipelines' checkpoints in one transaction, history written behind.

The promise (docs/run.md): after each successful task, the artifact, the task row and the
pipeline's cursor are committed before the pipeline's next task starts. One transaction
per task would make the disk the bottleneck, so a pipeline *stages* its checkpoint and
awaits the flush that carries it; every checkpoint staged during one turn of the event
loop shares that flush. Under load the batches grow by themselves: while one pipeline
waits for its commit, the others finish their tasks and stage theirs.

History (attempt rows, events) is written behind: it rides along with the next flush, or
is flushed on its own when ``history_batch`` rows are waiting or at the Runner's heartbeat
(every ``heartbeat_s``). A SIGKILL can lose the last batch of history, never a checkpoint. With
``write_behind=False`` every history row is flushed as soon as it is recorded and the
recorder may await it.

The flush itself is synchronous on the loop's thread: SQLite in WAL mode with
``synchronous=NORMAL`` commits without an fsync, so a batch is short next to the work that
produced it. Committing on a worker thread with a connection of its own was
measured and bought nothing: the GIL comes back to the writer only when the loop idles.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from pyattacker.clock import epoch_time
from pyattacker.errors import StoreError
from pyattacker.store import (
    ArtifactRow,
    AttemptRow,
    Batch,
    EventRow,
    PipelineRow,
    ResourceRow,
    Store,
    Superseded,
    TaskRow,
)

__all__ = ["Committer"]


class Committer:
    """Stages rows and writes them to ``store`` in batches; see the module docstring.

    ``on_failure`` is called once, with the ``StoreError``, when a write fails: the Runner
    stops the run (a run that cannot record must not go on). Every staged checkpoint of a
    failed flush sees the error from the awaitable it was given.

    ``input_record`` is asked for the run's input record (None when unchanged) at every
    flush, and the record is written in that transaction: with the pipelines it counts,
    since admission stages every pipeline of a row before the row counts as read. So a
    reader of the store (and a resume) sees how far the input was read as of the last
    commit, never further.
    """

    def __init__(
        self,
        store: Store,
        run_id: str,
        *,
        write_behind: bool = True,
        history_batch: int = 512,
        on_failure: Callable[[StoreError], None] | None = None,
        input_record: Callable[[], Mapping[str, Any] | None] | None = None,
    ) -> None:
        self._store = store
        self._input_record = input_record
        self._run_id = run_id
        self.write_behind = write_behind
        self._history_batch = history_batch
        self._on_failure = on_failure
        self._batch = Batch()
        self._pipelines: dict[str, PipelineRow] = {}
        self._done: asyncio.Future[None] | None = None
        self._scheduled = False
        self.failure: StoreError | None = None

    # -- staging ------------------------------------------------------------------------

    def checkpoint(
        self,
        *,
        artifacts: list[ArtifactRow] = [],  # noqa: B006 - never mutated
        task: TaskRow | None = None,
        pipeline: PipelineRow | None = None,
    ) -> asyncio.Future[None]:
        """Stage one pipeline's checkpoint; the future resolves when it is committed."""
        self.stage(artifacts=artifacts, task=task, pipeline=pipeline)
        return self._flush_soon()

    def stage(
        self,
        *,
        artifacts: list[ArtifactRow] = [],  # noqa: B006 - never mutated
        task: TaskRow | None = None,
        pipeline: PipelineRow | None = None,
    ) -> None:
        """Stage rows for the next flush without asking for one (a new pipeline's first
        row: it rides with the next checkpoint, which usually replaces it anyway).

        Pipeline rows are kept by id, the last one staged winning: an upsert replaces the
        whole row, so an earlier row in the same transaction would be written for nothing.
        """
        batch = self._batch
        if artifacts:
            batch.artifacts.extend(artifacts)
        if task is not None:
            batch.tasks.append(task)
        if pipeline is not None:
            self._pipelines[pipeline.pipeline_id] = pipeline

    def supersede(self, move: Superseded) -> None:
        """Stage the move of a pipeline's task rows to the task history; it rides with the
        checkpoint that moves the pipeline's cursor back (staged right after it)."""
        self._batch.superseded.append(move)

    def attempt(self, row: AttemptRow) -> asyncio.Future[None] | None:
        """Stage an attempt row; a future to await only when writing through."""
        self._batch.attempts.append(row)
        return self._history_added()

    def event(self, row: EventRow) -> asyncio.Future[None] | None:
        self._batch.events.append(row)
        return self._history_added()

    def resources(self, rows: list[ResourceRow]) -> None:
        self._batch.resources.extend(rows)

    def _history_added(self) -> asyncio.Future[None] | None:
        if not self.write_behind:
            return self._flush_soon()
        if len(self._batch.attempts) + len(self._batch.events) >= self._history_batch:
            self._flush_soon()
        return None

    # -- flushing -----------------------------------------------------------------------

    def _flush_soon(self) -> asyncio.Future[None]:
        if self.failure is not None:
            failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            _fail_quietly(failed, self.failure)
            return failed
        if self._done is None:
            self._done = asyncio.get_running_loop().create_future()
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)
        return self._done

    def heartbeat(self) -> None:
        """Flush whatever history is waiting, with the run's heartbeat (the interval timer)."""
        self._batch.heartbeat = (self._run_id, epoch_time())
        self.flush()

    def flush(self) -> None:
        """Write everything staged now, as one transaction. Never raises: a failure is kept
        in ``failure``, handed to every waiter and to ``on_failure``."""
        self._scheduled = False
        batch, done = self._batch, self._done
        if self._pipelines:
            batch.pipelines = list(self._pipelines.values())
            self._pipelines = {}
        if self._input_record is not None and self.failure is None:
            record = self._input_record()
            if record is not None:
                batch.run_input = (self._run_id, record)
        self._batch, self._done = Batch(), None
        if self.failure is not None or not batch:
            self._settle(done, self.failure)
            return
        try:
            self._store.write(batch)
        except StoreError as exc:
            self._fail(exc)
        except Exception as exc:  # sqlite3 or a third-party store: same meaning
            self._fail(StoreError(f"the store could not record: {exc}", location=self._location))
        self._settle(done, self.failure)

    def _fail(self, exc: StoreError) -> None:
        self.failure = exc
        if self._on_failure is not None:
            self._on_failure(exc)

    @property
    def _location(self) -> str:
        return getattr(self._store, "location", "?")

    @staticmethod
    def _settle(done: asyncio.Future[None] | None, failure: StoreError | None) -> None:
        if done is None or done.done():
            return
        if failure is None:
            done.set_result(None)
        else:
            _fail_quietly(done, failure)


def _fail_quietly(future: asyncio.Future[None], failure: StoreError) -> None:
    """Fail ``future`` without asyncio logging "exception was never retrieved" when nobody
    awaits it (most staged rows are not awaited); whoever awaits it still gets ``failure``,
    and the Runner raises it once the run has wound down."""
    future.set_exception(failure)
    future.exception()
