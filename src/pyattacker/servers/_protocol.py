"""The echo server's hot path: one ``asyncio.Protocol`` per connection on httptools.

Written by hand rather than on a web framework because the server is the *ruler* of our
accuracy benchmark: it must know exactly when it started and stopped holding each request,
and must answer 100k+ requests a second on one core so it is never the bottleneck. A
framework adds routing, middleware and its own scheduling between the parse and the write,
and would blur both.

Contract of a connection (:class:`EchoProtocol`):

- A request is *held* from the moment it is fully parsed (``on_message_complete``, read
  through the ``Core``'s clock) until its response has been written to the socket, flush
  included: if the transport had to buffer, until its write buffer drained (the write
  buffer's high-water mark is 0, so ``pause_writing``/``resume_writing`` bracket exactly
  the time anything is buffered). That hold time is what the ``Core`` records.
- Responses leave in request order (HTTP/1.1 pipelining): a request whose delay is over
  still waits for every earlier one on its connection, and its hold time includes that.
- A zero-delay plain request (keep-alive, no body, not HEAD, no ``x-echo-*`` header, not a
  control path) on an idle connection is answered inside
  ``on_message_complete`` with precomputed bytes and no timer; everything else (delays,
  failures, overrides, bodies, control paths, stalls, closing) takes :meth:`_handle`.
- A hold ends on the ``Core``'s :class:`~pyattacker.servers._timer.ServerTimer`: the
  kernel's timer where there is one, never early. Elsewhere the loop's timers fire early
  (libuv's millisecond clock is truncated), so a due request re-checks its deadline on
  our clock and re-arms for the remainder: a hold is never shorter than its drawn delay.
- A request whose connection closes before its response was flushed is *dropped*: counted
  as such, never recorded as a hold time.
- The server's :class:`~pyattacker.servers._guard.Limits` hold (head and body sizes, time,
  connections): a refusal (431, 413, 408) is answered after the responses already owed,
  like a 400 for bytes that do not parse, and the connection closes.
"""

from __future__ import annotations

import asyncio
from collections import deque
from functools import partial
from typing import TYPE_CHECKING, cast
from urllib.parse import parse_qs

import httptools

from pyattacker.errors import ConfigError
from pyattacker.servers._guard import Guarded, Limits

if TYPE_CHECKING:
    from pyattacker.servers._core import Core
    from pyattacker.servers._timer import Cancellable

__all__ = ["EchoProtocol"]

# The first six bytes of every control path; anything else skips the control lookup.
_CONTROL_HEADS = frozenset({b"/stats", b"/reset", b"/stall", b"/redir"})
_REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})
_OVERRIDE_PREFIX = b"x-echo-"


class _Held:
    """One request between its parse and its write. ``status`` None marks a control reply."""

    __slots__ = ("delay", "keep_alive", "ready", "response", "start", "status", "timer")

    def __init__(
        self, start: float, delay: float, response: bytes, status: int | None, keep_alive: bool
    ) -> None:
        self.start = start
        self.delay = delay
        self.response = response
        self.status = status
        self.keep_alive = keep_alive
        self.ready = delay <= 0
        self.timer: Cancellable | None = None


