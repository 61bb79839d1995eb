"""``pyattacker serve STORE``: a run's page, ``/metrics`` and ``/healthz`` over HTTP.

Read-only: every request opens the store read-only (as ``pyattacker report`` does: SQLite
WAL readers never block the writer and never write), reads it, and closes it, so the
server works beside a live run and shows it as it goes. The reading happens in a worker
thread, so a slow page does not hold up ``/healthz``.

Routes (GET and HEAD only; any other method is 405, any other path 404):

- ``/``: the run's page (``pyattacker report --html``'s), reloading itself every
  ``--refresh`` seconds while a run is live.
- ``/report.json``: the summary ``pyattacker report --json`` prints.
- ``/metrics``: Prometheus text (:func:`pyattacker.report.prometheus_text`).
- ``/healthz``: ``ok``.

The HTTP is the least a browser and a scraper need: one request per connection
(``Connection: close``), request heads up to 16 KiB, no bodies read.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass

import click

from pyattacker.cli._run_commands import open_reader
from pyattacker.report import live_run_page, prometheus_text, summarize

__all__ = ["Response", "route", "serve_command"]

_METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_HEAD_LIMIT = 16 * 1024
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            500: "Internal Server Error"}  # fmt: skip

_EPILOG = """\b
Examples:
  pyattacker serve runs/eval.db                  # port picked by the OS, URL on stderr
  pyattacker serve runs/eval.db --port 8089
  curl -s http://127.0.0.1:8089/metrics

\b
Routes: / (the run's page, reloading while the run is live), /report.json (as
`pyattacker report --json`), /metrics (Prometheus text), /healthz. GET and HEAD only.
The store is opened read-only for each request: safe beside a live run.
Ctrl-C stops the server (exit 130).
"""


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    content_type: str
    body: bytes
    allow: str | None = None  # the Allow header of a 405


def route(method: str, target: str, store: str, *, refresh_s: int) -> Response:
    """The response to ``method target`` for the store at ``store`` (blocking: it reads
    the store). Never raises for a request; a store that cannot be read is a 500."""
    if method not in ("GET", "HEAD"):
        return Response(405, "text/plain; charset=utf-8", b"only GET and HEAD\n", "GET, HEAD")
    path = target.split("?", 1)[0]
    build = _ROUTES.get(path)
    if build is None:
        return Response(404, "text/plain; charset=utf-8", b"not found\n")
    if path == "/healthz":
        return build("", refresh_s)
    try:
        return build(store, refresh_s)
    except Exception as exc:  # a store removed or corrupted under us: say so, keep serving
        text = f"could not read the store: {type(exc).__name__}: {exc}\n"
        return Response(500, "text/plain; charset=utf-8", text.encode())


def _page(store: str, refresh_s: int) -> Response:
    reader = open_reader(store)
    try:
        html = live_run_page(reader, refresh_s=refresh_s)
    finally:
        reader.close()
    return Response(200, "text/html; charset=utf-8", html.encode())


def _json(store: str, refresh_s: int) -> Response:
    reader = open_reader(store)
    try:
        text = json.dumps(summarize(reader), indent=2)
    finally:
        reader.close()
    return Response(200, "application/json", text.encode())


def _metrics(store: str, refresh_s: int) -> Response:
    reader = open_reader(store)
    try:
        text = prometheus_text(reader)
    finally:
        reader.close()
    return Response(200, _METRICS_TYPE, text.encode())


def _health(store: str, refresh_s: int) -> Response:
    return Response(200, "text/plain; charset=utf-8", b"ok\n")


_ROUTES: dict[str, Callable[[str, int], Response]] = {
    "/": _page,
    "/report.json": _json,
    "/metrics": _metrics,
    "/healthz": _health,
}


async def _handle(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, store: str, refresh_s: int
) -> None:
    """One request, one response, then the connection is closed."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > _HEAD_LIMIT:
            raise ValueError("head too long")
        method, target, _version = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
    except (asyncio.LimitOverrunError, asyncio.IncompleteReadError, ValueError):
        response, method = Response(400, "text/plain; charset=utf-8", b"bad request\n"), "GET"
    else:
        response = await asyncio.to_thread(route, method, target, store, refresh_s=refresh_s)
    try:
        writer.write(_encoded(response, with_body=method != "HEAD"))
        await writer.drain()
    except ConnectionError:
        pass  # the client went away: nothing to tell it
    finally:
        writer.close()


def _encoded(response: Response, *, with_body: bool) -> bytes:
    lines = [
        f"HTTP/1.1 {response.status} {_REASONS[response.status]}",
        f"Content-Type: {response.content_type}",
        f"Content-Length: {len(response.body)}",
        "Cache-Control: no-store",
        "X-Content-Type-Options: nosniff",
        "Connection: close",
    ]
    if response.allow:
        lines.append(f"Allow: {response.allow}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + response.body if with_body else head


async def _serve(store: str, host: str, port: int, refresh_s: int) -> None:
    server = await asyncio.start_server(
        lambda r, w: _handle(r, w, store, refresh_s), host, port, limit=_HEAD_LIMIT
    )
    bound = server.sockets[0].getsockname()
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    click.echo(f"serving {store} on http://{shown}:{bound[1]}/ (Ctrl-C stops)", err=True)
    sys.stderr.flush()
    async with server:
        await server.serve_forever()


@click.command("serve", epilog=_EPILOG)
@click.argument("store", metavar="STORE")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port to listen on; 0 lets the OS pick one (the URL is printed on stderr).",
)
@click.option(
    "--refresh",
    "refresh_s",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    metavar="SECONDS",
    help="How often the page reloads itself while the run is live.",
)
def serve_command(store: str, host: str, port: int, refresh_s: int) -> None:
    """Serve a run's store (live or finished), read-only: its page, /metrics for
    Prometheus, /report.json and /healthz."""
    open_reader(store).close()  # a missing STORE: exit 2 now, naming it, creating nothing
    try:
        asyncio.run(_serve(store, host, port, refresh_s))
    except OSError as exc:
        raise click.UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
