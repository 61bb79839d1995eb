"""One HTTP/1.1 connection: an ``asyncio.Protocol`` feeding ``httptools``' response parser.

Why by hand: this is the load path. A protocol on httptools has no stream reader, no
per-request task and no per-chunk await, which makes it several times faster than a
general client (``benchmarks/http_client.py`` compares it with aiohttp's).

One exchange at a time (no pipelining), in one reused
:class:`~pyattacker.http._exchange.Exchange`: the parser's callbacks, what they have read,
and where the exchange stands (its :class:`~pyattacker.http._exchange.State`, whose
transitions that module lists). This module is the rest: the socket, the pool, the timers,
and the ends of an exchange. Its life: :meth:`Connection.send` writes the request in one
call; the parser's callbacks fill the :class:`Response`; the exchange ends in exactly
one of *complete* (the connection goes back to its pool, or is closed when either side
asked for that) or *failed* (the connection is closed, the error delivered to whoever
waits). Timeouts are loop timers: one read watchdog per connection (re-armed only when it
fires, not per byte) and one total timer per request that has a total limit.

What a server sends is bounded by the client's :class:`Limits`: a head over ``max_head``
fails its request (``ResponseTooLarge``) and closes the connection; a body is counted whole
and kept up to ``keep_body``. A response completes only once the whole read it ended in is
parsed: bytes after it (extra bytes after a Content-Length body, an answer nobody asked
for) leave that response standing and the connection closed, never reused.

Never retried here: a request whose connection fails is failed, even when it is certain
that no byte of it reached the server. Deciding to send again is the retry policy's job.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

from httptools import HttpParserCallbackError

from pyattacker.http._errors import FOREIGN, Stage, translate
from pyattacker.http._exchange import (
    AWAITING_HEAD,
    IDLE,
    MESSAGE_ENDED,
    READING_BODY,
    STREAM_DONE,
    Exchange,
    HeadTooLarge,
    State,
    Stray,
)
from pyattacker.http._limits import Limits
from pyattacker.http._pool import OriginPool
from pyattacker.http._response import Response
from pyattacker.http._timeouts import Timeouts
from pyattacker.http._types import Waiter

__all__ = ["Connection"]

# Bytes a write may leave queued and still count as sent when it was written. One request
# is in flight per connection, so the kernel's send buffer is empty when a request is
# written and takes a request this small at once; a transport that reports it as buffered
# for a moment (uvloop may defer a write to the end of the loop iteration) would otherwise
# move `sent` to a later resume_writing(). Larger bodies are stamped when they drained.
_FLUSHED_AT_ONCE = 64 * 1024

# A status line's first bytes and the version they give (the usual ones).
_VERSIONS = {b"HTTP/1.1 ": "1.1", b"HTTP/1.0 ": "1.0"}

_HEAD = "HEAD"


class Connection(asyncio.Protocol):
    """A keep-alive connection of one :class:`OriginPool`; see the module docstring.

    ``closed`` (the socket is closed or closing), ``fd`` (its descriptor, -1 if none) and
    ``idle_since`` (when it last went back to its pool) are read by the pool.
    """

    __slots__ = (
        "_armed_for", "_dropped", "_exchange", "_last_activity", "_loop", "_now", "_pool",
        "_read_timer", "_transport", "closed", "fd", "idle_since",
    )  # fmt: skip

    def __init__(
        self,
        pool: OriginPool[Connection],
        now: Callable[[], float],
        loop: asyncio.AbstractEventLoop,
        limits: Limits = Limits(),  # noqa: B008  # frozen, so one shared default is safe
    ) -> None:
        self._pool, self._now, self._loop = pool, now, loop
        self._transport: asyncio.Transport | None = None
        self._exchange = Exchange(self, limits)  # with the parser and the state
        self.closed = self._dropped = False  # dropped: the pool no longer counts it
        self.fd, self.idle_since = -1, 0.0
        # The read watchdog: one timer, armed to look within _armed_for seconds; the
        # server's silence counts from _last_activity (a read, or progress of our write).
        self._read_timer: asyncio.TimerHandle | None = None
        self._armed_for = self._last_activity = 0.0

    @property
    def state(self) -> State:
        """Where the current exchange stands (``IDLE`` when there is none)."""
        return self._exchange.state

    # ----------------------------------------------------------------- the client's side

    def send(
        self,
        response: Response,
        payload: tuple[bytes, bytes | None, bool],
        timeouts: Timeouts,
        waiter: Waiter,
        method: str,
        streaming: bool,
    ) -> None:
        """Start one exchange: write the request, arm the timers.

        ``waiter`` gets the response when it is complete (or, ``streaming``, when its head
        is), or the request's :class:`HttpError`.
        """
        head, body, keep_alive = payload
        x = self._exchange
        x.begin(response, waiter, streaming, method == _HEAD, keep_alive)
        transport = self._transport
        if transport is None or self.closed:  # the server closed it before we could send
            self._fail_mapped(None)
            return
        # Read the clock *before* writing: the write wakes the server, and on a busy machine
        # the kernel may run the server and preempt us inside the write; a stamp taken
        # after it can land later than the server's answer began, a stamp before it can
        # only err against us.
        now = self._last_activity = self._now()
        if body is None:
            transport.write(head)
        else:
            transport.writelines((head, body))
        unsent = transport.get_write_buffer_size()
        if unsent > _FLUSHED_AT_ONCE:
            x.sent_pending = True  # resume_writing() records `sent` when it is flushed
            x.unsent = unsent
        else:
            response.timing.sent = now
        if timeouts.total is None and self._read_timer is not None:
            # The usual request needs no new timer: no total limit, and the read watchdog,
            # which re-arms itself (see _check_read), already looks often enough.
            read = x.read_timeout = timeouts.read
            if read is None or read >= self._armed_for:
                x.total_limit = None
                return
        self._arm_timers(timeouts, now - response.timing.started)

    def end_stream(self, response: Response) -> None:
        """The caller left a streamed response's context: reuse the connection if its body
        was complete, else close it. A no-op if the exchange already ended otherwise."""
        if self._exchange.response is not response:
            return
        if self._exchange.state is STREAM_DONE:
            self._release()
        else:
            self.abandon(response)

    def abandon(self, response: Response) -> None:
        """The caller gave up on ``response`` (cancelled, timed out): close the connection
        unless that exchange has already ended; a half-read connection is never reused."""
        x = self._exchange
        if x.response is not response:
            return
        waiter, stream = x.waiter, x.stream
        self._end_exchange()
        self.discard()
        if waiter is not None and not waiter.done():
            waiter.cancel()
        if stream is not None:
            stream.fail(RuntimeError("the response's stream was closed before its end"))

    def forsake(self) -> None:
        """Opening this connection failed: close whatever was opened; the caller frees
        the reserved slot (the pool never counted this connection as opened)."""
        self._dropped = True
        self.closed = True
        if self._transport is not None:
            self._transport.abort()
        self._pool.unreserve()

    def discard(self) -> None:
        """Close the connection and free its pool slot (once)."""
        if not self.closed:
            self.closed = True
            if self._transport is not None:
                self._transport.abort()
        if not self._dropped:
            self._dropped = True
            self._pool.drop(self)

    def pause_for_consumer(self) -> None:
        """A streamed body's buffer is full: stop reading (and the read watchdog)."""
        self._exchange.paused = True
        if self._transport is not None and not self.closed:
            self._transport.pause_reading()

    def resume_for_consumer(self) -> None:
        x = self._exchange
        x.paused = False
        if self._transport is not None and not self.closed:
            self._last_activity = self._now()  # the server's silence starts counting now
            self._transport.resume_reading()
            if x.read_timeout is not None:
                self._arm_read(x.read_timeout)

    # ---------------------------------------------------------------- asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = transport = cast(asyncio.Transport, transport)
        # Told about any unflushed byte (high water 0), so `sent` is when the kernel took
        # the last byte of the request, not when it was queued.
        transport.set_write_buffer_limits(high=0)
        sock = transport.get_extra_info("socket")
        self.fd = sock.fileno() if sock is not None else -1

    def secured(self, transport: asyncio.BaseTransport | None) -> None:
        """The TLS handshake is done: talk through ``transport``, which wraps the TCP one
        (``loop.start_tls`` calls no ``connection_made`` for it)."""
        if transport is None:  # closed during the handshake: the send will find it so
            self.closed = True
            return
        self._transport = transport = cast(asyncio.Transport, transport)
        transport.set_write_buffer_limits(high=0)

    def data_received(self, data: bytes) -> None:
        x = self._exchange
        now = x.at = self._last_activity = self._now()
        state = x.state
        if state is IDLE or state is STREAM_DONE:
            # Bytes nobody asked for: the connection's framing cannot be trusted any more.
            x.keep_alive = False
            if state is IDLE:
                self.discard()
            return
        if not x.got_bytes:
            x.got_bytes = True
            x.response.timing.first_byte = now  # type: ignore[union-attr]
            # The status line's version, without the parser's get_http_version(), which
            # formats a new string for every response: None if not whole here.
            x.version = _VERSIONS.get(data[:9])
            x.head_bytes = data
            x.head_parts = None  # (a failed exchange's, if any, is not this one's)
        elif state is AWAITING_HEAD:  # a head split across reads (or after a 1xx): rare
            x.add_head_part(data)
        try:
            x.parser.feed_data(data)
        except HttpParserCallbackError as exc:
            stopped = exc.__context__
            if isinstance(stopped, HeadTooLarge):
                self._head_too_large()
                return
            if not isinstance(stopped, Stray):
                # One of our callbacks raised: a bug of ours, surfaced as itself.
                self._fail(stopped or exc, None)
                return
        except FOREIGN as exc:
            if x.state is not MESSAGE_ENDED:
                self._fail_mapped(exc)
                return
            x.keep_alive = False  # garbage after a whole answer: the answer stands
        state = x.state
        if state is MESSAGE_ENDED:
            self._complete()
        elif state is AWAITING_HEAD and x.head_over_limit():  # no whole head yet: rare
            self._head_too_large()

    def eof_received(self) -> bool | None:
        return None  # close our side too; connection_lost() decides what the close meant

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None
        x = self._exchange
        state = x.state
        if state is READING_BODY and x.until_close and exc is None:
            x.at = self._now()
            self._complete()  # a body delimited by the close: this is its end
        elif state is AWAITING_HEAD or state is READING_BODY:
            self._fail_mapped(exc)
        self.discard()  # frees the slot; a streamed response keeps its buffered body

    def pause_writing(self) -> None:
        pass  # one request in flight: nothing more to hold back; see resume_writing()

    def resume_writing(self) -> None:
        x = self._exchange
        if x.sent_pending:
            x.sent_pending = False
            now = self._last_activity = self._now()
            if x.response is not None:
                x.response.timing.sent = now

    # ----------------------------------------------------------------------- internals

    def _complete(self) -> None:
        x = self._exchange
        response = x.response
        if response is None:
            return
        response.timing.end = x.at
        response.body_size = x.body_size
        if x.total_timer is not None:
            x.cancel_total()
        if x.streaming:
            x.state = STREAM_DONE
            x.stream.finish()  # type: ignore[union-attr]
            return
        body = x.body
        response.body = body[0] if len(body) == 1 else b"".join(body)
        waiter = x.waiter
        self._release()
        if waiter is not None and not waiter.done():
            waiter.set_result(response)

    def _release(self) -> None:
        x = self._exchange
        # A response that came before the request was fully written (an early 413, say)
        # leaves request bytes in the buffer: the connection's framing is lost.
        keep = x.keep_alive and not self.closed and not x.sent_pending
        self._end_exchange()
        if keep:
            if x.head_only:
                x.renew_parser()
            self.idle_since = x.at
            self._pool.checkin(self)
        else:
            self.discard()

    def _end_exchange(self) -> None:
        """Let go of the exchange's response, waiter and stream, and stop its timer."""
        x = self._exchange
        x.state = IDLE
        x.response = x.waiter = x.stream = None
        x.sent_pending = x.paused = False
        if x.total_timer is not None:
            x.cancel_total()

    def _head_too_large(self) -> None:
        """The head outgrew ``max_head``: fail the exchange and close the connection."""
        x = self._exchange
        response = x.response
        if response is None:
            return
        x.head_bytes, x.head_parts = b"", None
        self._fail(x.head_too_large(response), None)

    def _fail_mapped(self, exc: BaseException | None) -> None:
        x = self._exchange
        stage = Stage.RESPONSE if x.got_bytes else Stage.AWAITING
        response = x.response
        if response is None:  # the exchange has ended: only the connection is broken
            self.discard()
            return
        error = translate(
            exc, url=response.url, timing=response.timing, stage=stage, reused=x.reused
        )
        self._fail(error, exc)

    def _fail(self, error: BaseException, cause: BaseException | None) -> None:
        """End the exchange with ``error`` (raised ``from cause``) and close."""
        if error is not cause:
            error.__cause__ = cause
        x = self._exchange
        waiter, stream = x.waiter, x.stream
        self._end_exchange()
        self.discard()
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        elif stream is not None:
            stream.fail(error)

    def _arm_timers(self, timeouts: Timeouts, elapsed: float) -> None:
        x = self._exchange
        read = x.read_timeout = timeouts.read
        if read is not None:
            self._arm_read(read)
        x.total_limit = timeouts.total
        if timeouts.total is not None:
            x.total_timer = self._loop.call_later(timeouts.total - elapsed, self._expire, "total")

    def _arm_read(self, read: float) -> None:
        """Make sure the watchdog looks within ``read`` seconds (one timer, kept armed)."""
        if self._read_timer is None or read < self._armed_for:
            if self._read_timer is not None:
                self._read_timer.cancel()
            self._armed_for = read
            self._read_timer = self._loop.call_later(read, self._check_read)

    def _check_read(self) -> None:
        self._read_timer = None
        x = self._exchange
        read, state = x.read_timeout, x.state
        if read is None or x.paused or not (state is AWAITING_HEAD or state is READING_BODY):
            return  # idle, or waiting for the consumer: the watchdog sleeps until re-armed
        now = self._now()
        if x.sent_pending and self._transport is not None:
            # Still writing the request: the server taking bytes of it is progress too.
            size = self._transport.get_write_buffer_size()
            if size != x.unsent:
                x.unsent, self._last_activity = size, now
        remaining = read - (now - self._last_activity)
        if remaining > 0:
            self._armed_for = read
            self._read_timer = self._loop.call_later(remaining, self._check_read)
        else:
            self._expire("read")

    def _expire(self, phase: str) -> None:
        """A timer ran out: fail the exchange with a :class:`RequestTimeout` for ``phase``."""
        x = self._exchange
        if phase == "total":
            x.total_timer = None
        response = x.response
        if response is None:
            return
        self._fail(x.timed_out(response, phase), None)

    def __repr__(self) -> str:
        state = self._exchange.state.name.lower()
        return f"<Connection {self._pool.key} {state}{' closed' if self.closed else ''}>"
