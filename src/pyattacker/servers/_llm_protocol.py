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
  stamped with the moment the buffer drained (:meth:`on_drain`), "flush included". Over
  TLS (a server started with ``ssl``) the default marks stay: a TLS transport can leave
  its first write paused for good, so there a write is stamped when TLS takes it.
- A control request (``/stats``) may be answered in steps, giving the loop a turn
  between them (:class:`_Deferred`): it holds its place in the order like any response.
- A connection lost before a response ended drops that request and any pipelined behind
  it (recorded as ``dropped``); a request that does not parse gets a 400, then the
  connection closes.
- HTTP/1.0 requests get no chunked response: a stream's body ends when the server
  closes the connection.
- The server's :class:`~pyattacker.servers._guard.Limits` hold (head and body sizes, time,
  connections): a refusal (431, 413, 408) is answered like a 400, after the responses
  already owed, and the connection closes.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Generator
from typing import TYPE_CHECKING, Protocol, cast

import httptools

from pyattacker.servers._guard import Guarded, Limits
from pyattacker.servers._llm_core import Incoming, LlmCore, Tally, Work
from pyattacker.servers._llm_exchange import Exchange, State
from pyattacker.servers._llm_handle import dropped, handle, is_completion
from pyattacker.servers._llm_truth import Outcome
from pyattacker.servers._llm_wire import error_body, head

if TYPE_CHECKING:
    from pyattacker.servers._llm_truth import Epoch, Record

__all__ = ["LlmProtocol"]

_WANTED = frozenset({b"authorization", b"api-key"})
_MOCK_PREFIX = b"x-mock-"
_JSON = b"application/json"
_WRITE_SIZE = 256 * 1024  # bytes of a deferred reply written per turn of the loop
log = logging.getLogger("pyattacker.servers.llm")


class Flushable(Protocol):
    """Something waiting for the write buffer to drain: an exchange, a reply's record."""

    record: Record

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
        self.record.outcome = Outcome.DROPPED
        self.flushed(now)


class _Deferred:
    """A control reply computed and written in steps, one per loop turn, in request order."""

    __slots__ = ("conn", "keep_alive", "steps")

    def __init__(self, conn: LlmProtocol, work: Work, keep_alive: bool) -> None:
        self.conn, self.keep_alive = conn, keep_alive
        self.steps = self._respond(work)

    def _respond(self, work: Work) -> Generator[None, None, None]:
        """Compute the reply (``work``), then write it, at most _WRITE_SIZE a turn."""
        try:
            status, pieces = yield from work
        except Exception as exc:
            log.error("internal error answering a control request", exc_info=exc)
            status, pieces = 500, [error_body(f"internal error: {exc!r}", "server_error")]
        length = sum(len(piece) for piece in pieces)
        keep_alive = self.keep_alive
        conn = self.conn
        conn.write(head(status, [], content_type=_JSON, length=length, keep_alive=keep_alive))
        batch: list[bytes] = []
        size = 0
        for piece in pieces:  # a big body goes into the write buffer _WRITE_SIZE a turn
            batch.append(piece)
            size += len(piece)
            if size >= _WRITE_SIZE:
                conn.write(b"".join(batch))
                batch, size = [], 0
                yield
        conn.write(b"".join(batch))

    def step(self) -> None:
        if self.conn.closed:
            self.steps.close()
            return
        try:
            next(self.steps)
        except StopIteration:
            self.conn.finish(self)
            return
        self.conn.loop.call_soon(self.step)

    def lost(self, now: float) -> None:
        self.steps.close()


