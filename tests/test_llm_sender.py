"""``LlmSender``: one attempt is one LLM request, and the Attempt says what it measured."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from http_helpers import run
from llm_helpers import (
    KEY,
    TOKENS,
    USAGE,
    RecordingHttp,
    canned,
    chat_events,
    stream_response,
    whole,
)
from pyattacker.attack import AttackPlan, ClosedModel, Target, attack
from pyattacker.errors import ConfigError, ErrorClass, error_class_of, retry_after_of
from pyattacker.http import URL, HttpClient
from pyattacker.llm import (
    JsonlPrompts,
    LlmClient,
    LlmSender,
    LlmStatusError,
    Prompt,
    SyntheticPrompts,
    auth_headers,
    endpoint_url,
)
from pyattacker.measure import Attempt, Outcome, RequestRecord

PROMPTS = SyntheticPrompts(context_tokens=12, max_tokens=4, seed=7)


class CountingPrompts:
    """``PROMPTS``, counting how often each ordinal's prompt is asked for."""

    def __init__(self) -> None:
        self.asked: Counter[int] = Counter()

    def prompt(self, n: int) -> Prompt:
        self.asked[n] += 1
        return PROMPTS.prompt(n)


async def send_one(
    pieces: list[bytes], attempt: Attempt
) -> tuple[BaseException | None, list[dict[str, object]]]:
    async with canned(pieces) as server, HttpClient() as http:
        sender = LlmSender(LlmClient(http), PROMPTS, model="m")
        url = endpoint_url(f"{server.url}v1")
        target = Target(str(url), url, auth_headers(KEY))
        error = None
        try:
            await sender.send(target, attempt)
        except Exception as exc:
            error = exc
        return error, [json.loads(r.body) for r in server.requests]


def test_a_streamed_attempt_is_filled_with_every_timestamp_usage_and_headers() -> None:
    headers = [("Content-Type", "text/event-stream"), ("x-ratelimit-remaining-tokens", "900")]
    attempt = Attempt(request=3, attempt=1, scheduled=0.0)
    error, bodies = run(lambda: send_one(stream_response(chat_events(), headers), attempt))
    assert error is None
    assert attempt.status == 200
    assert attempt.sent is not None
    assert attempt.first_byte is not None
    assert attempt.first_token is not None
    assert attempt.end is not None
    assert attempt.sent <= attempt.first_byte <= attempt.first_token <= attempt.end
    assert attempt.token_times is not None
    assert len(attempt.token_times) == len(TOKENS) - 1
    assert all(attempt.first_token <= t <= attempt.end for t in attempt.token_times)
    assert attempt.usage == {k: float(v) for k, v in USAGE.items()}
    assert attempt.headers == {"x-ratelimit-remaining-tokens": "900"}
    assert attempt.bytes_sent > 0
    assert attempt.bytes_received > 0
    assert attempt.ttft is not None
    assert attempt.ttft >= 0
    (body,) = bodies
    assert body["messages"] == [{"role": "user", "content": PROMPTS.prompt(3).text}]
    assert body["max_tokens"] == 4
    row = attempt.to_dict()
    assert row["headers"] == {"x-ratelimit-remaining-tokens": "900"}
    assert json.loads(json.dumps(row)) == row


def test_a_throttled_attempt_is_filled_then_raised_for_the_engine_to_classify() -> None:
    attempt = Attempt(request=0, attempt=1, scheduled=0.0)
    pieces = [whole(429, b'{"error": {"message": "slow down"}}', [("Retry-After", "2")])]
    error, _ = run(lambda: send_one(pieces, attempt))
    assert isinstance(error, LlmStatusError)
    assert error_class_of(error) is ErrorClass.RATE_LIMIT
    assert retry_after_of(error) == 2.0
    assert (attempt.status, attempt.retry_after, attempt.headers) == (
        429,
        2.0,
        {"retry-after": "2"},
    )
    assert attempt.first_token is None
    assert attempt.sent is not None
    assert attempt.end is not None


def test_a_whole_body_attempt_has_no_token_times() -> None:
    async def main() -> Attempt:
        answer = {
            "choices": [{"message": {"content": "Hi"}, "finish_reason": "stop"}],
            "usage": USAGE,
        }
        async with canned(whole(200, json.dumps(answer).encode())) as server, HttpClient() as http:
            sender = LlmSender(LlmClient(http), PROMPTS, model="m", stream=False)
            url = URL.parse(f"{server.url}v1/chat/completions")
            attempt = Attempt(request=0, attempt=1, scheduled=0.0)
            await sender.send(Target("t", url, ()), attempt)
            return attempt

    attempt = run(main)
    assert attempt.token_times is None
    assert attempt.first_token is None
    assert attempt.usage is not None
    assert attempt.usage["completion_tokens"] == USAGE["completion_tokens"]


def test_every_attempt_of_a_request_sends_that_requests_prompt() -> None:
    sender = LlmSender(LlmClient(HttpClient()), PROMPTS, model="m")
    assert sender.request(5).body == sender.request(5).body
    assert sender.request(5).body != sender.request(6).body


