"""``fanout``: one task that runs several tasks on the same input, concurrently.

``fanout(judge_a, judge_b)`` is a :class:`Task` whose output is ``{"judge_a": ...,
"judge_b": ...}``, keyed by sub-task name in the order given. Each branch runs on a
context derived from the attempt's (``ctx.derive(pool=sub.resource,
algorithm=sub.algorithm)``: its own default pool and algorithm, the same ids, rng, emit
hook and lease ledger) and, if the sub-task has ``timeout_s``, under that timeout
(a ``TimeoutError`` naming the branch).

Failures, by ``on_error``:

- ``"raise"`` (default): the first branch to fail cancels the others, and its own
  exception propagates (not an ``ExceptionGroup``), so the retry policy sees what really
  happened. When two fail in the same instant, the earlier in the given order wins;
- ``"collect"``: a failed branch's entry is ``{"error": str(exc), "error_class": ...,
  "type": ...}`` and the other branches keep their values. Cancellation is never
  collected: it propagates.

The sub-tasks' own ``retry`` policies are *not* applied: the fanout is one task, retried
as a whole by its own ``retry``. Its fingerprint covers the sub-task fingerprints (in
order) and ``on_error``, so changing any branch makes a new identity.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pyattacker.errors import ConfigError, error_class_of
from pyattacker.pool import AlgorithmSpec, TaskContext
from pyattacker.run._task import RetrySpec, Task

__all__ = ["FanoutTask", "fanout"]

_ON_ERROR = ("raise", "collect")


class FanoutTask(Task):
    """The :class:`Task` :func:`fanout` builds; ``tasks`` and ``on_error`` say what it runs."""

    __slots__ = ("on_error", "tasks")

    def __init__(
        self,
        tasks: tuple[Task, ...],
        *,
        on_error: str,
        name: str | None,
        resource: str | None,
        algorithm: AlgorithmSpec | None,
        retry: RetrySpec,
        timeout_s: float | None,
    ) -> None:
        self.tasks = tasks
        self.on_error = on_error
        runner = _collect if on_error == "collect" else _first_failure_cancels

        async def run_fanout(value: Any, ctx: TaskContext) -> dict[str, Any]:
            return await runner(tasks, value, ctx)

        super().__init__(
            run_fanout,
            name=name or f"fanout({','.join(t.name for t in tasks)})",
            resource=resource,
            algorithm=algorithm,
            retry=retry,
            timeout_s=timeout_s,
            identity={"fanout": [t.fingerprint for t in tasks], "on_error": on_error},
        )
        self.input_type = _common_input(tasks)

    def describe(self) -> dict[str, Any]:
        described = super().describe()
        described["on_error"] = self.on_error
        described["fanout"] = [t.describe() for t in self.tasks]
        return described


def fanout(
    *tasks: Task,
    on_error: str = "raise",
    name: str | None = None,
    retry: RetrySpec = None,
    timeout_s: float | None = None,
    resource: str | None = None,
    algorithm: AlgorithmSpec | None = None,
) -> Task:
    """A task running ``tasks`` concurrently on one input; see the module docstring.

    ``retry``, ``timeout_s``, ``resource`` and ``algorithm`` are the fanout's own (default:
    one attempt, no limit, no default pool). ``name`` defaults to ``fanout(a,b,...)``.
    Raises ``ConfigError`` for no task, something that is not a task, two tasks with one
    name (they key the output) or an unknown ``on_error``.
    """
    _check(tasks, on_error)
    return FanoutTask(
        tuple(tasks),
        on_error=on_error,
        name=name,
        resource=resource,
        algorithm=algorithm,
        retry=retry,
        timeout_s=timeout_s,
    )


def _check(tasks: tuple[object, ...], on_error: object) -> None:
    if not tasks:
        raise ConfigError("fanout needs at least one task", field="tasks")
    for position, item in enumerate(tasks, 1):
        if not isinstance(item, Task):
            raise ConfigError(
                f"fanout item {position} is a {type(item).__name__}, not a task",
                field="tasks",
                hint="decorate functions with @pyattacker.task",
            )
    names = [t.name for t in tasks if isinstance(t, Task)]
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:
        raise ConfigError(
            f"fanout has two tasks named {twice!r}",
            field="tasks",
            hint="names key the fanout's output: rename one (task(fn, name=...))",
        )
    if on_error not in _ON_ERROR:
        raise ConfigError(
            f"unknown on_error {on_error!r}", field="on_error", hint="use 'raise' or 'collect'"
        )


def _common_input(tasks: tuple[Task, ...]) -> Any:
    """The input type every annotated branch agrees on, else ``None`` (no check)."""
    annotated = {t.input_type for t in tasks if t.input_type is not None}
    return annotated.pop() if len(annotated) == 1 else None


async def _branch(sub: Task, value: Any, ctx: TaskContext) -> Any:
    branch_ctx = ctx.derive(pool=sub.resource, algorithm=sub.algorithm)
    if sub.timeout_s is None:
        return await sub.call(value, branch_ctx)
    try:
        async with asyncio.timeout(sub.timeout_s):
            return await sub.call(value, branch_ctx)
    except TimeoutError as exc:
        raise TimeoutError(f"fanout branch {sub.name!r} took more than {sub.timeout_s:g}s") from exc


async def _first_failure_cancels(
    tasks: tuple[Task, ...], value: Any, ctx: TaskContext
) -> dict[str, Any]:
    running = [asyncio.create_task(_branch(sub, value, ctx)) for sub in tasks]
    try:
        await asyncio.wait(running, return_when=asyncio.FIRST_EXCEPTION)
        # In the given order, so that two failures in one instant always give the same one.
        failures = (exc for branch in running if branch.done() and (exc := branch.exception()))
        first = next(failures, None)
        if first is not None:
            raise first
        return {sub.name: branch.result() for sub, branch in zip(tasks, running, strict=True)}
    finally:
        for branch in running:
            branch.cancel()
        # Wait for the cancelled branches so that their leases are back before we return,
        # and retrieve every exception so that none is reported as "never retrieved".
        await asyncio.gather(*running, return_exceptions=True)


async def _collect(tasks: tuple[Task, ...], value: Any, ctx: TaskContext) -> dict[str, Any]:
    outcomes = await asyncio.gather(
        *(_branch(sub, value, ctx) for sub in tasks), return_exceptions=True
    )
    collected: dict[str, Any] = {}
    for sub, outcome in zip(tasks, outcomes, strict=True):
        if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
            raise outcome  # cancellation, KeyboardInterrupt...: never a value
        collected[sub.name] = _failure(outcome) if isinstance(outcome, Exception) else outcome
    return collected


def _failure(exc: Exception) -> dict[str, str]:
    return {
        "error": str(exc),
        "error_class": error_class_of(exc).value,
        "type": type(exc).__name__,
    }
