"""The mock LLM server over real HTTP on loopback: OpenAI's shapes, routes, errors, faults,
connections.

Servers listen on 127.0.0.1 with a port the OS picks and are stopped by each test. No
assertion bounds a duration from above (see ``test_llm_server_truth.py`` for the truth).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit

import pytest

from llm_server_helpers import (
    CHAT,
    COMPLETIONS,
    chat,
    connect,
    exchange,
    pinned,
    post,
    read_reply,
    request,
    run,
    serve,
    until,
)
from pyattacker.servers import LlmServer
from pyattacker.servers._llm_wire import VOCABULARY

# -- the wire: OpenAI's shapes ---------------------------------------------------------------


def test_a_stream_sends_the_role_then_one_word_per_event_then_finish_usage_and_done() -> None:
    async def main(server: LlmServer) -> None:
        body = chat("one two three", stream=True, stream_options={"include_usage": True})
        reply = await post(server.url, CHAT, body, x_mock_tokens="5", **pinned())
        assert reply.status == 200
        assert reply.headers["transfer-encoding"] == "chunked"
        assert reply.headers["content-type"].startswith("text/event-stream")
        assert reply.headers["connection"] == "keep-alive"
        events = reply.events()
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in events[:-1]]
        assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
        assert len({c["id"] for c in chunks}) == 1
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        words = [c["choices"][0]["delta"]["content"] for c in chunks[1:6]]
        assert all(w.encode() in VOCABULARY and len(w.split()) == 1 for w in words)
        assert chunks[6]["choices"][0] == {
            "index": 0,
            "delta": {},
            "logprobs": None,
            "finish_reason": "stop",
        }
        assert chunks[7]["choices"] == []
        usage = {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
        assert chunks[7]["usage"] == usage
        assert all(c["usage"] is None for c in chunks[:7])
        assert reply.headers["x-request-id"].endswith(chunks[0]["id"].split("-")[1][-8:])

    serve(main)


def test_a_stream_without_include_usage_has_no_usage_field_and_no_usage_chunk() -> None:
    async def main(server: LlmServer) -> None:
        reply = await post(server.url, CHAT, chat("hi", stream=True), x_mock_tokens="2", **pinned())
        chunks = reply.chunks_of_events()
        assert len(chunks) == 4  # role, two words, finish
        assert all("usage" not in c for c in chunks)

    serve(main)


def test_a_non_streamed_chat_completion_is_one_json_body_shaped_like_openai() -> None:
    async def main(server: LlmServer) -> None:
        reply = await post(server.url, CHAT, chat("a b", "c"), x_mock_tokens="7", **pinned())
        assert reply.headers["content-type"] == "application/json"
        body = reply.json()
        assert body["object"] == "chat.completion"
        assert body["id"].startswith("chatcmpl-")
        assert body["model"] == "m"
        assert isinstance(body["created"], int)
        message = body["choices"][0]["message"]
        assert message["role"] == "assistant"
        assert len(message["content"].split()) == 7
        assert body["choices"][0]["finish_reason"] == "stop"
        assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 7, "total_tokens": 10}

    serve(main)


def test_legacy_completions_stream_text_events_and_answer_text_completion_bodies() -> None:
    async def main(server: LlmServer) -> None:
        body = {"model": "m", "prompt": "say   it\nnow", "stream": True, "max_tokens": 3}
        streamed = await post(server.url, COMPLETIONS, body, x_mock_tokens="9", **pinned())
        chunks = streamed.chunks_of_events()
        assert {c["object"] for c in chunks} == {"text_completion"}
        assert [len(c["choices"][0]["text"].split()) for c in chunks] == [1, 1, 1, 0]
        assert chunks[-1]["choices"][0]["finish_reason"] == "length"
        whole = await post(
            server.url, COMPLETIONS, {"model": "m", "prompt": ["a b", "c"]}, **pinned()
        )
        assert whole.json()["object"] == "text_completion"
        assert whole.json()["usage"]["prompt_tokens"] == 3

    serve(main, output_tokens=4)


@pytest.mark.parametrize(
    ("path", "body", "prompt_tokens"),
    [
        (CHAT, chat("  one\ttwo\n\nthree  ", "four"), 4),
        (CHAT, {"model": "m", "messages": [{"role": "system", "content": "be brief"}]}, 2),
        (
            CHAT,
            {
                "model": "m",
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "a b c"}]},
                    {"role": "assistant", "content": None},
                ],
            },
            3,
        ),
        (COMPLETIONS, {"model": "m", "prompt": "w " * 50}, 50),
        (COMPLETIONS, {"model": "m", "prompt": ["x y", "z"]}, 3),
        (COMPLETIONS, {"model": "m", "prompt": [101, 102, 103, 104]}, 4),
        (COMPLETIONS, {"model": "m", "prompt": ""}, 0),
    ],
)
def test_prompt_tokens_are_the_whitespace_separated_words_of_the_prompt(
    path: str, body: dict[str, Any], prompt_tokens: int
) -> None:
    async def main(server: LlmServer) -> None:
        reply = await post(server.url, path, body, **pinned())
        assert reply.json()["usage"]["prompt_tokens"] == prompt_tokens
        assert server.stats(samples=True)["samples"][0]["prompt_tokens"] == prompt_tokens

    serve(main, output_tokens=1)


@pytest.mark.parametrize(
    ("extra", "length", "tokens", "finish"),
    [
        ({}, None, 10, "stop"),
        ({"max_tokens": 4}, None, 4, "length"),
        ({"max_completion_tokens": 3, "max_tokens": 8}, None, 3, "length"),
        ({"max_tokens": 10}, None, 10, "stop"),
        ({"max_tokens": 4}, "3", 3, "stop"),
        ({"max_tokens": 4}, "30", 4, "length"),
    ],
)
def test_max_tokens_cuts_the_completion_and_finish_reason_says_which_won(
    extra: dict[str, int], length: str | None, tokens: int, finish: str
) -> None:
    async def main(server: LlmServer) -> None:
        headers = pinned() | ({"x_mock_tokens": length} if length else {})
        body = await post(server.url, CHAT, chat("hi", **extra), **headers)
        assert body.json()["usage"]["completion_tokens"] == tokens
        assert body.json()["choices"][0]["finish_reason"] == finish

    serve(main, output_tokens="fixed:10")


def test_output_tokens_max_runs_every_request_to_its_max_tokens() -> None:
    async def main(server: LlmServer) -> None:
        for limit in (1, 5, 12):
            reply = await post(server.url, CHAT, chat("hi", max_tokens=limit), **pinned())
            assert reply.json()["usage"]["completion_tokens"] == limit
            assert reply.json()["choices"][0]["finish_reason"] == "length"

    serve(main, output_tokens="max")


def test_a_seed_fixes_every_requests_drawn_length_and_another_seed_changes_them() -> None:
    def lengths(seed: int) -> list[int]:
        async def main(server: LlmServer) -> list[int]:
            replies = [await post(server.url, CHAT, chat("hi"), **pinned()) for _ in range(8)]
            return [r.json()["usage"]["completion_tokens"] for r in replies]

        return serve(main, seed=seed, output_tokens="uniform:min=1,max=1000")

    assert lengths(3) == lengths(3)
    assert lengths(3) != lengths(4)


def test_models_are_listed_and_looked_up_by_name() -> None:
    async def main(server: LlmServer) -> None:
        listed, one, missing = await exchange(
            server.url,
            request("/v1/models", method="GET"),
            request("/v1/models/b", method="GET"),
            request("/v1/models/zzz", method="GET"),
        )
        assert [m["id"] for m in listed.json()["data"]] == ["a", "b"]
        assert listed.json()["object"] == "list"
        assert one.json()["id"] == "b"
        assert (missing.status, missing.json()["error"]["code"]) == (404, "model_not_found")
        assert server.stats()["requests"] == 0  # model lookups are not completions

    serve(main, models=["a", "b"])


def test_azure_deployment_paths_serve_the_deployment_as_the_model() -> None:
    async def main(server: LlmServer) -> None:
        path = "/openai/deployments/gpt-4o/chat/completions?api-version=2024-06-01"
        body = {"messages": [{"role": "user", "content": "x y"}], "stream": True}
        streamed = await post(server.url, path, body, api_key="k1", **pinned())
        assert streamed.status == 200
        assert streamed.chunks_of_events()[0]["model"] == "gpt-4o"
        path = "/openai/deployments/gpt-4o/completions?api-version=2024-06-01"
        whole = await post(server.url, path, {"prompt": "p", "model": "ignored"}, api_key="k1")
        assert whole.json()["model"] == "gpt-4o"
        unknown = "/openai/deployments/nope/chat/completions?api-version=1"
        missing = await post(server.url, unknown, body, api_key="k1")
        assert missing.json()["error"]["code"] == "model_not_found"
        v1 = await post(server.url, "/openai/v1/chat/completions", chat_for("gpt-4o"), api_key="k1")
        assert (v1.status, v1.json()["model"]) == (200, "gpt-4o")
        empty = "/openai/deployments//chat/completions?api-version=1"
        nameless = await post(server.url, empty, chat_for("gpt-4o"), api_key="k1")
        assert nameless.status == 404
        assert server.stats()["received"] == 4  # the nameless one is no completion request

    serve(main, models=["gpt-4o"], api_keys=["k1"], ttft="0", itl="0", output_tokens=2)


def chat_for(model: str) -> dict[str, Any]:
    return {**chat("x"), "model": model}


# -- limits on what one request may ask ----------------------------------------------------------


def test_asking_for_more_than_max_output_tokens_is_a_400_like_openai() -> None:
    async def main(server: LlmServer) -> None:
        too_many = await post(server.url, CHAT, chat("x", max_tokens=101))
        error = too_many.json()["error"]
        assert (too_many.status, error["param"], error["code"]) == (
            400,
            "max_tokens",
            "invalid_value",
        )
        assert "at most 100 completion tokens" in error["message"]
        newer = await post(server.url, CHAT, chat("x", max_completion_tokens=500))
        assert newer.json()["error"]["param"] == "max_completion_tokens"
        pinned_length = await post(server.url, CHAT, chat("x"), x_mock_tokens="101")
        assert pinned_length.status == 400
        assert "x-mock-tokens" in pinned_length.json()["error"]["message"]
        at_limit = await post(server.url, CHAT, chat("x", max_tokens=100), **pinned())
        assert at_limit.json()["usage"]["completion_tokens"] <= 100

    serve(main, max_output_tokens=100, output_tokens="lognormal:median=50,sigma=0.1")


def test_a_drawn_length_is_cut_to_max_output_tokens() -> None:
    async def main(server: LlmServer) -> None:
        replies = await exchange(server.url, *[request(CHAT, chat("x")) for _ in range(20)])
        lengths = [r.json()["usage"]["completion_tokens"] for r in replies]
        assert max(lengths) == 30
        assert all(
            r.json()["choices"][0]["finish_reason"] == "length"
            for r, n in zip(replies, lengths, strict=True)
            if n == 30
        )

    serve(
        main, max_output_tokens=30, output_tokens="lognormal:median=30,sigma=3", ttft="0", itl="0"
    )


def test_a_non_streamed_answer_waits_the_ttft_and_every_fixed_gap() -> None:
    async def main(server: LlmServer) -> None:
        reply = await post(server.url, CHAT, chat("x"), x_mock_tokens="1001")
        assert reply.json()["usage"]["completion_tokens"] == 1001
        (sample,) = server.stats(samples=True)["samples"]
        assert sample["end"] - sample["started"] >= 0.001 + 1000 * 0.0001

    serve(main, ttft="fixed:1ms", itl="fixed:100us")


def test_a_long_non_streamed_answer_draws_its_gaps_a_slice_at_a_time_and_waits_them_all() -> None:
    async def main(server: LlmServer) -> None:
        reply = await post(server.url, CHAT, chat("x"), x_mock_tokens="10001")
        assert reply.json()["usage"]["completion_tokens"] == 10001
        (sample,) = server.stats(samples=True)["samples"]
        assert sample["end"] - sample["started"] >= 10_000 * 0.000001

    serve(main, ttft="0", itl="uniform:min=1us,max=2us")


@pytest.mark.parametrize("header", ["x-mock-ttft", "x-mock-itl"])
def test_a_pinned_wait_longer_than_an_hour_is_a_400(header: str) -> None:
    async def main(server: LlmServer) -> None:
        reply = await post(server.url, CHAT, chat("x"), **{header.replace("-", "_"): "1e20s"})
        assert reply.status == 400
        assert header in reply.json()["error"]["message"]

    serve(main)


# -- errors -----------------------------------------------------------------------------------


def test_without_a_valid_key_a_completion_is_401_and_the_key_is_never_echoed() -> None:
    async def main(server: LlmServer) -> None:
        none = await post(server.url, CHAT, chat("hi"))
        wrong = await post(server.url, CHAT, chat("hi"), authorization="Bearer sk-wrong")
        bearer = await post(server.url, CHAT, chat("hi"), authorization="Bearer sk-right")
        header = await post(server.url, CHAT, chat("hi"), api_key="sk-right")
        models = (await exchange(server.url, request("/v1/models", method="GET")))[0]
        assert [r.status for r in (none, wrong, bearer, header, models)] == [
            401,
            401,
            200,
            200,
            401,
        ]
        error = wrong.json()["error"]
        assert (error["type"], error["code"]) == ("invalid_request_error", "invalid_api_key")
        assert b"sk-" not in wrong.body
        stats = server.stats(samples=True)
        assert stats["statuses"] == {"200": 2, "401": 2}
        assert "sk-right" not in json.dumps(stats)
        assert stats["settings"]["api_keys"] == 1

    serve(main, api_keys="sk-right", ttft="0", itl="0", output_tokens=1)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b"{not json", None),
        (b"[1, 2]", None),
        (json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode(), "model"),
        (json.dumps({"model": "m"}).encode(), "messages"),
        (json.dumps({"model": "m", "messages": []}).encode(), "messages"),
        (json.dumps({"model": "m", "messages": ["hi"]}).encode(), "messages"),
        (json.dumps(chat("x", stream="yes")).encode(), "stream"),
        (json.dumps(chat("x", max_tokens=0)).encode(), "max_tokens"),
        (json.dumps(chat("x", stream_options={"include_usage": True})).encode(), "stream_options"),
        (json.dumps(chat("x", n=2)).encode(), "n"),
        (b"[" * 100_000 + b"]" * 100_000, None),  # too deep for the JSON parser
    ],
)
def test_a_malformed_body_is_a_400_shaped_like_openai_and_recorded(
    body: bytes, param: str | None
) -> None:
    async def main(server: LlmServer) -> None:
        reply = await post(server.url, CHAT, body)
        assert reply.status == 400
        error = reply.json()["error"]
        assert (error["type"], error["param"]) == ("invalid_request_error", param)
        assert server.stats()["statuses"] == {"400": 1}

    serve(main)


def test_an_unknown_model_is_404_model_not_found() -> None:
    async def main(server: LlmServer) -> None:
        reply = await post(server.url, CHAT, {**chat("x"), "model": "gpt-9"})
        assert reply.status == 404
        assert reply.json()["error"]["code"] == "model_not_found"
        assert "gpt-9" in reply.json()["error"]["message"]

    serve(main)


def test_unknown_paths_and_wrong_methods_are_404_and_405_and_not_recorded() -> None:
    async def main(server: LlmServer) -> None:
        missing, wrong = await exchange(
            server.url,
            request("/v1/embeddings", {"model": "m"}),
            request(CHAT, method="GET"),
        )
        assert (missing.status, wrong.status) == (404, 405)
        assert "Invalid URL (POST /v1/embeddings)" in missing.json()["error"]["message"]
        assert server.stats()["requests"] == 0

    serve(main)


# -- connections -----------------------------------------------------------------------------


def test_one_keep_alive_connection_serves_pipelined_completions_in_order() -> None:
    async def main(server: LlmServer) -> None:
        raw = [
            request(
                CHAT, chat("hi", stream=True), headers={"x-mock-tokens": "3", "x-mock-ttft": "5ms"}
            ),
            request(CHAT, chat("hi"), headers={"x-mock-tokens": "2"}),
            request(
                COMPLETIONS,
                {"model": "m", "prompt": "p", "stream": True},
                headers={"x-mock-tokens": "1"},
            ),
        ]
        replies = await exchange(server.url, *raw)
        assert [len(r.chunks_of_events()) for r in (replies[0], replies[2])] == [5, 2]
        assert replies[1].json()["usage"]["completion_tokens"] == 2
        samples = server.stats(samples=True)["samples"]
        assert [s["id"] for s in samples] == [r.headers["x-request-id"] for r in replies]
        assert samples[1]["started"] >= samples[0]["end"]

    serve(main, ttft="0", itl="0")


def test_connection_close_is_honoured_after_the_stream_ends() -> None:
    async def main(server: LlmServer) -> None:
        parts = urlsplit(server.url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        writer.write(request(CHAT, chat("hi", stream=True), headers={"Connection": "close"}))
        reply = await read_reply(reader)
        assert reply.headers["connection"] == "close"
        assert reply.complete
        assert await reader.read() == b""  # the server closed
        writer.close()

    serve(main, ttft="0", itl="0", output_tokens=2)


def test_a_client_that_leaves_mid_stream_is_recorded_as_dropped_with_what_it_was_sent() -> None:
    async def main(server: LlmServer) -> None:
        parts = urlsplit(server.url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        writer.write(request(CHAT, chat("hi", stream=True), headers={"x-mock-itl": "30ms"}))
        await reader.readuntil(b'"content":" ')  # the first token arrived
        writer.close()
        await writer.wait_closed()
        await until(lambda: server.stats()["requests"] > 0)
        (sample,) = server.stats(samples=True)["samples"]
        assert (sample["status"], sample["outcome"]) == (200, "dropped")
        assert 1 <= sample["completion_tokens"] == len(sample["token_times"]) < 100
        assert server.stats()["ttft"]["count"] == 0  # only ok requests make the figures

    serve(main, ttft="0", output_tokens=100)


def test_stopping_the_server_drops_what_it_is_streaming() -> None:
    async def main() -> None:
        server = LlmServer(models="m", ttft="1h")
        await server.start()
        task = asyncio.create_task(post(server.url, CHAT, chat("hi", stream=True)))
        await until(lambda: server.stats()["in_flight"] > 0)
        await server.stop()
        reply = await task
        assert not reply.complete
        assert server.stats()["outcomes"] == {"dropped": 1}

    run(main())


# -- faults -------------------------------------------------------------------------------------


def test_not_openai_is_a_200_html_page() -> None:
    async def main(server: LlmServer) -> None:
        reply = await post(server.url, CHAT, chat("hi", stream=True), x_mock_fault="not-openai")
        assert reply.status == 200
        assert reply.headers["content-type"].startswith("text/html")
        assert reply.body.startswith(b"<!DOCTYPE html>")
        assert server.stats()["outcomes"] == {"fault": 1}

    serve(main)


def test_broken_sse_puts_one_unparseable_event_after_k_tokens_and_goes_on() -> None:
    async def main(server: LlmServer) -> None:
        reply = await post(
            server.url, CHAT, chat("hi", stream=True), x_mock_fault="broken-sse:2", **pinned()
        )
        events = reply.events()
        bad = []
        for index, event in enumerate(events[:-1]):
            try:
                json.loads(event)
            except ValueError:
                bad.append(index)
        assert bad == [3]  # role, two tokens, then the broken one
        assert events[-1] == "[DONE]"
        (sample,) = server.stats(samples=True)["samples"]
        assert (sample["outcome"], sample["completion_tokens"]) == ("fault", 4)

    serve(main, output_tokens=4)


def test_cut_mid_token_closes_the_connection_inside_the_next_chunk() -> None:
    async def main(server: LlmServer) -> None:
        reply = await post(
            server.url, CHAT, chat("hi", stream=True), x_mock_fault="cut-mid-token:3", **pinned()
        )
        assert not reply.complete
        assert len(reply.chunks_of_events()) == 1 + 3
        (sample,) = server.stats(samples=True)["samples"]
        assert (sample["status"], sample["outcome"], sample["completion_tokens"]) == (200, "cut", 3)

    serve(main, output_tokens=10)


def test_status_faults_answer_that_status_and_429_carries_retry_after() -> None:
    async def main(server: LlmServer) -> None:
        unavailable = await post(server.url, CHAT, chat("hi"), x_mock_fault="status:503")
        throttled = await post(server.url, CHAT, chat("hi"), x_mock_fault="status:429")
        assert unavailable.status == 503
        assert (throttled.status, throttled.headers["retry-after"]) == (429, "1")
        assert throttled.json()["error"]["code"] == "rate_limit_exceeded"
        assert server.stats()["throttled"] == 1

    serve(main)


def test_hang_sends_the_head_then_nothing_until_the_client_leaves() -> None:
    async def main(server: LlmServer) -> None:
        parts = urlsplit(server.url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        writer.write(request(CHAT, chat("hi", stream=True), headers={"x-mock-fault": "hang"}))
        await reader.readuntil(b'"role":"assistant"')
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reader.readuntil(b'"content":" '), 0.05)
        writer.close()
        await writer.wait_closed()
        await until(lambda: server.stats()["requests"] > 0)
        assert server.stats()["outcomes"] == {"dropped": 1}

    serve(main, ttft="0")


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("x-mock-fault", "explode"),
        ("x-mock-fault", "status:200"),
        ("x-mock-fault", "cut-mid-token:x"),
        ("x-mock-ttft", "soon"),
        ("x-mock-tokens", "0"),
        ("x-mock-colour", "blue"),
    ],
)
def test_a_bad_mock_header_is_a_400_naming_it(header: str, value: str) -> None:
    async def main(server: LlmServer) -> None:
        reply = await post(server.url, CHAT, chat("hi"), **{header.replace("-", "_"): value})
        assert reply.status == 400
        assert header in reply.json()["error"]["message"]

    serve(main)


def test_an_http_1_0_client_gets_a_stream_the_close_ends_not_a_chunked_one() -> None:
    async def main(server: LlmServer) -> None:
        reader, writer = await connect(server.url)
        body = chat("hi", stream=True, stream_options={"include_usage": True})
        writer.write(request(CHAT, body, headers={"x-mock-tokens": "3"}, version="1.0"))
        data = await reader.read()  # until the server closes
        writer.close()
        head, _, payload = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200")
        assert b"Transfer-Encoding" not in head
        assert b"Connection: close" in head
        events = [e for e in payload.decode().split("\n\n") if e]
        assert all(e.startswith("data: ") for e in events)
        assert events[-1] == "data: [DONE]"
        chunks = [json.loads(e[6:]) for e in events[:-1]]
        assert len(chunks) == 1 + 3 + 1 + 1  # role, tokens, finish, usage
        assert chunks[-1]["usage"]["completion_tokens"] == 3
        await until(lambda: server.stats()["requests"] == 1)
        assert server.stats()["outcomes"] == {"ok": 1}

    serve(main, ttft="0", itl="0")


def test_garbage_gets_a_400_and_the_connection_closes() -> None:
    async def main(server: LlmServer) -> None:
        (reply,) = await exchange(server.url, b"NOT HTTP AT ALL\r\n\r\n")
        assert (reply.status, reply.headers["connection"]) == (400, "close")

    serve(main)
