"""One run, executed: a coroutine per live pipeline, its attempts, parking and stopping.

Admission (reading the input, looking pipelines up, resume) is ``_admission``, which
``Execution`` inherits.

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
import dataclasses
from collections.abc import Mapping
from typing import Any

from pyattacker._secrets import mask
from pyattacker.clock import Clock, LoopClock, epoch_time
from pyattacker.errors import (
    CodecError,
    LeaseLeakError,
    StoreError,
    error_class_of,
)
from pyattacker.pool import Pool, PoolEvent, TaskContext
from pyattacker.run._admission import Admission, Job, Settings
from pyattacker.run._codecs import CodecRegistry, artifact_digest
from pyattacker.run._commit import Committer
from pyattacker.run._input import Tracked
from pyattacker.run._scrub import Scrubber
from pyattacker.run._stats import RunCounters
from pyattacker.run._task import Task
from pyattacker.run._vendor import HiddenRetryCheck
from pyattacker.store import (
    OK_DECISION,
    AttemptRow,
    EventRow,
    PipelineRow,
    PipelineState,
    ResourceRow,
    Store,
    TaskRow,
    TaskState,
)
from pyattacker.store._results import item_key

__all__ = ["STORED_POOL_EVENTS", "Execution", "Settings"]

_TIMING = "pyattacker.attempt_timing"  # (clock start, epoch start)
_OK = "pyattacker.attempt_ok"  # (epoch start, epoch end, duration, leases) of a success
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


class _Interrupted(Exception):
    """The run is stopping; the pipeline records itself ``interrupted``."""


class _TaskFailed(Exception):
    def __init__(self, error: BaseException, attempts: int) -> None:
        super().__init__(str(error))
        self.error = error
        self.attempts = attempts


class Execution(Admission):
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
        self._hidden_retries = HiddenRetryCheck(pools, self._event)
        self._codecs = codecs
        self._clock = clock
        # Made inside the run's loop: a reader skips the loop lookup of `now()`.
        self._now = clock.reader() if isinstance(clock, LoopClock) else clock.now
        self._settings = settings
        self.counters = counters
        self._scrub = scrubber
        self._slots = asyncio.Semaphore(settings.concurrency)
        self._room = asyncio.Event()  # set when a live pipeline ends
        self._live: dict[str, asyncio.Task[None]] = {}
        self._live_seeds: dict[str, str] = {}  # seed digest of each live pipeline
        self._parked: set[asyncio.Future[bool]] = set()
        self._ordinal = 0
        self.fresh = fresh
        self.held_templates = held_templates
        self.stop_reason: str | None = None
        self.failures: list[dict[str, Any]] = []
        self.input_error: BaseException | None = None
        self.tracker = tracker

    # -- stopping -------------------------------------------------------------------------

    def stop(self, reason: str) -> None:
        """Stop admitting, wake parked pipelines, give running attempts ``grace_s``."""
        if self.stop_reason is not None:
            return
        self.stop_reason = self._scrub.text(reason)
        for parked in tuple(self._parked):
            if not parked.done():
                parked.set_result(False)
        loop = asyncio.get_running_loop()
        loop.call_later(self._settings.grace_s, self.cancel_live)

    def cancel_live(self) -> None:
        """Cancel every live pipeline now (the grace period is over, or a second signal)."""
        for task in tuple(self._live.values()):
            task.cancel()

    # -- admission ------------------------------------------------------------------------

    def _start(self, job: Job) -> None:
        self.counters.admitted += 1
        self.counters.live += 1
        pid = job.row.pipeline_id
        task = asyncio.get_running_loop().create_task(self._pipeline(job))
        self._live[pid] = task
        self._live_seeds[pid] = job.row.seed_digest
        task.add_done_callback(lambda _: self._ended(pid))

    def _ended(self, pipeline_id: str) -> None:
        self._live.pop(pipeline_id, None)
        self._live_seeds.pop(pipeline_id, None)
        self.counters.live -= 1
        self._room.set()

    async def _drain(self) -> None:
        while self._live:
            await asyncio.wait(tuple(self._live.values()))

    # -- one pipeline ---------------------------------------------------------------------

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
            self._event("run.framework_error", job.row.pipeline_id, job.row.cursor, data)
            self._finish(job, PipelineState.FAILED, error=bug)

    async def _steps(self, job: Job) -> None:
        tasks = job.template.tasks
        while job.row.cursor < len(tasks):
            seq = job.row.cursor
            task = tasks[seq]
            started_at = epoch_time()
            value, attempts, ctx = await self._task(job, task, seq)
            codec, data, value = self._encode(job, task, seq, ctx, value, started_at)
            out = artifact_digest(codec, data)
            now = epoch_time()
            done = seq + 1 == len(tasks)
            attempt_started_at, attempt_ended_at, duration_s, leased = ctx.meta[_OK]
            task_row = TaskRow(
                pipeline_id=job.row.pipeline_id,
                seq=seq,
                name=task.name,
                task_digest=task.fingerprint,
                state=TaskState.SUCCEEDED,
                attempts=attempts,
                run_id=self.run_id,
                started_at=started_at,
                ended_at=now,
                input_artifact=job.input_digest,
                output_artifact=out,
                resources=leased,
                attempt_started_at=attempt_started_at,
                attempt_ended_at=attempt_ended_at,
                attempt_duration_s=duration_s,
                output_codec=codec,
                output_data=data,  # the artifact rides in its task row (see TaskRow)
                usage=ctx.usage,
            )
            job.row = _advanced(job.row, seq + 1, out, now, done=done)
            self._keep_carried(job, seq)
            await self._commit.checkpoint(task=task_row, pipeline=job.row)
            self.counters.tasks[TaskState.SUCCEEDED.value] += 1
            job.value, job.input_digest = value, out
        self.counters.pipelines[PipelineState.SUCCEEDED.value] += 1

    def _encode(
        self, job: Job, task: Task, seq: int, ctx: TaskContext, value: Any, started_at: float
    ) -> tuple[str, bytes, Any]:
        """The output as stored, and as the next task gets it: read back from those bytes,
        so a resumed run and an uninterrupted one hand the next task the same value."""
        try:
            codec, data, reread = self._codecs.stored(value)
            clean = self._scrub.data(data)
            if clean is not data:  # it held a secret: the next task sees what is stored
                data, reread = clean, self._codecs.decode(codec, clean)
            return codec, data, reread
        except CodecError as exc:
            error = CodecError(f"task {task.name!r} returned a value that cannot be stored: {exc}")
            # The attempt itself succeeded, and no task row will carry it: a row of its own.
            self._commit.attempt(self._ok_row(job, task, seq, ctx))
            self._task_row(job, task, seq, TaskState.FAILED, ctx.attempt, started_at, error)
            raise _TaskFailed(error, ctx.attempt) from exc

    def _finish(
        self, job: Job, state: PipelineState, *, error: BaseException | None = None
    ) -> None:
        """Record how the pipeline ended (its failed/interrupted task row is staged by
        ``_task``); written with the next flush."""
        message = None if error is None else self._scrub.error(error)
        job.row = dataclasses.replace(job.row, state=state, updated_at=epoch_time(), error=message)
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

    # -- one task: attempts, decisions, parking -------------------------------------------

    async def _task(self, job: Job, task: Task, seq: int) -> tuple[Any, int, TaskContext]:
        """``(value, number of the last attempt, its ctx)``. ``attempt`` counts this run's
        (the retry budget); recorded numbers continue after ``job.prior``'s (``_reuse``)."""
        first = self._now()
        started_at = epoch_time()
        base = 0 if job.prior is None else job.prior.get(seq, 0)
        attempt = 1
        while True:
            ctx = self._context(job, task, seq, attempt, base)
            try:
                value, error = await self._attempt(job, task, seq, ctx)
            except _Interrupted:
                if attempt > 1:
                    ran = base + attempt - 1
                    self._task_row(job, task, seq, TaskState.INTERRUPTED, ran, started_at)
                raise
            except asyncio.CancelledError:
                ran = attempt if _TIMING in ctx.meta else attempt - 1  # or queued for a slot
                if ran:
                    self._task_row(job, task, seq, TaskState.INTERRUPTED, base + ran, started_at)
                raise
            if error is None:
                return value, base + attempt, ctx
            decision = task.retry.decide(
                error,
                attempts_used=attempt,
                rng=ctx.rng,
                elapsed=self._now() - first,
                now=epoch_time(),
            )
            self._record(job, task, seq, ctx, error, decision.to_dict())
            if not decision.retry:
                self._task_row(job, task, seq, TaskState.FAILED, ctx.attempt, started_at, error)
                raise _TaskFailed(error, ctx.attempt)
            self.counters.retries += 1
            if not await self._park(decision.delay_s):
                self._task_row(job, task, seq, TaskState.INTERRUPTED, ctx.attempt, started_at)
                raise _Interrupted
            attempt += 1

    def _context(self, job: Job, task: Task, seq: int, attempt: int, base: int) -> TaskContext:
        """The context of this run's ``attempt``-th attempt, numbered ``base + attempt``."""
        pid = job.row.pipeline_id
        return TaskContext(
            self._pools,
            # Seeded on first use, from the attempt's identity (this run's count): reruns draw
            # the same. An int seed, because seeding from a str costs a SHA-512 (5x the time).
            rng=int(pid[:16], 16) ^ (seq << 20) ^ attempt,
            clock=self._clock,
            pool=task.resource,
            algorithm=task.algorithm,
            strict_leases=self._settings.strict_leases,
            run_id=self.run_id,
            pipeline_id=pid,
            task_id=f"{pid}:{seq}",
            seq=seq,
            attempt=base + attempt,
            store=self._store,
            emit=lambda kind, data: self._event(kind, pid, seq, data),
        )

    async def _attempt(
        self, job: Job, task: Task, seq: int, ctx: TaskContext
    ) -> tuple[Any, BaseException | None]:
        """Run one attempt in a worker slot: ``(value, None)`` or ``(None, error)``.

        The attempt is timed here. A cancelled attempt is recorded here, a failed one by the
        caller once the retry decision is known, and a successful one by the task row that
        commits its output (its timing and leases are left on the context for that row).
        Raises ``_Interrupted`` without running anything when the run began stopping while
        it queued for a slot.
        """
        await self._slots.acquire()
        counters = self.counters
        if self.stopping:
            self._slots.release()
            raise _Interrupted
        counters.in_flight += 1
        counters.attempts += 1
        ctx.meta[_TIMING] = (self._now(), epoch_time())
        error: BaseException | None = None
        value: Any = None
        try:
            try:
                if task.timeout_s is None:
                    value = await task.call(job.value, ctx)
                else:
                    async with asyncio.timeout(task.timeout_s):
                        value = await task.call(job.value, ctx)
            finally:
                # Leases come back before anything about the attempt is recorded.
                leak = self._reclaim(ctx)
        except asyncio.CancelledError:
            self._record(job, task, seq, ctx, None, None, outcome="cancelled")
            raise
        except (KeyboardInterrupt, SystemExit) as exc:
            # Raised by the task's own code: its attempt failed (never retried), and the run
            # stops as it would on a signal.
            error = exc
            self.stop(f"{type(exc).__name__} raised by task {task.name!r}")
        except BaseException as exc:
            error = exc
        finally:
            counters.in_flight -= 1
            self._slots.release()
        if ctx.leased:  # a vendor client that retries behind this task's policy is reported
            self._hidden_retries.after_attempt(task, ctx)
        error = error or leak
        if error is None:
            # Not an attempts row: the task row that commits its output carries it (TaskRow).
            t0, started_at = ctx.meta[_TIMING]
            ctx.meta[_OK] = (started_at, epoch_time(), self._now() - t0, tuple(ctx.leased))
            counters.outcomes["ok"] += 1
            counters.decisions["ok"] += 1
        return value, error

    def _reclaim(self, ctx: TaskContext) -> BaseException | None:
        held = ctx.held
        if not held:
            return None
        self.counters.leaks += len(held)
        for lease in held:
            where = {"pool": lease.pool.name, "resource": lease.resource.id}
            self._event("lease.leaked", ctx.pipeline_id, ctx.seq, where)
        try:
            ctx.reclaim_now()
        except LeaseLeakError as exc:
            return exc
        return None

    def _record(
        self,
        job: Job,
        task: Task,
        seq: int,
        ctx: TaskContext,
        error: BaseException | None,
        decision: Mapping[str, Any] | None,
        *,
        outcome: str | None = None,
    ) -> None:
        outcome = outcome or ("ok" if error is None else "failed")
        t0, started_at = ctx.meta[_TIMING]
        counters = self.counters
        error_class = None if error is None else error_class_of(error).value
        if decision is None:
            decision = {"retry": False, "reason": outcome}
        counters.outcomes[outcome] += 1
        if error_class is not None:
            counters.error_classes[error_class] += 1
        counters.decisions[str(decision["reason"])] += 1
        row = AttemptRow(
            run_id=self.run_id,
            pipeline_id=job.row.pipeline_id,
            seq=seq,
            task=task.name,
            attempt=ctx.attempt,
            outcome=outcome,
            started_at=started_at,
            ended_at=epoch_time(),
            duration_s=self._now() - t0,
            decision=decision,
            resources=tuple(ctx.leased),
            error_class=error_class,
            error=None if error is None else self._scrub.error(error),
            traceback=None if error is None else self._scrub.traceback(error),
            usage=ctx.usage,
        )
        self._commit.attempt(row)

    def _ok_row(self, job: Job, task: Task, seq: int, ctx: TaskContext) -> AttemptRow:
        """The successful attempt of ``ctx`` as an attempts row (when no task row carries it)."""
        started_at, ended_at, duration_s, leased = ctx.meta[_OK]
        return AttemptRow(
            run_id=self.run_id,
            pipeline_id=job.row.pipeline_id,
            seq=seq,
            task=task.name,
            attempt=ctx.attempt,
            outcome="ok",
            started_at=started_at,
            ended_at=ended_at,
            duration_s=duration_s,
            decision=OK_DECISION,
            resources=leased,
            usage=ctx.usage,
        )

    def _task_row(
        self,
        job: Job,
        task: Task,
        seq: int,
        state: TaskState,
        attempts: int,
        started_at: float,
        error: BaseException | None = None,
    ) -> None:
        row = TaskRow(
            pipeline_id=job.row.pipeline_id,
            seq=seq,
            name=task.name,
            task_digest=task.fingerprint,
            state=state,
            attempts=attempts,
            run_id=self.run_id,
            started_at=started_at,
            ended_at=epoch_time(),
            input_artifact=job.input_digest,
            error_class=None if error is None else error_class_of(error).value,
            error=None if error is None else self._scrub.error(error),
            traceback=None if error is None else self._scrub.traceback(error),
        )
        self._keep_carried(job, seq)
        self._commit.checkpoint(task=row)
        self.counters.tasks[state.value] += 1

    def _keep_carried(self, job: Job, seq: int) -> None:
        """Before task ``seq``'s row is replaced, keep the successful attempt it carried (from
        an earlier run) as an attempts row, in the same transaction."""
        old = job.carried.pop(seq, None)
        if old is not None:
            self._commit.attempt(old)

    async def _park(self, delay_s: float) -> bool:
        """Wait out a retry delay holding no worker slot. False when the run stops first
        (or has already begun stopping: a retry scheduled now would never be made)."""
        if self.stopping:
            return False
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[bool] = loop.create_future()
        timer = loop.call_later(delay_s, _wake, woken)
        self._parked.add(woken)
        self.counters.parked += 1
        try:
            return await woken
        finally:
            timer.cancel()
            self._parked.discard(woken)
            self.counters.parked -= 1

    # -- events -----------------------------------------------------------------------------

    def _event(
        self,
        kind: str,
        pipeline_id: str | None,
        seq: int | None,
        data: Mapping[str, Any] = _NO_DATA,
    ) -> None:
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
        self._event(event.kind, None, None, data)

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


def _advanced(row: PipelineRow, cursor: int, output: str, now: float, *, done: bool) -> PipelineRow:
    """``row`` with its cursor moved past a committed step (``dataclasses.replace`` costs
    twice as much, and this runs once per task)."""
    return PipelineRow(
        pipeline_id=row.pipeline_id,
        template=row.template,
        chain_digest=row.chain_digest,
        seed_digest=row.seed_digest,
        seed_artifact=row.seed_artifact,
        repeat=row.repeat,
        key=row.key,
        state=PipelineState.SUCCEEDED if done else PipelineState.RUNNING,
        cursor=cursor,
        ntasks=row.ntasks,
        run_id=row.run_id,
        ordinal=row.ordinal,
        created_at=row.created_at,
        updated_at=now,
        output_artifact=output,
        row=row.row,
    )


def _wake(woken: asyncio.Future[bool]) -> None:
    if not woken.done():
        woken.set_result(True)
