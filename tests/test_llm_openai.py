"""The OpenAI wire format: URLs, auth headers, request bodies, and reading answers."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pyattacker.errors import ConfigError, ErrorClass, error_class_of, retry_after_of
from pyattacker.http import Headers
from pyattacker.llm import (
    AZURE_API_VERSION,
    Api,
    LlmErrorKind,
    LlmResponseError,
    LlmResult,
    Prompt,
    SseEvent,
    Usage,
    auth_headers,
    build_request,
    endpoint_url,
    is_azure,
)
from pyattacker.llm._parse import (
    absorb_event,
    parse_body,
    parse_event,
    recorded_headers,
    status_error,
)

# -------------------------------------------------------------------------------- URLs


@pytest.mark.parametrize(
    ("base", "api", "url"),
    [
        ("http://127.0.0.1:8000/v1", "chat", "http://127.0.0.1:8000/v1/chat/completions"),
        ("http://127.0.0.1:8000/v1/", "chat", "http://127.0.0.1:8000/v1/chat/completions"),
        ("http://127.0.0.1:8000/v1", "completions", "http://127.0.0.1:8000/v1/completions"),
        ("http://h/v1/chat/completions", "chat", "http://h/v1/chat/completions"),
        ("http://h/v1/completions", "completions", "http://h/v1/completions"),
        ("http://h:1/v1?tenant=a", "chat", "http://h:1/v1/chat/completions?tenant=a"),
        ("http://h:1", "chat", "http://h:1/chat/completions"),  # as the SDK does: no guessing
        (
            "https://r.openai.azure.com/openai/v1",
            "chat",
            "https://r.openai.azure.com/openai/v1/chat/completions",
        ),
    ],
)
def test_an_openai_compatible_base_gains_the_apis_path(base: str, api: str, url: str) -> None:
    assert str(endpoint_url(base, api)) == url


def test_an_azure_deployment_gets_its_path_and_the_default_api_version() -> None:
    url = endpoint_url("https://res.openai.azure.com", azure_deployment="gpt-4o")
    assert str(url) == (
        "https://res.openai.azure.com/openai/deployments/gpt-4o/chat/completions"
        f"?api-version={AZURE_API_VERSION}"
    )
    assert is_azure(url)


def test_an_azure_url_keeps_an_api_version_it_already_has_or_takes_the_given_one() -> None:
    full = "https://res.openai.azure.com/openai/deployments/d/completions?api-version=2024-06-01"
    assert str(endpoint_url(full, "completions")) == full
    url = endpoint_url(
        "https://res.openai.azure.com/openai/deployments/d", api_version="2025-01-01-preview"
    )
    assert url.target == "/openai/deployments/d/chat/completions?api-version=2025-01-01-preview"


def test_an_azure_resource_without_a_deployment_is_a_config_error_saying_what_to_add() -> None:
    with pytest.raises(ConfigError, match="names no deployment") as caught:
        endpoint_url("https://res.openai.azure.com/")
    assert caught.value.field == "azure_deployment"


@pytest.mark.parametrize(
    ("base", "api", "kwargs"),
    [
        ("http://h/v1/completions", "chat", {}),
        ("http://h/v1/chat/completions", "completions", {}),
        ("http://h/v1", "embeddings", {}),
        ("ftp://h/v1", "chat", {}),
        ("http://h/v1", "chat", {"azure_deployment": "a/b"}),
    ],
)
def test_a_url_that_cannot_be_the_endpoint_is_a_config_error(
    base: str, api: str, kwargs: dict[str, str]
) -> None:
    with pytest.raises(ConfigError):
        endpoint_url(base, api, **kwargs)


def test_keys_go_in_authorization_or_in_azures_api_key_header() -> None:
    assert auth_headers("k") == (("Authorization", "Bearer k"),)
    assert auth_headers("k", azure=True) == (("api-key", "k"),)
    assert not is_azure("http://127.0.0.1:8000/v1/chat/completions")


# ---------------------------------------------------------------------------- requests


def body(api: str, prompt: object, **kwargs: object) -> dict[str, object]:
    return json.loads(build_request(api, "m", prompt, **kwargs).body)  # type: ignore[arg-type,no-any-return]


def test_a_streamed_chat_request_asks_for_usage_in_a_last_chunk() -> None:
    assert body("chat", "Say hi", max_tokens=5) == {
        "model": "m",
        "messages": [{"role": "user", "content": "Say hi"}],
        "max_tokens": 5,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_a_whole_body_completions_request_has_a_prompt_and_no_stream_options() -> None:
    assert body("completions", "Once", stream=False) == {
        "model": "m",
        "prompt": "Once",
        "stream": False,
    }


def test_a_prompts_own_max_tokens_wins_over_the_default_and_extra_adds_parameters() -> None:
    sent = body("chat", Prompt(text="x", max_tokens=3), max_tokens=50, extra={"temperature": 0})
    assert (sent["max_tokens"], sent["temperature"]) == (3, 0)
    messages = [{"role": "system", "content": "Be brief"}, {"role": "user", "content": "Hi"}]
    assert body("chat", messages)["messages"] == messages


def test_without_a_model_the_body_has_no_model_field() -> None:
    assert "model" not in json.loads(build_request("chat", None, "x").body)


@pytest.mark.parametrize("name", ["model", "messages", "prompt", "stream"])
def test_extra_parameters_cannot_replace_what_the_request_is_built_from(name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        build_request("chat", "m", "x", extra={name: 1})


def test_chat_messages_cannot_go_to_the_completions_api() -> None:
    with pytest.raises(ConfigError, match="completions API"):
        build_request("completions", "m", [{"role": "user", "content": "Hi"}])


def test_a_request_that_is_not_json_serialisable_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="JSON") as caught:
        build_request("chat", "m", "x", extra={"seed": object()})
    assert caught.value.field == "extra.seed"


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, {"nested": [1.0, math.nan]}])
def test_a_parameter_with_no_json_number_is_a_config_error_naming_it_not_a_bare_nan(
    value: object,
) -> None:
    with pytest.raises(ConfigError) as caught:
        build_request("chat", "m", "x", extra={"top_p": 1.0, "temperature": value})
    assert caught.value.field == "extra.temperature"
    assert "temperature" in str(caught.value)


def test_a_prompt_with_a_lone_surrogate_is_a_config_error_naming_the_prompt() -> None:
    for api in ("chat", "completions"):
        with pytest.raises(ConfigError) as caught:
            build_request(api, "m", "half a pair: \ud800")
        assert caught.value.field == "prompt"


@given(st.text(max_size=40), st.sampled_from(["chat", "completions"]))
def test_any_prompt_text_reaches_the_body_exactly_as_it_was(text: str, api: str) -> None:
    assume(text and all(not 0xD800 <= ord(c) <= 0xDFFF for c in text))
    sent = body(api, text)
    assert (sent["messages"][0]["content"] if api == "chat" else sent["prompt"]) == text


def test_a_model_spelt_like_the_prompts_stand_in_does_not_swallow_the_prompt() -> None:
    from pyattacker.llm._openai import _TEXT_SLOT

    sent = json.loads(build_request("chat", _TEXT_SLOT, "plain words").body)
    assert sent["model"] == _TEXT_SLOT
    assert sent["messages"] == [{"role": "user", "content": "plain words"}]


# --------------------------------------------------------------------------- responses


def event(obj: object, kind: str = "message") -> SseEvent:
    return SseEvent(obj if isinstance(obj, str) else json.dumps(obj), 1.0, kind)


def chat_chunk(delta: Mapping[str, object], reason: str | None = None) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}


DEEP = "[" * 200_000 + "]" * 200_000  # past the parser's recursion limit


def test_json_nested_past_the_stack_is_a_broken_answer_not_a_crash() -> None:
    with pytest.raises(LlmResponseError) as streamed:
        parse_event(Api.CHAT, event(DEEP))
    assert streamed.value.kind is LlmErrorKind.BROKEN_STREAM
    with pytest.raises(LlmResponseError) as whole:
        parse_body(Api.CHAT, DEEP.encode())
    assert whole.value.kind is LlmErrorKind.NOT_JSON
    refused = status_error(500, DEEP.encode())
    assert "500" in str(refused)


def test_the_opening_role_chunk_with_empty_content_is_not_a_content_chunk() -> None:
    delta = parse_event(Api.CHAT, event(chat_chunk({"role": "assistant", "content": ""})))
    assert not delta.output


def test_content_reasoning_and_tool_call_arguments_are_content_chunks() -> None:
    assert parse_event(Api.CHAT, event(chat_chunk({"content": "Hi"}))).text == "Hi"
    assert parse_event(Api.CHAT, event(chat_chunk({"reasoning_content": "hmm"}))).output
    call = {"tool_calls": [{"index": 0, "function": {"arguments": '{"a"'}}]}
    assert parse_event(Api.CHAT, event(chat_chunk(call))).output
    assert parse_event(Api.COMPLETIONS, event({"choices": [{"text": "Hi"}]})).output


def test_content_given_as_a_list_of_parts_is_a_content_chunk_when_a_part_has_text() -> None:
    parts = [{"type": "text", "text": "Hel"}, {"type": "image_url"}, {"type": "text", "text": "lo"}]
    delta = parse_event(Api.CHAT, event(chat_chunk({"content": parts})))
    assert (delta.output, delta.text) == (True, "Hello")
    empty = [{"type": "text", "text": ""}, {"type": "text"}, "text", {"text": 3}]
    assert not parse_event(Api.CHAT, event(chat_chunk({"content": empty}))).output
    assert not parse_event(Api.CHAT, event(chat_chunk({"content": []}))).output
    message = {"choices": [{"message": {"content": [{"type": "text", "text": "Hi"}]}}]}
    assert parse_body(Api.CHAT, json.dumps(message).encode()).text == "Hi"


def test_a_stream_whose_content_comes_as_parts_has_a_first_token_and_token_times() -> None:
    result = LlmResult(sent=0.0)
    for at, text in [(1.0, "a"), (2.0, "b")]:
        delta = {"content": [{"type": "text", "text": text}]}
        absorb_event(Api.CHAT, result, SseEvent(json.dumps(chat_chunk(delta)), at))
    assert (result.first_token, result.token_times, result.text) == (1.0, [2.0], "ab")


def test_the_finish_reason_and_the_usage_chunk_are_read() -> None:
    assert parse_event(Api.CHAT, event(chat_chunk({}, "length"))).finish_reason == "length"
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    delta = parse_event(Api.CHAT, event({"choices": [], "usage": usage}))
    assert delta.usage == Usage(3, 2, 5)
    assert not delta.output


def test_azures_empty_choices_preamble_says_nothing() -> None:
    delta = parse_event(Api.CHAT, event({"choices": [], "prompt_filter_results": []}))
    assert delta == (False, "", None, None)


def test_an_error_object_in_a_stream_is_an_error_event_classified_by_its_code() -> None:
    error = {"error": {"message": "Rate limit reached", "type": "requests", "code": "429"}}
    with pytest.raises(LlmResponseError, match="Rate limit reached") as caught:
        parse_event(Api.CHAT, event(error))
    assert caught.value.kind is LlmErrorKind.ERROR_EVENT
    assert error_class_of(caught.value) is ErrorClass.RATE_LIMIT
    with pytest.raises(LlmResponseError) as caught:
        parse_event(Api.CHAT, event("overloaded", kind="error"))
    assert error_class_of(caught.value) is ErrorClass.UPSTREAM


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        ("{not json", LlmErrorKind.BROKEN_STREAM),
        ("[1]", LlmErrorKind.BROKEN_STREAM),
        ('{"object": "chat.completion.chunk"}', LlmErrorKind.NOT_OPENAI),
        ('{"choices": {"0": 1}}', LlmErrorKind.NOT_OPENAI),
        ('{"choices": ["text"]}', LlmErrorKind.NOT_OPENAI),
    ],
)
def test_an_event_that_is_not_an_openai_chunk_is_an_upstream_error(
    data: str, kind: LlmErrorKind
) -> None:
    with pytest.raises(LlmResponseError) as caught:
        parse_event(Api.CHAT, event(data))
    assert caught.value.kind is kind
    assert error_class_of(caught.value) is ErrorClass.UPSTREAM


def test_odd_values_inside_a_chunk_are_ignored_not_crashed_on() -> None:
    odd = {"choices": [{"delta": {"content": 7, "tool_calls": [3]}, "finish_reason": 1}]}
    assert parse_event(Api.CHAT, event({**odd, "usage": {"prompt_tokens": -1}})) == (
        False,
        "",
        None,
        None,
    )
    usage = {"prompt_tokens": 2.0, "completion_tokens": True, "total_tokens": 1.5}
    assert parse_event(Api.CHAT, event({"usage": usage})).usage == Usage(2, None, None)


def test_a_whole_chat_body_gives_its_content_finish_reason_and_usage() -> None:
    sent = {
        "choices": [{"message": {"role": "assistant", "content": "Hi!"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6},
    }
    assert parse_body(Api.CHAT, json.dumps(sent).encode()) == (True, "Hi!", "stop", Usage(4, 2, 6))


@pytest.mark.parametrize(
    ("raw", "kind", "says"),
    [
        (b"<!DOCTYPE html><html>Welcome to nginx</html>", LlmErrorKind.NOT_JSON, "<!DOCTYPE"),
        (b"", LlmErrorKind.NOT_JSON, "empty"),
        (b'"ok"', LlmErrorKind.NOT_OPENAI, "not an object"),
        (b'{"status": "ok"}', LlmErrorKind.NOT_OPENAI, "no choices"),
        (b'{"choices": []}', LlmErrorKind.NOT_OPENAI, "no choices"),
        (b'{"error": {"message": "model overloaded"}}', LlmErrorKind.ERROR_EVENT, "overloaded"),
    ],
)
def test_a_whole_body_that_is_not_an_openai_completion_says_what_it_was(
    raw: bytes, kind: LlmErrorKind, says: str
) -> None:
    with pytest.raises(LlmResponseError, match=says) as caught:
        parse_body(Api.CHAT, raw)
    assert caught.value.kind is kind
    assert "\n" not in str(caught.value)


# ------------------------------------------------------------------------ status errors

OPENAI_404 = (
    b'{"error": {"message": "The model `gpt-x` does not exist", "code": "model_not_found"}}'
)


@pytest.mark.parametrize(
    ("status", "raw", "kind", "error_class"),
    [
        (
            429,
            b'{"error": {"message": "slow down"}}',
            LlmErrorKind.RATE_LIMIT,
            ErrorClass.RATE_LIMIT,
        ),
        (401, b'{"error": {"message": "bad key"}}', LlmErrorKind.AUTH, ErrorClass.FATAL),
        (403, b"", LlmErrorKind.AUTH, ErrorClass.FATAL),
        (404, OPENAI_404, LlmErrorKind.UNKNOWN_MODEL, ErrorClass.FATAL),
        (404, b"<html>Not Found</html>", LlmErrorKind.NOT_FOUND, ErrorClass.FATAL),
        (400, b'{"detail": "max_tokens too large"}', LlmErrorKind.BAD_REQUEST, ErrorClass.FATAL),
        (500, b"Internal Server Error", LlmErrorKind.UPSTREAM, ErrorClass.UPSTREAM),
        (503, b"", LlmErrorKind.UPSTREAM, ErrorClass.UPSTREAM),
        (504, b"", LlmErrorKind.TIMEOUT, ErrorClass.TIMEOUT),
        (418, b"", LlmErrorKind.STATUS, ErrorClass.UNKNOWN),
    ],
)
def test_each_status_has_a_kind_for_reports_and_the_classifiers_error_class(
    status: int, raw: bytes, kind: LlmErrorKind, error_class: ErrorClass
) -> None:
    error = status_error(status, raw)
    assert (error.kind, error.status) == (kind, status)
    assert error_class_of(error) is error_class
    assert str(error).startswith(f"HTTP {status}: ")
    assert "\n" not in str(error)


def test_a_status_error_carries_the_servers_message_code_and_retry_after() -> None:
    error = status_error(404, OPENAI_404)
    assert "unknown model" in str(error)
    assert "gpt-x" in str(error)
    assert error.error_code == "model_not_found"
    limited = status_error(429, b"", retry_after=1.5)
    assert "retry after 1.5 s" in str(limited)
    assert retry_after_of(limited) == 1.5


def test_a_status_error_never_repeats_a_secret_the_server_echoed() -> None:
    raw = b'{"error": {"message": "Incorrect API key provided: sk-abc123456"}}'
    error = status_error(401, raw, secrets=frozenset({"sk-abc123456"}))
    assert "sk-abc123456" not in str(error)
    assert "***" in str(error)


def test_only_rate_limit_and_utilisation_headers_are_recorded() -> None:
    headers = Headers.from_pairs(
        [
            ("Content-Type", "text/event-stream"),
            ("Retry-After", "2"),
            ("retry-after-ms", "1500"),
            ("X-RateLimit-Remaining-Requests", "10"),
            ("x-ratelimit-reset-tokens", "6ms"),
            ("azure-openai-deployment-utilization", "57.3%"),
            ("x-request-id", "req-1"),
        ]
    )
    assert recorded_headers(headers) == {
        "retry-after": "2",
        "retry-after-ms": "1500",
        "x-ratelimit-remaining-requests": "10",
        "x-ratelimit-reset-tokens": "6ms",
        "azure-openai-deployment-utilization": "57.3%",
    }


# ----------------------------------------------------------------------------- results


def test_content_chunks_set_the_first_token_then_the_token_times() -> None:
    result = LlmResult(sent=0.5)
    for at, delta in [
        (1.0, {"role": "assistant"}),
        (2.0, {"content": "a"}),
        (3.0, {"content": "b"}),
    ]:
        absorb_event(Api.CHAT, result, SseEvent(json.dumps(chat_chunk(delta)), at))
    absorb_event(Api.CHAT, result, SseEvent(json.dumps(chat_chunk({"content": "c"})), 3.5))
    assert (result.first_token, result.token_times, result.content_chunks) == (2.0, [3.0, 3.5], 3)
    assert result.text == "abc"
    assert result.ttft == 1.5
    assert result.itl == [1.0, 0.5]


def test_tpot_spreads_the_time_after_the_first_token_over_the_servers_later_tokens() -> None:
    result = LlmResult(sent=0.0, first_token=1.0, end=3.0, usage=Usage(10, 5, 15))
    assert result.tpot == 0.5
    assert result.e2e == 3.0
    assert LlmResult(sent=0.0, first_token=1.0, end=3.0, usage=Usage(10, 1, 11)).tpot is None
    assert LlmResult(sent=0.0, first_token=1.0, end=3.0).tpot is None  # no chunk counted
    # Without the server's count, the chunks counted stand in (as in the attack's figures).
    assert LlmResult(sent=0.0, first_token=1.0, end=3.0, content_chunks=3).tpot == 1.0
    assert LlmResult().itl == []
    assert LlmResult().ttft is None
