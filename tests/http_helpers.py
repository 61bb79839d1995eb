"""Scripted HTTP servers on 127.0.0.1 for the HTTP client's tests (imported as ``http_helpers``).

Each test writes the server it needs as a handler ``async def handler(conn: Peer)``, called
once per accepted connection; the server records what it saw. Servers misbehave on purpose
(delays, closes mid-body, silence), which is why they are hand-written and not an echo.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import uvloop

T = TypeVar("T")


@dataclass
class Request:
    """One request as the server read it."""

    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        return next((v for n, v in self.headers if n.lower() == name.lower()), None)


@dataclass
class Peer:
    """The server's side of one connection."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    server: Server

    async def read_request(self) -> Request | None:
        """The next request, or ``None`` when the client closed the connection."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = [tuple(x.strip() for x in line.split(":", 1)) for line in lines[1:] if line]
        request = Request(method, target, headers, b"")  # type: ignore[arg-type]
        length = int(request.header("content-length") or 0)
        if length:
            request.body = await self.reader.readexactly(length)
        self.server.requests.append(request)
        return request

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def respond(self, status: int = 200, body: bytes = b"ok", headers: str = "") -> None:
        await self.send(
            f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n{headers}\r\n".encode() + body
        )

    def close(self) -> None:
        self.writer.close()


Handler = Callable[[Peer], Awaitable[None]]


@dataclass
class Server:
    """``async with Server(handler) as server``: listening on ``server.url``."""

    handler: Handler
    requests: list[Request] = field(default_factory=list)
    accepted: int = 0
    port: int = 0
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    async def __aenter__(self) -> Server:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self.handler(Peer(reader, writer, self))
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client hung up, or the test is over (cancelled: nothing to report)
        finally:
            self._tasks.discard(task)
            writer.close()


async def keep_alive(peer: Peer) -> None:
    """Answer every request on the connection with ``ok`` (the well-behaved server)."""
    while await peer.read_request() is not None:
        await peer.respond()


def closed_port() -> int:
    """A loopback port that was just listening and is now closed (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run(main: Callable[[], Coroutine[Any, Any, T]], loop: str = "asyncio") -> T:
    """Run ``main()`` on a fresh stock asyncio loop, or on uvloop."""
    if loop == "uvloop":
        return uvloop.run(main())
    return asyncio.run(main())


LOOPS = ["asyncio", "uvloop"]
