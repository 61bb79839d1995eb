"""The mock LLM server over real HTTP on loopback: shapes, token model, truth, limits, faults.

Servers listen on 127.0.0.1 with a port the OS picks and are stopped by each test. No
assertion bounds a duration from above: timing is checked against what must hold on one
machine's monotonic clock (a TTFT at least the pinned one, a client receiving a token no
earlier than the server wrote it, the truth's own arithmetic).
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pytest
import uvloop

from pyattacker.measure import exact_percentile
from pyattacker.servers import LlmServer
from pyattacker.servers._llm_wire import VOCABULARY

T = TypeVar("T")
CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
PINNED = {"x-mock-ttft": "0", "x-mock-itl": "0"}  # no waiting: tests of shapes, not timing


# -- a small raw HTTP/1.1 client: every chunk with the time it arrived ----------------------


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes
    chunks: list[tuple[float, bytes]] = field(default_factory=list)  # (arrival, data)
    complete: bool = True  # False: the connection closed mid-body

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[str]:
        """The ``data:`` payloads of a server-sent event stream, in order."""
        return [e[6:] for e in self.body.decode().split("\n\n") if e.startswith("data: ")]

    def chunks_of_events(self) -> list[dict[str, Any]]:
        return [json.loads(e) for e in self.events() if e != "[DONE]"]


def request(
    path: str,
    body: dict[str, Any] | bytes | None = None,
    *,
    method: str = "POST",
    headers: dict[str, str] | None = None,
) -> bytes:
    data = body if isinstance(body, bytes) else json.dumps(body).encode() if body else b""
    lines = [f"{method} {path} HTTP/1.1", "Host: test"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    if method == "POST":
        lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


async def read_reply(reader: asyncio.StreamReader) -> Reply:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    status_line, *lines = head.strip().split("\r\n")
    headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in lines)}
    reply = Reply(int(status_line.split()[1]), headers, b"")
    if headers.get("transfer-encoding") != "chunked":
        reply.body = await reader.readexactly(int(headers.get("content-length", "0")))
        return reply
    parts = []
    try:
        while True:
            size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
            data = await reader.readexactly(size + 2)
            reply.chunks.append((time.monotonic(), data[:-2]))
            parts.append(data[:-2])
            if size == 0:
                break
    except (asyncio.IncompleteReadError, ValueError):
        reply.complete = False
    reply.body = b"".join(parts)
    return reply


async def exchange(url: str, *raw: bytes) -> list[Reply]:
    """Send the requests in one write (pipelined) and read one reply for each."""
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    try:
        writer.write(b"".join(raw))
        return [await read_reply(reader) for _ in raw]
    finally:
        writer.close()
        await writer.wait_closed()


async def post(url: str, path: str, body: Any, **headers: str) -> Reply:
    names = {name.replace("_", "-"): value for name, value in headers.items()}
    return (await exchange(url, request(path, body, headers=names)))[0]


def chat(*contents: str, **extra: Any) -> dict[str, Any]:
    messages = [{"role": "user", "content": text} for text in contents]
    return {"model": "m", "messages": messages, **extra}


def serve(main: Callable[[LlmServer], Awaitable[T]], loop: str = "asyncio", **options: Any) -> T:
    """Run ``main(server)`` with a started server (``models="m"`` unless given)."""
    options.setdefault("models", "m")

    async def body() -> T:
        async with LlmServer(**options) as server:
            return await main(server)

    if loop == "uvloop":
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(body())
    return asyncio.run(body())


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


async def until(condition: Callable[[], bool]) -> None:
    """Yield to the server until ``condition()`` holds (what it waits for has no event)."""
    while not condition():  # noqa: ASYNC110
        await asyncio.sleep(0.001)


# -- the wire: OpenAI's shapes ---------------------------------------------------------------


def test_a_stream_sends_the_role_then_one_word_per_event_then_finish_usage_and_done() -> None:
    async def main(server: LlmServer) -> None:
        body = chat("one two three", stream=True, stream_options={"include_usage": True})
        reply = await post(server.url, CHAT, body, x_mock_tokens="5", **_pinned())
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
        reply = await post(
            server.url, CHAT, chat("hi", stream=True), x_mock_tokens="2", **_pinned()
        )
        chunks = reply.chunks_of_events()
        assert len(chunks) == 4  # role, two words, finish
        assert all("usage" not in c for c in chunks)

    serve(main)


def test_a_non_streamed_chat_completion_is_one_json_body_shaped_like_openai() -> None:
    async def main(server: LlmServer) -> None:
        reply = await post(server.url, CHAT, chat("a b", "c"), x_mock_tokens="7", **_pinned())
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
        streamed = await post(server.url, COMPLETIONS, body, x_mock_tokens="9", **_pinned())
        chunks = streamed.chunks_of_events()
        assert {c["object"] for c in chunks} == {"text_completion"}
        assert [len(c["choices"][0]["text"].split()) for c in chunks] == [1, 1, 1, 0]
        assert chunks[-1]["choices"][0]["finish_reason"] == "length"
        whole = await post(
            server.url, COMPLETIONS, {"model": "m", "prompt": ["a b", "c"]}, **_pinned()
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
        reply = await post(server.url, path, body, **_pinned())
        assert reply.json()["usage"]["prompt_tokens"] == prompt_tokens
        assert server.stats(samples=True)["samples"][0]["prompt_tokens"] == prompt_tokens

    serve(main, output_tokens=1)


@pytest.mark.parametrize(
    ("extra", "pinned", "tokens", "finish"),
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
    extra: dict[str, int], pinned: str | None, tokens: int, finish: str
) -> None:
    async def main(server: LlmServer) -> None:
        headers = _pinned() | ({"x_mock_tokens": pinned} if pinned else {})
        body = await post(server.url, CHAT, chat("hi", **extra), **headers)
        assert body.json()["usage"]["completion_tokens"] == tokens
        assert body.json()["choices"][0]["finish_reason"] == finish

    serve(main, output_tokens="fixed:10")


def test_output_tokens_max_runs_every_request_to_its_max_tokens() -> None:
    async def main(server: LlmServer) -> None:
        for limit in (1, 5, 12):
            reply = await post(server.url, CHAT, chat("hi", max_tokens=limit), **_pinned())
            assert reply.json()["usage"]["completion_tokens"] == limit
            assert reply.json()["choices"][0]["finish_reason"] == "length"

    serve(main, output_tokens="max")


def test_a_seed_fixes_every_requests_drawn_length_and_another_seed_changes_them() -> None:
    def lengths(seed: int) -> list[int]:
        async def main(server: LlmServer) -> list[int]:
            replies = [await post(server.url, CHAT, chat("hi"), **_pinned()) for _ in range(8)]
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
        streamed = await post(server.url, path, body, api_key="k1", **_pinned())
        assert streamed.status == 200
        assert streamed.chunks_of_events()[0]["model"] == "gpt-4o"
        path = "/openai/deployments/gpt-4o/completions?api-version=2024-06-01"
        whole = await post(server.url, path, {"prompt": "p", "model": "ignored"}, api_key="k1")
        assert whole.json()["model"] == "gpt-4o"
        unknown = "/openai/deployments/nope/chat/completions?api-version=1"
        missing = await post(server.url, unknown, body, api_key="k1")
        assert missing.json()["error"]["code"] == "model_not_found"

    serve(main, models=["gpt-4o"], api_keys=["k1"], ttft="0", itl="0", output_tokens=2)


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


# -- the truth ----------------------------------------------------------------------------------


def _pinned(ttft: str = "0", itl: str = "0") -> dict[str, str]:
    return {"x_mock_ttft": ttft, "x_mock_itl": itl}


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_each_token_is_recorded_when_written_and_no_gap_is_shorter_than_pinned(loop: str) -> None:
    async def main(server: LlmServer) -> None:
        reply = await post(
            server.url, CHAT, chat("hi", stream=True), x_mock_tokens="4", **_pinned("20ms", "5ms")
        )
        assert reply.complete
        (sample,) = server.stats(samples=True)["samples"]
        assert sample["id"] == reply.headers["x-request-id"]
        assert (sample["status"], sample["outcome"], sample["stream"]) == (200, "ok", True)
        times = sample["token_times"]
        assert len(times) == sample["completion_tokens"] == 4
        assert sample["received"] <= sample["started"]
        assert times[0] - sample["started"] >= 0.020
        assert all(b - a >= 0.005 for a, b in pairwise(times))
        assert sample["end"] == times[-1]
        assert sample["ttft"] == times[0] - sample["received"]
        assert sample["e2e"] == sample["end"] - sample["received"]

    serve(main, loop=loop)


def test_the_client_never_receives_a_token_before_the_server_recorded_writing_it() -> None:
    async def main(server: LlmServer) -> None:
        reply = await post(
            server.url, CHAT, chat("hi", stream=True), x_mock_tokens="5", **_pinned("2ms", "2ms")
        )
        (sample,) = server.stats(samples=True)["samples"]
        content = [t for t, data in reply.chunks if b'"content":" ' in data]
        assert len(content) == 5
        # Both sides read time.monotonic(): one machine, one clock.
        assert all(
            arrived >= written
            for arrived, written in zip(content, sample["token_times"], strict=True)
        )

    serve(main)


def test_a_token_the_client_is_not_reading_is_written_when_the_buffer_drains() -> None:
    # 40,000 events (about 9 MB) cannot fit in the socket buffers (the client's receive
    # buffer is 64 KB): the server's writes wait in its buffer until the client reads. The
    # client reads the head, pauses, then reads the rest: the later tokens were written
    # (flushed) only after the pause ended.
    async def main(server: LlmServer) -> None:
        parts = urlsplit(server.url)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (parts.hostname, parts.port))
        reader, writer = await asyncio.open_connection(sock=sock)
        writer.write(request(CHAT, chat("hi", stream=True), headers={"x-mock-tokens": "40000"}))
        await reader.readuntil(b"\r\n\r\n")
        await asyncio.sleep(0.2)
        resumed = time.monotonic()
        reply = await read_reply_body(reader)
        writer.close()
        assert reply.count(b'"content":" ') == 40000
        (sample,) = server.stats(samples=True)["samples"]
        assert sample["outcome"] == "ok"
        times = sample["token_times"]
        assert times == sorted(times)
        assert times[-1] >= resumed
        # Tokens buffered together were flushed together: they share the drain's time.
        assert len(set(times)) < len(times) / 2
        assert sample["end"] == times[-1]

    serve(main, ttft="0", itl="0")


async def read_reply_body(reader: asyncio.StreamReader) -> bytes:
    """The rest of a chunked body whose head was read."""
    parts = []
    while True:
        size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
        parts.append((await reader.readexactly(size + 2))[:-2])
        if size == 0:
            return b"".join(parts)


def test_stats_are_the_exact_nearest_rank_distributions_of_the_records() -> None:
    async def main(server: LlmServer) -> None:
        for tokens in (1, 3, 6):
            body = chat("hi", stream=True)
            await post(server.url, CHAT, body, x_mock_tokens=str(tokens), **_pinned("1ms", "1ms"))
        await post(server.url, CHAT, chat("hi"), x_mock_tokens="2", **_pinned())
        stats = server.stats(samples=True)
        samples = stats["samples"]
        streams = [s for s in samples if s["stream"]]
        ttft = sorted(s["ttft"] for s in streams)
        assert stats["ttft"]["count"] == 3
        assert stats["ttft"]["p50"] == exact_percentile(ttft, 50)
        assert stats["ttft"]["max"] == ttft[-1]
        assert stats["e2e"]["count"] == 4
        gaps = sorted(b - a for s in streams for a, b in pairwise(s["token_times"]))
        assert stats["itl"]["count"] == len(gaps) == 0 + 2 + 5
        assert stats["itl"]["p99"] == exact_percentile(gaps, 99)
        assert stats["tpot"]["count"] == 2  # streams of one token have no TPOT
        assert stats["completion_tokens"] == 1 + 3 + 6 + 2
        assert stats["prompt_tokens"] == 4
        assert (stats["in_flight"], stats["queued"]) == (0, 0)

    serve(main)


def test_control_paths_answer_json_are_never_recorded_and_reset_forgets() -> None:
    async def main(server: LlmServer) -> None:
        await post(server.url, CHAT, chat("hi"), **_pinned())
        stats, samples, reset, after = await exchange(
            server.url,
            request("/stats", method="GET"),
            request("/stats?samples=1", method="GET"),
            request("/reset", b""),
            request("/stats", method="GET"),
        )
        assert stats.json()["requests"] == 1
        assert "samples" not in stats.json()
        assert len(samples.json()["samples"]) == 1
        assert reset.json() == {"cleared": 1}
        assert after.json()["requests"] == 0
        assert after.json()["ttft"] == {
            "count": 0,
            **dict.fromkeys(("min", "mean", "p50", "p90", "p95", "p99", "p99.9", "max")),
        }

    serve(main, output_tokens=1)


# -- capacity, limits, failures --------------------------------------------------------------


def test_requests_beyond_capacity_wait_for_a_slot_and_their_ttft_includes_the_wait() -> None:
    async def main(server: LlmServer) -> None:
        body = chat("hi", stream=True)
        raw = request(CHAT, body, headers={"x-mock-tokens": "3", "x-mock-ttft": "10ms"})
        await asyncio.gather(exchange(server.url, raw), exchange(server.url, raw))
        first, second = sorted(server.stats(samples=True)["samples"], key=lambda s: s["started"])
        assert second["started"] >= first["token_times"][-1]
        assert second["ttft"] >= second["started"] - second["received"] + 0.010

    serve(main, capacity=1, itl="1ms")


def test_overflow_refuse_answers_429_at_capacity() -> None:
    async def main(server: LlmServer) -> None:
        slow = request(CHAT, chat("hi"), headers={"x-mock-tokens": "1", "x-mock-ttft": "200ms"})
        quick = request(CHAT, chat("hi"), headers={"x-mock-tokens": "1"})
        first = asyncio.create_task(exchange(server.url, slow))
        await until(lambda: server.stats()["in_flight"] > 0)
        (refused,) = await exchange(server.url, quick)
        assert refused.status == 429
        assert refused.headers["retry-after"] == "1"
        assert (await first)[0].status == 200
        assert server.stats()["throttled"] == 1

    serve(main, capacity=1, overflow="refuse", ttft="0", itl="0")


def test_the_utilization_header_is_in_flight_over_capacity() -> None:
    async def main(server: LlmServer) -> None:
        reply = await post(server.url, CHAT, chat("hi"), **_pinned())
        assert reply.headers["azure-openai-deployment-utilization"] == "25.0%"

    serve(main, capacity=4, utilization_header=True, output_tokens=1)


def test_rpm_refuses_with_retry_after_and_every_response_carries_rate_limit_headers() -> None:
    async def main(server: LlmServer) -> None:
        replies = [await post(server.url, CHAT, chat("hi"), **_pinned()) for _ in range(3)]
        assert [r.status for r in replies] == [200, 200, 429]
        assert [r.headers["x-ratelimit-limit-requests"] for r in replies] == ["2"] * 3
        assert [r.headers["x-ratelimit-remaining-requests"] for r in replies] == ["1", "0", "0"]
        refused = replies[2]
        error = refused.json()["error"]
        assert (error["type"], error["code"]) == ("requests", "rate_limit_exceeded")
        wait_ms = int(refused.headers["retry-after-ms"])
        assert 0 < wait_ms <= 30_000  # one request of 2/min refills in 30 s
        assert int(refused.headers["retry-after"]) == math.ceil(wait_ms / 1000)
        assert refused.headers["x-ratelimit-reset-requests"].endswith("s")
        assert "x-ratelimit-limit-tokens" not in refused.headers
        stats = server.stats()
        assert (stats["statuses"], stats["throttled"]) == ({"200": 2, "429": 1}, 1)
        server.reset()  # refills the bucket
        assert (await post(server.url, CHAT, chat("hi"), **_pinned())).status == 200

    serve(main, rpm=2, output_tokens=1)


def test_tpm_charges_prompt_plus_max_tokens_or_the_generated_length() -> None:
    async def main(server: LlmServer) -> None:
        ten_words = "w " * 10
        capped = await post(server.url, CHAT, chat(ten_words, max_tokens=50), **_pinned())
        assert capped.headers["x-ratelimit-remaining-tokens"] == str(100 - 60)
        free = await post(server.url, CHAT, chat(ten_words), **_pinned())  # generates 5
        assert free.headers["x-ratelimit-remaining-tokens"] == str(40 - 15)
        refused = await post(server.url, CHAT, chat(ten_words, max_tokens=50), **_pinned())
        assert refused.status == 429
        assert refused.json()["error"]["type"] == "tokens"
        huge = await post(server.url, CHAT, chat(ten_words, max_tokens=500), **_pinned())
        assert "Request too large" in huge.json()["error"]["message"]

    serve(main, tpm=100, output_tokens=5)


def test_failures_follow_the_seeded_dice_and_are_shaped_like_openai_errors() -> None:
    def statuses(seed: int) -> list[int]:
        async def main(server: LlmServer) -> list[int]:
            raw = [request(CHAT, chat("hi"), headers={"x-mock-ttft": "0"}) for _ in range(40)]
            return [r.status for r in await exchange(server.url, *raw)]

        return serve(main, seed=seed, fail={503: 0.3, 500: 0.2}, output_tokens=1, itl="0")

    first = statuses(11)
    assert first == statuses(11)
    assert set(first) == {200, 500, 503}

    async def shape(server: LlmServer) -> None:
        reply = await post(server.url, CHAT, chat("hi"))
        assert reply.status == 503
        assert reply.json()["error"]["type"] == "server_error"
        assert server.stats(samples=True)["samples"][0]["outcome"] == "error"

    serve(shape, fail={503: 1.0})


def test_in_a_storm_requests_fail_at_the_storm_rate() -> None:
    async def main(server: LlmServer) -> None:
        raw = [request(CHAT, chat("hi")) for _ in range(5)]
        replies = await exchange(server.url, *raw)
        assert {r.status for r in replies} == {503}
        assert all("(storm)" in r.json()["error"]["message"] for r in replies)

    serve(main, storms="rate=1,duration=1h,error_rate=1")


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
            server.url, CHAT, chat("hi", stream=True), x_mock_fault="broken-sse:2", **_pinned()
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
            server.url, CHAT, chat("hi", stream=True), x_mock_fault="cut-mid-token:3", **_pinned()
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


def test_garbage_gets_a_400_and_the_connection_closes() -> None:
    async def main(server: LlmServer) -> None:
        (reply,) = await exchange(server.url, b"NOT HTTP AT ALL\r\n\r\n")
        assert (reply.status, reply.headers["connection"]) == (400, "close")

    serve(main)
