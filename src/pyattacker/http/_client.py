"""``HttpClient``: requests over pooled keep-alive connections, timed, never retried.

The hot path of :meth:`HttpClient.request` is synchronous up to one ``await``: encode the
head, take an idle connection, write, and wait for the response future the connection's
protocol resolves. Only the slow paths (opening a connection, waiting for a free one) use
``asyncio.timeout`` and further awaits.
"""

from __future__ import annotations

import asyncio
import ssl as _ssl
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from functools import partial
from threading import get_ident
from types import TracebackType
from typing import Any

from mypy_extensions import mypyc_attr

from pyattacker._checks import check_whole
from pyattacker.clock import Clock, LoopClock
from pyattacker.errors import ConfigError, HttpError, RequestTimeout
from pyattacker.http._connection import Connection
from pyattacker.http._errors import Stage, mapped
from pyattacker.http._limits import Limits
from pyattacker.http._pool import OriginPool
from pyattacker.http._request import HeadersInput, RequestEncoder, cacheable
from pyattacker.http._response import Response
from pyattacker.http._timeouts import Timeouts
from pyattacker.http._types import Timing, Waiter
from pyattacker.http._url import URL

__all__ = ["HttpClient"]

_Payload = tuple[bytes, bytes | None, bool]
_Encoding = tuple[URL, _Payload, OriginPool[Connection]]  # what _encode gives


