"""The calibrated echo server: the ground truth of our accuracy benchmark.

Every echo request is held for a fresh draw from a known :class:`Delay` and the server
records exactly how long it held it: from the moment the request was fully parsed to the
moment its response left the write buffer (see :mod:`pyattacker.servers._protocol`). A
load generator's percentiles are judged against :meth:`EchoServer.stats`.

HTTP surface (answered without delay, never counted, never stalled)::

    GET  /stats[?samples=1]    exact count and percentiles of the hold times (JSON, seconds)
    POST /reset   (GET too)    forget every hold time
    POST /stall?seconds=S      write no echo response for S seconds (250ms, 2s... too)

``/redirect?to=TARGET&code=CODE`` is an echo request (held, counted, ``code`` among its
statuses) answered CODE (301, 302, 303, 307 or 308; 302 by default) with ``Location:
TARGET`` (``/`` by default): a redirect to test a client's following against.

A control request is computed when it is parsed; pipelined behind held echo requests on
the same connection, its reply still leaves after theirs (HTTP/1.1 order).

Every other method and path is an echo request: delayed, then answered 200 with the
request's body (or ``body_size`` bytes), or with a failure status drawn from ``fail``.
Request headers override the dice for one request: ``x-echo-delay: 5ms``,
``x-echo-status: 429``, ``x-echo-retry-after: 2`` (ranges in
:mod:`pyattacker.servers._ranges`; out of range is a 400 naming the header). Hostile
clients meet the limits of :mod:`pyattacker.servers._guard` (431, 413, a timeout, a
connection cap).

This module is the in-process server (tests use it on their own loop);
:class:`~pyattacker.servers.EchoServerProcess` runs it as a separate process.
"""

from __future__ import annotations

import asyncio
import json
import ssl as _ssl
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import parse_qs

from pyattacker._checks import check_number, check_whole
from pyattacker.errors import ConfigError
from pyattacker.servers._core import Core, check_fail, check_status
from pyattacker.servers._delays import Delay
from pyattacker.servers._guard import HEAD_LIMIT, MAX_CONNECTIONS, REQUEST_TIMEOUT_S, limits
from pyattacker.servers._listening import ListeningServer
from pyattacker.servers._llm_values import Values
from pyattacker.servers._loops import run_until_signalled
from pyattacker.servers._process import EchoServerProcess
from pyattacker.servers._protocol import EchoProtocol
from pyattacker.servers._ranges import request_seconds
from pyattacker.servers._timer import ServerTimer

__all__ = [
    "HEAD_LIMIT",
    "MAX_CONNECTIONS",
    "PERCENTILES",
    "REQUEST_TIMEOUT_S",
    "Delay",
    "EchoServer",
    "EchoServerProcess",
    "check_fail",
    "check_status",
    "serve_until_signalled",
]

# The percentiles /stats reports, by key.
PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("p99.9", 99.9))
#: The largest request body the echo server reads (bytes): nginx's ``client_max_body_size``.
#: A load test's bodies are small; a larger one is answered 413 unread.
BODY_LIMIT = 1024 * 1024
_CONTROL = frozenset(
    {(b"GET", b"/stats"), (b"GET", b"/reset"), (b"POST", b"/reset"), (b"POST", b"/stall")}
)


