"""LLM attacks against the throttling mock server: retry honesty (no retry hidden from the
count, even behind 429s), figures that agree with the server's ground truth, and the plan's
LLM wiring.

The server runs on the test's own loop, so its clock is ours: a request's ``sent`` and
``first_token`` bracket the server's ``received`` and first token write exactly, with no
tolerance to tune.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pyattacker.attack import AttackPlan, ClosedModel, LlmSpec, OpenModel, attack
from pyattacker.errors import ConfigError
from pyattacker.http import Limits
from pyattacker.llm import SyntheticPrompts
from pyattacker.measure import Outcome, RequestRecord
from pyattacker.servers import LlmServer

# Three completions generate at once; a fourth is refused with 429 (Retry-After: 1 s).
# Every completion takes 20 ms to its first token, then 5 tokens 2 ms apart.
THROTTLING: dict[str, Any] = {
    "models": "m",
    "ttft": "fixed:20ms",
    "itl": "fixed:2ms",
    "output_tokens": "fixed:5",
    "capacity": 3,
    "overflow": "refuse",
}


def _plan(url: str, *, retry: object, requests: int = 12, **options: Any) -> AttackPlan:
    return AttackPlan.build(
        [url + "/v1"],
        options.pop("load", OpenModel(rate=200)),
        requests=requests,
        retry=retry,  # type: ignore[arg-type]
        llm=LlmSpec("m", SyntheticPrompts(context_tokens=8, max_tokens=16)),
        **options,
    )


async def _attack(server_options: dict[str, Any], plan_of: Any) -> tuple[Any, ...]:
    records: list[RequestRecord] = []
    async with LlmServer(**server_options) as server:
        result = await attack(plan_of(server.url), on_record=records.append)
        truth = server.stats(samples=True)
    return result, records, truth


def test_retry_none_sends_one_attempt_per_request_and_the_server_counts_the_same() -> None:
    result, _, truth = asyncio.run(_attack(THROTTLING, lambda url: _plan(url, retry="none")))
    total = result.total
    assert truth["requests"] == total.attempts == total.requests == 12
    assert total.attempts_per_request == {1: 12}
    assert total.throttled_requests == total.throttled_attempts == truth["throttled"] > 0
    assert total.by_outcome[Outcome.OK.value] == truth["outcomes"]["ok"] > 0
    assert result.decisions == {"attempts_exhausted": truth["throttled"]}
    # every 429 said how long to wait, and the report keeps those waits
    waits = result.to_dict()["llm"]["retry_after_s"]
    assert waits["count"] == truth["throttled"]
    assert waits["min"] > 0


def test_retry_none_served_requests_time_exactly_the_one_exchange_the_server_saw() -> None:
    result, records, truth = asyncio.run(_attack(THROTTLING, lambda url: _plan(url, retry="none")))
    by_id = {sample["id"]: sample for sample in truth["samples"]}
    served = [r for r in records if r.outcome is Outcome.OK]
    assert served
    for record in served:
        (attempt,) = record.attempts
        assert attempt.headers is not None
        sample = by_id[attempt.headers["x-request-id"]]
        # Our clock brackets the server's: sent before it received, first token read
        # after it was written, end after it ended. Nothing else happened in between.
        sent, first_token, end = attempt.sent, attempt.first_token, attempt.end
        assert sent is not None
        assert first_token is not None
        assert end is not None
        assert sent <= sample["received"]
        assert sample["first_token"] <= first_token
        assert sample["end"] <= end
        assert first_token - sent >= sample["ttft"]
        # A hidden retry would have waited out a Retry-After of a second first.
        assert first_token - attempt.scheduled < 1.0
        assert attempt.usage == {"prompt_tokens": 8, "completion_tokens": 5, "total_tokens": 13}
    assert result.total.ttft.count == len(served) == truth["ttft"]["count"]


def test_retry_exponential_records_every_attempt_and_latency_spans_them_all() -> None:
    retry = {"max_attempts": 8, "base": 0.01, "cap": 0.05}
    result, records, truth = asyncio.run(_attack(THROTTLING, lambda url: _plan(url, retry=retry)))
    total = result.total
    assert total.by_outcome[Outcome.OK.value] == total.requests == 12
    assert truth["requests"] == total.attempts > total.requests
    assert truth["throttled"] == total.throttled_attempts > 0
    assert 0 < total.throttled_requests < total.requests  # requests that met a 429, not attempts
    assert sum(n * k for n, k in total.attempts_per_request.items()) == total.attempts
    retried = [r for r in records if len(r.attempts) > 1]
    assert retried
    for record in retried:
        first, last = record.attempts[0], record.attempts[-1]
        assert record.latency == pytest.approx(last.end - first.scheduled)
        # Every retry waited out the server's Retry-After (a second) inside the request.
        assert record.latency >= len(record.attempts) - 1
        assert [a.outcome for a in record.attempts[:-1]] == [Outcome.THROTTLED] * (
            len(record.attempts) - 1
        )


def test_llm_attack_reports_the_tokens_the_server_counted() -> None:
    options = {**THROTTLING, "capacity": None}
    result, _, truth = asyncio.run(
        _attack(options, lambda url: _plan(url, retry="none", load=ClosedModel(2)))
    )
    total = result.total
    assert truth["outcomes"] == {"ok": 12}
    assert total.prompt_tokens == truth["prompt_tokens"] == 12 * 8
    assert total.completion_tokens == truth["completion_tokens"] == 12 * 5
    assert total.itl.count == truth["itl"]["count"] == 12 * 4


def test_an_llm_plan_points_base_urls_at_the_api_and_posts() -> None:
    spec = LlmSpec("m", SyntheticPrompts(context_tokens=4, max_tokens=4))
    plan = AttackPlan.build(
        ["http://127.0.0.1:9/v1"], OpenModel(rate=1), requests=1, llm=spec, keys=("sk-1",)
    )
    assert [str(url) for url in plan.targets] == ["http://127.0.0.1:9/v1/chat/completions"]
    assert plan.method == "POST"
    assert plan.headers == (("Authorization", "Bearer {key}"),)
    assert "sk-1" not in repr(plan)


def test_an_azure_llm_plan_carries_the_key_in_api_key() -> None:
    spec = LlmSpec(None, SyntheticPrompts(4, 4), azure_deployment="gpt")
    plan = AttackPlan.build(
        ["https://acme.openai.azure.com"], OpenModel(rate=1), requests=1, llm=spec, keys=("k",)
    )
    (url,) = plan.targets
    assert url.target.startswith("/openai/deployments/gpt/chat/completions?api-version=")
    assert plan.headers == (("api-key", "{key}"),)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"body": b"{}"}, "body"),
        ({"method": "PUT"}, "method"),
    ],
)
def test_an_llm_plan_refuses_what_it_would_ignore(options: dict[str, Any], field: str) -> None:
    spec = LlmSpec("m", SyntheticPrompts(4, 4))
    with pytest.raises(ConfigError) as caught:
        AttackPlan.build(
            ["http://127.0.0.1:9/v1"], OpenModel(rate=1), requests=1, llm=spec, **options
        )
    assert caught.value.field == field


def test_an_llm_plan_without_a_model_is_refused_unless_azure_names_the_deployment() -> None:
    with pytest.raises(ConfigError) as caught:
        AttackPlan.build(
            ["http://127.0.0.1:9/v1"],
            OpenModel(rate=1),
            requests=1,
            llm=LlmSpec(None, SyntheticPrompts(4, 4)),
        )
    assert caught.value.field == "llm.model"


def test_progress_of_an_llm_attack_carries_ttft_and_tokens_so_far() -> None:
    seen: list[Any] = []

    async def main() -> None:
        async with LlmServer(**{**THROTTLING, "capacity": None}) as server:
            plan = _plan(server.url, retry="none", load=ClosedModel(2), requests=30)
            await attack(plan, on_progress=seen.append, progress_every=0.02)

    asyncio.run(main())
    assert seen
    done = [p for p in seen if p.completion_tokens]
    assert done
    # TTFT is 20 ms at least; a histogram percentile may read up to 1/2048 low
    assert all(p.ttft_p50 is not None and p.ttft_p50 >= 0.02 * (1 - 2**-11) for p in done)
    assert [p.completion_tokens for p in seen] == sorted(p.completion_tokens for p in seen)


def test_a_targets_repr_never_shows_the_key_in_its_headers() -> None:
    spec = LlmSpec("m", SyntheticPrompts(4, 4))
    plan = AttackPlan.build(
        ["http://127.0.0.1:9/v1"], OpenModel(rate=1), requests=1, llm=spec, keys=("sk-secret",)
    )
    (target,) = plan.resolved_targets()
    assert ("Authorization", "Bearer sk-secret") in target.headers
    assert "sk-secret" not in repr(target)
    assert "sk-secret" not in str(target)


def test_an_llm_attack_keeps_whole_answers_to_parse_whatever_keep_body_says() -> None:
    async def main() -> Any:
        async with LlmServer(models="m", ttft="fixed:1ms", itl="fixed:1ms") as server:
            spec = LlmSpec("m", SyntheticPrompts(context_tokens=8, max_tokens=16), stream=False)
            plan = AttackPlan.build([server.url + "/v1"], OpenModel(rate=200), requests=5, llm=spec)
            return await attack(plan, limits=Limits(keep_body=0))

    result = asyncio.run(main())
    assert result.total.by_outcome == {"ok": 5}
