"""``attack --serve --workers N`` (and ``--ray``): the live page of an attack run by workers.

The workers' driver (:func:`~pyattacker.attack.run_workers` for processes of this
machine, :func:`~pyattacker.attack.run_ray_workers` for Ray actors, which may run on
other machines: the page is served here, on the driver's) blocks this process's main
thread, reading the workers' snapshots twice a second; the :class:`LiveServer` runs on an
event loop of its own in a second thread. At each snapshot the driver hands the server,
through that loop (so that the server's state changes only on its own thread):

- the whole's :class:`~pyattacker.attack.Progress` (the progress page's points, the
  in-flight and lease gauges);
- the workers' snapshots merged into one result (:func:`merge_outcomes` of copies: the
  snapshots stay whole for the final merge), which ``/report.json`` shows;
- the workers' ``/metrics`` counts added up (each worker counts its own records in an
  :class:`AttackMetrics`, a tap of ``attack/_taps.py``).

The gate's sections (thresholds, goodput) are shown with the final result only: goodput
is counted in the workers and added up once they have ended, so a verdict on the
snapshots would judge an empty count. Once every worker has ended, the server shows the
final result and metrics, ``on_finish`` prints the report, and the server lingers as
:func:`serve_attack`'s does.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from pyattacker._signals import stop_signals
from pyattacker.attack import (
    AttackPlan,
    AttackResult,
    Progress,
    WorkerOutcome,
    WorkersResult,
    WorkerTap,
    merge_outcomes,
    run_ray_workers,
    run_workers,
)
from pyattacker.http import Limits
from pyattacker.report._live import LiveServer
from pyattacker.report._metrics import AttackMetrics
from pyattacker.report._workers import workers_now

__all__ = ["serve_workers"]


class _Feed:
    """The driver's side: turns each round of snapshots into the server's state."""

    def __init__(
        self,
        plan: AttackPlan,
        n: int,
        server: LiveServer,
        loop: asyncio.AbstractEventLoop,
        per_worker: Callable[[list[WorkerOutcome | None]], None] | None,
    ) -> None:
        """``per_worker``: with ``--per-worker``, also told each round (the terminal's
        live view); ``/progress.json`` then says where each worker is."""
        self.plan, self.n, self.server, self.loop = plan, n, server, loop
        self.per_worker = per_worker
        self.latest: AttackResult | None = None

    def progress(
        self, inner: Callable[[Progress], str | None] | None
    ) -> Callable[[Progress], str | None]:
        def keep(progress: Progress) -> str | None:
            self.loop.call_soon_threadsafe(self.server.record_progress, progress)
            return None if inner is None else inner(progress)

        return keep

    def snapshots(self, lasts: list[WorkerOutcome | None]) -> None:
        """The workers' last snapshots (None before a worker's first): merged copies."""
        if self.per_worker is not None:
            self.per_worker(lasts)
            now = workers_now(lasts)
            self.loop.call_soon_threadsafe(setattr, self.server, "workers", now)
        counted = [copy.deepcopy(o) for o in lasts if o is not None]
        if not counted:
            return
        merged = merge_outcomes(self.plan, counted, workers=self.n)
        metrics = AttackMetrics(llm=self.server.llm)
        metrics.gather([o.taps[0] if o.taps else None for o in counted], [])
        self.latest = replace(merged, schedule_s=merged.elapsed)  # the span so far
        self.loop.call_soon_threadsafe(self._show, metrics)

    def _show(self, metrics: AttackMetrics) -> None:
        if self.server.done:  # a late round after the final result: it is stale
            return
        self.server.metrics = metrics
        if self.server.snapshot is None:
            self.server.on_start(self._latest)

    def _latest(self) -> AttackResult:
        assert self.latest is not None  # set before the server is handed this function
        return self.latest


def serve_workers(
    plan: AttackPlan,
    n: int,
    server: LiveServer,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    linger: float = 0.0,
    on_progress: Callable[[Progress], str | None] | None = None,
    limits: Limits | None = None,
    on_started: Callable[[str], None] | None = None,
    on_finish: Callable[[AttackResult], None] | None = None,
    per_worker: bool = False,
    taps: Sequence[WorkerTap] = (),
    ray: str | None = None,
    on_worker_progress: Callable[[list[WorkerOutcome | None]], None] | None = None,
) -> WorkersResult:
    """``run_workers(plan, n)`` with ``server`` listening on ``host:port`` (see the module
    docstring); the arguments mean what :func:`serve_attack`'s and :func:`run_workers`'s
    do. ``ray``: run the workers as Ray actors instead, on the cluster at that address
    (``""``: the one :func:`~pyattacker.attack.run_ray_workers` finds without one).
    With ``per_worker``, ``/progress.json`` has each worker's newest figures (``workers``)
    and ``on_worker_progress`` (if any) sees each round, as :func:`run_workers`' does.
    ``OSError`` if it cannot bind (before any worker starts)."""
    sections, server.sections = server.sections, None  # the gate's: at the end only
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="pyattacker-serve", daemon=True)
    thread.start()
    try:
        url = _on(loop, server.start(host, port))
        if on_started is not None:
            on_started(url)
        metrics = AttackMetrics(llm=server.llm)
        each = (on_worker_progress or _nothing) if per_worker else None
        feed = _Feed(plan, n, server, loop, each)
        progress, tapped = feed.progress(on_progress), [metrics, *taps]
        if ray is None:
            result = run_workers(plan, n, on_progress=progress,
                                 on_worker_progress=feed.snapshots, per_worker=per_worker,
                                 limits=limits, taps=tapped)  # fmt: skip
        else:
            result = run_ray_workers(plan, n, ray or None, on_progress=progress,
                                     on_worker_progress=feed.snapshots,
                                     per_worker=per_worker, limits=limits,
                                     taps=tapped)  # fmt: skip
        _on(loop, _finish(server, metrics, result, sections))
        if on_finish is not None:
            on_finish(result)
        if linger > 0 and not result.interrupted:
            _linger(linger)
        return result
    finally:
        if server.started:
            _on(loop, server.close())
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


async def _finish(
    server: LiveServer,
    metrics: AttackMetrics,
    result: AttackResult,
    sections: Callable[[AttackResult], Mapping[str, Any]] | None,
) -> None:
    server.metrics, server.sections = metrics, sections
    server.finish(result)


def _on(loop: asyncio.AbstractEventLoop, coroutine: Any) -> Any:
    """Run ``coroutine`` on ``loop`` (another thread's) and wait for its value."""
    return asyncio.run_coroutine_threadsafe(coroutine, loop).result()


def _linger(seconds: float) -> None:
    """Wait ``seconds``, or until SIGINT/SIGTERM (which then end only the wait)."""
    woken = threading.Event()

    def wake(signum: int, frame: object) -> None:
        woken.set()

    with stop_signals(wake):
        woken.wait(seconds)


def _nothing(lasts: list[WorkerOutcome | None]) -> None:
    """No terminal view to tell: ``/progress.json`` alone shows the workers."""