class EchoServer(ListeningServer):
    """The echo server on the running event loop (``async with EchoServer() as server``).

    Arguments are checked at construction (``ConfigError`` naming the argument). ``url``
    exists from :meth:`start` on. Statistics and controls are plain methods, safe to call
    from the loop's thread at any time, also while requests are in flight.

    Limits against hostile or broken clients (:mod:`pyattacker.servers._guard`): a request
    head over ``max_head_size`` bytes (32 KiB) is a 431, a body over ``max_body_size``
    (1 MiB, :data:`BODY_LIMIT`) a 413, both followed by a close; a connection that has not
    sent a whole request ``request_timeout`` seconds (60) after its last one, or after it
    opened, while the server owed it nothing, is closed (a 408 when it had begun one);
    beyond ``max_connections`` (10,000) open at once, a new connection is closed as soon
    as it is accepted.

    ``ssl``, a server-side ``ssl.SSLContext``, makes it speak TLS (its ``url`` is then
    ``https://``); a context that asks for client certificates (``verify_mode``
    ``CERT_REQUIRED``) refuses a client without one.
    """

    what = "echo server"

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        delay: Delay | str = "0",
        seed: int = 0,
        body_size: int = 2,
        fail: Mapping[int, float] | None = None,
        max_head_size: int = HEAD_LIMIT,
        max_body_size: int = BODY_LIMIT,
        request_timeout: float | str = REQUEST_TIMEOUT_S,
        max_connections: int = MAX_CONNECTIONS,
        ssl: _ssl.SSLContext | None = None,
    ) -> None:
        bounds = limits(
            head=max_head_size,
            body=max_body_size,
            timeout=request_timeout,
            connections=max_connections,
        )
        super().__init__(host, port, bounds, ssl)
        self.delay = delay if isinstance(delay, Delay) else Delay.parse(delay, field="delay")
        self.seed = check_whole(seed, "seed", at_least=0, at_most=2**63 - 1)
        body_size = check_whole(body_size, "body_size", at_least=0)
        self.fail = check_fail(fail)
        self._core = Core(
            delay=self.delay, seed=seed, body_size=body_size, fail=self.fail, control=self._control
        )
        # The hold times stats() has sorted so far: core.samples[:_absorbed].
        self._values = Values()
        self._absorbed = 0

    def stats(self, *, samples: bool = False) -> dict[str, Any]:
        """Exact statistics of every hold time since the last reset, in seconds.

        Keys: ``count``, ``min``, ``mean``, ``p50``, ``p90``, ``p95``, ``p99``, ``p99.9``,
        ``max`` (``None`` when ``count`` is 0; percentiles by nearest rank, from
        :func:`pyattacker.measure.nearest_rank`; ``mean`` within a few units in the last
        place of the exact mean), ``statuses`` (count per status
        answered), ``dropped`` (requests whose connection closed before they were
        answered), ``in_flight`` (requests parsed and not yet answered: held now, not yet
        in the statistics), ``delay`` (the spec) and ``seed``; with ``samples=True`` also
        ``samples``, every hold time in the order the requests finished.

        Costs what is new since the last call (sorted into runs, :mod:`._llm_values`) plus
        a few hundred binary searches, never a sort of every hold time: a long run's
        ``/stats`` stays cheap. ``samples=True`` copies them all.
        """
        core = self._core
        fresh = core.samples[self._absorbed :]
        self._absorbed += len(fresh)
        self._values.extend(fresh)
        result: dict[str, Any] = self._values.summary()
        count = result["count"]
        failed = sum(core.statuses.values())
        statuses = {200: count - failed} if count > failed else {}
        statuses.update(core.statuses)
        result["statuses"] = {str(status): statuses[status] for status in sorted(statuses)}
        result["dropped"] = core.dropped
        result["in_flight"] = sum(protocol.holding() for protocol in core.connections)
        result["delay"] = self.delay.describe()
        result["seed"] = self.seed
        if samples:
            result["samples"] = core.samples.tolist()
        return result

    def reset(self) -> int:
        """Forget every hold time, status count and drop; return how many holds were cleared."""
        self._values.clear()
        self._absorbed = 0
        return self._core.clear()

    def stall(self, seconds: float) -> None:
        """Write no echo response from now until ``seconds`` from now.

        Requests that fall due meanwhile are held until the stall ends, and their hold
        times include it. A second stall extends the first; it never shortens it.
        """
        self._core.stall(check_number(seconds, "seconds", at_least=0))

    def _bind(self, loop: asyncio.AbstractEventLoop, timer: ServerTimer) -> None:
        self._core.bind(loop, timer)

    def _protocol(self) -> EchoProtocol:
        return EchoProtocol(self._core, self.limits)

    def _open(self) -> Iterable[EchoProtocol]:
        return self._core.connections

    def _control(self, method: bytes, path: bytes, query: bytes) -> tuple[int, bytes] | None:
        """Answer a control request, or ``None`` when ``(method, path)`` is an echo request."""
        if (method, path) not in _CONTROL:
            return None
        params = parse_qs(query.decode("latin-1"))
        try:
            body = self._run_control(path, params)
        except ConfigError as exc:
            return 400, _json({"error": str(exc)})
        return 200, _json(body)

    def _run_control(self, path: bytes, params: dict[str, list[str]]) -> dict[str, Any]:
        if path == b"/stats":
            wanted = params.get("samples", ["0"])[-1].lower() in ("1", "true", "yes")
            return self.stats(samples=wanted)
        if path == b"/reset":
            return {"cleared": self.reset()}
        if "seconds" not in params:
            raise ConfigError("missing", field="seconds", hint="POST /stall?seconds=0.5")
        seconds = request_seconds(params["seconds"][-1], "seconds")
        self.stall(seconds)
        return {"stall_s": seconds}

    def __repr__(self) -> str:
        where = self._url or "not started"
        return f"<EchoServer {where} delay={self.delay.describe()!r} seed={self.seed}>"


def serve_until_signalled(server: EchoServer, *, announce: Callable[[EchoServer], None]) -> None:
    """Run ``server`` on uvloop until SIGINT or SIGTERM, then stop it and return.

    ``announce(server)`` is called once the server listens (``server.url`` is set). Uses
    asyncio's own loop where uvloop is not installed. Raises what ``server.start()``
    raises (``ConfigError`` for an unusable address).
    """
    run_until_signalled(server, announce)


def _json(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"
