"""HttpClient's per-origin pool and timeouts: bounded, FIFO, nothing leaked on failure.

Real servers on 127.0.0.1; waits are at most 0.2 s of real time and only ever bound
durations from below.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from http_helpers import LOOPS, Peer, Server, keep_alive, run
from pyattacker.errors import RequestTimeout, error_class_of
from pyattacker.http import HttpClient, Response, Timeouts
from pyattacker.http._pool import OriginPool


def _stats(client: HttpClient) -> dict[str, int]:
    (stats,) = client.statistics().values()
    return stats


class Gate:
    """A server whose answers wait until the test opens the gate."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.arrived = 0
        self._arrival = asyncio.Event()

    async def arrivals(self, count: int) -> None:
        """Return once ``count`` requests have reached the server."""
        while self.arrived < count:
            self._arrival.clear()
            await self._arrival.wait()

    async def handler(self, peer: Peer) -> None:
        while (request := await peer.read_request()) is not None:
            self.arrived += 1
            self._arrival.set()
            await self.open.wait()
            await peer.respond(200, request.target.encode())


@pytest.mark.parametrize("loop", LOOPS)
def test_requests_beyond_max_connections_wait_in_fifo_order(loop: str) -> None:
    async def main() -> tuple[list[dict[str, int]], list[Response], list[str]]:
        gate = Gate()
        finished: list[str] = []
        async with Server(gate.handler) as server, HttpClient(max_connections=2) as client:

            async def get(path: str) -> Response:
                response = await client.request("GET", server.url + path)
                finished.append(path)
                return response

            tasks = [asyncio.ensure_future(get(p)) for p in ("a", "b", "c", "d")]
            await gate.arrivals(2)
            during = _stats(client)
            gate.open.set()
            responses = await asyncio.gather(*tasks)
            return [during, _stats(client)], responses, finished

    (during, after), responses, finished = run(main, loop)
    assert during == {"open": 2, "idle": 0, "in_use": 2, "waiting": 2, "created": 2, "reused": 0}
    assert after == {"open": 2, "idle": 2, "in_use": 0, "waiting": 0, "created": 2, "reused": 2}
    assert [r.body for r in responses] == [b"/a", b"/b", b"/c", b"/d"]
    assert [r.timing.reused for r in responses] == [False, False, True, True]
    assert set(finished[:2]) == {"a", "b"}  # the order among c and d is the server's


def test_waiting_for_a_full_pool_times_out_in_the_connect_phase_and_leaves_the_queue() -> None:
    async def main() -> tuple[RequestTimeout, dict[str, int], Response]:
        gate = Gate()
        async with Server(gate.handler) as server, HttpClient(max_connections=1) as client:
            first = asyncio.ensure_future(client.request("GET", server.url))
            await gate.arrivals(1)
            with pytest.raises(RequestTimeout) as info:
                await client.request("GET", server.url, timeouts=Timeouts(connect=0.05))
            stats = _stats(client)
            gate.open.set()
            return info.value, stats, await first

    error, stats, first = run(main)
    assert (error.phase, error.timeout_s, error_class_of(error)) == ("connect", 0.05, "timeout")
    assert stats["waiting"] == 0
    assert stats["open"] == 1
    assert first.status == 200


@pytest.mark.parametrize("loop", LOOPS)
def test_a_silent_server_gives_a_read_timeout_and_the_connection_is_closed(loop: str) -> None:
    async def silent(peer: Peer) -> None:
        await peer.read_request()
        await asyncio.sleep(10)

    async def main() -> tuple[RequestTimeout, dict[str, int]]:
        async with Server(silent) as server, HttpClient(timeouts=Timeouts(read=0.1)) as client:
            with pytest.raises(RequestTimeout) as info:
                await client.request("GET", server.url)
            return info.value, _stats(client)

    error, stats = run(main, loop)
    assert (error.phase, error.timeout_s) == ("read", 0.1)
    timing = error.timing  # type: ignore[attr-defined]
    assert timing.sent is not None
    assert timing.first_byte is None
    assert stats["open"] == 0


def test_the_read_timeout_is_the_longest_gap_not_the_whole_response() -> None:
    async def trickle(peer: Peer) -> None:
        await peer.read_request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
        for byte in b"slow!":
            await asyncio.sleep(0.04)
            await peer.send(bytes([byte]))

    async def main() -> Response:
        async with Server(trickle) as server, HttpClient() as client:
            return await client.request("GET", server.url, timeouts=Timeouts(read=0.15))

    response = run(main)  # 0.2 s in all, no gap near 0.15 s
    assert response.body == b"slow!"
    assert response.timing.end - response.timing.first_byte >= 0.15  # type: ignore[operator]


