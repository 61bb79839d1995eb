"""``LlmClient`` over real loopback sockets, against canned OpenAI-like answers.

Timings are checked by their relations (sent <= first byte <= first token <= ... <= end),
never against durations: these machines are noisy.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest

from http_helpers import Peer, Server, run
from llm_helpers import (
    KEY,
    TOKENS,
    USAGE,
    RecordingHttp,
    body_of,
    canned,
    chat_events,
    chunked,
    completion_events,
    head,
    sse,
    stream_response,
    whole,
)
from pyattacker.errors import (
    ConnectError,
    ErrorClass,
    HttpError,
    RequestTimeout,
    ResponseTooLarge,
    error_class_of,
    retry_after_of,
)
from pyattacker.http import HttpClient, Limits, Timeouts
from pyattacker.llm import (
    Api,
    LlmClient,
    LlmErrorKind,
    LlmResponseError,
    LlmResult,
    LlmStatusError,
    Usage,
    auth_headers,
    build_request,
    endpoint_url,
)

CHAT = build_request("chat", "m", "Say hello", max_tokens=8)
WHOLE = build_request("chat", "m", "Say hello", max_tokens=8, stream=False)


async def call(
    pieces: Sequence[bytes] | bytes,
    request: object = CHAT,
    *,
    close_after: bool = False,
    headers: Sequence[tuple[str, str]] = auth_headers(KEY),
    timeouts: Timeouts | None = None,
) -> tuple[LlmResult, BaseException | None, dict[str, object]]:
    """Send one request to a canned server: the result (filled even on failure), the
    error if any, and the JSON body the server read."""
    result = LlmResult()
    error: BaseException | None = None
    async with canned(pieces, close_after=close_after) as server, HttpClient() as http:
        try:
            await LlmClient(http).send(
                endpoint_url(f"{server.url}v1"),
                request,  # type: ignore[arg-type]
                headers=headers,
                timeouts=timeouts,
                result=result,
            )
        except HttpError as exc:
            error = exc
        sent = body_of(server) if server.requests else {}
    return result, error, sent


def assert_ordered(result: LlmResult) -> None:
    times = [result.sent, result.first_byte, result.first_token, *result.token_times, result.end]
    present = [t for t in times if t is not None]
    assert present == sorted(present), times


def test_a_streamed_chat_answer_is_timed_per_content_chunk_and_reports_the_servers_usage() -> None:
    headers = [
        ("Content-Type", "text/event-stream; charset=utf-8"),
        ("x-request-id", "req-42"),
        ("x-ratelimit-remaining-requests", "99"),
    ]
    result, error, sent = run(lambda: call(stream_response(chat_events(), headers)))
    assert error is None
    assert (result.status, result.streamed, result.text) == (200, True, "".join(TOKENS))
    assert result.content_chunks == len(TOKENS)
    assert len(result.token_times) == result.content_chunks - 1
    assert result.first_byte is not None
    assert result.sent is not None
    assert result.first_token is not None
    assert result.end is not None
    assert result.sent <= result.first_byte <= result.first_token <= result.end
    assert_ordered(result)
    assert result.usage == Usage(**USAGE)
    assert result.finish_reason == "stop"
    assert result.request_id == "req-42"
    assert result.headers == {"x-ratelimit-remaining-requests": "99"}
    assert result.bytes_received == len(sse(chat_events()))
    assert len(result.itl) == len(TOKENS) - 1
    assert all(gap >= 0 for gap in result.itl)
    assert result.tpot is not None
    assert result.tpot >= 0
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["messages"] == [{"role": "user", "content": "Say hello"}]


@pytest.mark.parametrize("sizes", [(1,), (7, 40), (4096,)])
def test_first_token_and_every_token_time_are_arrival_stamps_taken_by_the_http_layer(
    sizes: tuple[int, ...],
) -> None:
    # A stamp read when the event was parsed (however soon after its bytes arrived) is
    # a later clock reading than any arrival stamp, so it is in no chunk's arrival time.
    async def main() -> tuple[LlmResult, list[float]]:
        result = LlmResult()
        pieces = stream_response(chat_events(), sizes=sizes)
        async with canned(pieces) as server, RecordingHttp() as http:
            await LlmClient(http).send(endpoint_url(f"{server.url}v1"), CHAT, result=result)
        (timing,) = http.timings
        return result, timing.chunk_times

    result, arrivals = run(main)
    stamps = [result.first_token, *result.token_times]
    assert len(stamps) == len(TOKENS)
    assert all(stamp in arrivals for stamp in stamps), (stamps, arrivals)
    assert stamps == sorted(stamps)


def test_a_streamed_request_cancelled_before_the_response_head_keeps_when_it_was_sent() -> None:
    async def main() -> LlmResult:
        result = LlmResult()
        request_read = asyncio.Event()

        async def silent(peer: Peer) -> None:
            await peer.read_request()
            request_read.set()
            await asyncio.Event().wait()  # never answers

        async with Server(silent) as server, HttpClient() as http:
            url = endpoint_url(f"{server.url}v1")
            sending = asyncio.create_task(LlmClient(http).send(url, CHAT, result=result))
            await request_read.wait()
            sending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await sending
        return result

    result = run(main)
    assert result.sent is not None
    assert (result.status, result.first_byte, result.first_token, result.end) == (
        None,
        None,
        None,
        None,
    )


@pytest.mark.parametrize("sizes", [(1,), (2, 9), (64,), (4096,)])
def test_http_chunks_cut_anywhere_give_the_same_answer(sizes: tuple[int, ...]) -> None:
    pieces = [
        head(200, [("Content-Type", "text/event-stream")]),
        *chunked(sse(chat_events(), "\r\n"), sizes),
    ]
    result, error, _ = run(lambda: call(pieces))
    assert error is None
    assert (result.text, result.content_chunks, result.usage) == (
        "".join(TOKENS),
        len(TOKENS),
        Usage(**USAGE),
    )
    assert len(result.token_times) == len(TOKENS) - 1
    assert_ordered(result)


def test_a_stream_without_a_content_type_is_still_read_as_server_sent_events() -> None:
    result, error, _ = run(lambda: call(stream_response(chat_events(), headers=())))
    assert error is None
    assert result.content_chunks == len(TOKENS)


def test_a_streamed_completions_answer_reads_the_text_of_each_choice() -> None:
    request = build_request("completions", "m", "Once", max_tokens=4)
    result, error, sent = run(lambda: call(stream_response(completion_events()), request))
    assert error is None
    assert (result.text, result.content_chunks, result.finish_reason) == (
        "".join(TOKENS),
        4,
        "length",
    )
    assert sent["prompt"] == "Once"


def test_a_whole_body_answer_has_usage_and_an_end_but_no_token_times() -> None:
    answer = {
        "choices": [{"index": 0, "message": {"content": "Hi!"}, "finish_reason": "stop"}],
        "usage": USAGE,
    }
    raw = json.dumps(answer).encode()
    result, error, sent = run(
        lambda: call(whole(200, raw, [("Content-Type", "application/json")]), WHOLE)
    )
    assert error is None
    assert (result.streamed, result.text, result.usage) == (False, "Hi!", Usage(**USAGE))
    assert result.first_token is None
    assert result.token_times == []
    assert result.content_chunks == 0
    assert result.sent is not None
    assert result.end is not None
    assert result.sent <= result.end
    assert result.bytes_received == len(raw)
    assert sent["stream"] is False
    assert "stream_options" not in sent


def test_a_whole_answer_longer_than_the_client_keeps_is_too_large_to_parse_not_garbled() -> None:
    raw = json.dumps({"choices": [{"message": {"content": "x" * 5000}}]}).encode()

    async def main() -> tuple[LlmResult, BaseException]:
        result = LlmResult()
        answer = whole(200, raw, [("Content-Type", "application/json")])
        async with canned(answer) as server, HttpClient(limits=Limits(keep_body=1024)) as http:
            with pytest.raises(ResponseTooLarge) as caught:
                await LlmClient(http).send(endpoint_url(f"{server.url}v1"), WHOLE, result=result)
        return result, caught.value

    result, error = run(main)
    assert isinstance(error, ResponseTooLarge)
    assert (error.what, error.limit, error_class_of(error)) == ("body", 1024, "protocol")
    assert error.message == "response body over 1 KiB (too long to parse)"
    assert result.bytes_received == len(raw)  # counted whole all the same


def test_a_429_is_a_rate_limit_error_with_retry_after_and_its_headers_recorded() -> None:
    headers = [
        ("Retry-After", "3"),
        ("x-ratelimit-remaining-tokens", "0"),
        ("azure-openai-deployment-utilization", "101.2%"),
    ]
    raw = b'{"error": {"message": "Requests to the deployment have exceeded the rate limit"}}'
    result, error, _ = run(lambda: call(whole(429, raw, headers)))
    assert isinstance(error, LlmStatusError)
    assert (error.status, error.kind, error.retry_after) == (429, LlmErrorKind.RATE_LIMIT, 3.0)
    assert error_class_of(error) is ErrorClass.RATE_LIMIT
    assert retry_after_of(error) == 3.0
    assert "exceeded the rate limit" in str(error)
    assert result.status == 429
    assert result.retry_after == 3.0
    assert result.headers == {
        "retry-after": "3",
        "x-ratelimit-remaining-tokens": "0",
        "azure-openai-deployment-utilization": "101.2%",
    }


@pytest.mark.parametrize(
    ("status", "raw", "kind", "error_class"),
    [
        (401, b'{"error": {"message": "Incorrect API key"}}', LlmErrorKind.AUTH, ErrorClass.FATAL),
        (
            404,
            b'{"error": {"message": "model nope not found"}}',
            LlmErrorKind.UNKNOWN_MODEL,
            ErrorClass.FATAL,
        ),
        (502, b"<html>Bad Gateway</html>", LlmErrorKind.UPSTREAM, ErrorClass.UPSTREAM),
    ],
)
@pytest.mark.parametrize("request_", [CHAT, WHOLE], ids=["stream", "whole"])
def test_an_error_status_is_classified_streamed_or_not(
    status: int, raw: bytes, kind: LlmErrorKind, error_class: ErrorClass, request_: object
) -> None:
    result, error, _ = run(lambda: call(whole(status, raw), request_))
    assert isinstance(error, LlmStatusError)
    assert (error.status, error.kind, error_class_of(error)) == (status, kind, error_class)
    assert result.status == status
    assert result.end is not None


def test_an_html_page_instead_of_a_stream_is_named_as_such() -> None:
    page = b"<!DOCTYPE html><html><body>Sign in</body></html>"
    _, error, _ = run(lambda: call(whole(200, page, [("Content-Type", "text/html")])))
    assert isinstance(error, LlmResponseError)
    assert error.kind is LlmErrorKind.NOT_EVENT_STREAM
    assert "text/html" in str(error)
    assert "<!DOCTYPE html>" in str(error)
    assert error_class_of(error) is ErrorClass.UPSTREAM


def test_an_html_page_with_no_content_type_is_a_broken_stream_naming_the_line() -> None:
    page = b"<!DOCTYPE html>\n<html></html>\n"
    _, error, _ = run(lambda: call(whole(200, page)))
    assert isinstance(error, LlmResponseError)
    assert (error.kind, "line 1" in str(error)) == (LlmErrorKind.BROKEN_STREAM, True)


def test_a_whole_completion_where_a_stream_was_asked_says_streaming_is_unsupported() -> None:
    raw = json.dumps({"choices": [{"message": {"content": "Hi"}}]}).encode()
    _, error, _ = run(lambda: call(whole(200, raw, [("Content-Type", "application/json")])))
    assert isinstance(error, LlmResponseError)
    assert error.kind is LlmErrorKind.NOT_EVENT_STREAM
    assert "stream=true" in str(error)


def test_a_200_json_body_without_choices_is_not_an_openai_completion() -> None:
    raw = b'{"status": "healthy"}'
    _, error, _ = run(lambda: call(whole(200, raw, [("Content-Type", "application/json")]), WHOLE))
    assert isinstance(error, LlmResponseError)
    assert error.kind is LlmErrorKind.NOT_OPENAI


def test_a_non_json_body_to_a_whole_request_is_not_json() -> None:
    _, error, _ = run(lambda: call(whole(200, b"<html>hi</html>"), WHOLE))
    assert isinstance(error, LlmResponseError)
    assert error.kind is LlmErrorKind.NOT_JSON


def test_a_stream_cut_mid_token_keeps_what_arrived_and_is_a_stream_cut() -> None:
    raw = sse(chat_events())
    cut = raw[: raw.index(b" friend") + 3]  # the connection dies inside the last token's event
    pieces = [head(200, [("Content-Type", "text/event-stream")]), b"%x\r\n%s\r\n" % (len(raw), cut)]
    result, error, _ = run(lambda: call(pieces, close_after=True))
    assert isinstance(error, LlmResponseError)
    assert error.kind is LlmErrorKind.STREAM_CUT
    assert "before [DONE]" in str(error)
    assert error_class_of(error) is ErrorClass.UPSTREAM
    assert result.content_chunks == len(TOKENS) - 1
    assert result.first_token is not None
    assert len(result.token_times) == len(TOKENS) - 2
    assert_ordered(result)


def test_a_close_delimited_stream_that_ends_without_done_is_a_stream_cut() -> None:
    pieces = [
        head(200, [("Content-Type", "text/event-stream")], chunked=False),
        sse(chat_events(done=False)),
    ]
    result, error, _ = run(lambda: call(pieces, close_after=True))
    assert isinstance(error, LlmResponseError)
    assert error.kind is LlmErrorKind.STREAM_CUT
    assert "without [DONE]" in str(error)
    assert result.content_chunks == len(TOKENS)
    assert result.end is not None


def test_a_close_delimited_stream_that_ends_mid_event_is_a_stream_cut() -> None:
    raw = sse(chat_events())
    pieces = [head(200, [("Content-Type", "text/event-stream")], chunked=False), raw[:-20]]
    _, error, _ = run(lambda: call(pieces, close_after=True))
    assert isinstance(error, LlmResponseError)
    assert error.kind is LlmErrorKind.STREAM_CUT


def test_garbage_inside_a_stream_is_a_broken_stream() -> None:
    raw = sse(chat_events()[:2]) + b"data: {oops\n\n"
    _, error, _ = run(lambda: call(stream_response([], sizes=(1,))[:1] + chunked(raw)))
    assert isinstance(error, LlmResponseError)
    assert error.kind is LlmErrorKind.BROKEN_STREAM
    assert "not JSON" in str(error)
    assert error.url is not None


def test_an_error_event_inside_a_stream_is_reported_with_the_servers_words() -> None:
    events = [
        *chat_events()[:2],
        json.dumps({"error": {"message": "engine overloaded", "code": 503}}),
    ]
    result, error, _ = run(lambda: call(stream_response(events)))
    assert isinstance(error, LlmResponseError)
    assert error.kind is LlmErrorKind.ERROR_EVENT
    assert "engine overloaded" in str(error)
    assert error_class_of(error) is ErrorClass.UPSTREAM
    assert result.content_chunks == 1


def test_a_refused_connection_is_the_http_clients_connect_error_with_no_result_times() -> None:
    from http_helpers import closed_port

    async def main() -> tuple[LlmResult, BaseException]:
        result = LlmResult()
        async with HttpClient() as http:
            with pytest.raises(ConnectError) as caught:
                await LlmClient(http).send(
                    f"http://127.0.0.1:{closed_port()}/v1/chat/completions", CHAT, result=result
                )
        return result, caught.value

    result, error = run(main)
    assert error_class_of(error) is ErrorClass.CONNECTION
    assert result.first_byte is None
    assert result.first_token is None


def test_a_silent_server_is_a_read_timeout() -> None:
    pieces = [
        head(200, [("Content-Type", "text/event-stream")]),
        *chunked(sse(chat_events()[:1]))[:-1],
    ]
    _, error, _ = run(lambda: call(pieces, timeouts=Timeouts(read=0.2)))
    assert isinstance(error, RequestTimeout)
    assert error_class_of(error) is ErrorClass.TIMEOUT


def test_azure_requests_carry_the_key_in_api_key_and_record_the_utilisation_header() -> None:
    headers = [
        ("Content-Type", "text/event-stream"),
        ("azure-openai-deployment-utilization", "12%"),
    ]

    async def main() -> tuple[LlmResult, list[tuple[str, str]]]:
        async with canned(stream_response(chat_events(), headers)) as server, HttpClient() as http:
            url = endpoint_url(f"{server.url}openai/deployments/gpt4o", azure_deployment="gpt4o")
            request = build_request(Api.CHAT, None, "Hi")
            result = await LlmClient(http).send(url, request, headers=auth_headers(KEY, azure=True))
            return result, [(server.requests[0].target, server.requests[0].header("api-key") or "")]

    result, seen = run(main)
    assert result.headers == {"azure-openai-deployment-utilization": "12%"}
    ((target, key),) = seen
    assert target.endswith("/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21")
    assert key == KEY


def test_the_key_appears_in_no_error_result_or_client_text_even_when_the_server_echoes_it() -> None:
    echo = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}"}}).encode()
    for request in (CHAT, WHOLE):
        result, error, _ = run(lambda request=request: call(whole(401, echo), request))  # type: ignore[misc]
        assert isinstance(error, LlmStatusError)
        texts = [str(error), repr(error), str(error.args), repr(result), str(error.context)]
        assert all(KEY not in text for text in texts), texts
        assert "***" in str(error)

    async def client_text() -> str:
        async with HttpClient() as http:
            return repr(LlmClient(http))

    assert KEY not in run(client_text)


@pytest.mark.parametrize(
    ("pieces", "request_"),
    [
        (whole(200, f"<html>hello {KEY}</html>".encode(), [("Content-Type", "text/html")]), CHAT),
        (whole(200, f"<html>hello {KEY}</html>".encode()), WHOLE),
        (stream_response([json.dumps({"error": {"message": f"bad key {KEY}"}})]), CHAT),
        (stream_response([f"not json {KEY}"]), CHAT),
        (
            whole(200, json.dumps({"echo": KEY}).encode(), [("Content-Type", "application/json")]),
            WHOLE,
        ),
    ],
    ids=["html-for-a-stream", "html-for-a-body", "error-event", "broken-event", "no-choices"],
)
def test_a_bad_answer_quoting_the_key_is_reported_without_it(
    pieces: object, request_: object
) -> None:
    _, error, _ = run(lambda: call(pieces, request_))  # type: ignore[arg-type]
    assert isinstance(error, LlmResponseError)
    assert KEY not in str(error)
    assert KEY not in repr(error)