def test_a_retried_request_sends_the_same_body_and_each_attempt_is_recorded() -> None:
    throttle = whole(429, b'{"error": {"message": "busy"}}', [("Retry-After", "0")])

    async def main() -> tuple[list[RequestRecord], list[bytes]]:
        records: list[RequestRecord] = []
        async with canned(throttle) as server, HttpClient() as http:
            url = endpoint_url(f"{server.url}v1")
            plan = AttackPlan.build(
                [url],
                ClosedModel(clients=1),
                requests=2,
                method="POST",
                headers=auth_headers("{key}"),
                keys=(KEY,),
                retry={"max_attempts": 3, "base": 0.0},
            )
            sender = LlmSender(LlmClient(http), PROMPTS, model="m")
            await attack(plan, sender=sender, on_record=records.append)
            return records, [r.body for r in server.requests]

    records, bodies = run(main)
    assert [r.n_attempts for r in records] == [3, 3]
    assert len(bodies) == 6  # the server saw every attempt, and no more
    by_request = {r.request: r for r in records}
    for n, record in by_request.items():
        assert all(a.outcome is Outcome.THROTTLED and a.status == 429 for a in record.attempts)
        assert all(a.headers == {"retry-after": "0"} for a in record.attempts)
        expected = LlmSender(LlmClient(HttpClient()), PROMPTS, model="m").request(n).body
        assert bodies.count(expected) == 3


def test_a_retry_sends_the_body_of_its_first_attempt_without_building_it_again() -> None:
    throttle = whole(429, b'{"error": {"message": "busy"}}', [("Retry-After", "0")])
    prompts = CountingPrompts()

    async def main() -> list[bytes]:
        async with canned(throttle) as server, HttpClient() as http:
            plan = AttackPlan.build(
                [endpoint_url(f"{server.url}v1")],
                ClosedModel(clients=2),
                requests=3,
                method="POST",
                retry={"max_attempts": 3, "base": 0.0},
            )
            sender = LlmSender(LlmClient(http), prompts, model="m")
            await attack(plan, sender=sender)
            return [r.body for r in server.requests]

    bodies = run(main)
    assert len(bodies) == 9
    assert prompts.asked == {0: 1, 1: 1, 2: 1}  # request 0's was built by the constructor
    assert len(set(bodies)) == 3


def test_a_body_built_long_ago_is_built_again_and_is_the_same() -> None:
    prompts = CountingPrompts()
    sender = LlmSender(LlmClient(HttpClient()), prompts, model="m")
    first = sender.request(0)
    for n in range(1, 500):
        sender.request(n)
    assert sender.request(499) is sender.request(499)
    again = sender.request(0)
    assert prompts.asked[0] == 2
    assert prompts.asked[499] == 1
    assert again.body == first.body


def test_an_attempts_first_token_and_token_times_are_the_http_layers_arrival_stamps() -> None:
    async def main() -> tuple[Attempt, list[float]]:
        attempt = Attempt(request=0, attempt=1, scheduled=0.0)
        pieces = stream_response(chat_events(), sizes=(9, 30))
        async with canned(pieces) as server, RecordingHttp() as http:
            url = endpoint_url(f"{server.url}v1")
            sender = LlmSender(LlmClient(http), PROMPTS, model="m")
            await sender.send(Target(str(url), url, ()), attempt)
        (timing,) = http.timings
        return attempt, timing.chunk_times

    attempt, arrivals = run(main)
    assert attempt.token_times is not None
    stamps = [attempt.first_token, *attempt.token_times]
    assert len(stamps) == len(TOKENS)
    assert all(stamp in arrivals for stamp in stamps), (stamps, arrivals)


def test_an_llm_attack_records_ttft_token_times_and_usage_per_attempt() -> None:
    async def main() -> list[RequestRecord]:
        records: list[RequestRecord] = []
        async with canned(stream_response(chat_events())) as server, HttpClient() as http:
            plan = AttackPlan.build(
                [endpoint_url(f"{server.url}v1")], ClosedModel(clients=2), requests=4, method="POST"
            )
            await attack(
                plan,
                sender=LlmSender(LlmClient(http), PROMPTS, model="m"),
                on_record=records.append,
            )
        return records

    records = run(main)
    assert len(records) == 4
    for record in records:
        (attempt,) = record.attempts
        assert attempt.outcome is Outcome.OK
        assert attempt.error is None
        assert attempt.first_token is not None
        assert attempt.ttft is not None
        assert attempt.ttft >= 0
        assert attempt.token_times is not None
        assert len(attempt.token_times) == len(TOKENS) - 1
        assert attempt.usage == {k: float(v) for k, v in USAGE.items()}


def test_chat_prompts_with_the_completions_api_are_refused_before_any_traffic(
    tmp_path: Path,
) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "fine"}\n{"messages": [{"role": "user", "content": "x"}]}\n')
    with pytest.raises(ConfigError, match="completions API"):
        LlmSender(LlmClient(HttpClient()), JsonlPrompts(path), model="m", api="completions")
    with pytest.raises(ConfigError, match="unknown API"):
        LlmSender(LlmClient(HttpClient()), PROMPTS, model="m", api="embeddings")


def test_the_senders_repr_names_its_setup_and_no_key() -> None:
    sender = LlmSender(LlmClient(HttpClient()), PROMPTS, model="m", extra={"user": KEY})
    assert repr(sender) == (
        "<LlmSender chat stream model='m' prompts=SyntheticPrompts(context_tokens=12, "
        "max_tokens=4, seed=7)>"
    )
