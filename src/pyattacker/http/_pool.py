"""Keep-alive connections to one origin: bounded, idle ones reused LIFO, waiters FIFO.

Pure bookkeeping, no I/O and no awaits: the client asks for a connection
(:meth:`OriginPool.checkout`, else :meth:`reserve` a slot and open one, else :meth:`wait`),
and the connection reports back (:meth:`checkin` when it is reusable, :meth:`drop` when it
is gone). ``open`` counts every connection that holds a slot: idle, in use, or being
opened, so ``open <= limit`` always holds. A slot freed while callers wait goes to the
first of them, either as a live connection or as the right to open one.

Idle reuse is LIFO: the most recently used connection is the one least likely to have been
closed by the server's idle timeout, and the others age out together.
"""

from __future__ import annotations

import asyncio
import select
from collections import deque
from typing import Generic, Protocol, TypeVar

__all__ = ["OriginPool", "Pooled"]


class Pooled(Protocol):
    """What the pool needs of a connection (:class:`~pyattacker.http._connection.Connection`
    in use; the tests' fakes alike): liveness, idle time, its socket, and a way to drop it."""

    closed: bool
    idle_since: float
    fd: int

    def discard(self) -> None: ...


Conn = TypeVar("Conn", bound=Pooled)  # the pool's connections: one kind per pool

# A connection idle this long is probed (a zero-timeout poll of its socket) before reuse:
# a server that closed it has sent FIN, which makes it readable. Shorter idles skip the
# probe; the loop itself notices a close within one iteration.
_PROBE_AFTER_S = 1.0


class OriginPool(Generic[Conn]):
    """The connections of one ``(scheme, host, port)``; at most ``limit`` open at once."""

    __slots__ = ("connections", "created", "idle", "key", "limit", "open", "reused", "waiters")

    def __init__(self, key: str, limit: int) -> None:
        self.key = key
        self.limit = limit
        self.idle: list[Conn] = []
        self.waiters: deque[asyncio.Future[Conn | None]] = deque()
        self.connections: set[Conn] = set()  # every opened one not yet dropped
        self.open = 0
        self.created = 0
        self.reused = 0

    def checkout(self, now: float) -> Conn | None:
        """A live idle connection (the most recent first), or ``None``. Drops dead ones."""
        idle = self.idle
        while idle:
            conn = idle.pop()
            if conn.closed or (now - conn.idle_since > _PROBE_AFTER_S and _readable(conn.fd)):
                conn.discard()  # calls drop(), which frees its slot
                continue
            self.reused += 1
            return conn
        return None

    def reserve(self) -> bool:
        """Take a slot to open a new connection in, if one is free and nobody queues."""
        if self.open < self.limit and not self.waiters:
            self.open += 1
            return True
        return False

    def opened(self, conn: Conn) -> None:
        """``conn`` was opened in a reserved slot."""
        self.created += 1
        self.connections.add(conn)

    def unreserve(self) -> None:
        """Opening a connection in a reserved slot failed: free the slot."""
        self.open -= 1
        self._grant_slot()

    def wait(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[Conn | None]:
        """Queue for a connection. The future gives a live connection, or ``None``: a slot
        was reserved for the caller to open one in. Use :meth:`forget` if it is abandoned."""
        future: asyncio.Future[Conn | None] = loop.create_future()
        self.waiters.append(future)
        return future

    def forget(self, future: asyncio.Future[Conn | None]) -> None:
        """The caller stopped waiting: leave the queue, and return what it was handed."""
        if not future.done() or future.cancelled():
            if future in self.waiters:
                self.waiters.remove(future)
            return
        conn = future.result()
        if conn is None:
            self.unreserve()
        else:
            self.checkin(conn)

    def checkin(self, conn: Conn) -> None:
        """``conn`` finished an exchange and is reusable: to the first waiter, or idle."""
        while self.waiters:
            future = self.waiters.popleft()
            if not future.done():
                self.reused += 1
                future.set_result(conn)
                return
        self.idle.append(conn)

    def drop(self, conn: Conn) -> None:
        """``conn`` is closed (called once per connection): free its slot."""
        if conn in self.idle:
            self.idle.remove(conn)
        self.connections.discard(conn)
        self.open -= 1
        self._grant_slot()

    def close(self) -> None:
        """Close every connection and fail every waiter (the client is closing)."""
        while self.waiters:  # first, or the closes below would hand them free slots
            future = self.waiters.popleft()
            if not future.done():
                future.set_exception(RuntimeError("the HttpClient was closed"))
        for conn in list(self.connections):
            conn.discard()

    def _grant_slot(self) -> None:
        while self.waiters and self.open < self.limit:
            future = self.waiters.popleft()
            if not future.done():
                self.open += 1
                future.set_result(None)

    def statistics(self) -> dict[str, int]:
        """``open``, ``idle``, ``in_use`` (open, not idle: includes connections being
        opened), ``waiting``, ``created`` and ``reused`` (requests that got a pooled one)."""
        idle = len(self.idle)
        return {
            "open": self.open,
            "idle": idle,
            "in_use": self.open - idle,
            "waiting": len(self.waiters),
            "created": self.created,
            "reused": self.reused,
        }

    def __repr__(self) -> str:
        stats = " ".join(f"{k}={v}" for k, v in self.statistics().items())
        return f"<OriginPool {self.key} limit={self.limit} {stats}>"


def _readable(fd: int) -> bool:
    """Whether socket ``fd`` has data or EOF pending, without blocking (``False`` if unknown)."""
    if fd < 0 or not hasattr(select, "poll"):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))
