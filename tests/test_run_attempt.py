"""The ``Attempt`` a task's tries travel in: numbering, what a try leaves, the decision."""

from __future__ import annotations

import dataclasses
from typing import Any

from pyattacker.errors import RetryableError
from pyattacker.pool import TaskContext
from pyattacker.retry import Retrying
from pyattacker.run import pipeline, task
from pyattacker.run._attempt import Attempt
from pyattacker.run._job import Job
from pyattacker.store import PipelineRow, PipelineState


@task(retry=Retrying(max_attempts=2, base=0.0, jitter="none"))
async def flaky(value: int) -> int:
    return value


TEMPLATE = pipeline("p", flaky)


def _row(**changes: Any) -> PipelineRow:
    row = PipelineRow(
        pipeline_id="ab" * 16, template="p", chain_digest="c", seed_digest="s",
        seed_artifact="s", repeat=0, key="k", state=PipelineState.RUNNING, cursor=0,
        ntasks=1, run_id="r1", ordinal=3, created_at=1.0, updated_at=2.0, row=7,
    )  # fmt: skip
    return row.replaced(**changes)


def _attempt(base: int = 0) -> Attempt:
    job = Job(TEMPLATE, _row(), 1, "s")
    attempt = Attempt(job, TEMPLATE.tasks[0], 0, base=base, first=10.0, task_started_at=100.0)
    attempt.ctx = TaskContext()
    return attempt


def test_recorded_numbers_continue_after_an_earlier_runs_tries() -> None:
    attempt = _attempt(base=3)
    assert (attempt.number, attempt.recorded) == (1, 4)
    attempt.next()
    assert (attempt.number, attempt.recorded) == (2, 5)


def _start(attempt: Attempt, clock_now: float, epoch_now: float) -> None:
    """What the executor does when a try takes its worker slot."""
    attempt.clock_start, attempt.started_at = clock_now, epoch_now


def test_a_try_counts_as_ran_only_once_it_started() -> None:
    attempt = _attempt()
    assert attempt.ran == 0  # queued for a slot
    _start(attempt, clock_now=20.0, epoch_now=200.0)
    assert attempt.ran == 1
    attempt.next()
    assert attempt.ran == 1  # the second try is queued: only the first ran


def test_ending_a_try_notes_its_duration_on_the_run_clock_and_its_leases() -> None:
    attempt = _attempt()
    _start(attempt, clock_now=20.0, epoch_now=200.0)
    attempt.ctx.leased.append("pool/a")
    attempt.end(clock_now=20.5, epoch_now=200.7)
    assert (attempt.started_at, attempt.ended_at, attempt.duration_s) == (200.0, 200.7, 0.5)
    assert attempt.leased == ("pool/a",)


def test_next_forgets_the_last_tries_outcome_and_keeps_the_tasks_start() -> None:
    attempt = _attempt()
    _start(attempt, clock_now=20.0, epoch_now=200.0)
    attempt.error, attempt.value = RetryableError("boom"), "x"
    attempt.end(clock_now=21.0, epoch_now=201.0)
    attempt.next()
    forgotten = (attempt.error, attempt.value, attempt.started_at)
    assert forgotten == (None, None, None)
    assert attempt.leased == ()
    assert (attempt.first, attempt.task_started_at) == (10.0, 100.0)


def test_the_decision_spends_this_runs_tries_not_the_recorded_numbers() -> None:
    attempt = _attempt(base=5)  # five tries in an earlier run do not use up this budget
    attempt.error = RetryableError("boom")
    assert attempt.decide(elapsed=0.0, now=0.0).retry
    attempt.next()
    attempt.ctx = TaskContext()
    attempt.error = RetryableError("boom")
    decision = attempt.decide(elapsed=0.0, now=0.0)
    assert (decision.retry, decision.to_dict()["reason"]) == (False, "attempts_exhausted")


def test_advancing_a_pipeline_row_keeps_every_other_field() -> None:
    row = _row(error="old failure", output_artifact="o0")
    moved = row.advanced(1, "o1", 3.0, done=True)
    changed = {"cursor": 1, "output_artifact": "o1", "updated_at": 3.0, "error": None}
    assert moved.state is PipelineState.SUCCEEDED
    for field in dataclasses.fields(PipelineRow):
        if field.name == "state":
            continue
        expected = changed.get(field.name, getattr(row, field.name))
        assert getattr(moved, field.name) == expected, field.name
    assert row.advanced(1, "o1", 3.0, done=False).state is PipelineState.RUNNING
