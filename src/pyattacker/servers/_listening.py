"""What the echo server and the mock LLM server share: an address checked when the server
is built, a listening socket on the running loop, its URL once bound, ``async with``.

A subclass says how to bind its shared state to the loop (:meth:`ListeningServer._bind`),
makes one protocol per connection (:meth:`ListeningServer._protocol`) and lists the open
ones (:meth:`ListeningServer._open`) so that :meth:`ListeningServer.stop` can drop them and
the :class:`~pyattacker.servers._guard.Sweeper` can close the slow ones (the server's
:class:`~pyattacker.servers._guard.Limits`).
"""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl as _ssl
from collections.abc import Iterable
from types import TracebackType
from typing import ClassVar, Self

from pyattacker._checks import check_whole
from pyattacker.errors import ConfigError
from pyattacker.servers._guard import Guarded, Limits, Sweeper
from pyattacker.servers._timer import ServerTimer

__all__ = ["ListeningServer", "listen_error"]


class ListeningServer:
    """A server on the running loop, listening on ``host:port`` (0: a free port)."""

    what: ClassVar[str] = "server"  # for messages: "the echo server has not been started"
    backlog: ClassVar[int] = 2048

    def __init__(
        self, host: str, port: int, limits: Limits, ssl: _ssl.SSLContext | None = None
    ) -> None:
        if ssl is not None and not isinstance(ssl, _ssl.SSLContext):
            raise ConfigError(f"must be an ssl.SSLContext, got {ssl!r}", field="ssl")
        self.ssl = ssl  # a server-side context: the server speaks TLS (https://)
        self.host = host
        self.limits = limits
        self.port = check_whole(port, "port", at_least=0)
        if self.port > 65535:
            raise ConfigError(f"must be a port 0..65535, got {port}", field="port")
        # SO_REUSEPORT: several processes listen on one port, the kernel spreads connections.
        self.reuse_port = False
        self._server: asyncio.Server | None = None
        self._sweeper: Sweeper | None = None
        self._timer: ServerTimer | None = None
        self._url: str | None = None

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` (``https://`` with TLS) with the bound port;
        ``RuntimeError`` before :meth:`start`."""
        if self._url is None:
            raise RuntimeError(f"the {self.what} has not been started")
        return self._url

    async def start(self) -> None:
        """Bind and listen. ``ConfigError`` naming ``host`` (not an address of this
        machine) or ``port`` (taken, or not ours to take) when the address is unusable."""
        if self._server is not None:
            raise RuntimeError(f"the {self.what} is already started")
        loop = asyncio.get_running_loop()
        self._timer = timer = ServerTimer(loop)
        self._bind(loop, timer)
        try:
            self._server = await loop.create_server(
                self._protocol,
                self.host,
                self.port,
                backlog=self.backlog,
                ssl=self.ssl,
                reuse_port=self.reuse_port or None,
            )
        except OSError as exc:
            self._close_timer()
            raise listen_error(self.host, self.port, exc) from None
        except UnicodeError:  # a label past 63 characters fails to encode, not to resolve
            self._close_timer()
            raise ConfigError(
                f"not a host name: {self.host[:60]!r}", field="host", hint="e.g. 127.0.0.1"
            ) from None
        # One timer for the whole server closes the connections that are too slow.
        self._sweeper = Sweeper(loop, timer.now, self._open, self.limits.timeout)
        port = self._server.sockets[0].getsockname()[1]
        host = f"[{self.host}]" if ":" in self.host else self.host
        self._url = f"{'https' if self.ssl is not None else 'http'}://{host}:{port}"

    async def stop(self) -> None:
        """Stop listening and close every connection (what is in flight is dropped)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        if self._sweeper is not None:
            self._sweeper.stop()
            self._sweeper = None
        for protocol in list(self._open()):
            protocol.abort()
        await server.wait_closed()
        self._close_timer()

    def _close_timer(self) -> None:
        if self._timer is not None:
            self._timer.close()
            self._timer = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    # -- what a subclass provides ---------------------------------------------------------

    def _bind(self, loop: asyncio.AbstractEventLoop, timer: ServerTimer) -> None:
        """Serve on ``loop``, its waits on ``timer`` (called by :meth:`start`, before any
        connection; :meth:`stop` closes the timer)."""
        raise NotImplementedError

    def _protocol(self) -> asyncio.Protocol:
        """The protocol of one new connection."""
        raise NotImplementedError

    def _open(self) -> Iterable[Guarded]:
        """The connections open now."""
        raise NotImplementedError


def listen_error(host: str, port: int, exc: OSError) -> ConfigError:
    """Why ``host:port`` cannot be listened on, naming the part to change."""
    text = f"cannot listen on {host}:{port}: {exc.strerror or exc}"
    if isinstance(exc, socket.gaierror) or exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
        return ConfigError(
            text, field="host", hint="an address of this machine: 127.0.0.1, 0.0.0.0 or ::1"
        )
    if exc.errno == errno.EACCES:
        hint = "ports below 1024 need privileges; port 0 picks a free one"
        return ConfigError(text, field="port", hint=hint)
    return ConfigError(text, field="port", hint="port 0 picks a free one")
