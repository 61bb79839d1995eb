"""A tiny raw HTTP/1.1 client and loop runners for the echo server's tests (imported as
``echo_helpers``): exact bytes on the wire, pipelining, half-read responses."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import uvloop

from pyattacker.servers import EchoServer

T = TypeVar("T")


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def request(
    path: str = "/",
    *,
    method: str = "GET",
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    version: str = "1.1",
) -> bytes:
    lines = [f"{method} {path} HTTP/{version}", "Host: test"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def read_reply(reader: asyncio.StreamReader) -> Reply:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    status_line, *header_lines = head.strip().split("\r\n")
    headers = dict(line.split(": ", 1) for line in header_lines)
    headers = {name.lower(): value for name, value in headers.items()}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Reply(int(status_line.split()[1]), headers, body)


async def connect(
    url: str, *, receive_buffer: int | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    parts = urlsplit(url)
    assert parts.hostname == "127.0.0.1"
    if receive_buffer is None:
        return await asyncio.open_connection(parts.hostname, parts.port)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # Set before connecting, so the kernel neither scales the window nor autotunes it.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (parts.hostname, parts.port))
    return await asyncio.open_connection(sock=sock)


async def exchange(url: str, *raw: bytes) -> list[Reply]:
    """Send every request in one write (pipelined) and read one reply per request."""
    reader, writer = await connect(url)
    try:
        writer.write(b"".join(raw))
        return [await read_reply(reader) for _ in raw]
    finally:
        writer.close()
        await writer.wait_closed()


def on_asyncio(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(main())


def on_uvloop(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main())


async def served(server: EchoServer, body: Callable[[EchoServer], Awaitable[None]]) -> None:
    async with server:
        await body(server)


async def until_parsed(url: str, count: int) -> dict[str, Any]:
    """Poll ``GET /stats`` until ``count`` echo requests were parsed (held or answered)."""
    while True:
        (reply,) = await exchange(url, request("/stats"))
        stats: dict[str, Any] = reply.json()
        if stats["in_flight"] + stats["count"] >= count:
            return stats
        await asyncio.sleep(0.005)
