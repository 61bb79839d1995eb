"""Streamed responses: chunks with arrival times, connection reuse, and backpressure."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from http_helpers import LOOPS, Peer, Server, run
from pyattacker.errors import RemoteProtocolError
from pyattacker.http import HttpClient, Response, Timing
from pyattacker.http._response import _HIGH_WATER, _LOW_WATER, BodyStream

DELAY = 0.05


async def chunked_slowly(peer: Peer) -> None:
    """Three chunks, ``DELAY`` apart, on every request of the connection."""
    while await peer.read_request() is not None:
        await peer.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for part in (b"one", b"two", b"three"):
            await peer.send(b"%x\r\n%s\r\n" % (len(part), part))
            await asyncio.sleep(DELAY)
        await peer.send(b"0\r\n\r\n")


@pytest.mark.parametrize("loop", LOOPS)
def test_streamed_chunks_carry_increasing_arrival_times_that_show_the_delay(loop: str) -> None:
    async def main() -> tuple[list[tuple[bytes, float]], Response, dict[str, int]]:
        async with Server(chunked_slowly) as server, HttpClient() as client:
            async with client.stream("GET", server.url) as response:
                chunks = [item async for item in response.iter_chunks()]
            (stats,) = client.statistics().values()
            return chunks, response, stats

    chunks, response, stats = run(main, loop)
    assert [c for c, _ in chunks] == [b"one", b"two", b"three"]
    times = [t for _, t in chunks]
    assert response.timing.chunk_times == times
    assert response.timing.first_byte <= times[0]  # type: ignore[operator]
    # Each chunk left the server DELAY after the previous one: the gaps are at least that
    # (less a little for timer rounding); nothing bounds them from above.
    assert all(later - earlier >= DELAY * 0.8 for earlier, later in itertools.pairwise(times))
    assert response.timing.end >= times[-1]  # type: ignore[operator]
    assert response.body == b""  # iterated, not read
    assert (stats["open"], stats["idle"]) == (1, 1)  # fully read: back in the pool


def test_read_joins_a_streamed_body_and_a_second_read_returns_it_again() -> None:
    async def main() -> tuple[bytes, bytes, Response]:
        async with Server(chunked_slowly) as server, HttpClient() as client:
            async with client.stream("GET", server.url) as response:
                first = await response.read()
                again = await response.read()
            with pytest.raises(RuntimeError):
                response.iter_chunks()
            return first, again, response

    first, again, response = run(main)
    assert first == again == response.body == b"onetwothree"
    assert len(response.timing.chunk_times) == 3


def test_leaving_a_stream_before_its_end_closes_the_connection() -> None:
    async def main() -> tuple[dict[str, int], Response, int]:
        async with Server(chunked_slowly) as server, HttpClient() as client:
            async with client.stream("GET", server.url) as response:
                async for chunk, _ in response.iter_chunks():
                    assert chunk == b"one"
                    break
            (stats,) = client.statistics().values()
            after = await client.request("GET", server.url)
            return stats, after, server.accepted

    stats, after, accepted = run(main)
    assert (stats["open"], stats["idle"]) == (0, 0)
    assert after.body == b"onetwothree"
    assert not after.timing.reused
    assert accepted == 2


def test_a_stream_whose_body_is_never_taken_cannot_be_read_after_its_context() -> None:
    async def main() -> Response:
        async with Server(chunked_slowly) as server, HttpClient() as client:
            async with client.stream("GET", server.url) as response:
                pass
            return response

    response = run(main)
    with pytest.raises(RuntimeError, match="closed"):
        response.iter_chunks()


def test_a_stream_that_breaks_off_raises_after_the_chunks_that_arrived() -> None:
    async def broken(peer: Peer) -> None:
        await peer.read_request()
        await peer.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
        await asyncio.sleep(0.02)
        peer.close()

    async def main() -> tuple[list[bytes], BaseException]:
        got: list[bytes] = []
        async with (
            Server(broken) as server,
            HttpClient() as client,
            client.stream("GET", server.url) as response,
        ):
            try:
                async for chunk, _ in response.iter_chunks():
                    got.append(chunk)
            except RemoteProtocolError as exc:
                return got, exc
        raise AssertionError("the broken stream ended without an error")

    got, error = run(main)
    assert got == [b"abc"]
    assert isinstance(error, RemoteProtocolError)


def test_a_streamed_body_much_larger_than_the_buffer_arrives_whole() -> None:
    size = 8 * 1024 * 1024

    async def big(peer: Peer) -> None:
        await peer.read_request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
        await peer.send(b"z" * size)

    async def main() -> int:
        total = 0
        async with (
            Server(big) as server,
            HttpClient() as client,
            client.stream("GET", server.url) as response,
        ):
            async for chunk, _ in response.iter_chunks():
                total += len(chunk)
                await asyncio.sleep(0)  # a consumer slower than the socket
        return total

    assert run(main) == size


def test_a_stream_fills_the_timing_it_is_given() -> None:
    async def main() -> tuple[Timing, Response]:
        timing = Timing(0.0)
        async with (
            Server(chunked_slowly) as server,
            HttpClient() as client,
            client.stream("GET", server.url, timing=timing) as response,
        ):
            await response.read()
        return timing, response

    timing, response = run(main)
    assert response.timing is timing
    assert timing.sent is not None
    assert timing.first_byte is not None
    assert timing.end is not None
    assert timing.started <= timing.sent <= timing.first_byte <= timing.end
    assert len(timing.chunk_times) == 3


def test_a_stream_cancelled_before_the_response_head_leaves_sent_in_the_callers_timing() -> None:
    async def main() -> tuple[Timing, bool]:
        timing = Timing(0.0)
        request_read = asyncio.Event()

        async def silent(peer: Peer) -> None:
            await peer.read_request()
            request_read.set()
            await asyncio.Event().wait()  # never answers

        async def take_stream(client: HttpClient, url: str) -> None:
            async with client.stream("POST", url, body=b"question", timing=timing):
                raise AssertionError("no response head ever came")

        async with Server(silent) as server, HttpClient() as client:
            waiting = asyncio.create_task(take_stream(client, server.url))
            await request_read.wait()
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
        return timing, waiting.cancelled()

    timing, cancelled = run(main)
    assert cancelled
    assert timing.sent is not None  # the only record of it: no response, no error
    assert timing.started <= timing.sent
    assert timing.first_byte is None
    assert timing.end is None


class Reading:
    """What BodyStream needs of a connection: it records pause/resume calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def pause_for_consumer(self) -> None:
        self.calls.append("pause")

    def resume_for_consumer(self) -> None:
        self.calls.append("resume")


