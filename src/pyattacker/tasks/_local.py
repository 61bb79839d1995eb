"""Built-in tasks that need no network: ``write_jsonl``, and the helpers for trying a
config without one: ``echo``, ``delay``, ``flaky``, ``boom``, ``simulate_llm``.

The helpers wait on the attempt's clock (``ctx.clock``), so a config tried on virtual time
takes no real time, and draw randomness from the attempt's ``ctx.rng``, so a rerun
fails and waits the same way.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pyattacker._checks import check_number, check_whole
from pyattacker.errors import RetryableError
from pyattacker.pool import TaskContext
from pyattacker.tasks._args import flag, result_of, seconds, shaped, text
from pyattacker.tasks._args import seconds as _checked_seconds
from pyattacker.tasks._template import Template

__all__ = ["Boom", "Flaked", "SimulatedRateLimit", "boom", "delay", "echo", "flaky",
           "simulate_llm", "write_jsonl"]  # fmt: skip

Task = Callable[[Any, TaskContext], Awaitable[Any]]


class Flaked(RetryableError):
    """A ``flaky`` task's planned failure (classified ``retryable``)."""


class Boom(Exception):
    """A ``boom`` task's failure (classified ``unknown``: not retried by default)."""


class SimulatedRateLimit(Exception):
    """A ``simulate_llm`` refusal, as an SDK's HTTP 429 looks (``status_code``,
    ``retry_after``)."""

    status_code = 429

    def __init__(self, retry_after: float) -> None:
        super().__init__("HTTP 429 Too Many Requests (simulated)")
        self.retry_after = retry_after


def echo() -> Callable[[Any], Any]:
    """Returns its input."""

    def echo_task(value: Any) -> Any:
        return value

    return shaped(echo_task)


def _wait(value: object) -> float:
    return _checked_seconds(value, "seconds")


def delay(*, seconds: float = 0.1) -> Task:
    """Waits ``seconds`` on the attempt's clock, then returns its input."""
    wait = _wait(seconds)

    async def delay_task(value: Any, ctx: TaskContext) -> Any:
        await ctx.clock.sleep(wait)
        return value

    return shaped(delay_task)


def flaky(*, fail_attempts: int = 1, rate: float = 0.0) -> Task:
    """Fails (``Flaked``, retryable) the first ``fail_attempts`` attempts of each item, then
    each later attempt with probability ``rate``; else returns its input."""
    first = check_whole(fail_attempts, "fail_attempts", at_least=0)
    chance = _probability(rate, "rate")

    async def flaky_task(value: Any, ctx: TaskContext) -> Any:
        if ctx.attempt <= first or (chance and ctx.rng.random() < chance):
            raise Flaked(f"planned failure of attempt {ctx.attempt}")
        return value

    return shaped(flaky_task)


def boom(*, message: str = "boom") -> Callable[[Any], Any]:
    """Always fails with ``Boom(message)``."""
    said = text(message, "message")

    def boom_task(value: Any) -> Any:
        raise Boom(said)

    return boom_task


def simulate_llm(
    *,
    prompt: str = "{input}",
    ttft_s: float = 0.05,
    itl_s: float = 0.005,
    tokens: int = 16,
    refuse_rate: float = 0.0,
    output: str | None = None,
    carry: bool = True,
    task_name: str = "llm",
) -> Task:
    """A pretend LLM call with ``llm.chat``'s output: waits ``ttft_s + (tokens - 1) * itl_s``
    (holding a lease when the task has a pool), and refuses with probability
    ``refuse_rate`` (a 429 with a 1 s Retry-After)."""
    template = Template(prompt, field="prompt")
    first, gap = seconds(ttft_s, "ttft_s"), seconds(itl_s, "itl_s")
    count = check_whole(tokens, "tokens", at_least=1)
    chance = _probability(refuse_rate, "refuse_rate")
    name, keep = text(output or task_name, "output"), flag(carry, "carry")

    async def simulate_llm_task(value: Any, ctx: TaskContext) -> Any:
        said = template.render(value)
        used = {"prompt_tokens": len(said.split()), "completion_tokens": count}
        resource = None
        if ctx.default_pool is not None:
            async with ctx.acquire() as lease:
                resource = lease.resource.id
                await _pretend(ctx, lease.report, first, gap, count, chance, used)
        else:
            await _pretend(ctx, None, first, gap, count, chance, used)
        facts = {
            "text": " ".join(f"word{n}" for n in range(count)), "model": "simulated",
            "finish_reason": "length", "usage": {**used, "total_tokens": sum(used.values())},
            "ttft_s": first, "e2e_s": first + (count - 1) * gap, "resource": resource,
        }  # fmt: skip
        return result_of(value, name, facts, carry=keep)

    return shaped(simulate_llm_task, [template], name, keep)


async def _pretend(
    ctx: TaskContext, report: Any, first: float, gap: float, count: int, chance: float,
    used: dict[str, int],
) -> None:  # fmt: skip
    if chance and ctx.rng.random() < chance:
        refused = SimulatedRateLimit(1.0)
        if report is not None:
            report(ok=False, error=refused)
        raise refused
    await ctx.clock.sleep(first + (count - 1) * gap)
    if report is not None:
        report(ok=True, usage=used)


def write_jsonl(*, path: str, carry: bool = True) -> Callable[[Any], Any]:
    """Appends its input to ``path`` as one JSON line and returns it. An item whose step
    runs again (a resume after a crash between the write and the checkpoint) is appended
    again: the store, not this file, is the record."""
    target = Path(text(path, "path"))
    keep = flag(carry, "carry")

    def write_jsonl_task(value: Any) -> Any:
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a", encoding="utf-8") as out:
            out.write(json.dumps(value, ensure_ascii=False, sort_keys=True) + "\n")
        return value if keep else None

    return shaped(write_jsonl_task, keeps=keep)


def _probability(value: object, field: str) -> float:
    return check_number(value, field, at_least=0, at_most=1, hint="a probability, 0 to 1")