def test_the_total_timeout_ends_a_response_that_keeps_trickling() -> None:
    async def trickle(peer: Peer) -> None:
        await peer.read_request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        for _ in range(1000):
            await asyncio.sleep(0.02)
            await peer.send(b"x")

    async def main() -> tuple[RequestTimeout, dict[str, int]]:
        async with Server(trickle) as server, HttpClient() as client:
            with pytest.raises(RequestTimeout) as info:
                await client.request("GET", server.url, timeouts=Timeouts(read=0.1, total=0.15))
            return info.value, _stats(client)

    error, stats = run(main)
    assert (error.phase, error.timeout_s) == ("total", 0.15)
    assert error.timing.first_byte is not None  # type: ignore[attr-defined]
    assert stats["open"] == 0


@pytest.mark.parametrize("loop", LOOPS)
def test_cancelling_a_request_closes_its_connection_and_frees_the_slot(loop: str) -> None:
    async def main() -> tuple[dict[str, int], Response]:
        gate = Gate()
        async with Server(gate.handler) as server, HttpClient(max_connections=1) as client:
            task = asyncio.ensure_future(client.request("GET", server.url))
            await gate.arrivals(1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            stats = _stats(client)
            gate.open.set()
            return stats, await client.request("GET", server.url)

    stats, response = run(main, loop)
    assert (stats["open"], stats["in_use"]) == (0, 0)
    assert response.status == 200
    assert response.timing.reused is False


def test_cancelling_a_waiter_leaves_the_queue_and_the_next_one_gets_the_connection() -> None:
    async def main() -> tuple[dict[str, int], list[Response]]:
        gate = Gate()
        async with Server(gate.handler) as server, HttpClient(max_connections=1) as client:
            first = asyncio.ensure_future(client.request("GET", server.url + "1"))
            await gate.arrivals(1)
            waiting = asyncio.ensure_future(client.request("GET", server.url + "2"))
            last = asyncio.ensure_future(client.request("GET", server.url + "3"))
            await asyncio.sleep(0.01)
            waiting.cancel()
            await asyncio.sleep(0.01)
            stats = _stats(client)
            gate.open.set()
            return stats, [await first, await last]

    stats, responses = run(main)
    assert stats["waiting"] == 1
    assert [r.body for r in responses] == [b"/1", b"/3"]
    assert responses[1].timing.reused


def test_aclose_closes_idle_connections_and_refuses_later_requests() -> None:
    async def main() -> tuple[dict[str, int], str]:
        async with Server(keep_alive) as server:
            client = HttpClient()
            await client.request("GET", server.url)
            await client.aclose()
            await client.aclose()  # idempotent
            with pytest.raises(RuntimeError, match="closed"):
                await client.request("GET", server.url)
            return _stats(client), repr(client)

    stats, text = run(main)
    assert stats["open"] == 0
    assert text.startswith("<HttpClient closed origins=1 open=0 idle=0")


# ------------------------------------------------------------- the pool's bookkeeping


class FakeConnection:
    """What OriginPool needs of a connection: liveness, idle time, and discard()."""

    def __init__(self, pool: OriginPool, name: str) -> None:
        self.pool, self.name = pool, name
        self.closed = self.dropped = False
        self.idle_since, self.fd = 0.0, -1

    def discard(self) -> None:
        self.closed = True
        if not self.dropped:
            self.dropped = True
            self.pool.drop(self)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return self.name


def test_the_pool_hands_a_returned_connection_to_the_first_waiter_and_reuses_idle_ones_lifo() -> (
    None
):
    loop = asyncio.new_event_loop()
    try:
        pool = OriginPool("http://x:1", limit=2)
        a, b = FakeConnection(pool, "a"), FakeConnection(pool, "b")
        assert pool.reserve()
        assert pool.reserve()
        assert not pool.reserve()
        pool.opened(a)  # type: ignore[arg-type]
        pool.opened(b)  # type: ignore[arg-type]
        first, second = pool.wait(loop), pool.wait(loop)
        pool.checkin(b)  # type: ignore[arg-type]
        assert first.result() is b
        assert not second.done()
        a.discard()  # a slot frees up: the next waiter may open a connection in it
        assert second.result() is None
        assert pool.statistics() == {
            "open": 2,
            "idle": 0,
            "in_use": 2,
            "waiting": 0,
            "created": 2,
            "reused": 1,
        }
        c = FakeConnection(pool, "c")
        pool.opened(c)  # type: ignore[arg-type]
        pool.checkin(b)  # type: ignore[arg-type]
        pool.checkin(c)  # type: ignore[arg-type]
        assert pool.checkout(0.0) is c
        assert pool.checkout(0.0) is b
        assert pool.checkout(0.0) is None
    finally:
        loop.close()


def test_a_waiter_that_gives_up_after_being_served_passes_on_what_it_got() -> None:
    loop = asyncio.new_event_loop()
    try:
        pool = OriginPool("http://x:1", limit=1)
        a = FakeConnection(pool, "a")
        assert pool.reserve()
        pool.opened(a)  # type: ignore[arg-type]
        late, next_in_line = pool.wait(loop), pool.wait(loop)
        pool.checkin(a)  # type: ignore[arg-type]
        pool.forget(late)  # cancelled just after being handed `a`
        assert next_in_line.result() is a
    finally:
        loop.close()


class PoolMachine(RuleBasedStateMachine):
    """Any interleaving of acquire, open, fail, release, close and give-up keeps the books:
    ``open <= limit``, every slot accounted for, nobody queues while a slot is free."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.pool = OriginPool("http://x:1", limit=2)
        self.held: list[FakeConnection] = []
        self.opening = 0  # reserved slots whose connection is being opened
        self.waiting: list[asyncio.Future[Any]] = []
        self.count = 0

    def teardown(self) -> None:
        self.loop.close()

    @rule()
    def acquire(self) -> None:
        conn = self.pool.checkout(0.0)
        if conn is not None:
            self.held.append(conn)  # type: ignore[arg-type]
        elif self.pool.reserve():
            self.opening += 1
        else:
            self.waiting.append(self.pool.wait(self.loop))

    @precondition(lambda self: self.opening > 0)
    @rule(ok=st.booleans())
    def finish_opening(self, ok: bool) -> None:
        self.opening -= 1
        if ok:
            self.count += 1
            conn = FakeConnection(self.pool, f"c{self.count}")
            self.pool.opened(conn)  # type: ignore[arg-type]
            self.held.append(conn)
        else:
            self.pool.unreserve()

    @precondition(lambda self: self.held)
    @rule(index=st.integers(min_value=0), reusable=st.booleans())
    def end_exchange(self, index: int, reusable: bool) -> None:
        conn = self.held.pop(index % len(self.held))
        if reusable:
            self.pool.checkin(conn)  # type: ignore[arg-type]
        else:
            conn.discard()

    @precondition(lambda self: self.pool.idle)
    @rule(index=st.integers(min_value=0))
    def server_closes_an_idle_one(self, index: int) -> None:
        conn = self.pool.idle[index % len(self.pool.idle)]
        conn.discard()

    @precondition(lambda self: self.waiting)
    @rule(index=st.integers(min_value=0))
    def a_waiter_gives_up(self, index: int) -> None:
        future = self.waiting.pop(index % len(self.waiting))
        future.cancel()
        self.pool.forget(future)

    @rule()
    def waiters_wake_up(self) -> None:
        for future in [f for f in self.waiting if f.done()]:
            self.waiting.remove(future)
            conn = future.result()
            if conn is None:
                self.opening += 1
            else:
                self.held.append(conn)

    @invariant()
    def the_books_balance(self) -> None:
        pool = self.pool
        served = [f.result() for f in self.waiting if f.done()]
        handed = sum(1 for c in served if c is not None)
        granted = sum(1 for c in served if c is None)
        assert 0 <= pool.open <= pool.limit
        assert pool.open == len(pool.idle) + len(self.held) + handed + self.opening + granted
        assert all(not c.closed for c in pool.idle)
        queued = [f for f in pool.waiters if not f.done()]
        assert not queued or (pool.open == pool.limit and not pool.idle)


TestPoolMachine = PoolMachine.TestCase


@pytest.mark.parametrize("loop", LOOPS)
def test_a_connect_that_hangs_times_out_in_the_connect_phase_and_frees_its_slot(loop: str) -> None:
    async def main() -> tuple[RequestTimeout, dict[str, int]]:
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(0)  # never accepted: once the queue is full, SYNs go unanswered
            port = listener.getsockname()[1]
            fillers = [socket.socket() for _ in range(3)]
            try:
                for filler in fillers:
                    filler.setblocking(False)
                    filler.connect_ex(("127.0.0.1", port))
                async with HttpClient(max_connections=1) as client:
                    url = f"http://127.0.0.1:{port}/"
                    with pytest.raises(RequestTimeout) as info:
                        await client.request("GET", url, timeouts=Timeouts(connect=0.05))
                    return info.value, _stats(client)
            finally:
                for filler in fillers:
                    filler.close()

    error, stats = run(main, loop)
    assert (error.phase, error.timeout_s) == ("connect", 0.05)
    assert "no connection within" in str(error)
    assert error.timing.connected is None  # type: ignore[attr-defined]
    assert (stats["open"], stats["created"]) == (0, 0)
