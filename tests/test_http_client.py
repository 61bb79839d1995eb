"""HttpClient against real servers on 127.0.0.1: framing, keep-alive, the pool, timeouts.

Every server is started by its test (port 0) and misbehaves on purpose. Real-time waits are
at most 0.2 s, and no assertion bounds how long anything took from above.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable

import pytest

from http_helpers import LOOPS, Peer, Server, closed_port, keep_alive, run
from pyattacker import __version__
from pyattacker.errors import (
    ConfigError,
    ConnectError,
    RemoteProtocolError,
    RequestTimeout,
    error_class_of,
)
from pyattacker.http import URL, HttpClient, Response, Timeouts


async def _get(server: Server, client: HttpClient, path: str = "/") -> Response:
    return await client.request("GET", server.url.rstrip("/") + path)


# ------------------------------------------------------------------------- the basics


@pytest.mark.parametrize("loop", LOOPS)
def test_a_get_returns_status_headers_body_and_a_complete_timing(loop: str) -> None:
    async def handler(peer: Peer) -> None:
        await peer.read_request()
        await peer.respond(201, b"hello", "X-Twice: 1\r\nx-twice: 2\r\n")

    async def main() -> Response:
        async with Server(handler) as server, HttpClient() as client:
            return await _get(server, client, "/a?b=c")

    response = run(main, loop)
    assert (response.status, response.reason, response.body, response.text()) == (
        201,
        "X",
        b"hello",
        "hello",
    )
    assert response.http_version == "1.1"
    assert response.headers.get("x-twice") == "1"
    assert response.headers.get_all("X-TWICE") == ["1", "2"]
    assert "content-length" in response.headers
    t = response.timing
    assert t.connected is not None
    assert t.sent is not None
    assert t.first_byte is not None
    assert t.end is not None
    assert t.started <= t.connected <= t.sent <= t.first_byte <= t.end
    assert t.reused is False
    assert t.chunk_times == []


@pytest.mark.parametrize("loop", LOOPS)
def test_keep_alive_connections_are_reused_and_statistics_say_so(loop: str) -> None:
    async def main() -> tuple[list[Response], dict[str, dict[str, int]]]:
        async with Server(keep_alive) as server, HttpClient() as client:
            responses = [await _get(server, client) for _ in range(3)]
            assert server.accepted == 1
            return responses, client.statistics()

    responses, stats = run(main, loop)
    assert [r.timing.reused for r in responses] == [False, True, True]
    assert [r.timing.connected is None for r in responses] == [False, True, True]
    (origin,) = stats
    assert origin.startswith("http://127.0.0.1:")
    assert stats[origin] == {
        "open": 1,
        "idle": 1,
        "in_use": 0,
        "waiting": 0,
        "created": 1,
        "reused": 2,
    }


def test_the_request_carries_host_default_headers_and_the_callers_headers() -> None:
    async def main() -> Server:
        async with Server(keep_alive) as server:
            async with HttpClient(headers={"X-Default": "d", "Accept": "*/*"}) as client:
                url = URL.parse(server.url).join("/p?q=1")
                await client.request(
                    "GET", url, headers=[("Accept", "text/plain"), ("X-Many", "1"), ("X-Many", "2")]
                )
                await client.request("POST", url, body=b"payload")
                await client.request("PUT", url)
            return server

    server = run(main)
    get, post, put = server.requests
    assert (get.method, get.target) == ("GET", "/p?q=1")
    assert get.header("host") == f"127.0.0.1:{server.port}"
    assert get.header("user-agent") == f"pyattacker/{__version__}"
    assert get.header("x-default") == "d"
    assert [v for n, v in get.headers if n == "Accept"] == [
        "text/plain"
    ]  # the caller's replaces the default
    assert [v for n, v in get.headers if n == "X-Many"] == ["1", "2"]
    assert get.header("content-length") is None
    assert (post.body, post.header("content-length")) == (b"payload", "7")
    assert (put.body, put.header("content-length")) == (b"", "0")


def test_bad_headers_raise_config_error_before_anything_is_sent() -> None:
    async def main() -> Server:
        async with Server(keep_alive) as server, HttpClient() as client:
            with pytest.raises(ConfigError) as info:
                await client.request("GET", server.url, headers={"X-Evil": "a\r\nInjected: 1"})
            assert info.value.field == "headers.X-Evil"
            with pytest.raises(ConfigError):
                await client.request("GET", server.url, headers={"Content-Length": "3"})
            with pytest.raises(ConfigError):
                await client.request("GET", "ftp://127.0.0.1/")
            return server

    assert run(main).accepted == 0


# ------------------------------------------------------------------------ body framing


@pytest.mark.parametrize("loop", LOOPS)
def test_large_bodies_go_out_and_come_back_whole(loop: str) -> None:
    payload = bytes(range(256)) * 20_000  # 5 MB

    async def echo(peer: Peer) -> None:
        while (request := await peer.read_request()) is not None:
            await peer.respond(200, request.body)

    async def main() -> Response:
        async with Server(echo) as server, HttpClient() as client:
            return await client.request("POST", server.url, body=payload)

    response = run(main, loop)
    assert response.body == payload
    t = response.timing
    assert t.sent is not None
    assert t.first_byte is not None
    assert t.sent <= t.first_byte  # the server answered after reading it all


async def _read_head_only(peer: Peer) -> None:
    await peer.reader.readuntil(b"\r\n\r\n")


def test_an_answer_before_the_body_was_sent_leaves_the_connection_unusable() -> None:
    async def early(peer: Peer) -> None:
        if peer.server.accepted > 1:
            await keep_alive(peer)
            return
        await _read_head_only(peer)
        await peer.respond(413, b"too large")  # without reading the body
        await asyncio.sleep(0.2)

    async def main() -> tuple[Response, Response, int]:
        async with Server(early) as server, HttpClient() as client:
            first = await client.request("POST", server.url, body=b"b" * 32_000_000)
            second = await client.request("GET", server.url)
            return first, second, server.accepted

    first, second, accepted = run(main)
    assert (first.status, first.timing.sent) == (413, None)  # never fully sent
    assert (second.status, second.timing.reused, accepted) == (200, False, 2)


def test_a_server_that_stops_taking_the_body_is_a_read_timeout() -> None:
    async def stuck(peer: Peer) -> None:
        await _read_head_only(peer)
        await asyncio.sleep(10)

    async def main() -> RequestTimeout:
        async with Server(stuck) as server, HttpClient() as client:
            with pytest.raises(RequestTimeout) as info:
                await client.request(
                    "PUT", server.url, body=b"b" * 32_000_000, timeouts=Timeouts(read=0.1)
                )
            return info.value

    error = run(main)
    assert error.phase == "read"
    assert "took no request byte" in str(error)
    assert error.timing.sent is None  # type: ignore[attr-defined]


def test_a_body_after_a_head_response_takes_the_connection_out_of_the_pool() -> None:
    async def wrong(peer: Peer) -> None:
        while await peer.read_request() is not None:
            await peer.respond(200, b"hello")  # a body, even for HEAD: broken framing

    async def main() -> tuple[Response, Response, int]:
        async with Server(wrong) as server, HttpClient() as client:
            head = await client.request("HEAD", server.url)
            get = await client.request("GET", server.url)
            return head, get, server.accepted

    head, get, accepted = run(main)
    assert (head.status, head.body) == (200, b"")
    assert (get.body, get.timing.reused, accepted) == (b"hello", False, 2)


def test_a_chunked_response_is_joined_and_its_connection_reused() -> None:
    async def chunked(peer: Peer) -> None:
        while await peer.read_request() is not None:
            await peer.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            for part in (b"abc", b"defgh", b"x" * 70_000):
                await peer.send(b"%x\r\n%s\r\n" % (len(part), part))
            await peer.send(b"0\r\n\r\n")

    async def main() -> tuple[Response, Response]:
        async with Server(chunked) as server, HttpClient() as client:
            return await _get(server, client), await _get(server, client)

    first, second = run(main)
    assert first.body == second.body == b"abcdefgh" + b"x" * 70_000
    assert second.timing.reused


def test_a_body_delimited_by_the_close_is_read_to_the_end() -> None:
    async def http10(peer: Peer) -> None:
        await peer.read_request()
        await peer.send(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nfirst part, ")
        await asyncio.sleep(0.02)
        await peer.send(b"second part")
        peer.close()

    async def main() -> tuple[Response, dict[str, int]]:
        async with Server(http10) as server, HttpClient() as client:
            response = await _get(server, client)
            return response, next(iter(client.statistics().values()))

    response, stats = run(main)
    assert (response.http_version, response.body) == ("1.0", b"first part, second part")
    assert stats["open"] == 0


@pytest.mark.parametrize("loop", LOOPS)
def test_head_204_and_304_have_no_body_and_keep_the_connection(loop: str) -> None:
    async def handler(peer: Peer) -> None:
        while (request := await peer.read_request()) is not None:
            if request.method == "HEAD":
                await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
            elif request.target == "/204":
                await peer.send(b"HTTP/1.1 204 No Content\r\n\r\n")
            elif request.target == "/304":
                await peer.send(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n")
            else:
                await peer.respond(200, b"after")

    async def main() -> tuple[list[Response], int]:
        async with Server(handler) as server, HttpClient() as client:
            responses = [await client.request("HEAD", server.url)]
            responses += [await _get(server, client, p) for p in ("/204", "/304", "/")]
            responses += [await client.request("HEAD", server.url), await _get(server, client)]
            return responses, server.accepted

    responses, accepted = run(main, loop)
    assert [(r.status, r.body) for r in responses] == [
        (200, b""), (204, b""), (304, b""), (200, b"after"), (200, b""), (200, b"after"),
    ]  # fmt: skip
    assert responses[0].headers.get("content-length") == "1000"
    assert accepted == 1


def test_informational_responses_are_skipped() -> None:
    async def handler(peer: Peer) -> None:
        await peer.read_request()
        await peer.send(b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n")
        await peer.respond(200, b"final")

    async def main() -> Response:
        async with Server(handler) as server, HttpClient() as client:
            return await _get(server, client)

    response = run(main)
    assert (response.status, response.body, "link" in response.headers) == (200, b"final", False)


# ------------------------------------------------------------------- closing and errors


def test_connection_close_from_the_server_means_a_new_connection_next_time() -> None:
    async def closing(peer: Peer) -> None:
        await peer.read_request()
        await peer.respond(headers="Connection: close\r\n")

    async def main() -> tuple[list[Response], int, dict[str, int]]:
        async with Server(closing) as server, HttpClient() as client:
            responses = [await _get(server, client) for _ in range(2)]
            return responses, server.accepted, next(iter(client.statistics().values()))

    responses, accepted, stats = run(main)
    assert [r.timing.reused for r in responses] == [False, False]
    assert accepted == 2
    assert (stats["open"], stats["created"], stats["reused"]) == (0, 2, 0)


def test_a_connection_the_server_closed_while_idle_is_not_used() -> None:
    async def answer_once(peer: Peer) -> None:
        await peer.read_request()
        await peer.respond()  # keep-alive by the headers, then closed anyway

    async def main() -> tuple[list[Response], Server]:
        async with Server(answer_once) as server, HttpClient() as client:
            first = await _get(server, client)
            await asyncio.sleep(0.05)  # the FIN reaches the client while it is idle
            return [first, await _get(server, client)], server

    responses, server = run(main)
    assert [r.status for r in responses] == [200, 200]
    assert responses[1].timing.reused is False
    assert (server.accepted, len(server.requests)) == (2, 2)


@pytest.mark.parametrize("reuse", [False, True])
def test_a_close_before_any_response_byte_is_a_connect_error_and_nothing_is_resent(
    reuse: bool,
) -> None:
    async def handler(peer: Peer) -> None:
        if reuse:
            await peer.read_request()
            await peer.respond()
        await peer.read_request()
        peer.close()  # read it, answered nothing

    async def main() -> tuple[BaseException, Server]:
        async with Server(handler) as server, HttpClient() as client:
            if reuse:
                await _get(server, client)
            with pytest.raises(ConnectError) as info:
                await _get(server, client)
            await asyncio.sleep(0.02)  # a resend, if there were one, would have arrived
            return info.value, server

    error, server = run(main)
    assert error_class_of(error) == "connection"
    assert len(server.requests) == (2 if reuse else 1)
    assert server.accepted == 1
    assert ("pooled keep-alive" in str(error)) is reuse
    assert error.timing.first_byte is None  # type: ignore[attr-defined]


@pytest.mark.parametrize("loop", LOOPS)
def test_a_close_mid_body_is_a_remote_protocol_error(loop: str) -> None:
    async def handler(peer: Peer) -> None:
        await peer.read_request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
        peer.close()

    async def main() -> tuple[RemoteProtocolError, dict[str, int]]:
        async with Server(handler) as server, HttpClient() as client:
            with pytest.raises(RemoteProtocolError) as info:
                await _get(server, client)
            return info.value, next(iter(client.statistics().values()))

    error, stats = run(main, loop)
    assert error_class_of(error) == "upstream"
    assert error.timing.first_byte is not None
    assert error.timing.end is None
    assert stats["open"] == 0


def test_a_malformed_response_is_a_remote_protocol_error_with_the_parser_error_as_cause() -> None:
    async def handler(peer: Peer) -> None:
        await peer.read_request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: nope\r\n\r\n")

    async def main() -> RemoteProtocolError:
        async with Server(handler) as server, HttpClient() as client:
            with pytest.raises(RemoteProtocolError) as info:
                await _get(server, client)
            return info.value

    error = run(main)
    assert type(error.__cause__).__module__.startswith("httptools")


@pytest.mark.parametrize("loop", LOOPS)
def test_a_refused_connection_is_a_connect_error_that_frees_its_slot(loop: str) -> None:
    async def main() -> tuple[ConnectError, dict[str, int]]:
        async with HttpClient(max_connections=1) as client:
            url = f"http://127.0.0.1:{closed_port()}/"
            for _ in range(2):  # a leaked slot would make the second wait forever
                with pytest.raises(ConnectError) as info:
                    await client.request("GET", url, timeouts=Timeouts(connect=1.0))
            return info.value, next(iter(client.statistics().values()))

    error, stats = run(main, loop)
    assert isinstance(error.__cause__, ConnectionRefusedError)
    assert error_class_of(error) == "connection"
    assert error.timing.connected is None  # type: ignore[attr-defined]
    assert (stats["open"], stats["created"]) == (0, 0)


class ShiftedClock:
    """Real monotonic time plus an offset the test moves forward (an idle gap, instantly)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def now(self) -> float:
        return time.monotonic() + self.offset

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def reader(self) -> Callable[[], float]:
        return self.now  # the offset moves: read it every time


