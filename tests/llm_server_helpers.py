"""A raw HTTP/1.1 client and a runner for the mock LLM server's tests.

The client writes requests as bytes (pipelined when several are given) and reads replies
chunk by chunk, stamping each chunk with when it arrived (``time.monotonic()``, the
server's clock too), so a test can compare what the client saw with the server's truth.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

import uvloop

from pyattacker.servers import LlmServer

T = TypeVar("T")
CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
LOOPS = ["asyncio", "uvloop"]


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
    version: str = "1.1",
) -> bytes:
    data = body if isinstance(body, bytes) else json.dumps(body).encode() if body else b""
    lines = [f"{method} {path} HTTP/{version}", "Host: test"]
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


def pinned(ttft: str = "0", itl: str = "0") -> dict[str, str]:
    """``post`` keyword headers pinning a request's TTFT and ITL."""
    return {"x_mock_ttft": ttft, "x_mock_itl": itl}


async def read_reply_body(reader: asyncio.StreamReader) -> bytes:
    """The rest of a chunked body whose head was read."""
    parts = []
    while True:
        size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
        parts.append((await reader.readexactly(size + 2))[:-2])
        if size == 0:
            return b"".join(parts)


async def connect(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    parts = urlsplit(url)
    return await asyncio.open_connection(parts.hostname, parts.port)


def small_send_buffer(server: LlmServer, size: int = 32 * 1024) -> None:
    """Give the server's connections a small kernel send buffer (set on the listening
    socket, which accepted sockets inherit on Linux): a client that stops reading then
    makes the server's writes wait in its transport's buffer after a few dozen KB, however
    large the machine's default buffers are."""
    listening = server._server.sockets[0]  # type: ignore[union-attr]  # test-only reach
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)


async def slow_reader(
    url: str, size: int = 32 * 1024
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection whose receive buffer is ``size`` bytes (the kernel doubles it)."""
    parts = urlsplit(url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (parts.hostname, parts.port))
    return await asyncio.open_connection(sock=sock)
