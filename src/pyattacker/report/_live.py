"""``attack --serve``: a read-only HTTP server on the attack's own loop, for watching it.

Routes (GET and HEAD only, anything else 405; unknown paths 404):

* ``/`` the attack's whole report page (the one ``attack --html`` writes, drawn by the same
  scripts), redrawn from ``/report.json`` every 2 seconds while the attack runs;
* ``/report.json`` what the page draws: the attack's JSON report so far (its result's
  ``to_dict()``, built when asked, with the gate's sections when there are thresholds), the
  page's extras, and whether the attack has started and finished (before it has started,
  only that);
* ``/progress`` the light page: charts of the progress snapshots, redrawn every second;
* ``/progress.json`` every progress snapshot so far (:class:`Progress`, two a second) as
  columns (``?since=SECONDS``: only those taken after), and whether the attack has finished;
* ``/metrics`` Prometheus text format 0.0.4 (:class:`AttackMetrics`);
* ``/healthz`` ``ok``.

The pages' scripts and styles come from ``/assets/``; the server is
:class:`~pyattacker.report._http.RouteServer` (the one ``pyattacker serve`` uses too: 404,
405, head limits and the strict CSP are its). Pages and metrics are rendered when asked
for, never per record, so an idle server costs the attack nothing but its ``on_record``
count.

:func:`serve_attack` runs an attack with the server up and, once it has finished, keeps
serving the final figures for ``linger`` seconds (or until Ctrl-C) so a Prometheus scrape
sees the counts of the final report; then the server closes.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import json
import math
import signal
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

from pyattacker._gc import quiet_gc
from pyattacker.attack import AttackPlan, AttackResult, Progress, attack, run_on_fast_loop
from pyattacker.clock import LoopClock
from pyattacker.http import Limits
from pyattacker.measure import RequestRecord
from pyattacker.report._html import attack_payload
from pyattacker.report._http import (
    HTML,
    JSON,
    TEXT,
    Handler,
    Response,
    RouteServer,
    asset,
    asset_routes,
    live_page,
    respond,
)
from pyattacker.report._metrics import AttackMetrics

__all__ = ["LiveServer", "serve_attack"]

#: at most this many snapshots are kept; beyond, every other one is dropped (2 a second
#: fill it in about 2.8 hours, and then each halving keeps the whole run in view)
MAX_POINTS = 20_000
#: /report.json is built again once its last build is this many times its cost old
REPORT_BUDGET = 50
_METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: what the pages load from /assets/
_ASSETS = ("uPlot.js", "uPlot.css", "page.css", "live.js", "page_kit.js", "page_attack.js",
           "page_live.js")  # fmt: skip
#: the Progress figures the page charts, in this order (see assets/live.js)
_FIGURES = (
    "elapsed", "completed", "in_flight", "failed", "throttled", "dropped",
    "latency_p50", "latency_p99", "service_p50", "service_p99", "ttft_p50", "ttft_p99",
)  # fmt: skip


class LiveServer:
    """What ``attack --serve`` shows, and the server that shows it.

    Chain :meth:`on_record` and :meth:`on_progress` into the attack (as
    :class:`pyattacker.report.Gate` does); :meth:`respond` answers one request (pure: the
    tests call it without a socket); :meth:`start` and :meth:`close` run the server on the
    running loop.
    """

    def __init__(
        self,
        *,
        llm: bool = False,
        targets: tuple[str, ...] = (),
        sections: Callable[[AttackResult], Mapping[str, Any]] | None = None,
    ) -> None:
        """``sections`` adds to each ``/report.json`` report what the JSON report adds to
        the result's ``to_dict()`` (the gate's verdicts: ``Gate.sections``)."""
        self.metrics = AttackMetrics(llm=llm)
        self.llm, self.targets = llm, targets
        self.points: list[tuple[float | int | None, ...]] = []
        self.in_flight = 0
        self.leases: tuple[tuple[str, int, int], ...] = ()
        #: --workers --per-worker: each worker now (report/_workers.py, workers_now)
        self.workers: list[dict[str, Any]] | None = None
        self.done = False
        self.stop_reason: str | None = None
        self.sections = sections
        self.snapshot: Callable[[], AttackResult] | None = None
        self.result: AttackResult | None = None
        #: the last /report.json body built while running: (when, seconds it is kept, body)
        self._report_cache: tuple[float, float, bytes] | None = None
        self._clock = LoopClock()
        self._since: float | None = None  # when the attack started (on_start)
        self.routes: dict[str, Handler] = {
            "/": self._report_page,
            "/progress": self._progress_page,
            "/report.json": self._report_route,
            "/progress.json": self._progress_route,
            "/metrics": self._metrics_route,
            "/healthz": self._health,
            **asset_routes(_ASSETS),
        }
        self._server = RouteServer(self.routes)
        self.started = False  # whether start() bound its socket

    def __repr__(self) -> str:
        return f"<LiveServer url={self.url!r} points={len(self.points)} done={self.done}>"

    @property
    def url(self) -> str | None:
        """``http://host:port/`` once started, else None."""
        return self._server.url

    def on_record(
        self, inner: Callable[[RequestRecord], None] | None
    ) -> Callable[[RequestRecord], None]:
        """The attack's ``on_record``: ``inner`` (may be None), then the metrics' count."""
        add = self.metrics.add
        if inner is None:
            return add

        def both(record: RequestRecord) -> None:
            inner(record)
            add(record)

        return both

    def on_progress(
        self, inner: Callable[[Progress], str | None] | None
    ) -> Callable[[Progress], str | None]:
        """The attack's ``on_progress``: the snapshot kept, then ``inner``'s answer."""

        def keep(progress: Progress) -> str | None:
            self.record_progress(progress)
            return None if inner is None else inner(progress)

        return keep

    def on_start(self, snapshot: Callable[[], AttackResult]) -> None:
        """The attack's ``on_start``: keeps the function ``/report.json`` reads."""
        self.snapshot = snapshot
        self._since = self._clock.now()

    def record_progress(self, progress: Progress) -> None:
        figures = asdict(progress)
        self.in_flight, self.leases = progress.in_flight, progress.leases
        self.points.append(tuple(figures[name] for name in _FIGURES))
        if len(self.points) > MAX_POINTS:
            self.points = self.points[::2]

    def finish(self, result: AttackResult) -> None:
        """The attack is over: the page says so (and why it stopped)."""
        self.done, self.in_flight = True, 0
        self.leases = tuple((target, 0, most) for target, _, most in self.leases)
        self.stop_reason = result.stop_reason
        self.result = result
        self._report_cache = None

    def report_body(self) -> bytes:
        """``/report.json``'s body: built again only when the last one is older than
        :data:`REPORT_BUDGET` times what building it cost, so however many pages poll,
        the report (about 0.1 s for an hour of 1 s windows) takes at most 1/50 of the loop;
        the final one is built once. A body is never kept longer than the attack had run
        when it was built: one slow build early on (the first, which pays for imports, or
        one the machine stalled) would otherwise show the first moments' report for
        seconds."""
        now = self._clock.now()
        cached = self._report_cache
        if cached is not None and (self.done or now - cached[0] < cached[1]):
            return cached[2]
        payload = self.report_json()
        body = json.dumps(payload, allow_nan=False, separators=(",", ":"), default=str).encode()
        if "report" in payload:  # before the start, there is nothing to keep
            keep = REPORT_BUDGET * (self._clock.now() - now)
            if self._since is not None:
                keep = min(keep, now - self._since)
            self._report_cache = (now, keep, body)
        return body

    def report_json(self) -> dict[str, Any]:
        """The payload of the attack's page (as ``attack --html`` embeds it) for what has
        been measured so far (the final result once finished), plus ``live``: whether the
        attack has started and finished. Before it has started, ``live`` alone."""
        result = self.result
        if result is None and self.snapshot is not None:
            result = self.snapshot()
        live = {"started": result is not None, "done": self.done, "stop_reason": self.stop_reason}
        if result is None:
            return {"live": live}
        report = {**result.to_dict(), **(self.sections(result) if self.sections else {})}
        return {**attack_payload(report), "live": live}

    def progress_json(self, since: float | None = None) -> dict[str, Any]:
        """The snapshots taken after ``since`` seconds (all without), as columns: the page
        asks for what is new each second, so a long attack costs each poll no more."""
        start = 0 if since is None else bisect.bisect_right(self.points, (since, math.inf))
        points = self.points[start:]
        columns = {name: [p[i] for p in points] for i, name in enumerate(_FIGURES)}
        return {
            "done": self.done,
            "stop_reason": self.stop_reason,
            "llm": self.llm,
            "targets": list(self.targets),
            "requests": sum(self.metrics.requests.values()),
            "columns": columns,
            **({} if self.workers is None else {"workers": self.workers}),
        }

    def respond(self, method: str, path: str) -> Response:
        """``(status, content type, body)`` for one request; HEAD gets GET's headers."""
        return respond(self.routes, method, path)

    def _report_page(self, query: str) -> Response:
        return 200, HTML, live_page("pyattacker attack (live)", "page_attack.js")

    def _progress_page(self, query: str) -> Response:
        return 200, HTML, asset("live.html").encode()

    def _health(self, query: str) -> Response:
        return 200, TEXT, b"ok\n"

    def _report_route(self, query: str) -> Response:
        return 200, JSON, self.report_body()

    def _progress_route(self, query: str) -> Response:
        body = json.dumps(self.progress_json(_since(query)), allow_nan=False, separators=(",", ":"))
        return 200, JSON, body.encode()

    def _metrics_route(self, query: str) -> Response:
        text = self.metrics.exposition(in_flight=self.in_flight, leases=self.leases)
        return 200, _METRICS_TYPE, text.encode()

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen on ``host:port`` (0: a free port) on the running loop; return the URL.
        ``OSError`` if it cannot bind."""
        url = await self._server.start(host, port)
        self.started = True
        return url

    async def close(self) -> None:
        await self._server.close()


def _since(query: str) -> float | None:
    """``since=SECONDS`` of a query string; None when absent or not a finite number."""
    for part in query.split("&"):
        name, _, value = part.partition("=")
        if name == "since":
            try:
                number = float(value)
            except ValueError:
                return None
            return number if math.isfinite(number) else None
    return None


def serve_attack(
    plan: AttackPlan,
    server: LiveServer,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    linger: float = 0.0,
    on_record: Callable[[RequestRecord], None] | None = None,
    on_progress: Callable[[Progress], str | None] | None = None,
    limits: Limits | None = None,
    on_started: Callable[[str], None] | None = None,
    on_finish: Callable[[AttackResult], None] | None = None,
) -> AttackResult:
    """``run_attack(plan)`` with ``server`` listening on ``host:port`` on the same loop.

    ``on_started`` gets the URL before the first request; ``on_finish`` the result as soon
    as the attack ends (the CLI prints its report there); then the server keeps answering
    for ``linger`` seconds, or until SIGINT/SIGTERM, and closes. ``OSError`` if it cannot
    bind (before any request is sent).
    """

    async def main() -> AttackResult:
        url = await server.start(host, port)
        try:
            if on_started is not None:
                on_started(url)
            result = await attack(
                plan,
                on_record=server.on_record(on_record),
                on_progress=server.on_progress(on_progress),
                stop_on_signals=True,
                limits=limits,
                on_start=server.on_start,
            )
            server.finish(result)
            if on_finish is not None:
                on_finish(result)
            if linger > 0 and not result.interrupted:
                await _linger(linger)
            return result
        finally:
            await server.close()

    with quiet_gc():
        return run_on_fast_loop(main())


async def _linger(seconds: float) -> None:
    """Wait ``seconds``, or until SIGINT/SIGTERM (which then end only the wait)."""
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()
    handled = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, woken.set)
            handled.append(signum)
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(woken.wait(), seconds)
    finally:
        for signum in handled:
            loop.remove_signal_handler(signum)
