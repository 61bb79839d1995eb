"""The rows of the durable record: plain values, the contract between the Runner (which
writes them) and every ``Store`` (which keeps them).

One table per kind (docs/run.md). Times named ``*_at`` are epoch seconds (wall clock, for
people and for correlating with other logs); ``duration_s`` is measured on the run's
monotonic ``Clock``. JSON-shaped fields (``data``, ``decision``, ``spec``, ``config``)
hold plain ``dict``/``list`` values that ``json.dumps`` accepts; secrets are masked by the
Runner before a row is built, and a store never sees a key.

Rows are values: nobody changes one after it is built. A changed pipeline row is a new
row, made by the row's own ``replaced``/``advanced``, so the copying lives here, next to
the fields. They are not ``frozen`` dataclasses only because a frozen dataclass is slower
to build, and a run builds four rows per task.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "OK_DECISION",
    "ROW_KINDS",
    "ArtifactRow",
    "AttemptRow",
    "Batch",
    "EventRow",
    "PipelineRow",
    "PipelineState",
    "ResourceRow",
    "RowKind",
    "RunRow",
    "RunState",
    "Superseded",
    "TaskRow",
    "TaskState",
]


class RunState(enum.StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"  # every pipeline succeeded
    FAILED = "failed"  # the run ended and some pipeline failed
    INTERRUPTED = "interrupted"  # stopped (signal, stop(), a stop condition) before the end
    CRASHED = "crashed"  # found `running` with a dead owner; set on takeover by a resume
    INCOMPLETE = "incomplete"  # ended without a stop, but its input was not read to the end


class PipelineState(enum.StrEnum):
    PENDING = "pending"  # admitted, no task finished yet in this run
    RUNNING = "running"  # a task of it is in flight or parked for a retry
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # the run stopped first; its checkpoints are intact


class TaskState(enum.StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # the retry policy gave up (or a fatal error)
    INTERRUPTED = "interrupted"  # the run stopped while it was in flight or parked


class RowKind(enum.StrEnum):
    """What ``Store.rows`` and the export can produce."""

    RUNS = "runs"
    PIPELINES = "pipelines"
    TASKS = "tasks"
    ATTEMPTS = "attempts"
    EVENTS = "events"
    ARTIFACTS = "artifacts"
    RESOURCES = "resources"
    TASK_HISTORY = "task_history"  # task rows replaced by a newer version of their step


ROW_KINDS: tuple[str, ...] = tuple(kind.value for kind in RowKind)

#: The decision recorded for a successful attempt. One shared value, so a store can encode
#: it once (most attempts succeed); never mutate it.
OK_DECISION: Mapping[str, Any] = {"retry": False, "reason": "ok"}


@dataclass(slots=True, kw_only=True)
class RunRow:
    run_id: str
    state: RunState
    started_at: float
    ended_at: float | None = None
    heartbeat_at: float | None = None
    pid: int | None = None
    host: str | None = None
    resumes: str | None = None  # the run this one resumed, if any
    stop_reason: str | None = None
    config: Mapping[str, Any] = field(default_factory=dict)  # masked Runner settings
    # What the run read and how far (``pyattacker.run._sources.InputRecord``): where from,
    # size, mtime, digest of the rows read, rows read, exhausted. None: not known.
    input: Mapping[str, Any] | None = None


@dataclass(slots=True, kw_only=True)
class PipelineRow:
    """One pipeline, upserted whole whenever its state or cursor moves.

    ``cursor`` is the number of leading tasks whose artifact is committed: the pipeline
    continues at task ``cursor`` with the output of task ``cursor - 1`` (the seed if 0).
    """

    pipeline_id: str
    template: str
    chain_digest: str
    seed_digest: str
    seed_artifact: str  # artifact digest of the seed value
    repeat: int
    key: str | None
    state: PipelineState
    cursor: int
    ntasks: int
    run_id: str  # the last run that touched it
    ordinal: int  # admission order in the first run that saw it
    created_at: float
    updated_at: float
    output_artifact: str | None = None  # the last task's output, once succeeded
    error: str | None = None  # the failure that ended it, if any
    row: int | None = None  # 0-based index of its row in the run's input; None: bind(seed)

    def replaced(self, **changes: Any) -> PipelineRow:
        """A copy of this row with ``changes`` (field names to new values)."""
        return dataclasses.replace(self, **changes)

    def advanced(
        self, cursor: int, output_artifact: str, updated_at: float, *, done: bool
    ) -> PipelineRow:
        """A copy with the cursor moved past a committed step: ``running`` on, or
        ``succeeded`` when ``done``, and no ``error``. What ``replaced`` would give, built
        directly, because it is the one change made for every task a run commits."""
        return PipelineRow(
            pipeline_id=self.pipeline_id,
            template=self.template,
            chain_digest=self.chain_digest,
            seed_digest=self.seed_digest,
            seed_artifact=self.seed_artifact,
            repeat=self.repeat,
            key=self.key,
            state=PipelineState.SUCCEEDED if done else PipelineState.RUNNING,
            cursor=cursor,
            ntasks=self.ntasks,
            run_id=self.run_id,
            ordinal=self.ordinal,
            created_at=self.created_at,
            updated_at=updated_at,
            output_artifact=output_artifact,
            error=None,  # a pipeline that moves on is not ended by a failure
            row=self.row,
        )


@dataclass(slots=True, kw_only=True)
class TaskRow:
    """One task of one pipeline, upserted when it ends (``seq`` is its 0-based index).

    A succeeded task also carries its last, successful attempt: ``resources`` it leased,
    ``attempt_started_at``/``attempt_ended_at``/``attempt_duration_s`` and its ``usage``.
    That attempt is not an ``attempts`` row of its own (a fifth row for every step of a
    durable run, and most steps succeed at once); ``Store.rows("attempts")`` yields
    it all the same, with ``outcome`` ``"ok"`` and the decision ``OK_DECISION``.

    Likewise its output: ``output_codec`` and ``output_data`` are the artifact that
    ``output_artifact`` addresses, kept in the task row rather than an ``artifacts`` row of
    its own (a pipeline's seed is one, at ``seq`` -1). ``Store.artifact`` and
    ``rows("artifacts")`` find both; ``rows("tasks")`` leaves ``output_data`` out.
    """

    pipeline_id: str
    seq: int
    name: str
    task_digest: str
    state: TaskState
    attempts: int
    run_id: str
    started_at: float
    ended_at: float
    input_artifact: str | None
    output_artifact: str | None = None
    error_class: str | None = None
    error: str | None = None
    traceback: str | None = None
    resources: Sequence[str] = ()
    attempt_started_at: float | None = None
    attempt_ended_at: float | None = None
    attempt_duration_s: float | None = None
    output_codec: str | None = None
    output_data: bytes | None = None
    usage: Mapping[str, float] | None = None  # the successful attempt's (see AttemptRow)


@dataclass(slots=True, kw_only=True)
class AttemptRow:
    """One execution of one task, with the retry decision taken after it.

    ``decision`` is ``RetryDecision.to_dict()`` for a failed attempt and
    ``{"retry": False, "reason": "ok"}`` for a successful one. ``resources`` lists the
    ``pool/resource`` ids leased during the attempt, in order. ``usage`` is what the
    attempt reported through ``lease.report(usage=...)``, summed by key (``{"tokens":
    1840}``), or None when it reported none.
    """

    run_id: str
    pipeline_id: str
    seq: int
    task: str
    attempt: int
    outcome: str  # ok | failed | cancelled
    started_at: float
    ended_at: float
    duration_s: float
    decision: Mapping[str, Any]
    resources: Sequence[str] = ()
    error_class: str | None = None
    error: str | None = None
    traceback: str | None = None
    usage: Mapping[str, float] | None = None


@dataclass(slots=True, kw_only=True)
class ArtifactRow:
    """A task's output (``seq`` >= 0) or a pipeline's seed (``seq`` = -1): bytes that
    ``codec`` decodes, addressed by ``digest = artifact_digest(codec, data)`` (the codec's
    name is part of the address: the same bytes under two codecs are two values).

    Kept with the pipeline that produced it, one row per ``(pipeline_id, seq)``, rather than
    once per digest: a unique index over random digests made every commit rewrite pages all
    over that index, a large share of a durable run's write time (``benchmarks/runner.py``
    shows it). Equal values still have equal digests.
    """

    pipeline_id: str
    seq: int
    digest: str
    codec: str
    data: bytes
    created_at: float

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass(slots=True, kw_only=True)
class EventRow:
    run_id: str
    kind: str  # <area>.<what>
    at: float
    pipeline_id: str | None = None
    seq: int | None = None
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class ResourceRow:
    run_id: str
    pool: str
    resource_id: str
    kind: str
    spec: Mapping[str, Any]  # masked: never a key


@dataclass(slots=True, kw_only=True)
class Superseded:
    """The task rows of ``pipeline_id`` at ``seq >= from_seq`` leave ``tasks`` for
    ``task_history`` (with their outputs), marked superseded by ``run_id`` at ``at``: the
    steps are about to run again (an edited step, or a fresh run), and their old outputs
    are kept, never overwritten. Written before the batch's task rows."""

    pipeline_id: str
    from_seq: int
    run_id: str
    at: float


