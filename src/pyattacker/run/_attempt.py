"""``Attempt``: one task of one pipeline being tried, try after try.

One object per task, not per try: like a retrying library's call state, it carries the
attempt number, when the task and the current try began, how the try ended (its value or
its error) and how long it took. The executor fills it in, the retry decision reads it
(:meth:`Attempt.decide`), and every row recorded about the task is built from it
(``_records``). :meth:`Attempt.next` readies it for the next try.

Two numbers: ``number`` counts this run's tries (the retry budget is spent on those), and
``recorded`` (``base + number``) continues after the tries an earlier run recorded for
the same step, so the attempts of a resumed step are numbered on from where they stopped.
"""

from __future__ import annotations

from typing import Any

from pyattacker.pool import TaskContext
from pyattacker.retry import RetryDecision
from pyattacker.run._job import Job
from pyattacker.run._task import Task

__all__ = ["Attempt"]


class Attempt:
    """The state of one task's tries; see the module docstring.

    ``started_at``/``ended_at`` are epoch seconds (for people), ``duration_s`` is measured
    on the run's clock. ``started_at`` is None while the current try waits for a worker
    slot (it has not run yet).
    """

    __slots__ = (
        "base",
        "clock_start",
        "ctx",
        "duration_s",
        "ended_at",
        "error",
        "first",
        "job",
        "leased",
        "number",
        "recorded",
        "seq",
        "started_at",
        "task",
        "task_started_at",
        "value",
    )

    def __init__(
        self, job: Job, task: Task, seq: int, base: int, first: float, task_started_at: float
    ) -> None:
        self.job = job
        self.task = task
        self.seq = seq
        self.base = base  # the tries an earlier run recorded for this step
        self.first = first  # the run's clock when the first try began (retry ``elapsed``)
        self.task_started_at = task_started_at
        self.number = 1
        self.recorded = base + 1
        self.ctx: TaskContext  # the current try's, given by the executor before it runs
        self.value: Any = None
        self.error: BaseException | None = None
        self.started_at: float | None = None
        self.clock_start = 0.0  # the run's clock when the current try took its slot
        self.ended_at = 0.0
        self.duration_s = 0.0
        self.leased: tuple[str, ...] = ()

    @property
    def ran(self) -> int:
        """How many of this run's tries ran (the current one counts once it took a slot)."""
        return self.number if self.started_at is not None else self.number - 1

    def end(self, clock_now: float, epoch_now: float) -> None:
        """The try is over (its leases are back): note when, how long, and what it leased.
        (Its start is noted by the executor: ``started_at`` and ``clock_start``.)"""
        self.ended_at = epoch_now
        self.duration_s = clock_now - self.clock_start
        self.leased = tuple(self.ctx.leased)

    def decide(self, elapsed: float, now: float) -> RetryDecision:
        """The task's retry policy on the current try's error (``elapsed``: run-clock
        seconds since the first try began; ``now``: epoch seconds)."""
        assert self.error is not None, "only a failed try is decided on"
        return self.task.retry.decide(
            self.error, attempts_used=self.number, rng=self.ctx.rng, elapsed=elapsed, now=now
        )

    def next(self) -> None:
        """Ready the next try: its number, and nothing of the last try's outcome (the
        executor gives it a context of its own)."""
        self.number += 1
        self.recorded += 1
        self.value = self.error = self.started_at = None
        self.leased = ()

    def __repr__(self) -> str:
        state = "queued" if self.started_at is None else "failed" if self.error else "ran"
        pid = self.job.row.pipeline_id
        return f"<Attempt {pid}:{self.seq} {self.task.name!r} #{self.recorded} {state}>"
