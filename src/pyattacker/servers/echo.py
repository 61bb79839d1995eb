"""The calibrated echo server: the ground truth of our accuracy benchmark.

Every echo request is held for a fresh draw from a known :class:`Delay` and the server
records exactly how long it held it: from the moment the request was fully parsed to the
moment its response left the write buffer (see :mod:`pyattacker.servers._protocol`). A
load generator's percentiles are judged against :meth:`EchoServer.stats`.

HTTP surface (answered without delay, never counted, never stalled)::

    GET  /stats[?samples=1]    exact count and percentiles of the hold times (JSON, seconds)
    POST /reset   (GET too)    forget every hold time
    POST /stall?seconds=S      write no echo response for S seconds (250ms, 2s... too)

A control request is computed when it is parsed; pipelined behind held echo requests on
the same connection, its reply still leaves after theirs (HTTP/1.1 order).

Every other method and path is an echo request: delayed, then answered 200 with the
request's body (or ``body_size`` bytes), or with a failure status drawn from ``fail``.
Request headers override the dice for one request: ``x-echo-delay: 5ms``,
``x-echo-status: 429``, ``x-echo-retry-after: 2``.

This module is the in-process server (tests use it on their own loop);
:class:`~pyattacker.servers.EchoServerProcess` runs it as a separate process.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qs

from pyattacker._checks import check_number, check_whole
from pyattacker._units import parse_duration
from pyattacker.errors import ConfigError
from pyattacker.measure import exact_percentile
from pyattacker.servers._core import Core, check_fail
from pyattacker.servers._delays import Delay
from pyattacker.servers._loops import run_until_signalled
from pyattacker.servers._process import EchoServerProcess
from pyattacker.servers._protocol import EchoProtocol

__all__ = ["PERCENTILES", "Delay", "EchoServer", "EchoServerProcess", "serve_until_signalled"]

# The percentiles /stats reports, by key.
PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("p99.9", 99.9))
_CONTROL = frozenset(
    {(b"GET", b"/stats"), (b"GET", b"/reset"), (b"POST", b"/reset"), (b"POST", b"/stall")}
)


class EchoServer:
    """The echo server on the running event loop (``async with EchoServer() as server``).

    Arguments are checked at construction (``ConfigError`` naming the argument). ``url``
    exists from :meth:`start` on. Statistics and controls are plain methods, safe to call
    from the loop's thread at any time, also while requests are in flight.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        delay: Delay | str = "0",
        seed: int = 0,
        body_size: int = 2,
        fail: Mapping[int, float] | None = None,
    ) -> None:
        self.host = host
        self.port = check_whole(port, "port", at_least=0)
        if self.port > 65535:
            raise ConfigError(f"must be a port 0..65535, got {port}", field="port")
        self.delay = delay if isinstance(delay, Delay) else Delay.parse(delay, field="delay")
        self.seed = check_whole(seed, "seed", at_least=0)
        body_size = check_whole(body_size, "body_size", at_least=0)
        self.fail = check_fail(fail)
        self._core = Core(
            delay=self.delay, seed=seed, body_size=body_size, fail=self.fail, control=self._control
        )
        self._server: asyncio.Server | None = None
        self._url: str | None = None

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` with the bound port; ``RuntimeError`` before :meth:`start`."""
        if self._url is None:
            raise RuntimeError("the echo server has not been started")
        return self._url

    async def start(self) -> None:
        """Bind and listen. ``ConfigError`` (field ``port``) when the address is unusable."""
        if self._server is not None:
            raise RuntimeError("the echo server is already started")
        loop = asyncio.get_running_loop()
        self._core.bind(loop)
        try:
            self._server = await loop.create_server(
                self._connection, self.host, self.port, backlog=2048
            )
        except OSError as exc:
            raise ConfigError(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}",
                field="port",
                hint="use --port 0 for any free port",
            ) from None
        port = self._server.sockets[0].getsockname()[1]
        host = f"[{self.host}]" if ":" in self.host else self.host
        self._url = f"http://{host}:{port}"

    async def stop(self) -> None:
        """Stop listening and close every connection (held requests count as dropped)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for protocol in list(self._core.connections):
            protocol.abort()
        await server.wait_closed()

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

    def stats(self, *, samples: bool = False) -> dict[str, Any]:
        """Exact statistics of every hold time since the last reset, in seconds.

        Keys: ``count``, ``min``, ``mean``, ``p50``, ``p90``, ``p95``, ``p99``, ``p99.9``,
        ``max`` (``None`` when ``count`` is 0; percentiles by nearest rank, from
        :func:`pyattacker.measure.exact_percentile`), ``statuses`` (count per status
        answered), ``dropped`` (requests whose connection closed before they were
        answered), ``in_flight`` (requests parsed and not yet answered: held now, not yet
        in the statistics), ``delay`` (the spec) and ``seed``; with ``samples=True`` also
        ``samples``, every hold time in the order the requests finished.
        """
        core = self._core
        values = sorted(core.samples)
        count = len(values)
        result: dict[str, Any] = {"count": count}
        result["min"] = values[0] if count else None
        result["mean"] = math.fsum(values) / count if count else None
        for key, q in PERCENTILES:
            result[key] = exact_percentile(values, q) if count else None
        result["max"] = values[-1] if count else None
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
        return self._core.clear()

    def stall(self, seconds: float) -> None:
        """Write no echo response from now until ``seconds`` from now.

        Requests that fall due meanwhile are held until the stall ends, and their hold
        times include it. A second stall extends the first; it never shortens it.
        """
        self._core.stall(check_number(seconds, "seconds", at_least=0))

    def _connection(self) -> EchoProtocol:
        return EchoProtocol(self._core)

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
        seconds = parse_duration(params["seconds"][-1], field="seconds")
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
