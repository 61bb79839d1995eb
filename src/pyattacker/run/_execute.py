"""One run, executed: a coroutine per live pipeline, its attempts, parking and stopping.

An ``Execution`` has an ``Admission`` (``_admission``: reading the input, looking
pipelines up, resume), which starts each admitted pipeline here; the live pipelines, their
room and stopping are ``_live``; what is written about the work is ``_records``; one task's
tries travel as one ``Attempt`` (``_attempt``).

The promises (each pinned by a test in ``tests/test_run_runner.py``):

- ``concurrency`` bounds *attempts in flight*. A pipeline takes a worker slot only while
  one attempt of its current task runs; waiting for its checkpoint to commit and waiting
  out a retry delay (*parked*) hold no slot, so the slot goes to other work.
- Admission is bounded: live pipelines (queued for a slot, running, committing or parked)
  never exceed ``admission``, so the input is pulled one row at a time as room frees up.
- A task never holds a lease after it ends: ``reclaim_now()`` runs in the attempt's
  ``finally``, before anything about the attempt is recorded; a leak is an event
  (``lease.leaked``) or, under ``strict_leases``, the attempt's failure.
- Durability (docs/run.md): a pipeline starts task ``k + 1`` only after the artifact, task
  row and cursor of task ``k`` are committed (``Committer``, group commit).
- Every attempt is recorded with the retry decision taken after it; a successful one with
  ``{"retry": false, "reason": "ok"}``.
- Stopping: admission ends at once; parked pipelines wake and are recorded
  ``interrupted``; attempts in flight get ``grace_s`` to finish, then are cancelled and
  recorded ``cancelled``. Checkpoints already committed stay; nothing half-written appears
  because rows are only built from finished facts.
- A bug of ours inside one pipeline (any exception that is not a task's own failure) is
  recorded against that pipeline with its traceback, and the run goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from pyattacker.clock import Clock, epoch_time
from pyattacker.errors import (
    CodecError,
    ConfigError,
    LeaseLeakError,
    StoreError,
    error_class_of,
)
from pyattacker.pool import Pool, TaskContext
from pyattacker.run._admission import Admission
from pyattacker.run._attempt import Attempt
from pyattacker.run._codecs import CodecRegistry, artifact_digest
from pyattacker.run._commit import Committer
from pyattacker.run._input import Tracked
from pyattacker.run._job import Job
from pyattacker.run._live import LivePipelines
from pyattacker.run._ray import cluster_lost
from pyattacker.run._records import Recorder
from pyattacker.run._scrub import Scrubber
from pyattacker.run._settings import Settings
from pyattacker.run._stats import RunCounters
from pyattacker.run._task import Task
from pyattacker.run._vendor import HiddenRetryCheck
from pyattacker.store import PipelineState, Store, TaskState
from pyattacker.store._results import item_key

__all__ = ["Execution"]


class _Interrupted(Exception):
    """The run is stopping; the pipeline records itself ``interrupted``."""


class _TaskFailed(Exception):
    def __init__(self, error: BaseException, attempts: int) -> None:
        super().__init__(str(error))
        self.error = error
        self.attempts = attempts


class Execution:
    """Drives one ``Runner.run``; not reusable. See the module docstring."""

    def __init__(
        self,
        *,
        run_id: str,
        store: Store,
        committer: Committer,
        pools: Mapping[str, Pool],
        codecs: CodecRegistry,
        clock: Clock,
        settings: Settings,
        counters: RunCounters,
        scrubber: Scrubber,
        fresh: bool = False,
        held_templates: frozenset[str] | None = None,
        tracker: Tracked | None = None,
    ) -> None:
        self.run_id = run_id
        self._store = store
        self._commit = committer
        self._pools = pools
        self._codecs = codecs
        self._clock = clock
        # Made inside the run's loop, where a clock's reader is valid.
        self._now = clock.reader()
        self._settings = settings
        self.counters = counters
        self._scrub = scrubber
        self._slots = asyncio.Semaphore(settings.concurrency)
        self.failures: list[dict[str, Any]] = []
        self.records = Recorder(run_id, committer, scrubber, counters, pools)
        self.live = LivePipelines(
            admission=settings.admission,
            grace_s=settings.grace_s,
            counters=counters,
            scrub=scrubber.text,
        )
        self._hidden_retries = HiddenRetryCheck(pools, self.records.event)
        self.admission = Admission(
            run_id=run_id, store=store, committer=committer, pools=pools, codecs=codecs,
            counters=counters, scrubber=scrubber, records=self.records, live=self.live,
            start=self._start, fresh=fresh, held_templates=held_templates, tracker=tracker,
        )  # fmt: skip

    # -- the run as the Runner sees it ----------------------------------------------------

    @property
    def stop_reason(self) -> str | None:
        return self.live.stop_reason

    @property
    def stopping(self) -> bool:
        return self.live.stopping

    @property
    def input_error(self) -> BaseException | None:
        """What the user's input iterable raised (admission ended there), if anything."""
        return self.admission.input_error

    @property
    def tracker(self) -> Tracked | None:
        return self.admission.tracker

    def stop(self, reason: str) -> None:
        """Stop admitting, wake parked pipelines, give running attempts ``grace_s``."""
        self.live.stop(reason)

    def cancel_live(self) -> None:
        """Cancel every live pipeline now (the grace period is over, or a second signal)."""
        self.live.cancel_all()

    async def admit_all(self, specs: Iterable[Any], *, resume: bool) -> None:
        """Admit every spec (see ``Admission.admit``) and wait for every admitted pipeline
        to end. An exception stops the run (a cancellation also cancels what runs), and is
        raised once what was already running has drained."""
        try:
            await self.admission.admit(specs, resume=resume)
        except asyncio.CancelledError:
            self.stop("cancelled")
            self.cancel_live()
            raise
        except BaseException as exc:
            self.stop(f"refused: {exc}" if isinstance(exc, ConfigError) else f"failed: {exc!r}")
            raise
        finally:
            await self.live.drain()

    # -- one pipeline ---------------------------------------------------------------------

    def _start(self, job: Job) -> None:
        self.live.start(job.row.pipeline_id, job.row.seed_digest, self._pipeline(job))

    async def _pipeline(self, job: Job) -> None:
        try:
            await self._steps(job)
        except (_Interrupted, asyncio.CancelledError):
            if job.row.state is PipelineState.SUCCEEDED:
                # Cancelled while its last checkpoint was staged: that checkpoint is written
                # by the run's final flush, and the pipeline is done.
                self.counters.pipelines[PipelineState.SUCCEEDED.value] += 1
            else:
                self._finish(job, PipelineState.INTERRUPTED)
        except _TaskFailed as failed:
            self._finish(job, PipelineState.FAILED, error=failed.error)
        except StoreError:
            self._finish(job, PipelineState.INTERRUPTED)
        except BaseException as bug:  # ours, not the task's: record it and let the run go on
            data = {"error": self._scrub.error(bug), "traceback": self._scrub.traceback(bug)}
            self.records.event("run.framework_error", job.row.pipeline_id, job.row.cursor, data)
            self._finish(job, PipelineState.FAILED, error=bug)

    async def _steps(self, job: Job) -> None:
        """Run the tasks from the cursor on; after each, commit its output with its task
        row and the moved cursor before the next starts (it gets the output as stored)."""
        tasks = job.template.tasks
        while job.row.cursor < len(tasks):
            seq = job.row.cursor
            attempt = await self._task(job, tasks[seq], seq)
            codec, data, value = self._encode(attempt)
            out = artifact_digest(codec, data)
            now = epoch_time()
            task_row = self.records.task_done(attempt, codec, data, out, now)
            job.row = job.row.advanced(seq + 1, out, now, done=seq + 1 == len(tasks))
            self.records.keep_carried(job, seq)
            await self._commit.checkpoint(task=task_row, pipeline=job.row)
            self.counters.tasks[TaskState.SUCCEEDED.value] += 1
            job.value, job.input_digest = value, out
        self.counters.pipelines[PipelineState.SUCCEEDED.value] += 1

    def _encode(self, attempt: Attempt) -> tuple[str, bytes, Any]:
        """The output as stored, and as the next task gets it: read back from those bytes,
        so a resumed run and an uninterrupted one hand the next task the same value."""
        try:
            codec, data, reread = self._codecs.stored(attempt.value)
            clean = self._scrub.data(data)
            if clean is not data:  # it held a secret: the next task sees what is stored
                data, reread = clean, self._codecs.decode(codec, clean)
            return codec, data, reread
        except CodecError as exc:
            name = attempt.task.name
            error = CodecError(f"task {name!r} returned a value that cannot be stored: {exc}")
            # The attempt itself succeeded, and no task row will carry it: a row of its own.
            self.records.ok_attempt(attempt)
            self.records.task_ended(attempt, TaskState.FAILED, attempt.recorded, error)
            raise _TaskFailed(error, attempt.recorded) from exc

    def _finish(
        self, job: Job, state: PipelineState, *, error: BaseException | None = None
    ) -> None:
        """Record how the pipeline ended (its failed/interrupted task row is staged by
        ``_task``); written with the next flush."""
        message = None if error is None else self._scrub.error(error)
        job.row = job.row.replaced(state=state, updated_at=epoch_time(), error=message)
        self._commit.checkpoint(pipeline=job.row)
        self.counters.pipelines[state.value] += 1
        if state is PipelineState.FAILED and error is not None:
            self._note_failure(job, error)

    def _note_failure(self, job: Job, error: BaseException) -> None:
        if len(self.failures) < self._settings.report_failures:
            tasks = job.template.tasks
            self.failures.append(
                {
                    "key": item_key(job.row),
                    "pipeline_id": job.row.pipeline_id,
                    "task": tasks[min(job.row.cursor, len(tasks) - 1)].name,
                    "error_class": error_class_of(error).value,
                    "error": self._scrub.error(error),
                }
            )
        limit = self._settings.stop_after_failures
        if limit is not None and self.counters.pipelines[PipelineState.FAILED.value] >= limit:
            self.stop(f"stop_after_failures={limit} reached")

    # -- one task: its tries, the retry decisions, parking --------------------------------

    async def _task(self, job: Job, task: Task, seq: int) -> Attempt:
        """The task's tries until one succeeds (returned: its ``Attempt``); raises
        ``_TaskFailed`` when the retry policy gives up, ``_Interrupted`` when the run stops.
        Recorded attempt numbers continue after ``job.prior``'s (``_reuse``)."""
        base = 0 if job.prior is None else job.prior.get(seq, 0)
        # Positional, as it is built for every task: base, first try's clock, task start.
        attempt = Attempt(job, task, seq, base, self._now(), epoch_time())
        while True:
            attempt.ctx = self._context(attempt)
            try:
                await self._try(attempt)
            except (_Interrupted, asyncio.CancelledError):
                if attempt.ran:  # else it never ran: queued for a slot when the run stopped
                    ran = attempt.base + attempt.ran
                    self.records.task_ended(attempt, TaskState.INTERRUPTED, ran)
                raise
            if attempt.error is None:
                return attempt
            await self._retry_or_raise(attempt, attempt.error)
            attempt.next()

    async def _retry_or_raise(self, attempt: Attempt, error: BaseException) -> None:
        """Record the failed try with the retry decision taken on it, then wait out the
        retry delay (parked); raise when the policy gives up or the run stops first."""
        decision = attempt.decide(self._now() - attempt.first, epoch_time())
        self.records.attempt(attempt, decision.to_dict(), outcome="failed")
        if not decision.retry:
            self.records.task_ended(attempt, TaskState.FAILED, attempt.recorded, error)
            raise _TaskFailed(error, attempt.recorded)
        self.counters.retries += 1
        if not await self.live.park(decision.delay_s):
            self.records.task_ended(attempt, TaskState.INTERRUPTED, attempt.recorded)
            raise _Interrupted

    def _context(self, attempt: Attempt) -> TaskContext:
        """The context of the current try, numbered ``attempt.recorded``."""
        task, seq = attempt.task, attempt.seq
        pid = attempt.job.row.pipeline_id
        return TaskContext(
            self._pools,
            # Seeded on first use, from the attempt's identity (this run's count): reruns draw
            # the same. An int seed, because a str seed is hashed first, on every attempt.
            rng=int(pid[:16], 16) ^ (seq << 20) ^ attempt.number,
            clock=self._clock,
            pool=task.resource,
            algorithm=task.algorithm,
            strict_leases=self._settings.strict_leases,
            run_id=self.run_id,
            pipeline_id=pid,
            task_id=f"{pid}:{seq}",
            seq=seq,
            attempt=attempt.recorded,
            store=self._store,
            emit=lambda kind, data: self.records.event(kind, pid, seq, data),
        )

    async def _try(self, attempt: Attempt) -> None:
        """Run the current try in a worker slot; its value or error is left on ``attempt``.

        The try is timed here. A cancelled try is recorded here, a failed one by the caller
        once the retry decision is known, and a successful one by the task row that commits
        its output. Raises ``_Interrupted`` without running anything when the run began
        stopping while it queued for a slot.
        """
        await self._slots.acquire()
        counters = self.counters
        if self.live.stopping:
            self._slots.release()
            raise _Interrupted
        counters.in_flight += 1
        counters.attempts += 1
        attempt.clock_start, attempt.started_at = self._now(), epoch_time()
        task, ctx = attempt.task, attempt.ctx
        error: BaseException | None = None
        try:
            try:
                if task.timeout_s is None:
                    attempt.value = await task.call(attempt.job.value, ctx)
                else:
                    async with asyncio.timeout(task.timeout_s):
                        attempt.value = await task.call(attempt.job.value, ctx)
            finally:
                # Leases come back before anything about the attempt is recorded.
                leak = self._reclaim(ctx)
        except asyncio.CancelledError:
            attempt.end(self._now(), epoch_time())
            self.records.attempt(attempt, None, outcome="cancelled")
            raise
        except (KeyboardInterrupt, SystemExit) as exc:
            # Raised by the task's own code: its attempt failed (never retried), and the run
            # stops as it would on a signal.
            error = exc
            self.stop(f"{type(exc).__name__} raised by task {task.name!r}")
        except BaseException as exc:
            error = exc
            lost = cluster_lost(exc)
            if lost is not None:  # every later attempt on Ray would fail the same way
                self.stop(lost)
        finally:
            counters.in_flight -= 1
            self._slots.release()
        if ctx.leased:  # a vendor client that retries behind this task's policy is reported
            self._hidden_retries.after_attempt(task, ctx)
        attempt.error = error or leak
        attempt.end(self._now(), epoch_time())
        if attempt.error is None:  # recorded by the task row that commits its output
            counters.outcomes["ok"] += 1
            counters.decisions["ok"] += 1

    def _reclaim(self, ctx: TaskContext) -> BaseException | None:
        held = ctx.held
        if not held:
            return None
        self.counters.leaks += len(held)
        for lease in held:
            where = {"pool": lease.pool.name, "resource": lease.resource.id}
            self.records.event("lease.leaked", ctx.pipeline_id, ctx.seq, where)
        try:
            ctx.reclaim_now()
        except LeaseLeakError as exc:
            return exc
        return None
