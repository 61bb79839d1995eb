"""What every connection of our servers is allowed: head and body sizes, time, how many.

A load-test target must survive the clients it is tested with, hostile or broken ones
included, without buffering what it was never going to use. :class:`Limits` holds the
four bounds, checked once when a server is built; :class:`Guarded` is the part of a
connection's protocol that keeps them; :class:`Sweeper` closes the connections that take
too long. The rules, as nginx and h11 apply them:

- **Head** (request line and headers): more than ``head`` bytes before the blank line that
  ends it is answered ``431 Request Header Fields Too Large`` and the connection closes.
  Counted on the bytes received, before the parser buffers them, so a 256 MB header line
  is refused once ``head`` bytes of it arrived. Bytes that follow the end of one request
  in the same read are not counted against the next head, so the next head may reach the
  limit plus one read (at most 256 KiB) before it is refused.
- **Body**: a ``Content-Length`` above ``body`` is answered ``413 Content Too Large`` as
  soon as its header is parsed, none of the body read; a chunked body, once its bytes pass
  ``body``.
- **Time**: a connection the server owes nothing (nothing received yet, between requests
  on a keep-alive connection, or part of a request received) must complete a request,
  head and body, within ``timeout`` seconds of the previous one, or of its opening, else
  it is closed: with ``408 Request Timeout`` when part of a request had arrived, silently when
  it was idle. While the server holds or writes a response, the client waits for the
  server and no time is counted. Checked by one sweep every ``timeout / 4``, so a
  connection is closed between ``timeout`` and ``1.25 * timeout`` after it went quiet.
- **Connections**: a connection beyond ``connections`` open at once is closed as soon as
  it is accepted, before anything is read.

After a 431, 413 or 408 the server stops reading (what the client still sends is
discarded, never kept) and half-closes: it closes for good once the client does, or
``timeout`` later at most. Closing while the client is still sending would reset the
connection, and the client could lose the answer. (A 400 for bytes that do not parse
closes at once, as it always did.)

The limits keep the hot path as it was: no timer and no Python call per request (the
parser's ``on_headers_complete`` is ``list.clear`` on the "in a head" flag, a C method),
only a compare and a few stores, so the server stays faster than any client it measures.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import httptools

from pyattacker._checks import check_whole
from pyattacker._units import parse_duration
from pyattacker.errors import ConfigError

__all__ = [
    "HEAD_LIMIT",
    "MAX_CONNECTIONS",
    "REQUEST_TIMEOUT_S",
    "Guarded",
    "Limits",
    "Refused",
    "Sweeper",
    "limits",
]

#: Bytes of a request head: nginx's ``large_client_header_buffers`` (4 x 8 KiB) allow 32
#: KiB, h11 16 KiB; an Azure AD bearer token (2-4 KiB) and every header an LLM SDK sends
#: fit many times over.
HEAD_LIMIT = 32 * 1024
#: Seconds to receive a whole request: nginx's ``client_header_timeout`` and
#: ``client_body_timeout`` (60 s); its keep-alive idle timeout is 75 s.
REQUEST_TIMEOUT_S = 60.0
#: Connections open at once. Far above what one load-generator process opens against one
#: server (a few thousand), far below what would exhaust the server's memory (each costs
#: a few KiB here, plus the kernel's socket buffers).
MAX_CONNECTIONS = 10_000
#: The largest bounds a caller may set: beyond them a limit no longer limits anything.
MOST_HEAD = 64 * 1024 * 1024
MOST_BODY = 1024 * 1024 * 1024
MOST_CONNECTIONS = 1_000_000
_SWEEPS_PER_TIMEOUT = 4
_MOST_TIMEOUT_S = 86_400.0


class Refused(Exception):
    """Raised from a parser callback: answer ``status`` with ``message``, then close."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass(frozen=True)
class Limits:
    """A server's bounds (see the module docstring); build them with :func:`limits`."""

    head: int
    body: int
    timeout: float
    connections: int


