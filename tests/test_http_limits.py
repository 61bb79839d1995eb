"""What the client reads and keeps of a response: the head limit, the kept body prefix, and
bytes after a response (never an assert, never a reused connection)."""

from __future__ import annotations

import asyncio
import tracemalloc

import pytest

from http_helpers import LOOPS, Peer, Server, run
from pyattacker.errors import ConfigError, RequestTimeout, ResponseTooLarge, error_class_of
from pyattacker.http import HttpClient, Limits, Timeouts
from pyattacker.http._limits import HEAD_SIZE_RANGE, MAX_HEAD_SIZE, MAX_LINE, parse_size
from pyattacker.llm._sse import SseParser

MiB = 1024 * 1024


def _padded_head(size: int) -> bytes:
    """A 200 head of about ``size`` bytes (padding headers), with a 2-byte body."""
    line = b"X-Pad: " + b"a" * 100 + b"\r\n"
    pad = line * (size // len(line) + 1)
    return b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" + pad + b"\r\nok"


async def _answer_with(peer: Peer, answer: bytes) -> None:
    while await peer.read_request() is not None:
        await peer.send(answer)


# --- bytes after a response --------------------------------------------------------------


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize(
    "extra",
    [
        b"GARBAGE",  # not HTTP at all
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",  # a second answer nobody asked for
        b"HTTP/1.1 2",  # the start of one
    ],
)
def test_extra_bytes_after_a_content_length_body_keep_the_answer_and_close_the_connection(
    loop: str, extra: bytes
) -> None:
    async def main() -> tuple[list[tuple[int, bytes]], int, dict[str, int]]:
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" + extra
        async with Server(lambda peer: _answer_with(peer, answer)) as server:
            async with HttpClient() as client:
                got = []
                for _ in range(5):
                    response = await client.request("GET", server.url)
                    got.append((response.status, response.body))
                stats = client.statistics()[server.url.rstrip("/")]
            return got, server.accepted, stats

    got, accepted, stats = run(main, loop)
    assert got == [(200, b"ok")] * 5  # each answer stands
    assert accepted == 5  # and no connection was used again
    assert stats["open"] == 0


# --- the head limit ------------------------------------------------------------------------


@pytest.mark.parametrize("loop", LOOPS)
def test_a_head_over_max_head_is_response_too_large_of_class_protocol_and_closes(
    loop: str,
) -> None:
    async def main() -> tuple[ResponseTooLarge, dict[str, int], int]:
        async with Server(lambda peer: _answer_with(peer, _padded_head(1 * MiB))) as server:
            async with HttpClient() as client:
                with pytest.raises(ResponseTooLarge) as caught:
                    await client.request("GET", server.url)
                stats = client.statistics()[server.url.rstrip("/")]
                bigger = HttpClient(limits=Limits(max_head=2 * MiB))
                async with bigger:
                    status = (await bigger.request("GET", server.url)).status
            return caught.value, stats, status

    error, stats, status = run(main, loop)
    assert (error.what, error.limit) == ("head", MAX_HEAD_SIZE)
    assert error.message == (
        "response head over 64 KiB (the client's limit: --max-head-size, Limits.max_head)"
    )
    assert error_class_of(error) == "protocol"
    assert stats["open"] == 0
    assert status == 200  # a client told to take bigger heads takes it


async def _endless_head(peer: Peer) -> None:
    await peer.read_request()
    await peer.send(b"HTTP/1.1 200 OK\r\n")
    while True:
        await peer.send(b"X-More: " + b"b" * 1000 + b"\r\n")


async def _endless_informational(peer: Peer) -> None:
    await peer.read_request()
    while True:
        await peer.send(b"HTTP/1.1 100 Continue\r\nX-Pad: " + b"c" * 200 + b"\r\n\r\n")


@pytest.mark.parametrize("handler", [_endless_head, _endless_informational])
def test_a_head_that_never_ends_fails_at_the_limit_not_at_the_timeout(handler: object) -> None:
    async def main() -> BaseException:
        async with Server(handler) as server:  # type: ignore[arg-type]
            limits = Limits(max_head=HEAD_SIZE_RANGE[0] * 16)
            async with HttpClient(limits=limits, timeouts=Timeouts(total=600)) as client:
                with pytest.raises(ResponseTooLarge) as caught:
                    await client.request("GET", server.url)
            return caught.value

    assert isinstance(run(main), ResponseTooLarge)


# --- the kept body ---------------------------------------------------------------------------


def _chunked(body: bytes, size: int = 64 * 1024) -> bytes:
    parts = [
        b"%x\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size])
        for i in range(0, len(body), size)
    ]
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"".join(parts) + b"0\r\n\r\n"


BODY = bytes(range(256)) * 4096  # 1 MiB


@pytest.mark.parametrize(
    "answer",
    [b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY), _chunked(BODY)],
    ids=["content-length", "chunked"],
)
@pytest.mark.parametrize("keep", [None, 0, 1000, 70_000])
def test_a_body_is_counted_whole_and_kept_up_to_keep_body(answer: bytes, keep: int | None) -> None:
    async def main() -> tuple[bytes, int, int]:
        async with Server(lambda peer: _answer_with(peer, answer)) as server:
            async with HttpClient(limits=Limits(keep_body=keep)) as client:
                response = await client.request("GET", server.url)
                again = await client.request("GET", server.url)  # the connection is fine
            return response.body, response.body_size, again.status

    body, size, status = run(main)
    assert body == BODY[:keep]
    assert size == len(BODY)
    assert status == 200


async def _endless_chunks(peer: Peer, sent: list[int], until: int) -> None:
    await peer.read_request()
    await peer.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n%s\r\n" % (64 * 1024, b"d" * 64 * 1024)
    while sent[0] < until:
        await peer.send(chunk)
        sent[0] += len(chunk)
    await asyncio.Event().wait()  # the body never ends


def test_a_body_that_never_ends_is_read_and_counted_but_not_kept() -> None:
    sent = [0]

    async def main() -> BaseException:
        async with Server(lambda peer: _endless_chunks(peer, sent, 64 * MiB)) as server:
            limits = Limits(keep_body=4096)
            async with HttpClient(limits=limits, timeouts=Timeouts(read=0.5)) as client:
                with pytest.raises(RequestTimeout) as caught:
                    await client.request("GET", server.url)
            return caught.value

    tracemalloc.start()
    try:
        error = run(main)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(error, RequestTimeout)
    assert sent[0] >= 64 * MiB
    assert peak < 8 * MiB  # what passed through was eight times that


# --- one place for the limits ----------------------------------------------------------------


def test_the_stream_line_cap_is_the_limits_module_s() -> None:
    assert SseParser().max_line == MAX_LINE == 8 * MiB


def test_limits_refuse_what_is_not_a_size() -> None:
    with pytest.raises(ConfigError, match="max_head"):
        Limits(max_head=0)
    with pytest.raises(ConfigError, match="keep_body"):
        Limits(keep_body=-1)
    with pytest.raises(ConfigError, match="limits"):
        HttpClient(limits=65536)  # type: ignore[arg-type]
    assert parse_size("64KiB", field="--max-head-size", within=HEAD_SIZE_RANGE) == 65536
    with pytest.raises(ConfigError, match="--max-head-size"):
        parse_size("1e9", field="--max-head-size", within=HEAD_SIZE_RANGE)