@dataclass(slots=True)
class Batch:
    """Everything one transaction writes. ``Store.write`` commits all of it or nothing.

    Checkpoints (task rows with their outputs, pipeline rows, seed artifacts) and history
    (attempts, events) may share a batch. Inside one transaction the order does not matter
    for durability; the stores write pipelines first, because the other rows find their
    pipeline's row by its id. A store without transactions would have to write a task row
    (and its output) before the pipeline row whose cursor it advances.
    """

    artifacts: list[ArtifactRow] = field(default_factory=list)
    tasks: list[TaskRow] = field(default_factory=list)
    pipelines: list[PipelineRow] = field(default_factory=list)
    attempts: list[AttemptRow] = field(default_factory=list)
    events: list[EventRow] = field(default_factory=list)
    resources: list[ResourceRow] = field(default_factory=list)
    heartbeat: tuple[str, float] | None = None  # (run_id, epoch seconds)
    superseded: list[Superseded] = field(default_factory=list)
    # (run_id, the run's input record): how far the input was read, written with the
    # pipelines it admitted so that the record never runs ahead of them.
    run_input: tuple[str, Mapping[str, Any]] | None = None

    def __bool__(self) -> bool:
        return bool(
            self.superseded
            or self.artifacts
            or self.tasks
            or self.pipelines
            or self.attempts
            or self.events
            or self.resources
            or self.heartbeat
            or self.run_input
        )

    @property
    def has_checkpoints(self) -> bool:
        return bool(self.artifacts or self.tasks or self.pipelines or self.superseded)