#: The servers' argument names for the four bounds, which errors name by default.
LIMIT_ARGUMENTS = ("max_head_size", "max_body_size", "request_timeout", "max_connections")


def limits(
    *,
    head: object,
    body: object,
    timeout: object,
    connections: object,
    fields: tuple[str, ...] = LIMIT_ARGUMENTS,
) -> Limits:
    """Check the four bounds; ``ConfigError`` naming the bad one by its entry in ``fields``
    (head, body, timeout, connections: the caller's argument or flag names)."""
    head_field, body_field, timeout_field, connections_field = fields
    seconds = parse_duration(timeout, field=timeout_field)  # type: ignore[arg-type]
    if not 0 < seconds <= _MOST_TIMEOUT_S:
        raise ConfigError(
            f"must be a duration > 0 and at most 1 day, got {timeout!r}", field=timeout_field
        )
    return Limits(
        head=check_whole(
            head, head_field, at_least=1024, at_most=MOST_HEAD, hint="1 KiB to 64 MiB"
        ),
        body=check_whole(body, body_field, at_least=0, at_most=MOST_BODY, hint="at most 1 GiB"),
        timeout=seconds,
        connections=check_whole(
            connections, connections_field, at_least=1, at_most=MOST_CONNECTIONS
        ),
    )