def _answer_once_then_close(listener: socket.socket, closed: threading.Event) -> None:
    """A thread's server: one keep-alive answer, then a close the client's loop misses."""
    conn, _ = listener.accept()
    with conn:
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        conn.shutdown(socket.SHUT_RDWR)
    closed.set()
    conn, _ = listener.accept()  # the client's next connection
    with conn:
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfresh")


def test_a_long_idle_connection_is_probed_and_a_closed_one_is_not_used() -> None:
    clock = ShiftedClock()

    async def main() -> list[Response]:
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            listener.settimeout(5)  # a failing test must not leave the thread in accept()
            closed = threading.Event()
            server = threading.Thread(
                target=_answer_once_then_close, args=(listener, closed), daemon=True
            )
            server.start()
            url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
            async with HttpClient(clock=clock) as client:
                first = await client.request("GET", url)
                # Block the loop until the server has closed: the client cannot have seen
                # the FIN yet, only the kernel has. Then "wait" 2 s of clock time.
                assert closed.wait(5)
                clock.offset += 2.0
                second = await client.request("GET", url)
            server.join(5)
            return [first, second]

    first, second = run(main)
    assert (first.body, second.body) == (b"ok", b"fresh")
    assert second.timing.reused is False


@pytest.mark.parametrize(
    "chunks",
    [
        [b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"],
        [b"HTT", b"P/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"],  # version split across reads
        [b"HTTP/1.1 103 Early Hints\r\n\r\n", b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"],
    ],
)
def test_the_http_version_is_the_final_status_lines_however_its_bytes_arrive(
    chunks: list[bytes],
) -> None:
    async def handler(peer: Peer) -> None:
        await peer.read_request()
        for chunk in chunks:
            await peer.send(chunk)
            await asyncio.sleep(0.01)
        peer.close()

    async def main() -> Response:
        async with Server(handler) as server, HttpClient() as client:
            return await _get(server, client)

    response = run(main)
    assert (response.http_version, response.status, response.body) == ("1.0", 200, b"ok")


@pytest.mark.parametrize("loop", LOOPS)
def test_start_follows_the_client_to_a_second_loop_and_refuses_outside_any(loop: str) -> None:
    client = HttpClient()

    async def first() -> None:
        async with Server(keep_alive) as server:
            await _get(server, client)  # leaves an idle connection of this loop's
            assert client.statistics()[server.url.rstrip("/")]["idle"] == 1

    async def second() -> tuple[Callable[[], None] | None, Response]:
        async with Server(keep_alive) as server:
            # The first loop's connection is not this loop's: start() finds none idle.
            none_idle = client.start("GET", server.url, asyncio.get_running_loop().create_future())
            await _get(server, client)
            waiter: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
            assert client.start("GET", server.url, waiter) is not None
            response = await waiter
            await client.aclose()
            return none_idle, response

    run(first, loop)
    none_idle, response = run(second, loop)
    assert none_idle is None
    assert (response.status, response.body) == (200, b"ok")
    idle = asyncio.new_event_loop()
    waiter: asyncio.Future[Response] = idle.create_future()
    idle.close()
    with pytest.raises(RuntimeError, match="no running event loop"):  # nothing to send on
        client.start("GET", "http://127.0.0.1:9/", waiter)


def test_preconnect_opens_idle_connections_that_requests_then_reuse() -> None:
    async def main() -> tuple[int, int, int, Response, int, int]:
        async with Server(keep_alive) as server, HttpClient(max_connections=5) as client:
            opened = await client.preconnect(server.url, 3)
            again = await client.preconnect(server.url, 3)  # already open: none more
            capped = await client.preconnect(server.url, 50)  # up to max_connections
            response = await _get(server, client)
            stats = client.statistics()[server.url.rstrip("/")]
            return opened, again, capped, response, server.accepted, stats["created"]

    opened, again, capped, response, accepted, created = run(main)
    assert (opened, again, capped) == (3, 3, 5)
    assert (accepted, created) == (5, 5)
    assert response.timing.reused is True  # the request connected nothing itself
    assert response.timing.connected is None


def test_preconnect_to_a_refused_port_opens_none_and_raises_nothing() -> None:
    async def main() -> tuple[int, dict[str, int]]:
        async with HttpClient() as client:
            url = f"http://127.0.0.1:{closed_port()}/"
            opened = await client.preconnect(url, 4)
            return opened, client.statistics()[url.rstrip("/")]

    opened, stats = run(main)
    assert opened == 0
    assert (stats["open"], stats["idle"]) == (0, 0)  # every reserved slot was freed


def test_start_sends_each_call_s_own_method_and_body_when_other_arguments_repeat() -> None:
    async def main() -> list[tuple[str, bytes]]:
        async with Server(keep_alive) as server, HttpClient() as client:
            await _get(server, client)  # an idle connection for start()
            url, headers = URL.parse(server.url), (("X-Same", "1"),)
            for method, body in (("GET", None), ("POST", b"one"), ("POST", b"two")):
                waiter: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
                assert client.start(method, url, waiter, headers, body) is not None
                await waiter
            return [(r.method, r.body) for r in server.requests[1:]]

    assert run(main) == [("GET", b""), ("POST", b"one"), ("POST", b"two")]