class LlmProtocol(Guarded):
    """One connection of the mock LLM server (see the module docstring)."""

    __slots__ = (
        "_active",
        "_body",
        "_broken",
        "_core",
        "_drain",
        "_headers",
        "_pending",
        "_transport",
        "_url",
        "closed",
        "loop",
        "paused",
    )

    def __init__(self, core: LlmCore, limits: Limits) -> None:
        super().__init__(limits)
        self._core = core
        self.loop = core.loop
        self._transport: asyncio.Transport | None = None
        self._url = b""
        self._headers: dict[bytes, bytes] = {}
        self._body: list[bytes] = []
        self._pending: deque[Incoming] = deque()
        self._active: Exchange | _Deferred | None = None
        self._drain: list[Flushable] = []
        self._broken: tuple[int, str] | None = None  # why the input stopped: status, message
        self.closed = False
        self.paused = False
        # httptools looks the callbacks up once, here: they must exist before this line.
        self._parser = httptools.HttpRequestParser(self)

    # -- transport events -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        transport = cast(asyncio.Transport, transport)
        if self.over_capacity(transport, len(self._core.connections)):
            self.closed = True
            return
        self._transport = transport
        if transport.get_extra_info("sslcontext") is None:  # over TLS: see the echo server's
            transport.set_write_buffer_limits(high=0)
        self._core.connections.add(self)

    def _upgraded(self, rest: bytes) -> None:
        self.refuse(400, "upgrades are not supported")

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
        self._drop_parser()

    def busy(self) -> bool:
        return self._active is not None or bool(self._pending or self._drain)

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
        elif name == b"content-length":
            self._declare(value)

    def on_body(self, body: bytes) -> None:
        self._body_room -= len(body)
        if self._body_room < 0:
            self._over_body()
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._message_done()
        if self.closed:  # pipelined after a request that asked to close: never answered
            return
        core = self._core
        received = core.now()  # first: nothing of ours counts in the request's latency
        parser, url, epoch = self._parser, self._url, core.epoch
        method = parser.get_method()
        completion = is_completion(method, url)
        if completion:
            epoch.received += 1
        incoming = Incoming(
            method,
            url,
            self._headers,
            b"".join(self._body),
            parser.should_keep_alive(),
            received,
            epoch,
            completion=completion,
            http10=parser.get_http_version() == "1.0",
        )
        self._url, self._headers = b"", {}
        self._body.clear()
        if self._active is None and not self._pending:
            handle(core, self, incoming)
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

    def active_exchange(self) -> Exchange | None:
        """The exchange answering the current request, if any."""
        active = self._active
        return active if isinstance(active, Exchange) else None

    def done(self, exchange: Exchange) -> None:
        """``exchange`` has ended: close if asked to, else answer the next request."""
        if self._active is exchange:
            self._active = None
        if not exchange.keep_alive:
            self.close_after_write()
        else:
            self._next()

    def answer(self, work: Work, keep_alive: bool) -> None:
        """Answer a control request with ``work``: its first step now, the others one per
        loop turn; later requests wait for its reply."""
        deferred = _Deferred(self, work, keep_alive)
        self._active = deferred
        deferred.step()

    def finish(self, deferred: _Deferred) -> None:
        """``deferred``'s reply is written: close if asked to, else answer the next request."""
        if self._active is deferred:
            self._active = None
        if deferred.keep_alive:
            self._next()
        else:
            self.close_after_write()

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

    def close_after_write(self, *, linger: bool = False) -> None:
        """Flush what was written, then close; requests not yet answered are dropped.

        ``linger``: the client may still be sending a refused request, and closing now
        would reset the connection and could lose the answer: half-close instead, drop
        the input until the client closes (or the sweeper gives up on it).
        """
        self._reading = False
        transport = self._transport
        if transport is not None and not self.closed:
            self.closed = True
            if linger and transport.can_write_eof():
                transport.write_eof()
            else:
                transport.close()

    def tally(self, epoch: Epoch, tally: Tally) -> None:
        """Add this connection's requests in progress to ``tally`` (``epoch``: the current)."""
        active = self._active
        if isinstance(active, Exchange) and active.live:
            if active.record.epoch is not epoch:
                tally.earlier += 1
            elif active.state is State.QUEUED:
                tally.queued += 1
            else:
                tally.in_flight += 1
        for item in self._drain:  # ended, waiting for the buffer to drain to be recorded
            if isinstance(item, Exchange) and not item.unflushed:
                continue  # still running (counted above) or already recorded
            if item.record.epoch is epoch:
                tally.pending += 1
            else:
                tally.earlier += 1
        for incoming in self._pending:  # received, waiting behind an earlier response
            if incoming.completion:
                if incoming.epoch is epoch:
                    tally.pending += 1
                else:
                    tally.earlier += 1

    def _next(self) -> None:
        while self._active is None and self._pending and not self.closed:
            handle(self._core, self, self._pending.popleft())
        broken = self._broken
        if broken is not None and self._active is None and not self._pending and not self.closed:
            status, message = broken
            body = error_body(message, "invalid_request_error")
            head_ = head(status, [], content_type=_JSON, length=len(body), keep_alive=False)
            self.write(head_ + body)
            self.close_after_write(linger=status != 400)  # the client may be sending

    def refuse(self, status: int, message: str) -> None:
        """A request refused (see Guarded), or bytes that do not parse (400): ``status``
        after the responses owed to the requests before it, then close."""
        self._reading = False
        self._broken = (status, message)
        if self._active is None:
            self._next()

    def __repr__(self) -> str:
        return f"<LlmProtocol active={self._active!r} pending={len(self._pending)}>"
