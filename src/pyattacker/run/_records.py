"""What a run writes about its work: attempts, task rows, events, counted as they go.

The one place that turns an ``Attempt`` (and the pipeline it belongs to) into rows of the
durable record and stages them on the ``Committer``; secrets are scrubbed here, before a
row exists. Every attempt is recorded with the retry decision taken after it; a
successful one rides in the task row that commits its output (``TaskRow``), and gets an
attempts row of its own only when no task row will carry it.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pyattacker._secrets import mask
from pyattacker.clock import epoch_time
from pyattacker.errors import error_class_of
from pyattacker.pool import Pool, PoolEvent
from pyattacker.run._attempt import Attempt
from pyattacker.run._commit import Committer
from pyattacker.run._job import Job
from pyattacker.run._scrub import Scrubber
from pyattacker.run._stats import RunCounters
from pyattacker.store import (
    OK_DECISION,
    AttemptRow,
    EventRow,
    ResourceRow,
    TaskRow,
    TaskState,
)

__all__ = ["STORED_POOL_EVENTS", "Recorder", "new_run_id", "resource_rows"]

_NO_DATA: Mapping[str, Any] = {}

# Pool events worth keeping in the record; lease.acquired/released/reported are one per
# call and already summed up by the attempts' `resources` column, and the Runner records
# lease.leaked itself, with the pipeline and task that leaked.
STORED_POOL_EVENTS = frozenset(
    {
        "pool.published",
        "pool.revoked",
        "pool.stuck",
        "resource.health",
        "resource.throttled",
        "resource.limit",
        "resource.factory",
        "resource.retries_off",
    }
)


class Recorder:
    """Builds one run's rows and stages them on ``committer``; counts what it records."""

    def __init__(
        self,
        run_id: str,
        committer: Committer,
        scrubber: Scrubber,
        counters: RunCounters,
        pools: Mapping[str, Pool],
    ) -> None:
        self.run_id = run_id
        self._commit = committer
        self._scrub = scrubber
        self._counters = counters
        self._pools = pools

    # -- attempts -----------------------------------------------------------------------

    def attempt(
        self, attempt: Attempt, decision: Mapping[str, Any] | None, *, outcome: str
    ) -> None:
        """An attempts row for a try that failed (with the retry decision taken after it)
        or was cancelled (``decision`` None)."""
        error = attempt.error
        counters = self._counters
        error_class = None if error is None else error_class_of(error).value
        if decision is None:
            decision = {"retry": False, "reason": outcome}
        counters.outcomes[outcome] += 1
        if error_class is not None:
            counters.error_classes[error_class] += 1
        counters.decisions[str(decision["reason"])] += 1
        self._commit.attempt(self._attempt_row(attempt, outcome, decision, error, error_class))

    def ok_attempt(self, attempt: Attempt) -> None:
        """The successful try as an attempts row of its own: no task row carries it."""
        self._commit.attempt(self._attempt_row(attempt, "ok", OK_DECISION, None, None))

    def _attempt_row(
        self,
        attempt: Attempt,
        outcome: str,
        decision: Mapping[str, Any],
        error: BaseException | None,
        error_class: str | None,
    ) -> AttemptRow:
        """The attempts row of ``attempt``'s current try, as it ended."""
        return AttemptRow(
            run_id=self.run_id,
            pipeline_id=attempt.job.row.pipeline_id,
            seq=attempt.seq,
            task=attempt.task.name,
            attempt=attempt.recorded,
            outcome=outcome,
            started_at=attempt.started_at or 0.0,
            ended_at=attempt.ended_at,
            duration_s=attempt.duration_s,
            decision=decision,
            resources=attempt.leased,
            error_class=error_class,
            error=None if error is None else self._scrub.error(error),
            traceback=None if error is None else self._scrub.traceback(error),
            usage=attempt.ctx.usage,
        )

    # -- task rows ------------------------------------------------------------------------

    def task_done(
        self, attempt: Attempt, codec: str, data: bytes, output: str, now: float
    ) -> TaskRow:
        """The row of a task whose last try succeeded, carrying that try and its output
        (``output`` is the artifact digest of ``data``); the caller commits it."""
        job = attempt.job
        return TaskRow(
            pipeline_id=job.row.pipeline_id,
            seq=attempt.seq,
            name=attempt.task.name,
            task_digest=attempt.task.fingerprint,
            state=TaskState.SUCCEEDED,
            attempts=attempt.recorded,
            run_id=self.run_id,
            started_at=attempt.task_started_at,
            ended_at=now,
            input_artifact=job.input_digest,
            output_artifact=output,
            resources=attempt.leased,
            attempt_started_at=attempt.started_at,
            attempt_ended_at=attempt.ended_at,
            attempt_duration_s=attempt.duration_s,
            output_codec=codec,
            output_data=data,  # the artifact rides in its task row (see TaskRow)
            usage=attempt.ctx.usage,
        )

    def task_ended(
        self,
        attempt: Attempt,
        state: TaskState,
        attempts: int,
        error: BaseException | None = None,
    ) -> None:
        """Stage the row of a task that failed or was interrupted after ``attempts`` tries
        (recorded numbers), and count it."""
        job = attempt.job
        row = TaskRow(
            pipeline_id=job.row.pipeline_id,
            seq=attempt.seq,
            name=attempt.task.name,
            task_digest=attempt.task.fingerprint,
            state=state,
            attempts=attempts,
            run_id=self.run_id,
            started_at=attempt.task_started_at,
            ended_at=epoch_time(),
            input_artifact=job.input_digest,
            error_class=None if error is None else error_class_of(error).value,
            error=None if error is None else self._scrub.error(error),
            traceback=None if error is None else self._scrub.traceback(error),
        )
        self.keep_carried(job, attempt.seq)
        self._commit.checkpoint(task=row)
        self._counters.tasks[state.value] += 1

    def keep_carried(self, job: Job, seq: int) -> None:
        """Before task ``seq``'s row is replaced, keep the successful attempt it carried (from
        an earlier run) as an attempts row, in the same transaction."""
        old = job.carried.pop(seq, None)
        if old is not None:
            self._commit.attempt(old)

    # -- events -----------------------------------------------------------------------------

    def event(
        self,
        kind: str,
        pipeline_id: str | None,
        seq: int | None,
        data: Mapping[str, Any] = _NO_DATA,
    ) -> None:
        """Stage an event of the run (its data scrubbed of secrets)."""
        self._commit.event(
            EventRow(
                run_id=self.run_id,
                kind=kind,
                at=epoch_time(),
                pipeline_id=pipeline_id,
                seq=seq,
                data=self._scrub.event_data(data),
            )
        )

    def pool_event(self, event: PoolEvent) -> None:
        """The pools' subscriber, for the kinds in ``STORED_POOL_EVENTS``."""
        if event.kind == "pool.published" and event.resource is not None:
            self._published(event.pool, event.resource)
        data = event.to_dict()
        del data["kind"]
        self.event(event.kind, None, None, data)

    def _published(self, pool_name: str, resource_id: str) -> None:
        """A resource joined a pool mid-run: its secrets are scrubbed from now on (before
        anyone can lease it: the event comes from ``publish``), and it is recorded."""
        pool = self._pools.get(pool_name)
        found = [r for r in pool.resources if r.id == resource_id] if pool is not None else []
        for resource in found:
            self._scrub.add(resource)
            spec = mask(resource.spec())
            row = ResourceRow(
                run_id=self.run_id, pool=pool_name, resource_id=resource.id,
                kind=resource.kind, spec=spec,
            )  # fmt: skip
            self._commit.resources([row])


def resource_rows(run_id: str, pools: Mapping[str, Pool]) -> list[ResourceRow]:
    """Every resource of ``pools`` as the run records it (its spec masked)."""
    return [
        ResourceRow(
            run_id=run_id,
            pool=name,
            resource_id=resource.id,
            kind=resource.kind,
            spec=mask(resource.spec()),
        )
        for name, pool in pools.items()
        for resource in pool.resources
    ]


def new_run_id() -> str:
    """Sortable and readable: ``20261130T084200Z-3f2a9c``."""
    stamp = datetime.fromtimestamp(epoch_time(), UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"
