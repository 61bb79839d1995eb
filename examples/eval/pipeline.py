"""An evaluation over a pool of four API keys: prepare → ask → grade.

``ask`` puts each question to a language model and ``grade`` has a model judge the answer
against the expected one; both lease one of four keys from the pool ``llm`` for each
call. Here the model is ``FakeModel``, a local stand-in, so the example runs anywhere in a
few seconds without a network or an account. To use a real endpoint, make ``client()``
return your SDK's client (``openai.AsyncOpenAI(api_key=..., max_retries=0)``: the run's
retry policy does the retrying) and change the two ``complete`` calls to its API.

Run it (from this folder):

    pyattacker run pipeline.py:evaluation --input items.jsonl --pools pipeline.py:pools \
        --key id --store eval.db
"""

from __future__ import annotations

import re
from typing import Any

from pyattacker import Pool, Resource, Retrying, TaskContext, pipeline, task

#: Seconds a fake call takes: long enough to press Ctrl-C halfway through the run.
LATENCY_S = 0.06


class RateLimited(Exception):
    """What an SDK raises on HTTP 429. pyattacker reads ``status_code`` and
    ``retry_after``: the key rests that long, and the call is retried on another one."""

    status_code = 429

    def __init__(self, key: str, retry_after: float) -> None:
        super().__init__(f"HTTP 429 Too Many Requests on {key}")
        self.retry_after = retry_after


class FakeModel:
    """A stand-in for an LLM client bound to one API key.

    It answers "What is A + B?" (wrong when A * B is a multiple of 11, so the grades
    vary), judges "Expected: X. Answer: Y." with PASS or FAIL, reports token usage like a
    real API, and refuses every 9th call with a 429 to show the retries.
    """

    def __init__(self, key: str) -> None:
        self.key = key
        self.calls = 0

    async def complete(self, prompt: str, ctx: TaskContext) -> dict[str, Any]:
        self.calls += 1
        if self.calls % 9 == 0:
            raise RateLimited(self.key, retry_after=0.2)
        await ctx.clock.sleep(LATENCY_S)
        numbers = [int(n) for n in re.findall(r"-?\d+", prompt)]
        if prompt.startswith("Expected"):
            text = "PASS" if numbers[0] == numbers[1] else "FAIL"
        else:
            a, b = numbers[:2]
            text = str(a + b + (1 if (a * b) % 11 == 0 else 0))
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split())}
        return {"text": text, "usage": usage}


def client(resource: Resource) -> FakeModel:
    """What a lease hands out (``lease.client``) for a key: one client per key."""
    return FakeModel(resource.id)


def pools() -> list[Pool]:
    """The pool the LLM steps lease from: four keys, one call in flight on each."""
    keys = [
        Resource.create("llm", id=f"key-{n}", capacity=1, factory=client, cooldown_s=1.0)
        for n in range(1, 5)
    ]
    return [Pool("llm", keys)]


async def complete(prompt: str, ctx: TaskContext) -> str:
    """One model call on a leased key; its outcome and token usage go to the pool (and
    into the run's record: ``usage`` on the attempt, ``tokens`` in the results)."""
    async with ctx.acquire() as lease:
        model = lease.client
        assert isinstance(model, FakeModel)  # what `client` builds for this pool's keys
        try:
            reply = await model.complete(prompt, ctx)
        except RateLimited as exc:
            lease.report(ok=False, error=exc)
            raise
        lease.report(ok=True, usage=reply["usage"])
        return str(reply["text"])


LLM_RETRY = Retrying(max_attempts=5, base=0.05, cap=1.0)


@task
def prepare(row: dict[str, Any]) -> dict[str, Any]:
    """Build the prompt from the input row (local: no key needed)."""
    question = str(row.get("question") or "").strip()
    if not question:
        # never retried: the same row fails the same way; the report names it by its id
        raise ValueError(f"item {row['id']} has no question")
    return {"id": row["id"], "prompt": question, "expected": str(row["expected"])}


@task("ask", resource="llm", retry=LLM_RETRY)
async def ask(item: dict[str, Any], ctx: TaskContext) -> dict[str, Any]:
    """Ask the model the question."""
    return {**item, "answer": await complete(item["prompt"], ctx)}


@task("grade", resource="llm", retry=LLM_RETRY)
async def grade(item: dict[str, Any], ctx: TaskContext) -> dict[str, Any]:
    """Have a model judge the answer against the expected one."""
    verdict = await complete(f"Expected: {item['expected']}. Answer: {item['answer']}.", ctx)
    return {"id": item["id"], "answer": item["answer"], "correct": verdict == "PASS"}


evaluation = pipeline("evaluation", prepare, ask, grade)
