"""``Response``, and the buffer a streamed body flows through.

A streamed body goes from the connection's ``data_received`` into a :class:`BodyStream`
(chunk and arrival time), from which ``Response.iter_chunks()`` takes it. The stream holds
at most about ``_HIGH_WATER`` bytes: above that the connection stops reading from the
socket, so a slow consumer slows the server (TCP flow control) instead of filling memory.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Callable
from types import SimpleNamespace
from typing import Any, Protocol

from pyattacker.errors import HttpStatusError, retry_after_of
from pyattacker.http._types import Headers, Timing
from pyattacker.http._url import URL

__all__ = ["BodyStream", "Pausable", "Response", "delimited_by_close", "reusable_without_body"]

_NO_HEADERS = Headers()  # until the head arrives (read-only, so one is enough)
_HIGH_WATER = 256 * 1024
_LOW_WATER = 64 * 1024


class Pausable(Protocol):
    """What a streamed body needs of its connection (the tests' fakes alike): to stop
    reading while its consumer is behind, and to read again."""

    def pause_for_consumer(self) -> None: ...

    def resume_for_consumer(self) -> None: ...


class BodyStream:
    """Chunks of one streamed body with their arrival times; one producer, one consumer.

    The connection calls :meth:`push`, :meth:`finish` or :meth:`fail`; the response awaits
    :meth:`next`, which returns ``None`` at the end and raises the failure if there was one
    (after the chunks that arrived before it).
    """

    __slots__ = (
        "_chunks", "_connection", "_error", "_paused", "_sink", "_size", "_waiter", "done",
    )  # fmt: skip

    def __init__(self, connection: Pausable) -> None:
        self._chunks: deque[tuple[bytes, float]] = deque()
        self._connection = connection
        self._size = 0
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        self._sink: Callable[[bytes, float], None] | None = None
        self.done = False

    def push(self, chunk: bytes, at: float) -> None:
        sink = self._sink
        if sink is not None:
            try:
                sink(chunk, at)
            except Exception as exc:  # the consumer refused the body: stop reading it
                self._sink = None
                self.fail(exc)
            return
        if self._error is not None:
            return  # a sink failed: the rest of the body is not wanted
        self._chunks.append((chunk, at))
        self._size += len(chunk)
        if self._size > _HIGH_WATER and not self._paused:
            self._paused = True
            self._connection.pause_for_consumer()
        self._wake()

    def finish(self) -> None:
        self.done = True
        self._wake()

    def fail(self, exc: BaseException) -> None:
        if not self.done:
            self._error = exc
            self.done = True
            self._wake()

    async def next(self) -> tuple[bytes, float] | None:
        """The next ``(chunk, arrival time)``, ``None`` at the end; raises a failure."""
        while not self._chunks:
            if self.done:
                if self._error is not None:
                    raise self._error
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        item = self._chunks.popleft()
        self._size -= len(item[0])
        if self._paused and self._size < _LOW_WATER:
            self._paused = False
            self._connection.resume_for_consumer()
        return item

    async def consume(self, sink: Callable[[bytes, float], None]) -> None:
        """Hand every chunk to ``sink(chunk, arrival time)`` as the connection receives it,
        in the connection's own callback; return at the end of the body. An exception
        from ``sink`` ends the body there and is raised here (as is a broken response)."""
        while self._chunks:
            chunk, at = self._chunks.popleft()
            self._size -= len(chunk)
            sink(chunk, at)
        if self._paused:
            self._paused = False
            self._connection.resume_for_consumer()
        if not self.done:
            self._sink = sink
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
                self._sink = None
        if self._error is not None:
            raise self._error

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class _Chunks:
    """The async iterator ``iter_chunks()`` returns (a class, so nothing needs finalising)."""

    __slots__ = ("_stream",)

    def __init__(self, stream: BodyStream) -> None:
        self._stream = stream

    def __aiter__(self) -> _Chunks:
        return self

    async def __anext__(self) -> tuple[bytes, float]:
        item = await self._stream.next()
        if item is None:
            raise StopAsyncIteration
        return item


class Response:
    """One HTTP response: status line, headers, body and when each part arrived.

    From ``HttpClient.request()`` the body is read: ``body`` holds it (its first
    ``Limits.keep_body`` bytes, when the client keeps only a prefix) and ``body_size``
    counts all of it; from ``HttpClient.stream()``
    it is not: iterate :meth:`iter_chunks` or await :meth:`read`, once. A status >= 400 is
    not an error until :meth:`raise_for_status` says so.
    """

    __slots__ = (
        "_consumed",
        "_head",
        "_headers",
        "_stream",
        "body",
        "body_size",
        "http_version",
        "status",
        "timing",
        "url",
    )

    def __init__(self, url: URL, timing: Timing) -> None:
        self.url = url
        self.timing = timing
        self.status = 0
        # The head's bytes, as the connection read them; `headers` reads them when asked.
        self._head = b""
        self._headers: Headers | None = None
        self.http_version = "1.1"
        self.body = b""
        # Every byte of the body that arrived: more than len(body) when the client keeps
        # only a prefix (Limits.keep_body).
        self.body_size = 0
        self._stream: BodyStream | None = None
        # How the body was consumed: "read" (request(), or read() done), "iterated",
        # "partly read" (read() failed), "closed" (the stream's context ended), or ""
        # for a streamed body nobody has taken yet.
        self._consumed = "read"

    @property
    def headers(self) -> Headers:
        """The response's headers (none until its head has arrived)."""
        headers = self._headers
        if headers is None:
            if not self._head:
                return _NO_HEADERS
            headers = self._headers = Headers._of_head(self._head)
        return headers

    @headers.setter
    def headers(self, headers: Headers) -> None:
        self._headers = headers

    @property
    def reason(self) -> str:
        """The reason phrase of the status line (may be empty)."""
        return self.headers._status_reason().decode("latin-1")

    def text(self, encoding: str = "utf-8") -> str:
        """The body decoded (``errors="replace"``: a load test reports, it does not crash)."""
        return self.body.decode(encoding, errors="replace")

    def json(self) -> Any:
        """The body parsed as JSON; ``json.JSONDecodeError`` (a ``ValueError``) if it is not."""
        return json.loads(self.body)

    @property
    def retry_after(self) -> float | None:
        """Seconds the server asked us to wait (``Retry-After-Ms``, then ``Retry-After``)."""
        return retry_after_of(SimpleNamespace(headers=self.headers))

    def raise_for_status(self) -> None:
        """Raise :class:`~pyattacker.errors.HttpStatusError` if ``status >= 400``."""
        if self.status >= 400:
            raise HttpStatusError(
                f"HTTP {self.status} {self.reason}".rstrip(),
                status=self.status,
                headers=self.headers,
                retry_after=self.retry_after,
                url=self.url,
                timing=self.timing,
            )

    def iter_chunks(self) -> AsyncIterator[tuple[bytes, float]]:
        """``(chunk, arrival time)`` of a streamed body, as it arrives; once per response.

        Each arrival time is also in ``timing.chunk_times``. Raises ``RuntimeError`` for a
        body that was already read or iterated, and the request's :class:`HttpError` if the
        response breaks off (after the chunks that did arrive).
        """
        return _Chunks(self._take_stream("iterated"))

    async def consume(self, sink: Callable[[bytes, float], None]) -> None:
        """Like :meth:`iter_chunks`, but calling ``sink(chunk, arrival time)`` for each
        chunk from the connection's own callback, as it arrives, instead of waking a task
        per chunk (for consumers that parse every chunk: about a task switch cheaper per
        chunk). Returns at the end of the body; raises what ``sink`` raised (the rest of
        the body is then left unread, and the connection is not reused) or the request's
        :class:`HttpError` if the response breaks off. ``sink`` must not block."""
        await self._take_stream("iterated").consume(sink)

    async def read(self) -> bytes:
        """The rest of a streamed body, joined (also kept in ``body``); idempotent."""
        if self._consumed == "read":
            return self.body
        stream = self._take_stream("partly read")  # stays so if reading fails
        parts: list[bytes] = []
        while (item := await stream.next()) is not None:
            parts.append(item[0])
        self.body = b"".join(parts)
        self._consumed = "read"
        return self.body

    def _take_stream(self, how: str = "iterated") -> BodyStream:
        stream = self._stream
        if stream is None:
            raise RuntimeError(f"the body of this response was already {self._consumed}")
        self._stream = None
        self._consumed = how
        return stream

    def _close_stream(self) -> None:
        """The stream's context ended: a body nobody took can no longer be taken."""
        if self._stream is not None:
            self._stream = None
            self._consumed = "closed"

    def _attach(self, stream: BodyStream) -> None:
        """Make this a streamed response whose body flows through ``stream``."""
        self._stream = stream
        self._consumed = ""

    def __repr__(self) -> str:
        reason = f" {self.reason}" if self.reason else ""
        return f"<Response {self.status}{reason} {self.url}>"


def delimited_by_close(headers: Headers) -> bool:
    """Whether a body's end is the connection's close (no Content-Length, not chunked)."""
    return "content-length" not in headers and "transfer-encoding" not in headers


def reusable_without_body(response: Response) -> bool:
    """Whether a response to HEAD allows keep-alive, judged from its headers.

    llhttp, not told the request was HEAD, would judge a head without Content-Length as
    "body until close" and say no.
    """
    tokens = {
        t.strip().lower() for v in response.headers.get_all("connection") for t in v.split(",")
    }
    if response.http_version == "1.1":
        return "close" not in tokens
    return "keep-alive" in tokens