@mypyc_attr(allow_interpreted_subclasses=True)  # subclassed by plain Python
class HttpClient:
    """An HTTP/1.1 client for load generation: pooled, timed, and never retrying.

    - ``clock``: where every timestamp in :class:`Timing` comes from (default
      :class:`~pyattacker.clock.LoopClock`: nanosecond monotonic time on real loops).
    - ``timeouts``: the default :class:`Timeouts` of each request (a request may pass its
      own).
    - ``max_connections``: per origin ``(scheme, host, port)``; callers beyond it wait in
      FIFO order, within their connect (and total) timeout.
    - ``ssl``: the context for ``https`` URLs (default: ``ssl.create_default_context()``,
      which verifies certificates); SNI is the URL's host.
    - ``connect_to``: ``(host, port) -> address``: connections for URLs of that host and
      port go to ``address``, the URL (``Host``, SNI, the certificate's name) unchanged
      (curl's ``--resolve``; see :class:`~pyattacker.http.Resolve`).
    - ``headers``: sent on every request, after ``User-Agent: pyattacker/<version>``
      (which a header of the same name replaces).
    - ``limits``: how much of a response is read and kept (:class:`Limits`: a head
      over 64 KiB fails its request with ``ResponseTooLarge``; bodies are kept whole
      unless ``keep_body`` says how much).

    A request fails with an :class:`~pyattacker.errors.HttpError`
    (``ConnectError``, ``RequestTimeout``, ``RemoteProtocolError``, ``ResponseTooLarge``)
    and is never sent
    twice. In particular, a pooled keep-alive connection that the server closes just as a
    request is written to it fails that request with a ``ConnectError`` ("before any
    response byte ... a pooled keep-alive connection") instead of resending it: the
    client cannot prove the server never read it, and resending is the retry policy's
    decision, to be recorded. To make that race rare, a connection the server closed while
    idle is dropped as soon as the loop sees the close, and one idle for over a second is
    probed (a zero-timeout poll) before reuse. A status code is not a failure (see
    ``Response.raise_for_status``). Invalid input raises ``ConfigError`` before anything
    is sent. Use one client per event loop; close it with :meth:`aclose` or ``async with``.
    """

    __slots__ = (
        "_clock", "_closed", "_connect_to", "_encoder", "_last_pool", "_last_request",
        "_last_url", "_limit", "_limits", "_loop", "_loop_thread", "_now", "_pools", "_ssl",
        "_timeouts",
    )  # fmt: skip

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        timeouts: Timeouts = Timeouts(),  # noqa: B008  # frozen, so one shared default is safe
        max_connections: int = 100,
        ssl: _ssl.SSLContext | None = None,
        headers: HeadersInput | None = None,
        limits: Limits = Limits(),  # noqa: B008  # frozen, so one shared default is safe
        connect_to: Mapping[tuple[str, int], str] | None = None,
    ) -> None:
        if not isinstance(limits, Limits):
            raise ConfigError(
                f"must be a Limits, got {limits!r}", field="limits", hint="Limits(max_head=..)"
            )
        if not isinstance(timeouts, Timeouts):
            raise ConfigError(
                f"must be a Timeouts, got {timeouts!r}",
                field="timeouts",
                hint="Timeouts(connect=.., read=.., total=..)",
            )
        if ssl is not None and not isinstance(ssl, _ssl.SSLContext):
            raise ConfigError(f"must be an ssl.SSLContext, got {ssl!r}", field="ssl")
        self._clock = clock if clock is not None else LoopClock()
        self._now = self._clock.now
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop `_now` was bound for
        # the thread it was bound in (not `_thread`: mypyc's C name for that is a C keyword)
        self._loop_thread = 0
        # The last request start() encoded, as (url, headers, body, method, its encoding),
        # when none of them can change (see cacheable): given again for the same objects.
        self._last_request: tuple[object, object, object, str, _Encoding] | None = None
        self._timeouts = timeouts
        self._limits = limits
        self._limit = check_whole(max_connections, "max_connections")
        self._ssl = ssl
        self._connect_to: dict[tuple[str, int], str] = dict(connect_to or {})
        self._encoder = RequestEncoder(headers)
        self._pools: dict[tuple[str, str, int], OriginPool[Connection]] = {}
        self._last_url: URL | None = None  # the last URL's pool, found without hashing
        self._last_pool: OriginPool[Connection] | None = None
        self._closed = False

    async def request(
        self,
        method: str,
        url: URL | str,
        *,
        headers: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
        body: bytes | None = None,
        timeouts: Timeouts | None = None,
        timing: Timing | None = None,
    ) -> Response:
        """Send one request and read the whole response (never raises for a status).

        ``timing``, if given, is the :class:`Timing` the exchange fills in (its ``started``
        is set now): a caller that keeps it still has ``sent`` and ``first_byte`` when the
        request is cancelled midway, which no exception carries.
        """
        _, response = await self._exchange(
            method, url, headers, body, timeouts, streaming=False, timing=timing
        )
        return response

    async def _exchange(
        self,
        method: str,
        url: URL | str,
        headers: Mapping[str, str] | Sequence[tuple[str, str]] | None,
        body: bytes | None,
        timeouts: Timeouts | None,
        *,
        streaming: bool,
        timing: Timing | None = None,
    ) -> tuple[Connection, Response]:
        """Send on a pooled or new connection; return when the response (its head, when
        ``streaming``) has arrived. A failure or cancellation abandons the exchange."""
        loop = asyncio.get_running_loop()
        response, payload, limits, pool, conn = self._prepare(
            loop, method, url, headers, body, timeouts, timing
        )
        if conn is None:
            conn = await self._connect(pool, response, limits, loop)
        waiter: asyncio.Future[Response] = loop.create_future()
        conn.send(response, payload, limits, waiter, method=method, streaming=streaming)
        try:
            await waiter
        except BaseException:
            conn.abandon(response)  # no-op unless this exchange is still running
            raise
        return conn, response

    def start(
        self,
        method: str,
        url: URL | str,
        waiter: Waiter,
        headers: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
        body: bytes | None = None,
        timing: Timing | None = None,
    ) -> Callable[[], None] | None:
        """Send one request *now* on an idle keep-alive connection, without awaiting.

        ``waiter`` is told how the exchange ends (see :class:`Waiter`): given the response
        with its whole body read, or the error, exactly as :meth:`request` would have
        returned or raised. Returns a function that abandons the exchange (unless it has
        ended, its connection is closed and ``waiter.cancel()`` is called), or ``None``,
        having sent nothing, when no idle connection is at hand: opening one takes awaits,
        so use :meth:`request`. Must be called with the loop running. Its arguments may
        all be given by position (the load path does: keywords cost more per call).

        This is the load engine's hot path: no task, no future and no loop turn per
        request, which would otherwise be a large share of a request's CPU time.
        """
        # What _prepare does, minus what a caller that only takes an idle connection needs:
        # this runs once per request of a load test.
        loop = self._loop
        if loop is None or not loop.is_running() or get_ident() != self._loop_thread:
            # Not the loop this client is bound to (or none yet): ask which one runs. Not
            # on every call: asking is slow on Python 3.11 (it asks the kernel for the
            # process id), and the bound loop running in this thread can only be the
            # running loop.
            loop = asyncio.get_running_loop()
            if loop is not self._loop:
                self._bind(loop)
        last = self._last_request  # a load test sends the same request again and again
        if (
            last is not None
            and last[0] is url
            and last[1] is headers
            and last[2] is body
            and last[3] == method
            and not self._closed
        ):
            url, payload, pool = last[4]
        else:
            url, payload, pool = self._encode(method, url, headers, body)
        now = self._now()
        conn = pool.checkout(now)
        if conn is None:
            return None
        if timing is None:
            timing = Timing(now, reused=True)
        else:
            timing.started, timing.reused = now, True
        response = Response(url, timing)
        conn.send(response, payload, self._timeouts, waiter, method, False)
        return partial(conn.abandon, response)

    def stream(
        self,
        method: str,
        url: URL | str,
        *,
        headers: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
        body: bytes | None = None,
        timeouts: Timeouts | None = None,
        timing: Timing | None = None,
    ) -> AbstractAsyncContextManager[Response]:
        """``async with client.stream(...) as response``: the response once its head has
        arrived; take the body with ``response.iter_chunks()`` or ``await response.read()``.

        On exit the connection returns to the pool if the whole body had arrived, and is
        closed otherwise. The total timeout, if any, runs until the body's end.

        ``timing``, if given, is the :class:`Timing` the exchange fills in (its ``started``
        is set on entering the block), as with :meth:`request`: a caller that keeps it
        still has ``sent`` when the request is cancelled or fails before the response head
        arrives, when there is no response to read it from.
        """
        return _Stream(self, method, url, headers, body, timeouts, timing)

    async def preconnect(self, url: URL | str, count: int) -> int:
        """Open connections to ``url``'s origin now, so that requests find them idle: up
        to ``count`` in all for the origin (and within ``max_connections``), opened at
        once, each within the connect timeout. Returns how many stand open and idle.

        Opening is not a request: a connection that fails to open is not retried and its
        error is not raised (fewer are returned); the requests that follow meet the same
        refusal and report it as theirs. A load test calls this before its clock starts,
        as wrk does, so that no request's time is spent connecting.
        """
        check_whole(count, "count", at_least=0)
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._bind(loop)
        if self._closed:
            raise RuntimeError("this HttpClient is closed")
        target = url if url.__class__ is URL else _as_url(url)
        pool = self._pool_for(target)
        wanted = max(0, min(count, self._limit) - pool.open)
        limits = self._timeouts

        async def open_one() -> None:
            if not pool.reserve():
                return
            response = Response(target, Timing(self._now()))
            try:
                async with asyncio.timeout(limits.connect):
                    conn = await self._open(pool, response, loop)
            except (HttpError, TimeoutError):  # the requests will meet it and report it
                return
            # Idle at once, each as it opens: cancelled midway (Ctrl-C), the ones already
            # open stay usable, none is left counted as in use.
            if not conn.closed:
                conn.idle_since = self._now()
                pool.checkin(conn)

        await asyncio.gather(*(open_one() for _ in range(wanted)))
        return len(pool.idle)

    def statistics(self) -> dict[str, dict[str, int]]:
        """Per origin (``"http://host:port"``): ``open``, ``idle``, ``in_use``,
        ``waiting``, ``created``, ``reused``."""
        return {pool.key: pool.statistics() for pool in self._pools.values()}

    async def aclose(self) -> None:
        """Close every connection; requests still running fail, later ones raise
        ``RuntimeError``. Idempotent."""
        self._closed = True
        for pool in self._pools.values():
            pool.close()

    async def __aenter__(self) -> HttpClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        totals = {"open": 0, "idle": 0, "in_use": 0, "waiting": 0}
        for stats in self.statistics().values():
            for key in totals:
                totals[key] += stats[key]
        counts = " ".join(f"{k}={v}" for k, v in totals.items())
        state = " closed" if self._closed else ""
        return (
            f"<HttpClient{state} origins={len(self._pools)} {counts} max_connections={self._limit}>"
        )

    # ----------------------------------------------------------------------- internals

    def _prepare(
        self,
        loop: asyncio.AbstractEventLoop,
        method: str,
        url: URL | str,
        headers: HeadersInput | None,
        body: bytes | None,
        timeouts: Timeouts | None,
        timing: Timing | None = None,
    ) -> tuple[Response, _Payload, Timeouts, OriginPool[Connection], Connection | None]:
        """Everything before the first await: check, encode, try an idle connection."""
        if loop is not self._loop:
            self._bind(loop)
        if timing is None:
            timing = Timing(self._now())
        else:
            timing.started = self._now()
        url, payload, pool = self._encode(method, url, headers, body)
        limits = self._timeouts if timeouts is None else timeouts
        conn = pool.checkout(timing.started)
        if conn is not None:
            timing.reused = True
        return Response(url, timing), payload, limits, pool, conn

    def _encode(
        self, method: str, url: URL | str, headers: HeadersInput | None, body: bytes | None
    ) -> _Encoding:
        """Check the client and the input, encode the request, find the origin's pool."""
        if self._closed:
            raise RuntimeError("this HttpClient is closed")
        checked = url if url.__class__ is URL else _as_url(url)
        if body is not None and not isinstance(body, bytes | bytearray | memoryview):
            raise ConfigError(
                f"must be bytes or None, got {type(body).__name__}",
                field="body",
                hint="encode text first",
            )
        payload = self._encoder.encode(method, checked, headers, body)
        pool = self._last_pool  # a load test sends to the same URL object again and again
        if checked is not self._last_url or pool is None:
            pool = self._pool_for(checked)
        encoded = checked, payload, pool
        if cacheable(headers, body):  # what start() gives again for the same objects
            self._last_request = (url, headers, body, method, encoded)
        return encoded

    def _pool_for(self, url: URL) -> OriginPool[Connection]:
        pool = self._pools.get(url.origin)
        if pool is None:
            key = f"{url.scheme}://{url.authority}"
            pool = self._pools[url.origin] = OriginPool(key, self._limit)
        self._last_url, self._last_pool = url, pool
        return pool

    async def _connect(
        self,
        pool: OriginPool[Connection],
        response: Response,
        limits: Timeouts,
        loop: asyncio.AbstractEventLoop,
    ) -> Connection:
        """A connection from a full pool's queue or a new one, within the connect budget."""
        timing = response.timing
        budget, phase = limits.connect, "connect"
        if limits.total is not None:
            left = limits.total - (self._now() - timing.started)
            if budget is None or left < budget:
                budget, phase = left, "total"
        try:
            async with asyncio.timeout(budget) as scope:
                return await self._get_connection(pool, response, loop)
        except TimeoutError as exc:
            if not scope.expired():
                raise
            message = f"no connection within {budget:g} s ({phase} timeout)"
            raise RequestTimeout(
                message, phase=phase, timeout_s=budget, url=response.url, timing=timing
            ) from exc

    async def _get_connection(
        self, pool: OriginPool[Connection], response: Response, loop: asyncio.AbstractEventLoop
    ) -> Connection:
        while True:
            if pool.reserve():
                return await self._open(pool, response, loop)
            future = pool.wait(loop)
            try:
                conn = await future
            except BaseException:
                pool.forget(future)
                raise
            if conn is None:  # a slot was reserved for us
                return await self._open(pool, response, loop)
            if not conn.closed:  # else it died on the way: its slot is free again
                response.timing.reused = True
                return conn

    async def _open(
        self, pool: OriginPool[Connection], response: Response, loop: asyncio.AbstractEventLoop
    ) -> Connection:
        """Open a connection in a reserved slot (freed again if that fails)."""
        url, timing = response.url, response.timing
        conn = Connection(pool, self._now, loop, self._limits)
        context = self._ssl_context() if url.scheme == "https" else None
        address = self._connect_to.get((url.host, url.port)) if self._connect_to else None
        timing.connect_start = self._now()
        try:
            with mapped(url=url, timing=timing, stage=Stage.CONNECT, address=address):
                host = url.host if address is None else address
                transport, _ = await loop.create_connection(lambda: conn, host, url.port)
                if context is not None:
                    # The handshake apart from the TCP connect, so that each is timed: SNI
                    # and the certificate's name are the URL's host.
                    timing.tls_start = self._now()
                    secured = await loop.start_tls(
                        transport, conn, context, server_hostname=url.host
                    )
                    conn.secured(secured)
        except BaseException:
            conn.forsake()
            raise
        timing.connected = self._now()
        pool.opened(conn)
        return conn

    def _bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Read time for ``loop`` through the clock's reader, taken once per loop (a
        clock's reader may be bound to the running loop).

        Connections belong to the loop that opened them: on another loop (a second
        ``asyncio.run``), the pools start afresh and the old ones are left to their loop.
        """
        if self._loop is not None:
            self._pools, self._last_url, self._last_pool = {}, None, None
            self._last_request = None
        self._loop, self._loop_thread = loop, get_ident()
        self._now = self._clock.reader()

    def _ssl_context(self) -> _ssl.SSLContext:
        if self._ssl is None:
            self._ssl = _ssl.create_default_context()
        return self._ssl


def _as_url(url: object) -> URL:
    if isinstance(url, URL):  # a subclass
        return url
    return URL.parse(url)  # type: ignore[arg-type]  # parse() refuses a non-str itself


class _Stream(AbstractAsyncContextManager[Response]):
    """The context manager :meth:`HttpClient.stream` returns."""

    __slots__ = ("_args", "_client", "_conn", "_response")

    def __init__(self, client: HttpClient, *args: Any) -> None:
        self._client = client
        self._args = args
        self._conn: Connection | None = None
        self._response: Response | None = None

    async def __aenter__(self) -> Response:
        method, url, headers, body, timeouts, timing = self._args
        conn, response = await self._client._exchange(
            method, url, headers, body, timeouts, streaming=True, timing=timing
        )
        self._conn, self._response = conn, response
        return response

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        conn, response = self._conn, self._response
        if conn is not None and response is not None:
            conn.end_stream(response)
            response._close_stream()
