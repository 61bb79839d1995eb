"""One HTTP/1.1 connection of the mock LLM server: an ``asyncio.Protocol`` on httptools.

Hand-written for the reasons the echo server's is (:mod:`pyattacker.servers._protocol`):
the server is a ruler, so it must know exactly when each byte left, and it must stream to
thousands of clients from one core without a task or coroutine per request.

Contract:

- A request is *received* when it is fully parsed (``on_message_complete``); the handler
  (:func:`pyattacker.servers._llm_handle.handle`) then answers it at once or hands it an
  :class:`~pyattacker.servers._llm_exchange.Exchange` that streams on timers.
- Responses leave in request order: a request pipelined behind a running completion waits
  until that one has ended (its wait counts in its TTFT and e2e, which start when it was
  received).
- The write buffer's high-water mark is 0, so ``pause_writing``/``resume_writing``
  bracket exactly the time anything is buffered: whatever was written meanwhile is
  stamped with the moment the buffer drained (:meth:`on_drain`), "flush included".
- A connection lost before a response ended drops that request and any pipelined behind
  it (recorded as ``dropped``); a request that does not parse gets a 400, then the
  connection closes.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Protocol, cast

import httptools

from pyattacker.servers._llm_core import Incoming, LlmCore
from pyattacker.servers._llm_handle import dropped, handle
from pyattacker.servers._llm_wire import error_body, head

if TYPE_CHECKING:
    from pyattacker.servers._llm_exchange import Exchange
    from pyattacker.servers._llm_truth import Record

__all__ = ["LlmProtocol"]

_WANTED = frozenset({b"authorization", b"api-key"})
_MOCK_PREFIX = b"x-mock-"


class Flushable(Protocol):
    """Something waiting for the write buffer to drain: an exchange, a reply's record."""

    def flushed(self, now: float) -> None: ...

    def lost(self, now: float) -> None: ...


class _Reply:
    """A whole reply written while the transport was buffering: its record ends at drain."""

    __slots__ = ("core", "record")

    def __init__(self, core: LlmCore, record: Record) -> None:
        self.core, self.record = core, record

    def flushed(self, now: float) -> None:
        self.record.end = now
        self.core.ledger.add(self.record)

    def lost(self, now: float) -> None:
        self.record.outcome = "dropped"
        self.flushed(now)


class LlmProtocol(asyncio.Protocol):
    """One connection of the mock LLM server (see the module docstring)."""

    __slots__ = (
        "_active",
        "_body",
        "_broken",
        "_core",
        "_drain",
        "_headers",
        "_parser",
        "_pending",
        "_reading",
        "_transport",
        "_url",
        "closed",
        "paused",
    )

    def __init__(self, core: LlmCore) -> None:
        self._core = core
        self._transport: asyncio.Transport | None = None
        self._url = b""
        self._headers: dict[bytes, bytes] = {}
        self._body: list[bytes] = []
        self._pending: deque[Incoming] = deque()
        self._active: Exchange | None = None
        self._drain: list[Flushable] = []
        self._reading = True
        self._broken: str | None = None  # why the input stopped parsing
        self.closed = False
        self.paused = False
        # httptools looks the callbacks up once, here: they must exist before this line.
        self._parser = httptools.HttpRequestParser(self)

    # -- transport events -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        transport.set_write_buffer_limits(high=0)
        self._core.connections.add(self)

    def data_received(self, data: bytes) -> None:
        if not self._reading:
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._reject("upgrades are not supported")
        except httptools.HttpParserError as exc:
            self._reject(f"bad request: {exc}")

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self._drain:
            now = self._core.now()
            waiting, self._drain = self._drain, []
            for item in waiting:
                item.flushed(now)

    def connection_lost(self, exc: Exception | None) -> None:
        self._reading, self.closed, self.paused = False, True, False
        self._transport = None
        core = self._core
        now = core.now()
        waiting, self._drain = self._drain, []
        for item in waiting:
            item.lost(now)
        if self._active is not None:
            self._active.lost(now)
            self._active = None
        while self._pending:
            dropped(core, self._pending.popleft(), now)
        core.connections.discard(self)

    def abort(self) -> None:
        """Close the connection now, dropping whatever it is still answering."""
        if self._transport is not None:
            self._transport.abort()

    # -- parser callbacks ---------------------------------------------------------------------

    def on_url(self, url: bytes) -> None:
        self._url += url  # llhttp may deliver the URL in pieces

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name in _WANTED or name.startswith(_MOCK_PREFIX):
            self._headers[name] = value

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self.closed:  # pipelined after a request that asked to close: never answered
            return
        parser = self._parser
        incoming = Incoming(
            parser.get_method(),
            self._url,
            self._headers,
            b"".join(self._body),
            parser.should_keep_alive(),
            self._core.now(),
        )
        self._url, self._headers = b"", {}
        self._body.clear()
        if self._active is None and not self._pending:
            handle(self._core, self, incoming)
        else:
            self._pending.append(incoming)

    # -- what the handler and the exchanges call ---------------------------------------------

    def write(self, data: bytes) -> None:
        if self._transport is not None and not self.closed:
            self._transport.write(data)

    def on_drain(self, item: Flushable) -> None:
        """Call ``item.flushed(now)`` when the write buffer drains (``lost`` if it never does)."""
        self._drain.append(item)

    def begin(self, exchange: Exchange) -> None:
        """``exchange`` answers the current request; later ones wait until :meth:`done`."""
        self._active = exchange

    def done(self, exchange: Exchange) -> None:
        """``exchange`` has ended: close if asked to, else answer the next request."""
        if self._active is exchange:
            self._active = None
        if not exchange.keep_alive:
            self.close_after_write()
        else:
            self._next()

    def reply(
        self,
        status: int,
        body: bytes,
        headers: list[tuple[bytes, bytes]],
        content_type: bytes,
        keep_alive: bool,
        record: Record | None,
    ) -> None:
        """Write a whole response now; ``record`` (if any) ends when it is flushed."""
        data = head(
            status, headers, content_type=content_type, length=len(body), keep_alive=keep_alive
        )
        self.write(data + body)
        if record is not None:
            record.status = status
            if self.paused:
                self.on_drain(_Reply(self._core, record))
            else:
                _Reply(self._core, record).flushed(self._core.now())
        if not keep_alive:
            self.close_after_write()

    def close_after_write(self) -> None:
        """Flush what was written, then close; requests not yet answered are dropped."""
        self._reading = False
        if self._transport is not None and not self.closed:
            self.closed = True
            self._transport.close()

    def _next(self) -> None:
        while self._active is None and self._pending and not self.closed:
            handle(self._core, self, self._pending.popleft())
        if self._broken is not None and self._active is None and not self._pending:
            body = error_body(self._broken, "invalid_request_error")
            self.reply(400, body, [], b"application/json", False, None)

    def _reject(self, message: str) -> None:
        """Bytes that do not parse: a 400 after the requests before them, then close."""
        self._reading = False
        self._broken = message
        if self._active is None:
            self._next()

    def __repr__(self) -> str:
        return f"<LlmProtocol active={self._active!r} pending={len(self._pending)}>"
