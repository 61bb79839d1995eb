"""One request/response exchange on a connection: its state and what it has read so far.

A :class:`~pyattacker.http._connection.Connection` runs one exchange at a time (no
pipelining), in one :class:`Exchange` that it keeps for its whole life and resets at each
request, so that a request allocates no state object of its own. The exchange is the
response parser's protocol: its callbacks fill the response (head bytes, body, framing)
and move its :class:`State`, which is the connection's state; the connection does the
I/O, the timers and the pool, and ends the exchange.

The state's transitions (the parser's callbacks make the ones to READING_BODY and
MESSAGE_ENDED, the connection all the others):

============== =================================================== ==============
from           event                                               to
============== =================================================== ==============
IDLE           ``send()`` started a request                        AWAITING_HEAD
AWAITING_HEAD  a 1xx head (another head follows)                   AWAITING_HEAD
AWAITING_HEAD  the final head                                      READING_BODY
READING_BODY   the parser saw the message's end                    MESSAGE_ENDED
READING_BODY   the server closed a body delimited by the close     IDLE, STREAM_DONE
MESSAGE_ENDED  the whole read it ended in is parsed                IDLE, STREAM_DONE
STREAM_DONE    the caller left the streamed response's context     IDLE
any            failure, timeout, or the caller gave up             IDLE
============== =================================================== ==============

The connection acts on the state after each read: MESSAGE_ENDED completes the exchange
then, so that bytes after the message (which no request asked for) are seen before the
connection can be reused. Bytes that arrive in IDLE or STREAM_DONE mark the connection
unusable (in IDLE, it is closed at once).

A response to ``HEAD`` goes from AWAITING_HEAD through READING_BODY to MESSAGE_ENDED at
its head's end. An exchange that ends in STREAM_DONE is still the connection's (the caller
reads the buffered body) until the caller leaves the context. Closing is not a state: the
socket can close while a streamed body that was complete stays readable, so the
connection's ``closed`` flag stands beside its state.
"""

from __future__ import annotations

import asyncio
import enum
import sys

from httptools import HttpResponseParser

from pyattacker.errors import RequestTimeout, ResponseTooLarge
from pyattacker.http._limits import Limits, size_text
from pyattacker.http._response import (
    BodyStream,
    Pausable,
    Response,
    delimited_by_close,
    reusable_without_body,
)
from pyattacker.http._types import Waiter

__all__ = [
    "AWAITING_HEAD",
    "HEAD_ONLY_ABOVE",
    "IDLE",
    "MESSAGE_ENDED",
    "READING_BODY",
    "STREAM_DONE",
    "Exchange",
    "HeadTooLarge",
    "State",
    "Stray",
]

# A response keeps the bytes its head came in (headers are read off them when asked): a
# read longer than this is cut to the head, so that a large body is not held twice.
HEAD_ONLY_ABOVE = 1024


class State(enum.IntEnum):
    """Where a connection's exchange stands; the transitions are in the module docstring."""

    IDLE = 0  # no exchange: in the pool, handed out, or closed
    AWAITING_HEAD = 1  # a request sent (its bytes may still drain); no final head yet
    READING_BODY = 2  # the final head parsed; the body being read
    MESSAGE_ENDED = 3  # the message ended in the read being parsed: it completes after it
    STREAM_DONE = 4  # a streamed body complete; the caller has not released it yet


# The members as module names: reading an Enum member off its class is a slow lookup on
# Python 3.11, and the connection compares its state on every read of every request.
IDLE, AWAITING_HEAD, READING_BODY, MESSAGE_ENDED, STREAM_DONE = State


class Stray(Exception):
    """Raised by a parser callback to stop the parser at bytes no request asked for."""


class HeadTooLarge(Exception):
    """Raised by a parser callback to stop the parser at a head over ``max_head``."""


