"""Tasks: the shapes ``@task`` accepts, the settings it checks, and what makes an identity."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pyattacker.errors import ConfigError
from pyattacker.pool import TaskContext
from pyattacker.retry import Retrying
from pyattacker.run._pipeline import PipelineTemplate
from pyattacker.run._task import Task, task
from pyattacker.testing import run_virtual


def run(coro: Any) -> Any:
    return run_virtual(coro, wall_budget_s=10)


# ----------------------------------------------------------------------------- the forms


def test_bare_decorator_makes_a_task_named_after_the_function() -> None:
    @task
    def judge(value: int) -> int:
        return value

    assert isinstance(judge, Task)
    assert judge.name == "judge"


def test_decorator_with_a_name_or_options_makes_a_task() -> None:
    @task("scorer")
    def one(value: int) -> int:
        return value

    @task(name="ranker", resource="keys", timeout_s=2, version="2")
    def two(value: int) -> int:
        return value

    assert one.name == "scorer"
    assert (two.name, two.resource, two.timeout_s, two.version) == ("ranker", "keys", 2.0, "2")


def test_task_can_be_called_as_a_plain_function() -> None:
    def judge(value: int) -> int:
        return value

    assert task(judge, name="j").name == "j"


def test_the_name_given_twice_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="given twice"):
        task("a", name="b")


@pytest.mark.parametrize("name", ["", " padded ", 3])
def test_a_bad_task_name_is_a_config_error(name: Any) -> None:
    with pytest.raises(ConfigError, match="task name"):
        task(lambda v: v, name=name)


# ----------------------------------------------------------------------------- the shape


def no_params() -> int:
    return 1


def three_required(value: int, ctx: Any, extra: Any) -> int:
    return value


def args_only(*args: Any) -> int:
    return 1


def keyword_only_required(value: int, *, model: str) -> int:
    return value


def a_generator(value: int) -> Any:
    yield value


async def an_async_generator(value: int) -> Any:
    yield value


def looks_like_a_method(self: Any, value: int) -> int:
    return value


class NotAFunction:
    pass


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (no_params, "no_params takes no parameters"),
        (three_required, "three_required takes 3 required parameters"),
        (args_only, "args_only takes only *args"),
        (keyword_only_required, "keyword_only_required has the required keyword-only"),
        (a_generator, "a_generator is a generator function"),
        (an_async_generator, "an_async_generator is a generator function"),
        (looks_like_a_method, "looks_like_a_method is a method"),
        (NotAFunction, "NotAFunction is a class"),
        (42, "42 is not callable"),
    ],
)
def test_a_function_of_the_wrong_shape_is_refused_when_decorating(fn: Any, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        task(fn)
    assert words in str(caught.value)


def test_a_task_cannot_be_made_a_task_again() -> None:
    with pytest.raises(ConfigError, match="already a task"):
        task(task(lambda v: v))


def test_a_required_second_parameter_receives_the_context() -> None:
    assert task(lambda value, whatever: value).takes_ctx


def test_an_optional_second_parameter_keeps_its_default() -> None:
    def judge(value: int, model: str = "a") -> str:
        return model

    made = task(judge)
    assert not made.takes_ctx
    assert run(made.call(1, TaskContext())) == "a"


def test_an_optional_second_parameter_named_ctx_receives_the_context() -> None:
    def judge(value: int, ctx: TaskContext | None = None) -> bool:
        return ctx is not None

    assert run(task(judge).call(1, TaskContext()))


def test_a_bound_method_and_a_callable_instance_are_tasks() -> None:
    class Scorer:
        def __init__(self, bonus: int) -> None:
            self.bonus = bonus

        def score(self, value: int) -> int:
            return value + self.bonus

        def __call__(self, value: int, ctx: TaskContext) -> int:
            return value * self.bonus

    assert run(task(Scorer(2).score).call(1, TaskContext())) == 3
    made = task(Scorer(3))
    assert made.name == "Scorer"
    assert made.takes_ctx
    assert run(made.call(2, TaskContext())) == 6


# ------------------------------------------------------------------------------- calling


def test_call_runs_sync_and_async_functions_with_or_without_the_context() -> None:
    async def with_ctx(value: int, ctx: TaskContext) -> str:
        await asyncio.sleep(1)
        return f"{value}:{ctx.meta['who']}"

    ctx = TaskContext(meta={"who": "me"})
    assert run(task(lambda v: v + 1).call(1, ctx)) == 2
    assert run(task(with_ctx).call(1, ctx)) == "1:me"
    assert task(with_ctx).is_async
    assert not task(lambda v: v).is_async


def test_a_sync_task_runs_inline_on_the_calling_thread() -> None:
    seen: list[int] = []

    async def main() -> None:
        await task(lambda v: seen.append(threading.get_ident())).call(None, TaskContext())
        seen.append(threading.get_ident())

    run(main())
    assert seen[0] == seen[1]


def test_an_awaitable_returned_by_a_sync_function_is_awaited() -> None:
    async def later(value: int) -> int:
        return value * 2

    assert run(task(lambda v: later(v), name="wrapped").call(4, TaskContext())) == 8


def test_calling_the_task_calls_the_plain_function() -> None:
    @task
    def judge(value: int, ctx: Any) -> tuple[int, Any]:
        return value, ctx

    assert judge(1, "fake ctx") == (1, "fake ctx")


# ------------------------------------------------------------------------------ settings


def test_the_defaults_are_one_attempt_no_timeout_no_pool_and_an_empty_config() -> None:
    made = task(lambda v: v)
    assert made.retry == Retrying()
    assert made.retry.max_attempts == 1
    assert (made.timeout_s, made.resource, made.algorithm, made.version) == (None, None, None, None)
    assert dict(made.config) == {}


def test_retry_and_algorithm_specs_are_resolved() -> None:
    made = task(lambda v: v, retry="exponential", algorithm="immediate")
    assert made.retry.max_attempts == 5
    assert made.algorithm is not None
    assert made.algorithm.name == "immediate"


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"timeout_s": 0}, "timeout_s"),
        ({"timeout_s": -1}, "timeout_s"),
        ({"timeout_s": float("nan")}, "timeout_s"),
        ({"retry": "sometimes"}, "retry"),
        ({"algorithm": "telepathy"}, "algorithm"),
        ({"config": {"client": object()}}, "config"),
        ({"config": {1: "a"}}, "config"),
        ({"config": ["a"]}, "config"),
        ({"resource": ""}, "resource"),
        ({"version": 1.5}, "version"),
    ],
)
def test_a_bad_option_is_a_config_error_naming_its_field(
    options: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        task(lambda v: v, **options)
    assert (caught.value.field or "").startswith(field)


def test_a_bad_option_names_the_task() -> None:
    def judge(value: int) -> int:
        return value

    with pytest.raises(ConfigError, match="task 'judge': must be a number > 0"):
        task(judge, timeout_s=0)


def test_config_is_a_frozen_copy() -> None:
    settings: dict[str, Any] = {"model": "a", "stops": ["x"], "nested": {"t": 0.5}}
    made = task(lambda v: v, config=settings)
    settings["model"] = "b"
    assert made.config["model"] == "a"
    assert made.config["stops"] == ("x",)
    with pytest.raises(TypeError):
        made.config["model"] = "c"  # type: ignore[index]
    with pytest.raises(TypeError):
        made.config["nested"]["t"] = 1


def test_an_int_version_is_kept_as_a_str() -> None:
    assert task(lambda v: v, version=2).version == "2"


def test_input_and_output_types_come_from_the_annotations() -> None:
    def typed(value: list[int], ctx: TaskContext) -> dict[str, int]:
        return {}

    made = task(typed)
    assert (made.input_type, made.output_type) == (list[int], dict[str, int])
    assert (task(lambda v: v).input_type, task(lambda v: v).output_type) == (None, None)


def test_an_annotation_that_cannot_be_resolved_means_no_type() -> None:
    def odd(value: NoSuchType) -> int:  # type: ignore[name-defined]  # noqa: F821
        return 1

    assert task(odd).input_type is None


def test_describe_is_json_and_repr_is_telling() -> None:
    made = task(lambda v: v, name="judge", resource="keys", retry="exponential", config={"m": "a"})
    described = json.loads(json.dumps(made.describe()))
    assert described["name"] == "judge"
    assert described["fingerprint"] == made.fingerprint
    assert described["config"] == {"m": "a"}
    assert described["retry"].startswith("Retrying(")
    assert {"resource", "algorithm", "timeout_s", "version"} <= set(described)
    assert "'judge'" in repr(made)
    assert "resource='keys'" in repr(made)


def test_or_joins_tasks_into_a_template_named_after_them() -> None:
    a, b, c = task(lambda v: v, name="a"), task(lambda v: v, name="b"), task(lambda v: v, name="c")
    chain = a | b | c
    assert isinstance(chain, PipelineTemplate)
    assert chain.name == "a|b|c"
    assert [t.name for t in chain.tasks] == ["a", "b", "c"]
    assert (a | (b | c)).name == "a|b|c"
    with pytest.raises(TypeError):
        a | 3


# ------------------------------------------------------------------------------ identity


def judge_plain(value: int) -> int:
    return value + 1


def judge_with_comments(value: int) -> int:
    """A docstring that says what it does."""
    # a comment, blank lines and different spacing

    return  value+1  # fmt: skip


def judge_changed(value: int) -> int:
    return value + 2


def judge_nested(value: int) -> int:
    def inner(x: int) -> int:
        return x + 1

    return inner(value)


def judge_nested_changed(value: int) -> int:
    def inner(x: int) -> int:
        return x - 1

    return inner(value)


def as_judge(fn: Callable[..., Any], **options: Any) -> Task:
    return task(fn, name="judge", **options)


def test_editing_a_comment_or_docstring_keeps_the_fingerprint() -> None:
    assert as_judge(judge_plain).fingerprint == as_judge(judge_with_comments).fingerprint


def test_changing_the_body_changes_the_fingerprint() -> None:
    assert as_judge(judge_plain).fingerprint != as_judge(judge_changed).fingerprint


def test_changing_a_nested_function_changes_the_fingerprint() -> None:
    assert as_judge(judge_nested).fingerprint != as_judge(judge_nested_changed).fingerprint


def test_decorators_and_the_function_name_are_not_code_but_settings_are_identity() -> None:
    @task("judge", retry="exponential")
    def renamed(value: int) -> int:
        return value + 1

    plain = as_judge(judge_plain)
    assert renamed.code_digest == plain.code_digest
    assert renamed.fingerprint != plain.fingerprint


@pytest.mark.parametrize(
    "options",
    [
        {"retry": "exponential"},
        {"algorithm": "immediate"},
        {"config": {"model": "a"}},
        {"version": "2"},
    ],
)
def test_each_setting_is_part_of_the_fingerprint(options: dict[str, Any]) -> None:
    assert as_judge(judge_plain, **options).fingerprint != as_judge(judge_plain).fingerprint


def test_the_name_is_part_of_the_fingerprint() -> None:
    assert task(judge_plain, name="a").fingerprint != task(judge_plain, name="b").fingerprint


def test_the_timeout_is_not_part_of_the_fingerprint() -> None:
    assert as_judge(judge_plain, timeout_s=3).fingerprint == as_judge(judge_plain).fingerprint


def test_the_pool_a_task_leases_from_is_part_of_the_fingerprint() -> None:
    # Another pool may be another model: its checkpoints are not this task's outputs.
    moved = as_judge(judge_plain, resource="keys")
    assert moved.fingerprint != as_judge(judge_plain).fingerprint


def make_judge(model: str) -> Task:
    @task("judge")
    def judge(value: str) -> str:
        return f"{model}:{value}"

    return judge


def test_factory_parameters_change_the_fingerprint_but_not_the_code_digest() -> None:
    a, b, a_again = make_judge("a"), make_judge("b"), make_judge("a")
    assert a.code_digest == b.code_digest
    assert a.fingerprint != b.fingerprint
    assert a.fingerprint == a_again.fingerprint


def make_with_default(chosen: str) -> Task:
    # The pattern that binds a loop variable early: the default is computed, not written.
    def judge(value: int, model: str = chosen) -> str:
        return model

    return as_judge(judge)


def test_defaults_are_factory_parameters() -> None:
    a, b = make_with_default("a"), make_with_default("b")
    assert a.code_digest == b.code_digest
    assert a.fingerprint != b.fingerprint


def test_partial_arguments_are_factory_parameters() -> None:
    def scaled(factor: int, value: int) -> int:
        return factor * value

    double, triple = functools.partial(scaled, 2), functools.partial(scaled, 3)
    assert as_judge(double).fingerprint != as_judge(triple).fingerprint
    assert run(as_judge(double).call(5, TaskContext())) == 10


def test_a_captured_object_counts_by_its_type_so_identity_is_stable() -> None:
    def make(client: object) -> Task:
        return task(lambda v: client, name="judge")

    assert make(object()).fingerprint == make(object()).fingerprint


def test_a_captured_task_counts_by_its_fingerprint() -> None:
    def wrap(inner: Task) -> Task:
        return task(lambda v: inner(v), name="outer")

    assert wrap(make_judge("a")).fingerprint != wrap(make_judge("b")).fingerprint


def exec_function(source: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {}
    exec(textwrap.dedent(source), namespace)
    return namespace["judge"]  # type: ignore[no-any-return]


def test_without_source_the_bytecode_is_the_identity() -> None:
    one = exec_function('def judge(value):\n    """one"""\n    return value + 1\n')
    same = exec_function('def judge(value):\n    """two"""\n    return value + 1\n')
    other = exec_function("def judge(value):\n    return value + 2\n")
    assert as_judge(one).fingerprint == as_judge(same).fingerprint
    assert as_judge(one).fingerprint != as_judge(other).fingerprint


def test_lambdas_are_told_apart_by_their_bytecode() -> None:
    assert (
        task(lambda v: v + 1, name="f").fingerprint == task(lambda v: v + 1, name="f").fingerprint
    )
    assert (
        task(lambda v: v + 1, name="f").fingerprint != task(lambda v: v + 2, name="f").fingerprint
    )


FINGERPRINT_MODULE = """
from pyattacker.run._task import task

TAGS = {"a", "b", "c", "d"}

def make(options):
    @task("judge", config={"k": [1, 2]})
    def judge(value):
        return value in {"x", "y", "z"} and sorted(options)
    return judge

judge = make(frozenset(TAGS))
print(judge.fingerprint)
"""


def test_the_fingerprint_is_the_same_in_every_process(tmp_path: Path) -> None:
    (tmp_path / "judge_module.py").write_text(FINGERPRINT_MODULE)
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    printed = {
        subprocess.run(
            [sys.executable, "-c", "import judge_module"],
            cwd=tmp_path,
            env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": path},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2", "3")
    }
    assert len(printed) == 1
    assert len(printed.pop()) == 32
