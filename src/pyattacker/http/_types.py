"""The small value types of the HTTP client's load path: ``Timing``, ``Waiter`` and
``Headers`` (``Timeouts``, which checks what a user gives it, is in ``_timeouts``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyattacker.http._response import Response

from httptools import (
    HttpParserCallbackError,
    HttpParserError,
    HttpParserUpgrade,
    HttpResponseParser,
)

__all__ = ["Headers", "Timing", "Waiter", "read_head"]


_TIMING_FIELDS = (
    "started", "connected", "sent", "first_byte", "end", "chunk_times", "reused",
    "connect_start", "tls_start",
)  # fmt: skip


class Timing:
    """When each step of one request happened, in the client's clock seconds.

    A step the request did not reach is ``None``. ``connected`` is set only when this
    request opened a new connection (``reused`` says it took a pooled keep-alive one);
    ``sent`` is when the whole request had left for the socket (the kernel took every
    byte); ``first_byte`` when the first response byte arrived; ``end`` when the last body
    byte did. ``chunk_times`` holds the arrival time of each body chunk of a *streamed*
    response (chunks that arrived in one socket read share that read's time); it stays
    empty for ``request()``, which reads the body in one go.

    A request that opened a new connection also has ``connect_start`` (opening began,
    after any wait for a free slot of the pool) and, for ``https``, ``tls_start`` (the TCP
    connection stood, the TLS handshake began); ``connected`` is then when the connection
    was ready (handshake done). :attr:`connect` and :attr:`tls` are those spans.
    """

    __slots__ = (
        "chunk_times", "connect_start", "connected", "end", "first_byte", "reused", "sent",
        "started", "tls_start",
    )  # fmt: skip

    # A plain __init__, not @dataclass's: the dataclass one is generated Python that a
    # compiled build still runs as bytecode, once per request.
    def __init__(
        self,
        started: float,
        connected: float | None = None,
        sent: float | None = None,
        first_byte: float | None = None,
        end: float | None = None,
        chunk_times: list[float] | None = None,
        reused: bool = False,
        connect_start: float | None = None,
        tls_start: float | None = None,
    ) -> None:
        self.started = started
        self.connected = connected
        self.sent = sent
        self.first_byte = first_byte
        self.end = end
        self.chunk_times: list[float] = [] if chunk_times is None else chunk_times
        self.reused = reused
        self.connect_start = connect_start
        self.tls_start = tls_start

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _TIMING_FIELDS)
        return f"Timing({shown})"

    @property
    def connect(self) -> float | None:
        """Seconds of the TCP connect of a new connection (``None``: none was opened)."""
        start = self.connect_start
        end = self.tls_start if self.tls_start is not None else self.connected
        return None if start is None or end is None else end - start

    @property
    def tls(self) -> float | None:
        """Seconds of the TLS handshake of a new connection (``None``: none, or plain HTTP)."""
        start, end = self.tls_start, self.connected
        return None if start is None or end is None else end - start


class Waiter(Protocol):
    """Who learns how one exchange ended: an ``asyncio.Future[Response]`` (what
    :meth:`HttpClient.request` awaits), or any object with these four methods that acts at
    once (:meth:`HttpClient.start`'s callers: no task, no future, no loop turn).

    The connection calls at most one of ``set_result`` / ``set_exception`` / ``cancel``,
    and only while ``done()`` is false. A waiter that acts at once must not send on a
    connection from inside these calls: they run inside the connection's own callbacks.
    """

    def done(self) -> bool: ...

    def set_result(self, result: Response, /) -> None: ...

    def set_exception(self, exception: BaseException, /) -> None: ...

    def cancel(self) -> bool: ...


class Headers:
    """Response headers: names compared case-insensitively, order and repeats kept.

    Built from the raw ``(name, value)`` byte pairs the parser saw; they are decoded
    (Latin-1, as HTTP/1.1 defines) only when someone looks, which a load test mostly does
    not. A connection gives the response's head bytes instead (:meth:`_of_head`): the pairs
    are then read off them when first needed, by the same parser, so that answers nobody
    asks about cost no per-header callback. Read-only.
    """

    __slots__ = ("_decoded", "_head", "_raw", "_reason")

    def __init__(self, raw: list[tuple[bytes, bytes]] | None = None) -> None:
        self._raw = raw if raw is not None else []
        self._head: bytes | None = None
        self._reason = b""
        self._decoded: list[tuple[str, str, str]] | None = None

    @classmethod
    def _of_head(cls, head: bytes) -> Headers:
        """The headers of the response whose head (status line included, any 1xx heads
        before it too) is in ``head``, which a parser has already accepted; bytes after
        the head are ignored."""
        headers = cls()
        headers._head = head
        return headers

    def _pairs(self) -> list[tuple[bytes, bytes]]:
        if self._head is not None:
            self._reason, self._raw = read_head(self._head)
            self._head = None
        return self._raw

    def _status_reason(self) -> bytes:
        """The reason phrase of the status line these headers came with (``b""`` if none)."""
        self._pairs()
        return self._reason

    @classmethod
    def from_pairs(cls, pairs: list[tuple[str, str]]) -> Headers:
        """Headers from text pairs (for tests and fakes)."""
        return cls([(n.encode("latin-1"), v.encode("latin-1")) for n, v in pairs])

    def _entries(self) -> list[tuple[str, str, str]]:
        """``(lower-case name, name, value)`` per header, decoded on first use."""
        if self._decoded is None:
            self._decoded = [
                (name.decode("latin-1").lower(), name.decode("latin-1"), value.decode("latin-1"))
                for name, value in self._pairs()
            ]
        return self._decoded

    def get(self, name: str, default: str | None = None) -> str | None:
        """The first value of ``name``, or ``default``."""
        key = name.lower()
        for lower, _, value in self._entries():
            if lower == key:
                return value
        return default

    def get_all(self, name: str) -> list[str]:
        """Every value of ``name``, in the order they came."""
        key = name.lower()
        return [value for lower, _, value in self._entries() if lower == key]

    def items(self) -> list[tuple[str, str]]:
        """``(name, value)`` pairs as sent (names in the server's case)."""
        return [(name, value) for _, name, value in self._entries()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __iter__(self) -> Iterator[str]:
        return (name for _, name, _ in self._entries())

    def __len__(self) -> int:
        return len(self._pairs())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Headers):
            return NotImplemented
        return self.items() == other.items()

    __hash__ = None  # type: ignore[assignment]  # mutable-looking container: unhashable

    def __repr__(self) -> str:
        return f"Headers({self.items()!r})"


class _HeadEnd(Exception):
    """Raised by :class:`_HeadReader` to stop its parser at the end of the head."""


class _HeadReader:
    """httptools' callbacks for :func:`read_head`: the status line's reason and the
    ``(name, value)`` pairs of the first head with a final (>= 200) status."""

    __slots__ = ("parser", "raw", "reason")

    def __init__(self) -> None:
        self.raw: list[tuple[bytes, bytes]] = []
        self.reason = b""
        self.parser = HttpResponseParser(self)

    def on_status(self, reason: bytes) -> None:
        self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self.raw.append((name, value))

    def on_headers_complete(self) -> None:
        if self.parser.get_status_code() < 200:  # 1xx: informational, the real head follows
            self.raw, self.reason = [], b""
            return
        raise _HeadEnd


def read_head(head: bytes) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """``(reason, [(name, value), ...])`` of the final response head in ``head``, bytes a
    parser has accepted: what httptools' ``on_status`` and ``on_header`` callbacks gave
    while it read them (a fresh parser of the same kind reads them again)."""
    reader = _HeadReader()
    try:
        reader.parser.feed_data(head)
    except HttpParserCallbackError as exc:
        if not isinstance(exc.__context__, _HeadEnd):
            raise
    except (HttpParserError, HttpParserUpgrade):
        # Not for bytes the connection's parser accepted, which end at their final head;
        # but headers are read from inside that parser's callbacks (a status error's), so
        # give what was read rather than break the connection there.
        pass
    return reader.reason, reader.raw