class Exchange:
    """One request and its response: the parser's callbacks and what they have read.

    The connection keeps one for its whole life and :meth:`begin` resets it for each
    request. It feeds :attr:`parser` each read; the callbacks here fill the response and
    move :attr:`state`, which the connection reads after the read to complete the
    exchange or fail it. The connection reads and writes the other fields directly (this
    is its per-read path). ``keep`` and ``max_head`` come from the client's
    :class:`Limits` and do not change.
    """

    __slots__ = (
        "at", "body", "body_size", "connection", "got_bytes", "head_bytes", "head_only",
        "head_parts", "head_size", "informational", "informational_heads", "keep",
        "keep_alive", "max_head", "parser", "paused", "read_timeout", "response", "reused",
        "sent_pending", "state", "stream", "streaming", "total_limit", "total_timer",
        "unsent", "until_close", "version", "waiter",
    )  # fmt: skip

    def __init__(self, connection: Pausable, limits: Limits) -> None:
        self.connection = connection  # what a streamed body tells to pause and resume
        self.parser = HttpResponseParser(self)
        self.state = IDLE
        # Who waits, and what is filled.
        self.response: Response | None = None
        self.waiter: Waiter | None = None
        self.stream: BodyStream | None = None  # a streamed response's body, once its head is in
        self.streaming = False
        # Framing: decided when the request is sent, and when the final head arrives.
        self.head_only = self.reused = self.keep_alive = self.until_close = False
        # The head. Its bytes are those read since the request was sent, until the head is
        # complete (usually one read: the whole answer); its headers are read off them
        # when asked.
        self.got_bytes = False
        self.version: str | None = None  # read off the response's first bytes, if it can
        self.head_bytes = b""
        self.head_parts: list[bytes] | None = None  # when the head came in several reads
        self.head_size = 0  # the bytes in head_parts
        self.informational = False  # inside a 1xx message
        self.informational_heads = 0  # 1xx heads before the final one
        self.max_head = limits.max_head
        # The body: the part kept (up to `keep` bytes), and the size of all of it.
        self.body: list[bytes] = []
        self.body_size = 0
        self.keep = limits.keep_body if limits.keep_body is not None else sys.maxsize
        # The request's write, the consumer's pause, and time.
        self.sent_pending = self.paused = False  # sent_pending: bytes of the request unsent
        self.unsent = 0  # write-buffer size when the watchdog last looked, while sending
        self.at = 0.0  # when the read being parsed arrived
        self.read_timeout: float | None = None
        self.total_limit: float | None = None
        self.total_timer: asyncio.TimerHandle | None = None

    def begin(
        self,
        response: Response,
        waiter: Waiter,
        streaming: bool,
        head_only: bool,
        keep_alive: bool,
    ) -> None:
        """Start a new exchange (AWAITING_HEAD): forget everything the previous one read."""
        self.state = AWAITING_HEAD
        self.response, self.waiter, self.streaming = response, waiter, streaming
        self.head_only, self.reused, self.keep_alive = head_only, response.timing.reused, keep_alive
        self.body = []
        self.body_size = self.informational_heads = 0
        self.got_bytes = self.until_close = self.informational = False

    def renew_parser(self) -> None:
        """After a response to HEAD: llhttp cannot be told that it has no body, and would
        wait for its Content-Length bytes in the next response."""
        self.parser = HttpResponseParser(self)

    # ------------------------------------------------------------------ parser callbacks

    # No on_status or on_header: the response's Headers read them off the head's bytes
    # when someone asks, which a load test mostly does not.

    def on_message_begin(self) -> None:
        if self.state is not AWAITING_HEAD:
            # A message after the exchange's own (extra bytes after a Content-Length body,
            # say): the server's framing is broken. The answer stands; the connection is
            # not reused, and the parser stops here.
            self.keep_alive = False
            raise Stray

    def on_headers_complete(self) -> None:
        response = self.response
        if response is None:  # the exchange has ended
            return
        parser = self.parser
        status = parser.get_status_code()
        if status < 200:  # 1xx: informational, the real response follows
            self.informational = True
            self.informational_heads += 1
            self.version = None  # the next status line's is not in the first bytes
            return
        response.status = status
        head = self.head_bytes
        if self.head_parts is not None or len(head) > HEAD_ONLY_ABOVE:  # not one short read
            whole = self.take_head()
            if whole is None:
                raise HeadTooLarge
            head = whole
        else:
            self.head_bytes = b""
        response._head = head
        response.http_version = self.version or parser.get_http_version()
        self.state = READING_BODY
        if self.head_only:
            self.keep_alive = self.keep_alive and reusable_without_body(response)
        else:
            self.keep_alive = self.keep_alive and parser.should_keep_alive()
            if not self.keep_alive:
                self.until_close = delimited_by_close(response.headers)
        if self.streaming:
            self._hand_over_stream(response)
        if self.head_only:
            # The parser would wait for Content-Length bytes a response to HEAD lacks: the
            # message ends here, and any byte after this head marks the connection unusable.
            self.state = MESSAGE_ENDED

    def on_body(self, body: bytes) -> None:
        if self.state is not READING_BODY:  # a body after a HEAD response's head: broken
            self.keep_alive = False
            return
        size = self.body_size = self.body_size + len(body)
        if self.streaming:
            self.stream.push(body, self.at)  # type: ignore[union-attr]
            self.response.timing.chunk_times.append(self.at)  # type: ignore[union-attr]
        elif size <= self.keep:
            self.body.append(body)
        else:  # past what is kept: keep the part of it that fits, count the rest
            room = self.keep - (size - len(body))
            if room > 0:
                self.body.append(body[:room])

    def on_message_complete(self) -> None:
        if self.informational:
            self.informational = False
        elif self.state is READING_BODY:
            self.state = MESSAGE_ENDED  # the connection completes it after the whole read

    def _hand_over_stream(self, response: Response) -> None:
        """A streamed response's head is complete: its caller may start reading."""
        self.stream = BodyStream(self.connection)
        response._attach(self.stream)
        waiter = self.waiter
        if waiter is not None and not waiter.done():  # else cancelled: abandon() follows
            waiter.set_result(response)

    # -------------------------------------------------------------------------- the rest

    def cancel_total(self) -> None:
        if self.total_timer is not None:
            self.total_timer.cancel()
            self.total_timer = None

    def add_head_part(self, data: bytes) -> None:
        """Another read before the head was complete (a split head, or one after a 1xx)."""
        if self.head_parts is None:
            self.head_parts = [self.head_bytes]
            self.head_size = len(self.head_bytes)
        self.head_parts.append(data)
        self.head_size += len(data)

    def head_over_limit(self) -> bool:
        """Whether the bytes read toward the head so far are over ``max_head``."""
        size = self.head_size if self.head_parts is not None else len(self.head_bytes)
        return size > self.max_head

    def take_head(self) -> bytes | None:
        """The complete heads' bytes (1xx heads and the final one), cut before any body
        read with them; ``None`` if they are over ``max_head``. Empties the head buffer."""
        head, parts = self.head_bytes, self.head_parts
        if parts is not None:
            head = b"".join(parts)
        self.head_bytes, self.head_parts = b"", None
        if len(head) <= HEAD_ONLY_ABOVE:
            return head
        # Each head (a 1xx's, then the final one) ends at its blank line. If a head ended
        # with bare line feeds, the search finds less and keeps more (the reader of the
        # headers needs only a superset).
        end = -4
        for _ in range(self.informational_heads + 1):
            end = head.find(b"\r\n\r\n", end + 4)
            if end < 0:
                return head
        head = head[: end + 4]
        # Checked here only: Limits keeps max_head >= HEAD_ONLY_ABOVE, so a shorter head
        # that is complete is never over it.
        return None if len(head) > self.max_head else head

    def head_too_large(self, response: Response) -> ResponseTooLarge:
        """The error of a response whose head outgrew ``max_head``."""
        limit = self.max_head
        return ResponseTooLarge(
            f"response head over {size_text(limit)}"
            " (the client's limit: --max-head-size, Limits.max_head)",
            what="head",
            limit=limit,
            url=response.url,
            timing=response.timing,
        )

    def timed_out(self, response: Response, phase: str) -> RequestTimeout:
        """The error of a ``"read"`` or ``"total"`` timer that ran out on this exchange."""
        limit = self.read_timeout if phase == "read" else self.total_limit
        if phase == "total":
            what = f"the request took more than {limit:g} s"
        elif self.sent_pending:
            what = f"the server took no request byte for {limit:g} s"
        else:
            what = f"no response byte for {limit:g} s"
        url, timing = response.url, response.timing
        return RequestTimeout(
            f"{what} ({phase} timeout)", phase=phase, timeout_s=limit, url=url, timing=timing
        )
