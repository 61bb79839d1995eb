"""A connection's exchange: the State it walks through and the Exchange it reuses.

The connection is driven by hand here (a fake transport, bytes fed as reads), so each
step of the transition table in ``pyattacker.http._exchange`` is one assertion. No timer
is armed (no read or total timeout) and no time is asserted.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyattacker.http import URL, Limits, Response, Timeouts, Timing
from pyattacker.http._connection import Connection
from pyattacker.http._exchange import HEAD_ONLY_ABOVE, Exchange, State
from pyattacker.http._pool import OriginPool

_GET = (b"GET / HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n", None, True)
_OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


class _Transport:
    """Just enough of a transport: writes are dropped, an abort is noted."""

    def __init__(self) -> None:
        self.aborted = False

    def write(self, data: bytes) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def abort(self) -> None:
        self.aborted = True


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def _open(loop: asyncio.AbstractEventLoop) -> tuple[Connection, OriginPool]:
    pool = OriginPool("http://127.0.0.1:9", 1)
    assert pool.reserve()
    conn = Connection(pool, lambda: 1.0, loop)
    conn.connection_made(_Transport())  # type: ignore[arg-type]
    pool.opened(conn)
    return conn, pool


def _send(
    conn: Connection, loop: asyncio.AbstractEventLoop, method: str = "GET", streaming: bool = False
) -> tuple[Response, asyncio.Future[Response]]:
    response = Response(URL.parse("http://127.0.0.1:9/"), Timing(0.0))
    waiter: asyncio.Future[Response] = loop.create_future()
    conn.send(response, _GET, Timeouts(read=None), waiter, method, streaming)
    return response, waiter


def test_a_request_walks_from_idle_through_head_and_body_back_to_its_pool(
    loop: asyncio.AbstractEventLoop,
) -> None:
    conn, pool = _open(loop)
    assert conn.state is State.IDLE
    _, waiter = _send(conn, loop)
    assert conn.state is State.AWAITING_HEAD
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab")
    assert conn.state is State.READING_BODY
    conn.data_received(b"cde")
    assert conn.state is State.IDLE
    assert waiter.result().body == b"abcde"
    assert pool.statistics()["idle"] == 1
    assert not conn.closed


def test_a_1xx_head_leaves_the_exchange_awaiting_its_final_head(
    loop: asyncio.AbstractEventLoop,
) -> None:
    conn, _ = _open(loop)
    _, waiter = _send(conn, loop)
    conn.data_received(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert conn.state is State.AWAITING_HEAD
    conn.data_received(_OK)
    assert conn.state is State.IDLE
    assert waiter.result().status == 200


def test_a_streamed_body_waits_in_stream_done_until_the_caller_leaves_its_context(
    loop: asyncio.AbstractEventLoop,
) -> None:
    conn, pool = _open(loop)
    response, waiter = _send(conn, loop, streaming=True)
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n")
    assert conn.state is State.READING_BODY
    assert waiter.result() is response  # the head is in: the caller may read
    conn.data_received(b"ok")
    assert conn.state is State.STREAM_DONE
    assert pool.statistics()["idle"] == 0  # still the caller's
    conn.end_stream(response)
    assert conn.state is State.IDLE
    assert pool.statistics()["idle"] == 1


def test_a_response_to_head_ends_at_its_head_and_the_next_request_reads_its_body(
    loop: asyncio.AbstractEventLoop,
) -> None:
    conn, pool = _open(loop)
    _, waiter = _send(conn, loop, method="HEAD")
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
    assert conn.state is State.IDLE
    assert waiter.result().body == b""
    assert pool.checkout(1.0) is conn
    _, waiter = _send(conn, loop)
    conn.data_received(_OK)
    assert waiter.result().body == b"ok"
    assert conn.state is State.IDLE
    assert not conn.closed


def test_a_body_delimited_by_the_close_completes_when_the_server_closes(
    loop: asyncio.AbstractEventLoop,
) -> None:
    conn, pool = _open(loop)
    _, waiter = _send(conn, loop)
    conn.data_received(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nabc")
    assert conn.state is State.READING_BODY
    conn.connection_lost(None)
    assert conn.state is State.IDLE
    assert waiter.result().body == b"abc"
    assert conn.closed
    assert pool.statistics()["open"] == 0


def test_giving_up_mid_body_ends_the_exchange_and_closes_the_connection(
    loop: asyncio.AbstractEventLoop,
) -> None:
    conn, pool = _open(loop)
    response, waiter = _send(conn, loop)
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab")
    conn.abandon(response)
    assert conn.state is State.IDLE
    assert waiter.cancelled()
    assert conn.closed
    assert pool.statistics()["open"] == 0


def test_bytes_nobody_asked_for_close_an_idle_connection(
    loop: asyncio.AbstractEventLoop,
) -> None:
    conn, pool = _open(loop)
    _send(conn, loop)
    conn.data_received(_OK)
    assert pool.statistics()["idle"] == 1
    conn.data_received(_OK)
    assert conn.state is State.IDLE
    assert conn.closed
    assert (pool.statistics()["open"], pool.statistics()["idle"]) == (0, 0)


def test_the_next_request_on_a_connection_keeps_nothing_of_the_previous_exchange(
    loop: asyncio.AbstractEventLoop,
) -> None:
    conn, pool = _open(loop)
    _, waiter = _send(conn, loop)
    # A 1xx head, a head split across reads, a large body: every field of the exchange used.
    conn.data_received(b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\n")
    conn.data_received(b"X-First: yes\r\nContent-Length: 2000\r\n\r\n" + b"a" * 2000)
    first = waiter.result()
    assert first.headers.get("x-first") == "yes"
    assert first.body_size == 2000
    assert pool.checkout(1.0) is conn
    _, waiter = _send(conn, loop)
    conn.data_received(
        b"HTTP/1.0 201 Created\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"
    )
    second = waiter.result()
    assert (second.status, second.http_version, second.body, second.body_size) == (
        201,
        "1.0",
        b"ok",
        2,
    )
    assert second.headers.get("x-first") is None


# ------------------------------------------------------------------- the Exchange itself


def _exchange(limits: Limits) -> Exchange:
    """An exchange on no connection: only a streamed body would need one."""
    return Exchange(cast(Connection, None), limits)


def _fed(exchange: Exchange, parts: list[bytes]) -> None:
    """Feed ``parts`` to the exchange's head buffer as the connection does."""
    exchange.head_bytes, exchange.head_parts = parts[0], None
    for part in parts[1:]:
        exchange.add_head_part(part)