class EchoProtocol(Guarded):
    """One HTTP/1.1 connection of the echo server (see the module docstring)."""

    __slots__ = (
        "_body",
        "_closed",
        "_core",
        "_draining",
        "_lingering",
        "_overrides",
        "_paused",
        "_queue",
        "_special",
        "_stall_timer",
        "_transport",
        "_url",
    )

    def __init__(self, core: Core, limits: Limits) -> None:
        super().__init__(limits)
        self._core = core
        self._transport: asyncio.Transport | None = None
        self._url = b""
        self._body: list[bytes] = []
        self._overrides: dict[bytes, bytes] | None = None
        self._special = False  # a body or an override header: not the fast path
        self._queue: deque[_Held] = deque()
        self._draining: list[tuple[float, int]] = []
        self._paused = False
        self._lingering = False  # refused mid-request: half-close, let the client finish
        self._closed = False  # closing or closed: nothing more will be written
        self._stall_timer: Cancellable | None = None
        # httptools looks the callbacks up once, here: they must exist before this line.
        self._parser = httptools.HttpRequestParser(self)

    # -- transport events -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        transport = cast(asyncio.Transport, transport)
        if self.over_capacity(transport, len(self._core.connections)):
            self._closed = True
            return
        self._transport = transport
        # Pause at the first buffered byte and resume when none is left: the drain is
        # then exactly observable, which is what "flush included" needs. Not over TLS: its
        # transport can leave a connection's first answer paused for good (the handshake's
        # last records share its buffer), so there a hold ends when TLS takes the answer.
        if transport.get_extra_info("sslcontext") is None:
            transport.set_write_buffer_limits(high=0)
        self._core.connections.add(self)

    def _upgraded(self, rest: bytes) -> None:
        # Upgrades are not supported; the request was answered as a plain one.
        self.data_received(rest)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        if self._draining:
            core = self._core
            end = core.now()
            for start, status in self._draining:
                core.record(end - start, status)
            self._draining.clear()

    def connection_lost(self, exc: Exception | None) -> None:
        self._reading, self._closed = False, True
        self._transport = None
        dropped = len(self._draining)
        for held in self._queue:
            if held.timer is not None:
                held.timer.cancel()
            dropped += held.status is not None
        self._core.dropped += dropped
        self._queue.clear()
        self._draining.clear()
        if self._stall_timer is not None:
            self._stall_timer.cancel()
        self._core.connections.discard(self)
        self._drop_parser()

    def busy(self) -> bool:
        return bool(self._queue or self._draining)

    def holding(self) -> int:
        """Echo requests parsed on this connection and not yet answered (flush included)."""
        return len(self._draining) + sum(held.status is not None for held in self._queue)

    def abort(self) -> None:
        """Close the connection now, dropping whatever it still holds."""
        if self._transport is not None:
            self._transport.abort()

    # -- parser callbacks ---------------------------------------------------------------

    def on_url(self, url: bytes) -> None:
        self._url += url  # llhttp may deliver the URL in pieces

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) == 14 and name.lower() == b"content-length":
            self._declare(value)
        elif len(name) > 7 and name[:7].lower() == _OVERRIDE_PREFIX:
            if self._overrides is None:
                self._overrides = {}
            self._overrides[name[7:].lower()] = value
            self._special = True

    def on_body(self, body: bytes) -> None:
        self._body_room -= len(body)
        if self._body_room < 0:
            self._over_body()
        self._body.append(body)
        self._special = True

    def on_message_complete(self) -> None:
        core = self._core
        start = core.now()
        url = self._url
        self._url = b""
        # Guarded._message_done's steps, written out because every request passes here;
        # _body_room is reset by _handle, which every request with a body takes.
        self._in_head.append(True)
        self._head_room = self._head_limit
        self._requests += 1
        if (
            start < core.slow_until
            or self._special
            or self._queue
            or url[:6] in _CONTROL_HEADS
            or not self._parser.should_keep_alive()
            or self._parser.get_method() == b"HEAD"
        ):
            self._handle(start, url)
            return
        assert self._transport is not None
        self._transport.write(core.ok_response)
        if self._paused:
            self._draining.append((start, 200))
        else:
            core.samples_append(core.now() - start)

    # -- the general path ---------------------------------------------------------------

    def _handle(self, start: float, url: bytes) -> None:
        self._body_room = self._body_limit
        parser, core = self._parser, self._core
        keep_alive = parser.should_keep_alive()
        body = b"".join(self._body)
        self._body.clear()
        overrides = self._overrides or {}
        self._overrides, self._special = None, False
        path, _, query = url.partition(b"?")
        method = parser.get_method()
        control = core.control(method, path, query)
        if isinstance(control, asyncio.Future):  # answered later (several processes)
            held = _Held(start, 0.0, b"", None, keep_alive)
            held.ready = False
            control.add_done_callback(lambda done: self._answered(held, done))
        elif control is not None:
            status, payload = control
            response = core.response(status, payload, keep_alive, b"application/json")
            held = _Held(start, 0.0, response, None, keep_alive)
        elif path == b"/redirect":
            held = self._redirect(start, query, overrides, keep_alive)
        else:
            held = self._echo(start, body, overrides, keep_alive)
        if method == b"HEAD":  # the head of what GET would say, without the body
            held.response = held.response[: held.response.index(b"\r\n\r\n") + 4]
        self._queue.append(held)
        if held.ready:
            self._flush()
        elif held.response:  # not a control reply still being computed (see _answered)
            held.timer = core.timer.call_at(held.start + held.delay, partial(self._due, held))

    def _echo(
        self, start: float, body: bytes, overrides: dict[bytes, bytes], keep_alive: bool
    ) -> _Held:
        core = self._core
        try:
            delay, status, retry_after = core.draw(overrides)
        except ConfigError as exc:  # a bad x-echo-* header: say so, hold nothing
            response = core.response(400, f"{exc}\n".encode(), keep_alive)
            return _Held(start, 0.0, response, None, keep_alive)
        response = core.echo_response(status, body, keep_alive, retry_after)
        return _Held(start, delay, response, status, keep_alive)

    def _redirect(
        self, start: float, query: bytes, overrides: dict[bytes, bytes], keep_alive: bool
    ) -> _Held:
        """``/redirect?to=TARGET&code=CODE``: an echo request (held, counted under CODE)
        answered CODE with ``Location: TARGET``; a bad ``to`` or ``code`` is a 400."""
        core = self._core
        params = parse_qs(query.decode("latin-1"))
        to = params.get("to", ["/"])[-1]
        code = params.get("code", ["302"])[-1]
        try:
            delay, _, _ = core.draw(overrides)
            if not code.isdigit() or int(code) not in _REDIRECT_CODES:
                raise ConfigError(f"not a redirect status: {code[:10]!r}", field="code")
            if not to or any(ord(c) < 0x21 or ord(c) > 0x7E for c in to):
                raise ConfigError("must be a URL or path without spaces", field="to")
        except ConfigError as exc:
            response = core.response(400, f"{exc}\n".encode(), keep_alive)
            return _Held(start, 0.0, response, None, keep_alive)
        location = b"Location: " + to.encode("ascii") + b"\r\n"
        response = core.response(int(code), b"", keep_alive, b"text/plain", location)
        return _Held(start, delay, response, int(code), keep_alive)

    def _answered(self, held: _Held, done: asyncio.Future[tuple[int, bytes]]) -> None:
        """A control reply that was computed later is ready: write it in its turn."""
        if self._closed or done.cancelled():
            return
        status, payload = done.result()
        held.response = self._core.response(status, payload, held.keep_alive, b"application/json")
        held.ready = True
        self._flush()

    def _due(self, held: _Held) -> None:
        if self._closed:
            return
        core = self._core
        end = held.start + held.delay
        if end > core.now():  # (the loop's timer fired early)
            held.timer = core.timer.call_at(end, partial(self._due, held))
            return
        held.timer, held.ready = None, True
        self._flush()

    def _flush(self) -> None:
        """Write every ready response at the head of the queue, in order, unless stalled."""
        queue, core = self._queue, self._core
        while queue and not self._closed:
            head = queue[0]
            if not head.ready:
                return
            if head.status is not None and core.stall_until > core.now():
                self._wait_for_stall_end()
                return
            queue.popleft()
            assert self._transport is not None
            self._transport.write(head.response)
            if head.status is not None:
                if self._paused:
                    self._draining.append((head.start, head.status))
                else:
                    core.record(core.now() - head.start, head.status)
            if not head.keep_alive:
                self._close_after_write()

    def _wait_for_stall_end(self) -> None:
        if self._stall_timer is None:
            self._stall_timer = self._core.timer.call_at(self._core.stall_until, self._stall_over)

    def _stall_over(self) -> None:
        self._stall_timer = None
        self._flush()

    def _close_after_write(self) -> None:
        """The client asked to close: flush what was written, then close; drop the rest."""
        self._reading, self._closed = False, True
        for held in self._queue:
            if held.timer is not None:
                held.timer.cancel()
            self._core.dropped += held.status is not None
        self._queue.clear()
        transport = self._transport
        assert transport is not None
        if self._lingering and transport.can_write_eof():
            # The client may still be sending what was refused: closing now would reset
            # the connection and could lose the answer. Half-close; the input is dropped
            # until the client closes, or the sweeper gives up on it.
            transport.write_eof()
        else:
            transport.close()

    def refuse(self, status: int, message: str) -> None:
        """Answer ``status`` after the earlier requests' responses, then close (see Guarded)."""
        if self._closed:
            return
        core = self._core
        response = core.response(status, f"{message}\n".encode(), False)
        self._reading = False
        self._lingering = status != 400  # a 408, 413 or 431: the client may be sending
        self._queue.append(_Held(core.now(), 0.0, response, None, keep_alive=False))
        self._flush()

    def __repr__(self) -> str:
        return f"<EchoProtocol queued={len(self._queue)} paused={self._paused}>"
