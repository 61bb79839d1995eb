"""The LLM report's populations and spans against the mock server's ground truth: what
it saw (attempts that were sent, refusals) is what the report and its time series say.

The server runs on the test's loop (see ``test_llm_attack.py``); no figure here depends
on timing, only on counts the server keeps.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pyattacker.attack import AttackPlan, AttackResult, LlmSpec, OpenModel, attack
from pyattacker.attack._tally import ErrorGroup
from pyattacker.llm import SyntheticPrompts
from pyattacker.servers import LlmServer

# Three completions generate at once; a fourth is refused with 429 (Retry-After: 1 s).
THROTTLING: dict[str, Any] = {
    "models": "m",
    "ttft": "fixed:20ms",
    "itl": "fixed:2ms",
    "output_tokens": "fixed:5",
    "capacity": 3,
    "overflow": "refuse",
}


def _plan(
    url: str, load: OpenModel, *, requests: int = 12, stream: bool = True, **options: Any
) -> AttackPlan:
    return AttackPlan.build(
        [url + "/v1"],
        load,
        requests=requests,
        llm=LlmSpec("m", SyntheticPrompts(context_tokens=8, max_tokens=16), stream=stream),
        window=0.25,
        **options,
    )


def _attack(server_options: dict[str, Any], plan_of: Any) -> tuple[AttackResult, Any]:
    async def main() -> tuple[AttackResult, Any]:
        async with LlmServer(**server_options) as server:
            result = await attack(plan_of(server.url))
            return result, server.stats()

    return asyncio.run(main())


def test_retried_refusals_show_in_the_windows_as_the_attempts_the_server_refused() -> None:
    retry = {"max_attempts": 8, "base": 0.01, "cap": 0.05}
    result, truth = _attack(THROTTLING, lambda url: _plan(url, OpenModel(rate=200), retry=retry))
    llm = result.to_dict()["llm"]
    assert truth["throttled"] == result.total.throttled_attempts > 0
    assert sum(w["throttled_attempts"] for w in llm["windows"]) == truth["throttled"]
    # Every request ended OK, so the requests' throttled column would have said 0.
    assert all(w.throttled == 0 for w in result.windows)
    ok_streams = llm["ok_streams"]
    assert ok_streams == truth["outcomes"]["ok"] == 12
    assert sum(w["e2e_scheduled_s"]["count"] for w in llm["windows"]) == ok_streams
    assert llm["per_minute"]["answer_span_s"] == result.answer_span_s >= result.elapsed
    assert llm["sent_attempts"] == truth["requests"] == result.total.attempts


def test_dropped_requests_are_attempts_the_server_never_saw() -> None:
    slow = {**THROTTLING, "capacity": None, "ttft": "fixed:200ms"}
    result, truth = _attack(
        slow, lambda url: _plan(url, OpenModel(rate=200, max_in_flight=2), requests=10)
    )
    total = result.total
    dropped = total.by_outcome["dropped"]
    assert dropped > 0
    assert total.attempts == total.requests == 10
    assert total.sent_attempts == truth["requests"] == 10 - dropped
    message = "dropped: --max-in-flight requests were already in progress"
    assert result.errors == [ErrorGroup(message, dropped, message)]


def test_streams_cut_mid_token_give_ttfts_and_no_window_end_to_end() -> None:
    cut = [("x-mock-fault", "cut-mid-token:2")]
    options = {**THROTTLING, "capacity": None}
    result, truth = _attack(
        options, lambda url: _plan(url, OpenModel(rate=50), requests=3, headers=cut)
    )
    assert truth["requests"] == 3
    assert result.total.failed_after_first_token == 3
    assert result.total.ttft.count == 3
    assert result.total.e2e.count == result.total.itl.count == 0
    windows = result.to_dict()["llm"]["windows"]
    assert sum(w["ttft_sent_s"]["count"] for w in windows) == 3
    assert sum(w["e2e_scheduled_s"]["count"] for w in windows) == 0


def test_a_whole_body_run_has_an_end_to_end_for_every_answer_the_server_served() -> None:
    options = {**THROTTLING, "capacity": None}
    result, truth = _attack(
        options, lambda url: _plan(url, OpenModel(rate=50), requests=6, stream=False)
    )
    llm = result.to_dict()["llm"]
    assert truth["outcomes"]["ok"] == 6
    assert (llm["streamed_requests"], llm["ok_answers"]) == (0, 6)
    assert llm["e2e_s"]["sent"]["count"] == llm["e2e_s"]["scheduled"]["count"] == 6
    assert sum(w["e2e_scheduled_s"]["count"] for w in llm["windows"]) == 6
    # Every request succeeded: no more answered OK per minute than were sent.
    assert llm["per_minute"]["sent"] >= llm["per_minute"]["ok_requests"]