@st.composite
def _answers(draw: st.DrawFn) -> tuple[bytes, bytes, int]:
    """Heads (some 1xx, then the final one), a body, and the number of 1xx heads."""
    informational = draw(st.integers(0, 2))
    heads = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" * informational
    padding = b"x" * draw(st.integers(0, 1500))
    heads += b"HTTP/1.1 200 OK\r\nX-Pad: " + padding + b"\r\n\r\n"
    return heads, b"b" * draw(st.integers(0, 3000)), informational


@settings(max_examples=200, deadline=None)
@given(_answers(), st.lists(st.integers(1, 5000), max_size=4))
def test_take_head_keeps_the_heads_without_the_body_read_with_them_however_split(
    answer: tuple[bytes, bytes, int], cuts: list[int]
) -> None:
    heads, body, informational = answer
    whole = heads + body
    points = sorted({0, len(whole), *(c % len(whole) for c in cuts)})
    parts = [whole[a:b] for a, b in itertools.pairwise(points) if b > a]
    exchange = _exchange(Limits(max_head=64 * 1024))
    _fed(exchange, parts)
    exchange.informational_heads = informational
    # A short read is kept whole (a superset of the heads is all the headers need).
    assert exchange.take_head() == (whole if len(whole) <= HEAD_ONLY_ABOVE else heads)
    assert (exchange.head_bytes, exchange.head_parts) == (b"", None)


def test_take_head_refuses_heads_over_max_head() -> None:
    exchange = _exchange(Limits(max_head=1024))
    head = b"HTTP/1.1 200 OK\r\nX-Pad: " + b"x" * 1100 + b"\r\n\r\n"
    _fed(exchange, [head[:600], head[600:] + b"body"])
    assert exchange.head_over_limit()
    assert exchange.take_head() is None


def test_begin_forgets_what_the_previous_exchange_read() -> None:
    exchange = _exchange(Limits())
    exchange.body, exchange.body_size, exchange.informational_heads = [b"old"], 3, 2
    exchange.got_bytes = exchange.until_close = exchange.informational = True
    response = Response(URL.parse("http://127.0.0.1:9/"), Timing(0.0, reused=True))
    waiter: Callable[[], None] = print  # any object: begin() only keeps it
    exchange.begin(response, waiter, False, True, True)  # type: ignore[arg-type]
    assert exchange.state is State.AWAITING_HEAD
    assert (exchange.response, exchange.waiter, exchange.reused) == (response, waiter, True)
    assert (exchange.head_only, exchange.keep_alive, exchange.streaming) == (True, True, False)
    assert (exchange.body, exchange.body_size, exchange.informational_heads) == ([], 0, 0)
    assert (exchange.got_bytes, exchange.until_close, exchange.informational) == (False,) * 3