def test_a_full_stream_buffer_pauses_reading_until_the_consumer_drains_it() -> None:
    async def main() -> list[str]:
        reading = Reading()
        stream = BodyStream(reading)  # type: ignore[arg-type]
        chunk = b"x" * 16 * 1024
        for i in range(_HIGH_WATER // len(chunk) + 1):
            stream.push(chunk, float(i))
        assert reading.calls == ["pause"]
        stream.push(chunk, 99.0)  # still paused: no second pause
        while reading.calls == ["pause"]:
            await stream.next()
        assert stream._size < _LOW_WATER
        stream.finish()
        while await stream.next() is not None:
            pass
        return reading.calls

    assert asyncio.run(main()) == ["pause", "resume"]


@pytest.mark.parametrize("loop", LOOPS)
def test_consume_hands_each_chunk_to_the_sink_with_its_arrival_time(loop: str) -> None:
    async def main() -> tuple[list[tuple[bytes, float]], Response, dict[str, int]]:
        got: list[tuple[bytes, float]] = []
        async with Server(chunked_slowly) as server, HttpClient() as client:
            async with client.stream("GET", server.url) as response:
                await response.consume(lambda chunk, at: got.append((chunk, at)))
                with pytest.raises(RuntimeError):
                    response.iter_chunks()  # taken once, like iter_chunks and read
            (stats,) = client.statistics().values()
            return got, response, stats

    got, response, stats = run(main, loop)
    assert [c for c, _ in got] == [b"one", b"two", b"three"]
    assert [t for _, t in got] == response.timing.chunk_times
    assert (stats["open"], stats["idle"]) == (1, 1)  # fully read: back in the pool


def test_consume_first_hands_over_the_chunks_that_arrived_before_it() -> None:
    async def main() -> list[bytes]:
        got: list[bytes] = []
        async with (
            Server(chunked_slowly) as server,
            HttpClient() as client,
            client.stream("GET", server.url) as response,
        ):
            await asyncio.sleep(DELAY * 1.5)  # "one" (and maybe "two") are queued now
            await response.consume(lambda chunk, at: got.append(chunk))
        return got

    assert run(main) == [b"one", b"two", b"three"]


def test_a_sink_that_raises_ends_the_body_there_and_the_connection_is_not_reused() -> None:
    class Refused(Exception):
        pass

    def sink(chunk: bytes, at: float) -> None:
        if chunk == b"two":
            raise Refused(chunk)

    async def main() -> tuple[BaseException, dict[str, int]]:
        async with Server(chunked_slowly) as server, HttpClient() as client:
            async with client.stream("GET", server.url) as response:
                with pytest.raises(Refused) as caught:
                    await response.consume(sink)
            (stats,) = client.statistics().values()
            return caught.value, stats

    error, stats = run(main)
    assert error.args == (b"two",)
    assert (stats["open"], stats["idle"]) == (0, 0)  # left before its end: closed


def test_consume_raises_the_break_of_a_stream_that_breaks_off() -> None:
    async def broken(peer: Peer) -> None:
        await peer.read_request()
        await peer.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
        await asyncio.sleep(0.02)
        peer.close()

    async def main() -> tuple[list[bytes], BaseException]:
        got: list[bytes] = []
        async with (
            Server(broken) as server,
            HttpClient() as client,
            client.stream("GET", server.url) as response,
        ):
            with pytest.raises(RemoteProtocolError) as caught:
                await response.consume(lambda chunk, at: got.append(chunk))
        return got, caught.value

    got, error = run(main)
    assert got == [b"abc"]
    assert isinstance(error, RemoteProtocolError)
