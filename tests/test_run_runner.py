"""The Runner's scheduling promises, each on the virtual-time loop with an in-memory store."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from pyattacker.errors import ConfigError, LeaseLeakError, RetryableError
from pyattacker.pool import Pool, Resource, TaskContext
from pyattacker.retry import Retrying
from pyattacker.run import Runner, pipeline, task
from pyattacker.store import MemoryStore, RowKind, RunState
from run_helpers import Pulled, now, rows, run_virtually, runner, virtual

# -- the plain story ---------------------------------------------------------------------


@task
async def add_one(x: dict[str, int], ctx: TaskContext) -> dict[str, int]:
    await ctx.clock.sleep(1.0)
    return {"v": x["v"] + 1}


@task
def double(x: dict[str, int]) -> dict[str, int]:
    return {"v": x["v"] * 2}


CHAIN = pipeline("chain", add_one, double)


def test_a_run_finishes_every_pipeline_and_records_every_task_and_attempt() -> None:
    store = MemoryStore()
    report = run_virtually(runner(store, concurrency=4), CHAIN.map({"v": i} for i in range(10)))
    assert report.state is RunState.SUCCEEDED
    assert report.exit_code == 0
    assert report.by_state == {"succeeded": 10}
    assert len(rows(store, RowKind.TASKS, state="succeeded")) == 20
    attempts = rows(store, RowKind.ATTEMPTS)
    assert len(attempts) == 20
    assert {a["outcome"] for a in attempts} == {"ok"}
    assert all(a["decision"] == {"retry": False, "reason": "ok"} for a in attempts)


def test_the_last_artifact_of_a_pipeline_is_its_output() -> None:
    store = MemoryStore()
    run_virtually(runner(store), CHAIN.bind({"v": 3}))
    (row,) = rows(store, RowKind.PIPELINES)
    artifact = store.artifact(row["pipeline_id"], 1)
    assert artifact is not None
    assert artifact.data == b'{"v":8}'


# -- concurrency and admission -----------------------------------------------------------


def test_concurrency_bounds_the_attempts_in_flight_and_is_reached() -> None:
    seen: list[int] = []
    in_flight = 0

    @task
    async def busy(x: int, ctx: TaskContext) -> int:
        nonlocal in_flight
        in_flight += 1
        seen.append(in_flight)
        await ctx.clock.sleep(1.0)
        in_flight -= 1
        return x

    run_virtually(runner(concurrency=3), pipeline("p", busy).map(range(10)))
    assert max(seen) == 3


def test_a_retry_backoff_does_not_hold_a_worker() -> None:
    starts: dict[int, list[float]] = {}

    @task(retry=Retrying(max_attempts=2, base=10.0, cap=10.0, jitter="none"))
    async def flaky(x: int, ctx: TaskContext) -> int:
        starts.setdefault(x, []).append(now())
        await ctx.clock.sleep(1.0)
        if x == 0 and ctx.attempt == 1:
            raise RetryableError("try again")
        return x

    report = run_virtually(runner(concurrency=1), pipeline("p", flaky).map(range(3)))
    assert report.by_state == {"succeeded": 3}
    # Pipeline 0 failed at t=1 and waits 10 s; the single worker ran 1 and 2 meanwhile.
    assert starts[1] == [1.0]
    assert starts[2] == [2.0]
    assert starts[0] == [0.0, 11.0]


def test_admission_is_bounded_so_the_input_is_pulled_as_room_frees_up() -> None:
    pulled_at_start: list[int] = []
    source = Pulled({"v": i} for i in range(1000))

    @task
    async def slow(x: dict[str, int], ctx: TaskContext) -> dict[str, int]:
        if x["v"] == 0:
            pulled_at_start.append(source.count)
        await ctx.clock.sleep(1.0)
        return x

    report = run_virtually(runner(concurrency=2, admission=5), pipeline("p", slow).map(source))
    assert report.by_state == {"succeeded": 1000}
    # When the first task ran, `admission` rows had been read from a 1000-row input.
    assert pulled_at_start == [5]


def test_bad_settings_are_refused_naming_the_argument() -> None:
    with pytest.raises(ConfigError) as exc:
        Runner(concurrency=0)
    assert exc.value.field == "concurrency"
    with pytest.raises(ConfigError) as exc:
        Runner(concurrency=8, admission=4)
    assert exc.value.field == "admission"


# -- leases ------------------------------------------------------------------------------


def _pool() -> Pool:
    return Pool("apis", [Resource.create("llm", id=f"api-{i}", capacity=2) for i in range(2)])


def test_a_forgotten_lease_is_reclaimed_when_the_task_ends_and_recorded() -> None:
    pool = _pool()

    @task(resource="apis")
    async def forgets(x: int, ctx: TaskContext) -> int:
        await ctx.acquire_lease()
        return x

    store = MemoryStore()
    report = run_virtually(runner(store, pools=[pool]), pipeline("p", forgets).map(range(3)))
    assert report.by_state == {"succeeded": 3}
    assert pool.active == 0
    assert len(rows(store, RowKind.EVENTS, kind="lease.leaked")) == 3
    assert report.stats["attempts"]["leaked_leases"] == 3


def test_under_strict_leases_a_forgotten_lease_fails_the_attempt() -> None:
    pool = _pool()

    @task(resource="apis")
    async def forgets(x: int, ctx: TaskContext) -> int:
        await ctx.acquire_lease()
        return x

    store = MemoryStore()
    report = run_virtually(
        runner(store, pools=[pool], strict_leases=True), pipeline("p", forgets).bind(1)
    )
    assert report.by_state == {"failed": 1}
    assert pool.active == 0
    (attempt,) = rows(store, RowKind.ATTEMPTS)
    assert attempt["error"].startswith(LeaseLeakError.__name__)


def test_the_attempt_row_names_the_resources_it_leased() -> None:
    @task(resource="apis")
    async def calls_twice(x: int, ctx: TaskContext) -> int:
        for _ in range(2):
            async with ctx.acquire() as lease:
                lease.report(ok=True)
        return x

    store = MemoryStore()
    run_virtually(runner(store, pools=[_pool()]), pipeline("p", calls_twice).bind(1))
    (attempt,) = rows(store, RowKind.ATTEMPTS)
    assert len(attempt["resources"]) == 2
    assert all(r.startswith("apis/api-") for r in attempt["resources"])


# -- retries and decisions ---------------------------------------------------------------


def test_every_attempt_records_the_retry_decision_taken_after_it() -> None:
    @task(retry=Retrying(max_attempts=3, base=1.0, jitter="none"))
    async def twice_unlucky(x: int, ctx: TaskContext) -> int:
        if ctx.attempt < 3:
            raise RetryableError(f"unlucky {ctx.attempt}")
        return x

    store = MemoryStore()
    report = run_virtually(runner(store), pipeline("p", twice_unlucky).bind(1))
    assert report.by_state == {"succeeded": 1}
    attempts = sorted(rows(store, RowKind.ATTEMPTS), key=lambda a: a["attempt"])
    assert [a["decision"]["reason"] for a in attempts] == ["retryable", "retryable", "ok"]
    assert [a["decision"]["delay_s"] for a in attempts[:2]] == [1.0, 2.0]
    assert [a["outcome"] for a in attempts] == ["failed", "failed", "ok"]
    (task_row,) = rows(store, RowKind.TASKS)
    assert task_row["attempts"] == 3


def test_a_task_that_exhausts_its_retries_fails_its_pipeline_and_the_run_goes_on() -> None:
    @task(retry=Retrying(max_attempts=2, base=1.0))
    async def hopeless(x: int, ctx: TaskContext) -> int:
        if x == 0:
            raise RetryableError("never")
        return x

    store = MemoryStore()
    report = run_virtually(runner(store), pipeline("p", hopeless).map(range(4)))
    assert report.state is RunState.FAILED
    assert report.exit_code == 1
    assert report.by_state == {"failed": 1, "succeeded": 3}
    assert report.failures[0]["error_class"] == "retryable"
    (failed,) = rows(store, RowKind.TASKS, state="failed")
    assert failed["attempts"] == 2
    assert "RetryableError" in failed["traceback"]


def test_the_attempt_rng_is_a_function_of_the_attempt_so_reruns_reproduce_delays() -> None:
    policy = Retrying(max_attempts=4, base=1.0, jitter="full")

    @task(retry=policy)
    async def flaky(x: int, ctx: TaskContext) -> int:
        if ctx.attempt < 4:
            raise RetryableError("again")
        return x

    def delays() -> list[float]:
        store = MemoryStore()
        run_virtually(runner(store), pipeline("p", flaky).bind(5))
        attempts = sorted(rows(store, RowKind.ATTEMPTS), key=lambda a: a["attempt"])
        return [a["decision"]["delay_s"] for a in attempts[:3]]

    first = delays()
    assert first == delays()
    assert len(set(first)) == 3


def test_a_task_timeout_fails_the_attempt_at_the_simulated_instant() -> None:
    @task(timeout_s=2.5)
    async def stuck(x: int, ctx: TaskContext) -> int:
        await ctx.clock.sleep(100.0)
        return x

    store = MemoryStore()
    report = run_virtually(runner(store), pipeline("p", stuck).bind(1))
    assert report.by_state == {"failed": 1}
    (attempt,) = rows(store, RowKind.ATTEMPTS)
    assert attempt["error_class"] == "timeout"
    assert attempt["duration_s"] == pytest.approx(2.5)


# -- events ------------------------------------------------------------------------------


def test_emit_records_an_event_with_the_pipeline_and_task() -> None:
    @task
    async def chatty(x: int, ctx: TaskContext) -> int:
        ctx.emit("judge.score", score=0.5, api_key="sk-secret")
        return x

    store = MemoryStore()
    run_virtually(runner(store), pipeline("p", chatty).bind(1))
    (event,) = rows(store, RowKind.EVENTS, kind="judge.score")
    assert event["data"] == {"score": 0.5, "api_key": "***"}
    assert event["seq"] == 0
    assert event["pipeline_id"] == rows(store, RowKind.PIPELINES)[0]["pipeline_id"]


# -- stopping ----------------------------------------------------------------------------


def test_stop_after_failures_stops_admitting_and_interrupts_the_rest() -> None:
    @task
    async def fails_on_even(x: int, ctx: TaskContext) -> int:
        await ctx.clock.sleep(1.0)
        if x % 2 == 0:
            raise ValueError("even")
        return x

    report = run_virtually(
        runner(concurrency=2, stop_after_failures=2, grace_s=0.0),
        pipeline("p", fails_on_even).map(range(100)),
    )
    assert report.state is RunState.INTERRUPTED
    assert report.exit_code == 130
    assert report.stop_reason == "stop_after_failures=2 reached"
    assert report.by_state["failed"] == 2
    assert sum(report.by_state.values()) < 100
    assert report.resume_hint is not None


def test_parked_pipelines_are_recorded_interrupted_on_stop_with_checkpoints_intact() -> None:
    @task
    async def first(x: int, ctx: TaskContext) -> int:
        return x + 1

    @task(retry=Retrying(max_attempts=5, base=100.0, cap=100.0, jitter="none"))
    async def second(x: int, ctx: TaskContext) -> int:
        raise RetryableError("later")

    store = MemoryStore()
    report = run_virtually(
        runner(store, stop_after_s=50.0), pipeline("p", first, second).map(range(3))
    )
    assert report.state is RunState.INTERRUPTED
    assert report.by_state == {"interrupted": 3}
    assert report.stats["pipelines"]["parked"] == 0
    for row in rows(store, RowKind.PIPELINES):
        assert row["cursor"] == 1  # the checkpoint of `first` stayed
    interrupted = rows(store, RowKind.TASKS, state="interrupted")
    assert len(interrupted) == 3
    assert {t["attempts"] for t in interrupted} == {1}


def test_stop_gives_running_attempts_the_grace_period_then_cancels_them() -> None:
    @task
    async def long(x: int, ctx: TaskContext) -> int:
        await ctx.clock.sleep(float(x))
        return x

    store = MemoryStore()
    the_runner = runner(store, concurrency=4, grace_s=5.0, stop_after_s=1.0)
    report = run_virtually(the_runner, pipeline("p", long).map([2, 4, 8, 20]))
    assert report.by_state == {"succeeded": 2, "interrupted": 2}
    cancelled = rows(store, RowKind.ATTEMPTS, outcome="cancelled")
    assert len(cancelled) == 2
    assert sorted(round(a["duration_s"], 6) for a in cancelled) == [6.0, 6.0]


def test_a_run_stopped_from_inside_a_task_ends_interrupted() -> None:
    the_runner = runner(concurrency=1, grace_s=0.0)

    @task
    async def stopper(x: int, ctx: TaskContext) -> int:
        if x == 2:
            the_runner.stop("enough")
        return x

    report = run_virtually(the_runner, pipeline("p", stopper).map(range(10)))
    assert report.stop_reason == "enough"
    assert report.by_state["succeeded"] == 3


# -- the input ---------------------------------------------------------------------------


def test_a_generator_that_raises_midway_is_a_clear_error_and_loses_nothing() -> None:
    def rows_then_boom() -> Any:
        yield from range(5)
        raise OSError("disk went away")

    @task
    def ident(x: int) -> int:
        return x

    store = MemoryStore()
    with pytest.raises(ConfigError) as exc:
        run_virtually(runner(store), pipeline("p", ident).map(rows_then_boom()))
    assert "disk went away" in str(exc.value)
    assert exc.value.field == "specs"
    assert store.count_by_state() == {"succeeded": 5}
    report = run_virtually(runner(store), pipeline("p", ident).map(range(8)), resume=True)
    assert report.by_state == {"succeeded": 8}
    assert report.stats["pipelines"]["skipped"] == 5


def test_something_that_is_not_a_spec_is_refused() -> None:
    with pytest.raises(ConfigError) as exc:
        run_virtually(runner(), [1, 2, 3])
    assert exc.value.field == "specs"


def test_the_same_pipeline_twice_in_the_input_runs_once() -> None:
    calls = Counter[int]()

    @task
    def counted(x: int) -> int:
        calls[x] += 1
        return x

    report = run_virtually(runner(), pipeline("p", counted).map([1, 1, 2]))
    assert calls == {1: 1, 2: 1}
    assert report.stats["pipelines"]["duplicates"] == 1


def test_repeats_make_distinct_pipelines_of_one_row() -> None:
    calls = Counter[int]()

    @task
    def counted(x: int) -> int:
        calls[x] += 1
        return x

    report = run_virtually(runner(), pipeline("p", counted).map([7], repeats=3))
    assert calls == {7: 3}
    assert report.by_state == {"succeeded": 3}


# -- notebooks ---------------------------------------------------------------------------


def test_run_works_inside_an_already_running_loop() -> None:
    async def notebook_cell() -> dict[str, int]:
        with Runner(handle_signals=False) as r:
            return r.run(pipeline("p", double).map({"v": i} for i in range(3))).by_state

    assert asyncio.run(notebook_cell()) == {"succeeded": 3}


def test_stats_are_readable_mid_run() -> None:
    snapshots: list[dict[str, Any]] = []
    the_runner = runner(concurrency=2)

    @task
    async def peek(x: int, ctx: TaskContext) -> int:
        if x == 5:
            snapshots.append(the_runner.stats())
        await ctx.clock.sleep(1.0)
        return x

    virtual(lambda: the_runner.run_async(pipeline("p", peek).map(range(6))))
    (mid,) = snapshots
    assert mid["in_flight"] == 2
    assert mid["attempts"]["total"] == 6
    assert the_runner.stats()["pipelines"]["ended"] == {"succeeded": 6}
