"""One HTTP/1.1 connection: an ``asyncio.Protocol`` feeding ``httptools``' response parser.

Why by hand (DESIGN.md §8): this is the load path. A protocol on httptools has no stream
reader, no per-request task and no per-chunk await; measured here it is several times
faster than aiohttp's client (``benchmarks/http_client.py``).

One exchange at a time (no pipelining). Its life: :meth:`Connection.send` writes the
request in one call; parser callbacks fill the :class:`Response`; the exchange ends in
exactly one of *complete* (the connection goes back to its pool, or is closed when either
side asked for that) or *failed* (the connection is closed, the error delivered to whoever
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
import sys
from collections.abc import Callable
from typing import cast

from httptools import HttpParserCallbackError, HttpResponseParser

from pyattacker.errors import RequestTimeout, ResponseTooLarge
from pyattacker.http._errors import FOREIGN, Stage, translate
from pyattacker.http._limits import Limits, size_text
from pyattacker.http._pool import OriginPool
from pyattacker.http._response import (
    BodyStream,
    Response,
    delimited_by_close,
    reusable_without_body,
)
from pyattacker.http._types import Timeouts, Waiter

__all__ = ["Connection"]

# Bytes a write may leave queued and still count as sent when it was written. One request
# is in flight per connection, so the kernel's send buffer is empty when a request is
# written and takes a request this small at once; a transport that reports it as buffered
# for a moment (uvloop may defer a write to the end of the loop iteration) would otherwise
# move `sent` to a later resume_writing(). Larger bodies are stamped when they drained.
_FLUSHED_AT_ONCE = 64 * 1024

# A status line's first bytes and the version they give (the usual ones).
_VERSIONS = {b"HTTP/1.1 ": "1.1", b"HTTP/1.0 ": "1.0"}

# Exchange states. _ENDED: the parser has seen the message's end inside the read being
# fed; the exchange completes once the whole read is parsed, so that bytes after the
# message (which no request asked for) are seen before the connection can be reused.
# _DONE: a streamed body complete, not released.
_IDLE, _AWAITING, _BODY, _DONE, _ENDED = 0, 1, 2, 3, 4
_HEAD = "HEAD"


# Raised by on_message_begin to stop the parser at bytes no request asked for.
class _Stray(Exception):
    pass


# A response keeps the bytes its head came in (headers are read off them when asked): a
# read longer than this is cut to the head, so that a large body is not held twice.
_HEAD_ONLY_ABOVE = 1024


class Connection(asyncio.Protocol):
    """A keep-alive connection of one :class:`OriginPool`; see the module docstring."""

    __slots__ = (
        "_armed_for", "_at", "_body", "_body_size", "_dropped", "_got_bytes", "_head",
        "_head_bytes", "_head_parts", "_head_size", "_informational", "_informational_heads",
        "_keep", "_keep_alive", "_last_activity", "_loop", "_max_head", "_now", "_parser",
        "_parser_stale", "_paused", "_pool",
        "_read_timeout", "_read_timer", "_response", "_reused", "_sent_pending", "_state",
        "_stream", "_streaming", "_total_limit", "_total_timer", "_transport", "_unsent",
        "_until_close", "_version", "_waiter", "closed", "fd", "idle_since",
    )  # fmt: skip

    def __init__(
        self,
        pool: OriginPool,
        now: Callable[[], float],
        loop: asyncio.AbstractEventLoop,
        limits: Limits = Limits(),  # noqa: B008  # frozen, so one shared default is safe
    ) -> None:
        self._pool, self._now, self._loop = pool, now, loop
        self._max_head = limits.max_head
        # Bytes of a body kept in Response.body; the rest is counted in _body_size only.
        self._keep = limits.keep_body if limits.keep_body is not None else sys.maxsize
        self._transport: asyncio.Transport | None = None
        self._parser = HttpResponseParser(self)
        self._parser_stale = self.closed = self._dropped = False
        self.fd, self.idle_since = -1, 0.0
        self._state = _IDLE
        self._response: Response | None = None
        self._waiter: Waiter | None = None
        self._stream: BodyStream | None = None
        # The bytes read since the request was sent, until the response's head is complete
        # (usually one read: the whole answer): its headers are read off them when asked.
        self._head_bytes = b""
        self._head_parts: list[bytes] | None = None  # when the head came in several reads
        self._head_size = 0  # the bytes in _head_parts
        self._informational_heads = 0  # 1xx heads before this exchange's final one
        self._body: list[bytes] = []
        self._body_size = 0
        self._streaming = self._head = self._reused = False
        self._got_bytes = self._informational = self._until_close = False
        self._keep_alive = True
        self._version: str | None = None  # read off the response's first bytes, if it can
        self._sent_pending = self._paused = False
        self._unsent = 0  # write-buffer size when the watchdog last looked, while sending
        self._at = self._last_activity = 0.0
        self._read_timeout: float | None = None
        self._armed_for = 0.0
        self._read_timer: asyncio.TimerHandle | None = None
        self._total_timer: asyncio.TimerHandle | None = None
        self._total_limit: float | None = None

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
        if self._parser_stale:  # the previous response was to HEAD: see on_headers_complete
            self._parser = HttpResponseParser(self)
            self._parser_stale = False
        self._response, self._waiter, self._streaming = response, waiter, streaming
        self._head, self._reused = method == _HEAD, response.timing.reused
        self._keep_alive, self._state = keep_alive, _AWAITING
        self._body = []
        self._body_size = 0
        self._informational_heads = 0
        self._got_bytes = self._until_close = False
        transport = self._transport
        if transport is None or self.closed:  # the server closed it before we could send
            self._fail_mapped(None)
            return
        # Read the clock *before* writing: the write wakes the server, and on a busy machine
        # the kernel may run the server and preempt us inside the syscall; a stamp taken
        # after it was seen landing up to 0.6 ms late (service times shorter than the
        # server's own hold times). A stamp before it can only err against us.
        now = self._last_activity = self._now()
        if body is None:
            transport.write(head)
        else:
            transport.writelines((head, body))
        unsent = transport.get_write_buffer_size()
        if unsent > _FLUSHED_AT_ONCE:
            self._sent_pending = True  # resume_writing() records `sent` when it is flushed
            self._unsent = unsent
        else:
            response.timing.sent = now
        if timeouts.total is None and self._read_timer is not None:
            # The common case, inlined: no total limit, the read watchdog already armed
            # (it re-arms itself, see _check_read); just note the limit it enforces.
            read = self._read_timeout = timeouts.read
            if read is None or read >= self._armed_for:
                self._total_limit = None
                return
        self._arm_timers(timeouts, now - response.timing.started)

    def end_stream(self, response: Response) -> None:
        """The caller left a streamed response's context: reuse the connection if its body
        was complete, else close it. A no-op if the exchange already ended otherwise."""
        if self._response is not response:
            return
        if self._state == _DONE:
            self._release()
        else:
            self.abandon(response)

    def abandon(self, response: Response) -> None:
        """The caller gave up on ``response`` (cancelled, timed out): close the connection
        unless that exchange has already ended; a half-read connection is never reused."""
        if self._response is not response:
            return
        waiter, stream = self._waiter, self._stream
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
        self._paused = True
        if self._transport is not None and not self.closed:
            self._transport.pause_reading()

    def resume_for_consumer(self) -> None:
        self._paused = False
        if self._transport is not None and not self.closed:
            self._last_activity = self._now()  # the server's silence starts counting now
            self._transport.resume_reading()
            if self._read_timeout is not None:
                self._arm_read(self._read_timeout)

    # ---------------------------------------------------------------- asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = transport = cast(asyncio.Transport, transport)
        # Told about any unflushed byte (high water 0), so `sent` is when the kernel took
        # the last byte of the request, not when it was queued.
        transport.set_write_buffer_limits(high=0)
        sock = transport.get_extra_info("socket")
        self.fd = sock.fileno() if sock is not None else -1

    def data_received(self, data: bytes) -> None:
        now = self._at = self._last_activity = self._now()
        if self._state == _IDLE or self._state == _DONE:
            # Bytes nobody asked for: the connection's framing cannot be trusted any more.
            self._keep_alive = False
            if self._state == _IDLE:
                self.discard()
            return
        if not self._got_bytes:
            self._got_bytes = True
            self._response.timing.first_byte = now  # type: ignore[union-attr]
            # The status line's version, without the parser's get_http_version(), which
            # formats a new string for every response (~0.3 us): None if not whole here.
            self._version = _VERSIONS.get(data[:9])
            self._head_bytes = data
            self._head_parts = None  # (a failed exchange's, if any, is not this one's)
        elif self._state == _AWAITING:  # a head split across reads (or after a 1xx): rare
            if self._head_parts is None:
                self._head_parts = [self._head_bytes]
                self._head_size = len(self._head_bytes)
            self._head_parts.append(data)
            self._head_size += len(data)
        try:
            self._parser.feed_data(data)
        except HttpParserCallbackError as exc:
            if not isinstance(exc.__context__, _Stray):
                # One of our callbacks raised: a bug of ours, surfaced as itself.
                self._fail(exc.__context__ or exc, None)
                return
        except FOREIGN as exc:
            if self._state != _ENDED:
                self._fail_mapped(exc)
                return
            self._keep_alive = False  # garbage after a whole answer: the answer stands
        state = self._state
        if state == _ENDED:
            self._complete()
        elif state == _AWAITING:  # no whole head yet (a split head, 1xx, a drip): rare
            self._check_head_size()

    def eof_received(self) -> bool | None:
        return None  # close our side too; connection_lost() decides what the close meant

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None
        if self._state == _BODY and self._until_close and exc is None:
            self._at = self._now()
            self._complete()  # a body delimited by the close: this is its end
        elif self._state == _AWAITING or self._state == _BODY:
            self._fail_mapped(exc)
        self.discard()  # frees the slot; a streamed response keeps its buffered body

    def pause_writing(self) -> None:
        pass  # one request in flight: nothing more to hold back; see resume_writing()

    def resume_writing(self) -> None:
        if self._sent_pending:
            self._sent_pending = False
            now = self._last_activity = self._now()
            if self._response is not None:
                self._response.timing.sent = now

    # ----------------------------------------------------------------- parser callbacks

    # No on_status or on_header: the response's Headers read them off the head's bytes
    # when someone asks (about 5 % of a load test's instructions per request, saved).

    def on_message_begin(self) -> None:
        if self._state != _AWAITING:
            # A message after the exchange's own (extra bytes after a Content-Length body,
            # say): the server's framing is broken. The answer stands; the connection is
            # not reused, and the parser stops here.
            self._keep_alive = False
            raise _Stray

    def on_headers_complete(self) -> None:
        parser, response = self._parser, self._response
        if response is None:  # the exchange has ended (on_message_begin saw to that)
            return
        status = parser.get_status_code()
        if status < 200:  # 1xx: informational, the real response follows
            self._informational = True
            self._informational_heads += 1
            self._version = None  # the next status line's is not in the first bytes
            return
        response.status = status
        head, parts = self._head_bytes, self._head_parts
        if parts is not None:
            head = b"".join(parts)
        self._head_bytes, self._head_parts = b"", None
        if len(head) > _HEAD_ONLY_ABOVE:
            # Keep the heads, not a large body read with them: each head (a 1xx's, then
            # the final one) ends at its blank line. If a head ended with bare line feeds,
            # the search finds less and keeps more (the reader needs only a superset).
            end = -4
            for _ in range(self._informational_heads + 1):
                end = head.find(b"\r\n\r\n", end + 4)
                if end < 0:
                    break
            else:
                head = head[: end + 4]
                # Checked here only: Limits keeps max_head >= 1 KiB (_HEAD_ONLY_ABOVE).
                if len(head) > self._max_head:
                    self._head_too_large()
                    return
        response._head = head
        response.http_version = self._version or parser.get_http_version()
        self._state = _BODY
        if self._head:
            # llhttp cannot be told that a response to HEAD has no body: it would wait for
            # Content-Length bytes. The message ends here; the parser is replaced before the
            # next request, and any byte after this head marks the connection unusable.
            self._keep_alive = self._keep_alive and reusable_without_body(response)
            self._parser_stale = True
        else:
            self._keep_alive = self._keep_alive and parser.should_keep_alive()
            if not self._keep_alive:
                self._until_close = delimited_by_close(response.headers)
        if self._streaming:
            self._stream = BodyStream(self)
            response._attach(self._stream)
            waiter = self._waiter
            if waiter is not None and not waiter.done():  # else cancelled: abandon() follows
                waiter.set_result(response)
        if self._head:
            self._state = _ENDED  # completed by data_received, after the whole read

    def on_body(self, body: bytes) -> None:
        if self._state != _BODY:  # a body after a HEAD response's head: broken framing
            self._keep_alive = False
            if self._state == _IDLE:  # already back in the pool: take it out
                self.discard()
            return
        size = self._body_size = self._body_size + len(body)
        if self._streaming:
            self._stream.push(body, self._at)  # type: ignore[union-attr]
            self._response.timing.chunk_times.append(self._at)  # type: ignore[union-attr]
        elif size <= self._keep:
            self._body.append(body)
        else:  # past what is kept: keep the part of it that fits, count the rest
            room = self._keep - (size - len(body))
            if room > 0:
                self._body.append(body[:room])

    def on_message_complete(self) -> None:
        if self._informational:
            self._informational = False
        elif self._state == _BODY:
            self._state = _ENDED  # completed by data_received, after the whole read

    # ----------------------------------------------------------------------- internals

    def _complete(self) -> None:
        response = self._response
        if response is None:
            return
        response.timing.end = self._at
        response.body_size = self._body_size
        if self._total_timer is not None:
            self._total_timer.cancel()
            self._total_timer = None
        if self._streaming:
            self._state = _DONE
            self._stream.finish()  # type: ignore[union-attr]
            return
        body = self._body
        response.body = body[0] if len(body) == 1 else b"".join(body)
        waiter = self._waiter
        self._release()
        if waiter is not None and not waiter.done():
            waiter.set_result(response)

    def _release(self) -> None:
        # A response that came before the request was fully written (an early 413, say)
        # leaves request bytes in the buffer: the connection's framing is lost.
        keep = self._keep_alive and not self.closed and not self._sent_pending
        self._end_exchange()
        if keep:
            self.idle_since = self._at
            self._pool.checkin(self)
        else:
            self.discard()

    def _end_exchange(self) -> None:
        self._state = _IDLE
        self._response = self._waiter = self._stream = None
        self._sent_pending = self._paused = False
        if self._total_timer is not None:
            self._total_timer.cancel()
            self._total_timer = None

    def _check_head_size(self) -> None:
        size = self._head_size if self._head_parts is not None else len(self._head_bytes)
        if size > self._max_head:
            self._head_too_large()

    def _head_too_large(self) -> None:
        """The head outgrew ``max_head``: fail the exchange and close the connection."""
        response = self._response
        if response is None:
            return
        self._head_bytes, self._head_parts = b"", None
        limit = self._max_head
        error = ResponseTooLarge(
            f"response head over {size_text(limit)}"
            " (the client's limit: --max-head-size, Limits.max_head)",
            what="head",
            limit=limit,
            url=response.url,
            timing=response.timing,
        )
        self._fail(error, None)

    def _fail_mapped(self, exc: BaseException | None) -> None:
        stage = Stage.RESPONSE if self._got_bytes else Stage.AWAITING
        response = self._response
        if response is None:  # the exchange has ended: only the connection is broken
            self.discard()
            return
        error = translate(
            exc, url=response.url, timing=response.timing, stage=stage, reused=self._reused
        )
        self._fail(error, exc)

    def _fail(self, error: BaseException, cause: BaseException | None) -> None:
        """End the exchange with ``error`` (raised ``from cause``) and close."""
        if error is not cause:
            error.__cause__ = cause
        waiter, stream = self._waiter, self._stream
        self._end_exchange()
        self.discard()
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        elif stream is not None:
            stream.fail(error)

    def _arm_timers(self, timeouts: Timeouts, elapsed: float) -> None:
        read = self._read_timeout = timeouts.read
        if read is not None:
            self._arm_read(read)
        self._total_limit = timeouts.total
        if timeouts.total is not None:
            self._total_timer = self._loop.call_later(
                timeouts.total - elapsed, self._expire, "total"
            )

    def _arm_read(self, read: float) -> None:
        """Make sure the watchdog looks within ``read`` seconds (one timer, kept armed)."""
        if self._read_timer is None or read < self._armed_for:
            if self._read_timer is not None:
                self._read_timer.cancel()
            self._armed_for = read
            self._read_timer = self._loop.call_later(read, self._check_read)

    def _check_read(self) -> None:
        self._read_timer = None
        read = self._read_timeout
        if read is None or self._paused or not (self._state == _AWAITING or self._state == _BODY):
            return  # idle, or waiting for the consumer: the watchdog sleeps until re-armed
        now = self._now()
        if self._sent_pending and self._transport is not None:
            # Still writing the request: the server taking bytes of it is progress too.
            size = self._transport.get_write_buffer_size()
            if size != self._unsent:
                self._unsent, self._last_activity = size, now
        remaining = read - (now - self._last_activity)
        if remaining > 0:
            self._armed_for = read
            self._read_timer = self._loop.call_later(remaining, self._check_read)
        else:
            self._expire("read")

    def _expire(self, phase: str) -> None:
        """A timer ran out: fail the exchange with a :class:`RequestTimeout` for ``phase``."""
        if phase == "total":
            self._total_timer = None
        response = self._response
        if response is None:
            return
        limit = self._read_timeout if phase == "read" else self._total_limit
        if phase == "total":
            what = f"the request took more than {limit:g} s"
        elif self._sent_pending:
            what = f"the server took no request byte for {limit:g} s"
        else:
            what = f"no response byte for {limit:g} s"
        url, timing = response.url, response.timing
        error = RequestTimeout(
            f"{what} ({phase} timeout)", phase=phase, timeout_s=limit, url=url, timing=timing
        )
        self._fail(error, None)

    def __repr__(self) -> str:
        state = ("idle", "awaiting", "body", "done", "ended")[self._state]
        return f"<Connection {self._pool.key} {state}{' closed' if self.closed else ''}>"