class Guarded(asyncio.Protocol):
    """The part of a connection's protocol that keeps its server's :class:`Limits`.

    A subclass makes ``_parser`` (an ``httptools.HttpRequestParser`` on itself), which
    :meth:`data_received` feeds. From its own parser callbacks it calls ``_declare`` for a
    ``Content-Length`` header, subtracts each piece of body from ``_body_room`` (calling
    ``_over_body`` below 0), and does what ``_message_done`` does when a request is
    complete (a subclass on every request's path may write those steps out rather than
    call it; ``_body_room`` may be reset later, before the next body). It
    says what it owes the client (:meth:`busy`), what to do with the bytes after an
    upgrade (:meth:`_upgraded`), how to answer a refusal (:meth:`refuse`) and how to close
    (:meth:`abort`). ``_reading`` False means input is ignored (after a refusal, or once
    closing).

    Not done here: a client that sends requests and never reads the responses keeps the
    server "owing" it, so it is never timed out (nginx's ``send_timeout``), and the
    responses it does not read stay in the write buffer: each is bounded, their number
    is not.
    """

    __slots__ = (
        "_body_limit",
        "_body_room",
        "_head_limit",
        "_head_room",
        "_idle_since",
        "_in_head",
        "_limits",
        "_mark",
        "_parser",
        "_reading",
        "_requests",
        "on_headers_complete",
    )

    _parser: httptools.HttpRequestParser  # the subclass's, made once its callbacks exist
    on_headers_complete: Callable[[], None]

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._head_limit, self._body_limit = limits.head, limits.body  # one lookup less
        self._reading = True
        # Non-empty from the end of a request to the end of the next head. A list, so that
        # the parser's on_headers_complete can be its C-level clear(): no Python frame.
        self._in_head = [True]
        self.on_headers_complete = self._in_head.clear
        self._head_room = limits.head
        self._body_room = limits.body
        self._requests = 0  # requests parsed on this connection: the sweeper's progress
        self._mark = 0
        self._idle_since: float | None = None

    def _drop_parser(self) -> None:
        """Let go of the parser, once the connection is lost (nothing is parsed after:
        ``_reading`` is False). It holds this protocol, through its callbacks: kept, the
        pair is a cycle that only a full collection frees, and that collection pauses the
        server in the middle of the next run (benchmarks/README.md, "the echo server's
        pauses")."""
        del self._parser

    def over_capacity(self, transport: asyncio.BaseTransport, open_now: int) -> bool:
        """Close ``transport`` at once when ``open_now`` connections are already open."""
        if open_now < self._limits.connections:
            return False
        self._reading = False
        transport.close()
        return True

    def data_received(self, data: bytes) -> None:
        if not self._reading:
            return  # refused or closing: what the client still sends is dropped
        if self._in_head:
            room = self._head_room
            if len(data) > room:
                data = self._head_over(data, room)
                if not data:
                    return
            else:
                self._head_room = room - len(data)
        try:  # _parse's steps, written out: every read of every connection passes here
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            self._upgraded(data[upgrade.args[0] :])
        except httptools.HttpParserError as exc:
            self._parse_error(exc)

    def _head_over(self, data: bytes, room: int) -> bytes:
        """``data`` goes past the head's room: parse the room's worth (a copy, only here);
        431 unless the head ended in it. Returns what is left to parse."""
        requests = self._requests
        self._parse(data[:room])
        if self._in_head and self._requests == requests:
            if self._reading:
                self.refuse(431, f"request head larger than {self._limits.head} bytes")
            return b""
        return data[room:] if self._reading else b""

    def _parse(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            self._upgraded(data[upgrade.args[0] :])
        except httptools.HttpParserError as exc:
            self._parse_error(exc)

    def _declare(self, value: bytes) -> None:
        """A ``Content-Length`` header: ``Refused`` (413) at once when it is over the limit."""
        if value.isdigit() and int(value) > self._body_limit:  # not digits: llhttp refuses it
            raise Refused(413, f"request body of {int(value)} bytes is over {self._body_limit}")

    def _over_body(self) -> None:
        """The body went past the limit (a subclass's ``on_body`` saw ``_body_room < 0``)."""
        raise Refused(413, f"request body over {self._body_limit} bytes")

    def _message_done(self) -> None:
        """A request was parsed whole: the next head starts, with its own room."""
        self._in_head.append(True)
        self._head_room, self._body_room = self._head_limit, self._body_limit
        self._requests += 1

    def _parse_error(self, exc: Exception) -> None:
        """httptools stopped: a :class:`Refused` from a callback, else bytes that do not parse."""
        refused = exc.__context__
        if isinstance(refused, Refused):
            self.refuse(refused.status, refused.message)
        else:
            self.refuse(400, f"bad request: {exc}")

    def sweep(self, now: float) -> None:
        """The sweeper's visit: close this connection if it has been quiet too long."""
        if self.busy():
            self._idle_since = None
        elif self._requests != self._mark or self._idle_since is None:
            self._mark, self._idle_since = self._requests, now
        elif now - self._idle_since >= self._limits.timeout:
            self._idle_since = None
            if not self._reading:
                self.abort()  # a refused request's client never closed: stop waiting
            elif not self._in_head or self._head_room < self._limits.head:
                self.refuse(408, f"request not received within {self._limits.timeout:g} s")
            else:
                self.abort()

    # -- what a subclass provides -----------------------------------------------------------

    def _upgraded(self, rest: bytes) -> None:
        """The request asked for an upgrade; ``rest`` is what followed it."""
        raise NotImplementedError

    def busy(self) -> bool:
        """Whether the server owes this connection a response (no time is counted)."""
        raise NotImplementedError

    def refuse(self, status: int, message: str) -> None:
        """Answer ``status`` after the responses already owed, stop reading, then close."""
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError


class Sweeper:
    """One timer per server that visits every open connection each ``timeout / 4``."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        now: Callable[[], float],
        connections: Callable[[], Iterable[Guarded]],
        timeout: float,
    ) -> None:
        self._loop, self._now, self._connections = loop, now, connections
        self._period = timeout / _SWEEPS_PER_TIMEOUT
        self._handle: asyncio.TimerHandle | None = loop.call_later(self._period, self._sweep)

    def _sweep(self) -> None:
        now = self._now()
        for conn in list(self._connections()):  # a visit may close one
            conn.sweep(now)
        self._handle = self._loop.call_later(self._period, self._sweep)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
