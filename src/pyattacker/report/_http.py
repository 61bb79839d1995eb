"""The one small read-only HTTP server behind ``attack --serve`` and ``pyattacker serve``.

Each gives it a route table: a path (``/metrics``) to a handler that takes the request's
query string (``since=2.5``, or ``""``) and returns ``(status, content type, body)``. The
server does the rest, the same way for both:

* GET and HEAD only (HEAD gets GET's headers and no body); any other method is 405 with
  ``Allow: GET, HEAD``; a path not in the table is 404; a request line that is not HTTP
  is 400; a handler that raises is 500 (its error class and message, as plain text);
* one request per connection (``Connection: close``); a request head over 16 KiB, or
  slower than 10 s to arrive, is dropped; no request body is ever read;
* every answer says ``Cache-Control: no-store``, ``X-Content-Type-Options: nosniff``,
  ``Referrer-Policy: no-referrer`` and a Content-Security-Policy that lets a page load
  scripts, styles and data from this server only.

It inserts nothing into HTML: handlers answer static pages and assets (whose scripts
build the DOM with ``textContent``) and JSON or plain-text data.

Handlers run on the server's loop, or with ``blocking=True`` in a worker thread each (a
store read must not hold up ``/healthz``, nor another page).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from importlib import resources
from string import Template

__all__ = [
    "HTML",
    "JSON",
    "TEXT",
    "Handler",
    "Response",
    "RouteServer",
    "asset",
    "asset_routes",
    "live_page",
    "respond",
]

#: ``(status, content type, body)``
Response = tuple[int, str, bytes]
#: a route: the request's query string to its response
Handler = Callable[[str], Response]

TEXT = "text/plain; charset=utf-8"
HTML = "text/html; charset=utf-8"
JSON = "application/json"

HEAD_LIMIT = 16 * 1024
_HEAD_TIMEOUT_S = 10.0
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            500: "Internal Server Error"}  # fmt: skip
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_KINDS = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
#: what ``/assets/<name>`` serves for a name the pages load (``assets/`` holds the file)
_ASSET_FILES = {"uPlot.js": "uPlot.iife.min.js", "uPlot.css": "uPlot.min.css"}


def respond(routes: Mapping[str, Handler], method: str, target: str) -> Response:
    """The response to ``method target`` by ``routes`` (see the module docstring). Never
    raises: a handler's exception is a 500."""
    if method not in ("GET", "HEAD"):
        return 405, TEXT, b"only GET and HEAD\n"
    path, _, query = target.partition("?")
    handler = routes.get(path)
    if handler is None:
        return 404, TEXT, b"not found\n"
    try:
        return handler(query)
    except Exception as exc:  # keep serving; say what broke, as text
        return 500, TEXT, f"{type(exc).__name__}: {exc}\n".encode()


class RouteServer:
    """A server of ``routes`` (see the module docstring): :meth:`start`, then
    :meth:`close` (or :meth:`serve_forever`)."""

    def __init__(self, routes: Mapping[str, Handler], *, blocking: bool = False) -> None:
        self.routes = routes
        self.blocking = blocking
        self._server: asyncio.Server | None = None

    def __repr__(self) -> str:
        return f"<RouteServer url={self.url!r} routes={len(self.routes)}>"

    @property
    def url(self) -> str | None:
        """``http://host:port/`` once started, else None."""
        if self._server is None or not self._server.sockets:
            return None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}/" if ":" not in host else f"http://[{host}]:{port}/"

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen on ``host:port`` (0: a free port) on the running loop; return the URL.
        ``OSError`` if it cannot bind."""
        self._server = await asyncio.start_server(self._handle, host, port, limit=HEAD_LIMIT)
        assert self.url is not None
        return self.url

    async def serve_forever(self) -> None:
        """Answer until cancelled (Ctrl-C), then close."""
        assert self._server is not None, "start() first"
        async with self._server:
            await self._server.serve_forever()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)

    async def _answer(self, method: str, target: str) -> Response:
        if self.blocking:
            return await asyncio.to_thread(respond, self.routes, method, target)
        return respond(self.routes, method, target)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(_read_head(reader), _HEAD_TIMEOUT_S)
            parts = head[0].split() if head else []
            if len(parts) != 3 or not parts[2].startswith("HTTP/"):
                method, (status, kind, body) = "GET", (400, TEXT, b"bad request\n")
            else:
                method = parts[0]
                status, kind, body = await self._answer(method, parts[1])
            writer.write(_head(status, kind, len(body)) + (b"" if method == "HEAD" else body))
            await writer.drain()
        except (
            TimeoutError,
            ValueError,
            ConnectionError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
        ):
            pass  # a slow, oversized or vanished client: drop it
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


def asset_routes(names: Iterable[str]) -> dict[str, Handler]:
    """``/assets/<name>`` for each of ``names`` (the package's ``assets/`` files a page
    loads; ``uPlot.js`` and ``uPlot.css`` are the shipped uPlot build)."""
    return {f"/assets/{name}": _asset_handler(name) for name in names}


def _asset_handler(name: str) -> Handler:
    kind = _KINDS.get(name[name.rfind(".") :], TEXT)
    file = _ASSET_FILES.get(name, name)
    return lambda query: (200, kind, asset(file).encode())


@cache
def live_page(title: str, script: str) -> bytes:
    """A live page: ``title`` (ours, never user data) over the report that ``script`` (an
    ``assets/page_*.js``) draws from ``/report.json``, redrawn by ``page_live.js``."""
    html = Template(asset("live_report.html")).substitute(title=title, script=script)
    return html.encode()


@cache
def asset(name: str) -> str:
    """A file shipped in ``pyattacker/report/assets`` (package data)."""
    return (resources.files("pyattacker.report") / "assets" / name).read_text(encoding="utf-8")


async def _read_head(reader: asyncio.StreamReader) -> list[str]:
    """The request line and header lines (ValueError past the size limit)."""
    lines: list[str] = []
    while True:
        line = await reader.readuntil(b"\n")
        text = line.decode("latin-1").rstrip("\r\n")
        if not text:
            return lines
        lines.append(text)
        if len(lines) > 100:
            raise ValueError("too many header lines")


def _head(status: int, kind: str, length: int) -> bytes:
    lines = [
        f"HTTP/1.1 {status} {_REASONS[status]}",
        f"Content-Type: {kind}",
        f"Content-Length: {length}",
        "Cache-Control: no-store",
        "X-Content-Type-Options: nosniff",
        f"Content-Security-Policy: {_CSP}",
        "Referrer-Policy: no-referrer",
        "Connection: close",
    ]
    if status == 405:
        lines.append("Allow: GET, HEAD")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
