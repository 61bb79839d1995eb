"""A response's headers and reason phrase, read off its head's bytes when first asked.

The connection gives httptools no ``on_header``/``on_status`` callbacks (one Python call
per header per answer, which a load test never reads); ``Headers`` reads them off the head
when asked, with a parser of the same kind. These tests pin that the result is what the
callbacks gave while the connection read the answer, however its bytes were split.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Coroutine
from typing import Any

from httptools import HttpResponseParser
from hypothesis import given, settings
from hypothesis import strategies as st

from pyattacker.http import URL, Response, Timeouts, Timing
from pyattacker.http._connection import Connection
from pyattacker.http._pool import OriginPool
from pyattacker.http._types import Headers, read_head

_TOKEN = st.text(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_!#$%&'*+.^`|~",
    min_size=1,
    max_size=12,
)
_VALUE = st.text(
    st.characters(min_codepoint=0x21, max_codepoint=0x7E) | st.just(" ") | st.just("\t"),
    max_size=20,
).map(lambda v: v.strip(" \t"))
_OWS = st.sampled_from(["", " ", "  ", "\t", " \t"])


class _EagerReader:
    """What the connection's parser callbacks collected before: the reference."""

    def __init__(self) -> None:
        self.raw: list[tuple[bytes, bytes]] = []
        self.reason = b""
        self.parser = HttpResponseParser(self)
        self.final = False

    def on_status(self, reason: bytes) -> None:
        if not self.final:
            self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.final:
            self.raw.append((name, value))

    def on_headers_complete(self) -> None:
        if self.parser.get_status_code() < 200:
            self.raw, self.reason = [], b""
        else:
            self.final = True


class _Transport:
    """Just enough of a transport for one exchange that the test feeds by hand."""

    def write(self, data: bytes) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def abort(self) -> None:
        pass


async def _answer(chunks: list[bytes]) -> Response:
    """The response a connection reads from ``chunks``, fed as separate reads."""
    loop = asyncio.get_running_loop()
    pool = OriginPool("http://127.0.0.1:9", 1)
    assert pool.reserve()
    conn = Connection(pool, time.monotonic, loop)
    conn.connection_made(_Transport())  # type: ignore[arg-type]
    pool.opened(conn)
    response = Response(URL.parse("http://127.0.0.1:9/"), Timing(time.monotonic(), reused=True))
    waiter: asyncio.Future[Response] = loop.create_future()
    request = (b"GET / HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n", None, True)
    conn.send(response, request, Timeouts(read=None), waiter, "GET", False)
    for chunk in chunks:
        conn.data_received(chunk)
    assert waiter.done(), "the answer was not complete"
    return waiter.result()


def _run(answer: Coroutine[Any, Any, Response]) -> Response:
    # Not asyncio.run: in Python 3.11 its SIGINT set-up formats the running task's repr,
    # and with it the result's, which reads the headers before the test can look.
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(answer)
    finally:
        loop.close()


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


@st.composite
def _heads(draw: st.DrawFn) -> bytes:
    reason = draw(st.sampled_from(["OK", "", "Fine By Me", "Too Many Requests"]))
    status = draw(st.sampled_from([200, 201, 404, 429, 503]))
    lines = [f"HTTP/1.{draw(st.sampled_from('01'))} {status} {reason}".rstrip(" ")]
    for name, value in draw(st.lists(st.tuples(_TOKEN, _VALUE), max_size=6)):
        if name.lower() in ("content-length", "transfer-encoding", "connection"):
            continue
        lines.append(f"{name}:{draw(_OWS)}{value}{draw(_OWS)}")
    lines.append("Content-Length: 3")
    head = "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n"
    if draw(st.booleans()):  # a 1xx head first, with headers of its own
        head = b"HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n" + head
    return head


@settings(max_examples=150, deadline=None)
@given(_heads(), st.lists(st.integers(0, 400), max_size=4))
def test_headers_and_reason_are_what_the_parser_callbacks_gave_however_the_bytes_arrive(
    head: bytes, cuts: list[int]
) -> None:
    answer = head + b"abc"
    chunks = _split(answer, cuts)
    eager = _EagerReader()
    for chunk in chunks:
        eager.parser.feed_data(chunk)
    response = _run(_answer(chunks))
    assert response.body == b"abc"
    assert response.headers._pairs() == eager.raw
    assert response.reason == eager.reason.decode("latin-1")
    assert len(response.headers) == len(eager.raw)


def test_a_large_body_read_with_its_head_is_not_kept_twice() -> None:
    head = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 2\r\nContent-Length: 5000\r\n\r\n"
    body = b"x" * 5000
    response = _run(_answer([head + body]))
    assert (response._head, response.body) == (head, body)  # the head only: cut
    assert (response.reason, response.headers.get("retry-after"), response.retry_after) == (
        "Too Many Requests",
        "2",
        2.0,
    )


def test_a_small_answer_keeps_its_read_whole_and_reads_its_headers_only_when_asked() -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    response = _run(_answer([answer]))
    assert response._head == answer  # not cut: a copy would cost more than it saves
    assert response._headers is None  # nobody asked yet
    assert response.headers.items() == [("Content-Length", "2")]


def test_read_head_skips_informational_heads_and_ignores_bytes_after_the_head() -> None:
    data = (
        b"HTTP/1.1 100 Continue\r\nX-Early: 1\r\n\r\n"
        b"HTTP/1.1 200 Fine\r\nX-Late: 2\r\nX-Late: 3\r\nContent-Length: 2\r\n\r\nok"
        b"and then garbage that is not HTTP"
    )
    assert read_head(data) == (
        b"Fine",
        [(b"X-Late", b"2"), (b"X-Late", b"3"), (b"Content-Length", b"2")],
    )


def test_headers_built_from_pairs_have_no_reason_and_read_nothing() -> None:
    headers = Headers.from_pairs([("A", "1")])
    assert (headers._status_reason(), headers.items(), len(headers)) == (b"", [("A", "1")], 1)


def test_after_an_informational_head_the_kept_bytes_end_at_the_final_head() -> None:
    early = b"HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n"
    final = b"HTTP/1.1 200 OK\r\nX-Final: yes\r\nContent-Length: 4000\r\n\r\n"
    body = b"y" * 4000
    response = _run(_answer([early + final + body]))
    assert response._head == early + final  # both heads, not the body
    assert response.headers.items() == [("X-Final", "yes"), ("Content-Length", "4000")]


def test_a_head_in_many_small_reads_is_read_whole() -> None:
    answer = b"HTTP/1.1 200 OK\r\nX-A: 1\r\nX-B: 2\r\nContent-Length: 2\r\n\r\nok"
    response = _run(_answer([answer[i : i + 3] for i in range(0, len(answer), 3)]))
    assert response.headers.items() == [("X-A", "1"), ("X-B", "2"), ("Content-Length", "2")]
    assert response.body == b"ok"


def test_read_head_gives_what_it_read_when_the_bytes_turn_out_not_to_be_http() -> None:
    assert read_head(b"this is not HTTP at all\r\n\r\n") == (b"", [])
