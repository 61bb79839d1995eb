"""``pyattacker serve STORE``: a run's live page, ``/metrics`` and ``/healthz`` over HTTP.

Read-only: every request opens the store read-only (through the ``open_store`` function it
is given: the CLI's opens SQLite as ``pyattacker report`` does, and WAL readers never block
the writer and never write), reads it, and closes it, so the server works beside a live run
and shows it as it goes. Requests are answered in worker threads, so a slow page does not
hold up ``/healthz``. The server is :class:`~pyattacker.report._http.RouteServer` (the one
``attack --serve`` uses: 404, 405, head limits and the strict CSP are its).

Routes (GET and HEAD only):

- ``/``: the run's page (the charts and tables of ``pyattacker report --html``), drawn by
  the page's scripts from ``/report.json`` and redrawn in place every ``refresh_s`` seconds
  while a run of the store is live, without reloading; once no run is live it stops asking
  and keeps the final figures.
- ``/report.json``: what the page draws, the same shape as ``attack --serve``'s: ``kind``
  (``"run"``), ``title``, ``version``, ``report`` (exactly what ``pyattacker report
  --json`` prints), ``extra`` (the timeline, retry delays and failed items the page adds)
  and ``live`` (``started``, ``done``: no run of the store is live, ``every_s``).
- ``/metrics``: Prometheus text (:func:`pyattacker.report.prometheus_text`).
- ``/healthz``: ``ok``.
- ``/assets/...``: the page's scripts and styles.

``/report.json`` and ``/metrics`` read the whole store (the summary, then the page's
extras: a few passes over the attempts), so on a big store each costs seconds. Each is
built by one request at a time, and a body is reused while younger than
:data:`REUSE_FACTOR` times what building it cost: however many pages poll and scrapers
scrape, the server spends at most a third of its time building each, and a small store's
figures are fresh at every poll.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from pyattacker.clock import wall_time
from pyattacker.report._html import page_payload
from pyattacker.report._html_run import store_extras
from pyattacker.report._http import (
    HTML,
    JSON,
    TEXT,
    Handler,
    Response,
    RouteServer,
    asset_routes,
    live_page,
)
from pyattacker.report._run import summarize
from pyattacker.report._run_metrics import CONTENT_TYPE, prometheus_text
from pyattacker.store import Store

__all__ = ["REUSE_FACTOR", "Reused", "StorePages", "run_payload", "serve_store", "store_routes"]

#: a body built from the store is reused while younger than this many times its cost
REUSE_FACTOR = 2.0

#: what the run's live page loads from /assets/
_ASSETS = ("uPlot.js", "uPlot.css", "page.css", "page_kit.js", "page_run.js", "page_live.js")


def run_payload(store: Store, *, every_s: float = 5.0, errors: int = 5) -> dict[str, Any]:
    """``/report.json`` of ``store`` (see the module docstring); reads only."""
    summary = summarize(store, errors=errors)
    payload = page_payload("run", "pyattacker run report", summary, store_extras(store))
    live = any(run.get("live") for run in summary["runs"])
    payload["live"] = {"started": True, "done": not live, "stop_reason": None, "every_s": every_s}
    return payload


def store_routes(open_store: Callable[[], Store], *, refresh_s: float) -> dict[str, Handler]:
    """The route table of ``pyattacker serve`` (:class:`StorePages`'s)."""
    return StorePages(open_store, refresh_s=refresh_s).routes


class StorePages:
    """What ``pyattacker serve`` answers, by path (:attr:`routes`). ``open_store()`` opens
    the store read-only for each request (closed after it); a store that cannot be read is
    a 500 saying why. Blocking: serve it with ``RouteServer(..., blocking=True)``."""

    def __init__(self, open_store: Callable[[], Store], *, refresh_s: float) -> None:
        self._open_store = open_store
        self.refresh_s = refresh_s
        self.routes: dict[str, Handler] = {
            "/": self.page,
            "/report.json": Reused(self.report).get,
            "/metrics": Reused(self.metrics).get,
            "/healthz": self.health,
            **asset_routes(_ASSETS),
        }

    def __repr__(self) -> str:
        return f"<StorePages refresh_s={self.refresh_s} routes={len(self.routes)}>"

    def page(self, query: str) -> Response:
        return 200, HTML, live_page("pyattacker run (live)", "page_run.js")

    def health(self, query: str) -> Response:
        return 200, TEXT, b"ok\n"

    def report(self, query: str) -> Response:
        return self._reading(self._report)

    def metrics(self, query: str) -> Response:
        return self._reading(lambda store: (200, CONTENT_TYPE, prometheus_text(store).encode()))

    def _report(self, store: Store) -> Response:
        payload = run_payload(store, every_s=self.refresh_s)
        body = json.dumps(payload, allow_nan=False, separators=(",", ":"), default=str)
        return 200, JSON, body.encode()

    def _reading(self, build: Callable[[Store], Response]) -> Response:
        try:
            store = self._open_store()
        except Exception as exc:  # removed or corrupted under us: say so, keep serving
            return _unreadable(exc)
        try:
            return build(store)
        except Exception as exc:
            return _unreadable(exc)
        finally:
            store.close()


async def serve_store(
    open_store: Callable[[], Store],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    refresh_s: float = 5.0,
    on_started: Callable[[str], None] | None = None,
) -> None:
    """Serve :func:`store_routes` on ``host:port`` (0: a free port) until cancelled;
    ``on_started`` gets the URL first. ``OSError`` if it cannot bind."""
    server = RouteServer(store_routes(open_store, refresh_s=refresh_s), blocking=True)
    url = await server.start(host, port)
    if on_started is not None:
        on_started(url)
    await server.serve_forever()


class Reused:
    """``build`` (a route) run by one caller at a time, its 200 answer reused while younger
    than ``factor`` times what it cost (see the module docstring). Answers other than 200
    (a store that could not be read) are never kept. Thread-safe."""

    def __init__(
        self,
        build: Handler,
        *,
        factor: float = REUSE_FACTOR,
        clock: Callable[[], float] = wall_time,
    ) -> None:
        self._build = build
        self._factor = factor
        self._clock = clock
        self._lock = threading.Lock()
        self._last: tuple[float, float, Response] | None = None  # (built at, cost, answer)

    def __repr__(self) -> str:
        return f"<Reused factor={self._factor} kept={self._last is not None}>"

    def get(self, query: str) -> Response:
        with self._lock:  # a second caller waits for the build under way, then reuses it
            start = self._clock()
            last = self._last
            if last is not None and start - last[0] < self._factor * last[1]:
                return last[2]
            answer = self._build(query)
            end = self._clock()
            self._last = (end, end - start, answer) if answer[0] == 200 else None
            return answer


def _unreadable(exc: Exception) -> Response:
    return 500, TEXT, f"could not read the store: {type(exc).__name__}: {exc}\n".encode()
