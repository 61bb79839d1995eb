"""Fanout: several tasks on one input at once, with their own pools, timeouts and failures."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from helpers import now, res
from pyattacker.errors import ConfigError, ErrorClass
from pyattacker.pool import Pool, TaskContext
from pyattacker.run._fanout import FanoutTask, fanout
from pyattacker.run._pipeline import pipeline
from pyattacker.run._task import Task, task
from pyattacker.testing import run_virtual


def run(coro: Any) -> Any:
    return run_virtual(coro, wall_budget_s=10)


def sleeper(name: str, seconds: float, result: Any = None, **options: Any) -> Task:
    async def sleep_then_answer(value: Any) -> Any:
        await asyncio.sleep(seconds)
        return result if result is not None else f"{name}:{value}"

    return task(sleep_then_answer, name=name, **options)


def failer(name: str, seconds: float, exc: Exception) -> Task:
    async def sleep_then_fail(value: Any) -> Any:
        await asyncio.sleep(seconds)
        raise exc

    return task(sleep_then_fail, name=name)


# ----------------------------------------------------------------------------- running


def test_fanout_returns_each_branch_keyed_by_name_in_order() -> None:
    both = fanout(sleeper("b", 1), sleeper("a", 1))
    assert list(run(both.call(7, TaskContext()))) == ["b", "a"]
    assert run(both.call(7, TaskContext())) == {"b": "b:7", "a": "a:7"}


def test_branches_run_concurrently() -> None:
    async def main() -> float:
        await fanout(sleeper("a", 3), sleeper("b", 3), sleeper("c", 2)).call(1, TaskContext())
        return now()

    assert run(main()) == 3.0


def test_each_branch_gets_its_own_pool_and_algorithm_and_shares_the_ids() -> None:
    seen: dict[str, tuple[Any, ...]] = {}

    def probe(name: str, **options: Any) -> Task:
        def look(value: Any, ctx: TaskContext) -> str:
            algorithm = None if ctx.algorithm is None else ctx.algorithm.name
            seen[name] = (ctx.default_pool, algorithm, ctx.pipeline_id)
            return name

        return task(look, name=name, **options)

    pools = [Pool("keys", [res("k")]), Pool("backup", [res("b")])]
    ctx = TaskContext(pools, pool="keys", pipeline_id="p1")
    both = fanout(probe("main"), probe("spare", resource="backup", algorithm="immediate"))
    run(both.call(None, ctx))
    assert seen == {"main": ("keys", None, "p1"), "spare": ("backup", "immediate", "p1")}


def test_a_branch_timeout_raises_a_timeout_naming_the_branch() -> None:
    slow = fanout(sleeper("slow", 10, timeout_s=2), sleeper("fast", 1))
    with pytest.raises(TimeoutError, match="branch 'slow' took more than 2s"):
        run(slow.call(1, TaskContext()))


# ------------------------------------------------------------------------------ failures


def test_the_first_failure_cancels_the_others_and_propagates_itself() -> None:
    cancelled: list[str] = []
    boom = ValueError("boom")

    async def patient(value: Any) -> str:
        try:
            await asyncio.sleep(100)
        except asyncio.CancelledError:
            cancelled.append("patient")
            raise
        return "never"

    async def main() -> tuple[BaseException, float]:
        with pytest.raises(ValueError, match="boom") as caught:
            await fanout(task(patient), failer("bad", 2, boom)).call(1, TaskContext())
        return caught.value, now()

    error, when = run(main())
    assert error is boom
    assert when == 2.0
    assert cancelled == ["patient"]


def test_when_two_fail_at_once_the_first_in_order_wins() -> None:
    both = fanout(failer("one", 1, KeyError("one")), failer("two", 1, ValueError("two")))
    with pytest.raises(KeyError):
        run(both.call(1, TaskContext()))


def test_collect_keeps_the_values_and_describes_the_failures() -> None:
    collected = fanout(
        sleeper("ok", 1),
        failer("bad", 1, ConnectionResetError("reset")),
        sleeper("slow", 10, timeout_s=2),
        on_error="collect",
    )
    result = run(collected.call(1, TaskContext()))
    assert result["ok"] == "ok:1"
    assert result["bad"] == {
        "error": "reset",
        "error_class": ErrorClass.CONNECTION.value,
        "type": "ConnectionResetError",
    }
    assert result["slow"]["error_class"] == "timeout"
    assert json.loads(json.dumps(result)) == result


def test_cancelling_the_fanout_cancels_every_branch_and_returns_the_leases() -> None:
    pool = Pool("keys", [res("k", capacity=2)])
    ctx = TaskContext([pool], pool="keys")

    async def holds(value: Any, ctx: TaskContext) -> None:
        async with ctx.acquire():
            await asyncio.sleep(100)

    async def main() -> int:
        running = asyncio.ensure_future(
            fanout(task(holds, name="a"), task(holds, name="b")).call(1, ctx)
        )
        await asyncio.sleep(1)
        assert pool.statistics().active == 2
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        return pool.statistics().active

    assert run(main()) == 0


def test_a_failure_returns_the_other_branches_leases_before_propagating() -> None:
    pool = Pool("keys", [res("k")])
    ctx = TaskContext([pool], pool="keys")

    async def holds(value: Any, ctx: TaskContext) -> None:
        async with ctx.acquire():
            await asyncio.sleep(100)

    async def main() -> int:
        with pytest.raises(RuntimeError):
            await fanout(task(holds), failer("bad", 1, RuntimeError("x"))).call(1, ctx)
        return pool.statistics().active

    assert run(main()) == 0


def test_a_sub_tasks_own_retry_is_not_applied_inside_the_fanout() -> None:
    calls: list[int] = []

    def flaky(value: Any) -> Any:
        calls.append(1)
        raise ConnectionError("down")

    with pytest.raises(ConnectionError):
        run(fanout(task(flaky, retry="exponential")).call(1, TaskContext()))
    assert calls == [1]


# ------------------------------------------------------------------------------ building


def test_the_fanout_is_a_task_with_its_own_settings() -> None:
    built = fanout(sleeper("a", 1), sleeper("b", 1), retry="exponential", timeout_s=5)
    assert isinstance(built, FanoutTask)
    assert built.name == "fanout(a,b)"
    assert built.retry.max_attempts == 5
    assert built.timeout_s == 5.0
    assert built.resource is None
    assert built.output_type == dict[str, Any]
    assert fanout(sleeper("a", 1), name="both").name == "both"


def test_the_fanout_defaults_to_one_attempt_no_timeout_and_no_pool() -> None:
    built = fanout(sleeper("a", 1, retry="exponential", timeout_s=3, resource="keys"))
    assert (built.retry.max_attempts, built.timeout_s, built.resource) == (1, None, None)


def test_the_fingerprint_covers_the_branches_and_on_error() -> None:
    a, b = sleeper("a", 1), sleeper("b", 1)
    base = fanout(a, b).fingerprint
    assert fanout(a, b).fingerprint == base
    assert fanout(b, a).fingerprint != base
    assert fanout(a, sleeper("b", 1, retry="exponential")).fingerprint != base
    assert fanout(a, b, on_error="collect").fingerprint != base


def test_describe_shows_the_branches() -> None:
    described = fanout(sleeper("a", 1), on_error="collect").describe()
    assert described["on_error"] == "collect"
    assert [d["name"] for d in described["fanout"]] == ["a"]
    json.dumps(described)


def test_a_fanout_chains_into_a_task_that_takes_a_dict() -> None:
    @task
    def source(value: int) -> int:
        return value

    @task
    def branch(value: int) -> int:
        return value

    @task
    def merge(value: dict[str, Any]) -> int:
        return len(value)

    @task
    def wants_a_str(value: str) -> str:
        return value

    both = fanout(branch)
    assert both.input_type is int
    assert len(pipeline("p", source, both, merge)) == 3
    with pytest.raises(ConfigError, match="takes str"):
        pipeline("p", source, both, wants_a_str)


@pytest.mark.parametrize(
    ("args", "options", "words"),
    [
        ((), {}, "at least one task"),
        (("a", "a"), {}, "two tasks named 'a'"),
        (("a",), {"on_error": "ignore"}, "unknown on_error"),
    ],
)
def test_bad_fanouts_are_config_errors(
    args: tuple[str, ...], options: dict[str, Any], words: str
) -> None:
    with pytest.raises(ConfigError, match=words):
        fanout(*(sleeper(name, 1) for name in args), **options)


def test_something_that_is_not_a_task_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="not a task"):
        fanout(lambda v: v)  # type: ignore[arg-type]
