"""``attack --workers N``: the driver of worker processes on this machine.

The driver forks ``n`` processes (each runs :func:`~pyattacker.attack._workers.run_worker`
and talks to the driver over a pipe), waits until every one is ready, hands them one start
instant a little in the future on the monotonic clock, then reads their progress (every
half second: the live view's counts), their snapshots (every two seconds: the live view's
percentiles, and what a worker that dies leaves behind; see ``SNAPSHOT_EVERY_S``) and their
final counts, and merges them (:func:`~pyattacker.attack._merge.merge_outcomes`).

- A worker whose process dies is *lost*: the report keeps its last snapshot's requests
  and names it (``WorkersResult.lost``); the others run to their end.
- SIGINT or SIGTERM on the driver (Ctrl-C) asks every worker to stop over its pipe; each
  stops as one process does (what is in flight is cancelled and counted) and sends its
  count: the report covers what ran, with ``stop_reason="interrupted"``. A Ctrl-C in a
  terminal also reaches the workers themselves, which stop the same way.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from typing import Any

from pyattacker._gc import quiet_gc
from pyattacker._signals import stop_signals
from pyattacker.attack._engine import Progress
from pyattacker.attack._merge import WorkersResult, merge_outcomes
from pyattacker.attack._plan import AttackPlan
from pyattacker.attack._taps import WorkerTap, gather_taps
from pyattacker.attack._workers import WorkerOutcome, run_worker, worker_plan
from pyattacker.clock import LoopClock
from pyattacker.errors import ConfigError, PyAttackerError
from pyattacker.http import Limits

__all__ = ["START_MARGIN_S", "run_workers", "usable_cores"]

#: How far in the future the common start instant is set once every worker is ready: the
#: time to hand it over and for each worker to open its first connections.
START_MARGIN_S = 0.25
_PR_SET_NAME = 15  # prctl(2)


# The workers' clock outside any loop: the monotonic clock, which every process of one
# machine reads alike (their engines read it too, through the same seam).
_now = LoopClock().now


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def blocking_sender(conn: Connection) -> Callable[[object], None]:
    """``conn.send`` that waits for room in the pipe. The worker's loop watches the same
    socket for the driver's stop (``add_reader``), which makes it non-blocking; a large
    snapshot then does not fit at once and ``send`` would fail with ``BlockingIOError``."""
    fd = conn.fileno()

    def send(message: object) -> None:
        os.set_blocking(fd, True)
        conn.send(message)

    return send


def _child(
    conn: Connection,
    plan: AttackPlan,
    index: int,
    n: int,
    limits: Limits | None,
    taps: Sequence[WorkerTap],
    inherited: Sequence[Connection] = (),
) -> None:
    """A worker process: say ready, wait for the start instant, run, send the outcome."""
    # Until its loop handles signals, Ctrl-C is the driver's business (it says stop).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The fork copied the driver's ends of the pipes (this worker's and the ones before
    # it): while a copy is open, a driver killed outright leaves its workers no end of
    # file to notice, and they would attack on to the end of the plan.
    for end in inherited:
        end.close()
    _name_process(f"pyattacker-w{index}")
    try:
        conn.send(("ready", index))
        kind, value = conn.recv()
    except (EOFError, OSError):  # the driver died before the start: nothing to do
        return
    if kind != "start":
        conn.send(("done", None))
        return
    send = blocking_sender(conn)

    def listen(stop: Callable[[str], None]) -> None:
        import asyncio

        loop = asyncio.get_running_loop()

        def readable() -> None:
            try:
                what, reason = conn.recv()
            except (EOFError, OSError):  # the driver is gone: stop, there is no one to tell
                loop.remove_reader(conn.fileno())
                stop("driver lost")
                return
            if what == "stop":
                stop(reason)

        loop.add_reader(conn.fileno(), readable)

    outcome = run_worker(plan, index, n, value,
                         on_snapshot=lambda o: send(("snapshot", o)),
                         on_progress=lambda p: send(("progress", p)), on_stop=listen,
                         limits=limits, taps=taps)  # fmt: skip
    send(("done", outcome))


def _name_process(name: str) -> None:
    """The name ``ps -e`` and ``top`` show for this process (Linux; 15 bytes at most), so
    a worker is told from its driver, whose command line it shares."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux: the name stays
        pass


@dataclass
class _Worker:
    index: int
    process: Any
    conn: Connection
    ready: bool = False
    last: WorkerOutcome | None = None
    done: bool = False
    lost: bool = False
    progress: Progress | None = field(default=None)


def run_workers(
    plan: AttackPlan,
    n: int,
    *,
    on_progress: Callable[[Progress], str | None] | None = None,
    progress_every: float = 0.5,
    per_worker: bool = False,
    on_worker_progress: Callable[[list[WorkerOutcome | None]], None] | None = None,
    limits: Limits | None = None,
    taps: Sequence[WorkerTap] = (),
) -> WorkersResult:
    """Run ``plan`` on ``n`` worker processes and merge what they counted (see the module
    docstring). ``on_progress`` sees the whole every ``progress_every`` seconds (counts
    summed, percentiles of the merged snapshots); a string it returns stops every worker
    with that reason. ``on_worker_progress`` sees each worker's last snapshot (None before
    its first); ``limits`` bound what each worker's client reads; ``taps`` see every
    record, each worker's part apart, gathered once every worker ended
    (``attack/_taps.py``). ``ConfigError`` for a plan ``n`` workers cannot share."""
    if n < 1:
        raise ConfigError(f"must be >= 1, got {n}", field="workers", hint="e.g. 2 or auto")
    for index in range(n):
        worker_plan(plan, index, n)  # refuse a plan that cannot be shared before forking
    # Frozen before the fork: a child's collections then never walk (and so never copy,
    # page by page) the objects it shares with the driver.
    with quiet_gc():
        return _run(plan, n, on_progress, progress_every, per_worker, on_worker_progress, limits,
                    taps)  # fmt: skip


def _run(
    plan: AttackPlan,
    n: int,
    on_progress: Callable[[Progress], str | None] | None,
    progress_every: float,
    per_worker: bool,
    on_worker_progress: Callable[[list[WorkerOutcome | None]], None] | None,
    limits: Limits | None,
    taps: Sequence[WorkerTap],
) -> WorkersResult:
    cpu0 = time.process_time()  # the driver's own: forking, reading, merging
    context = multiprocessing.get_context("fork")
    workers: list[_Worker] = []
    for index in range(n):
        mine, theirs = context.Pipe()
        inherited = [w.conn for w in workers] + [mine]  # the driver's ends the child gets
        process = context.Process(
            target=_child,
            args=(theirs, plan, index, n, limits, taps, inherited),
            daemon=True,
            name=f"pyattacker-worker-{index}",
        )
        process.start()
        theirs.close()
        workers.append(_Worker(index, process, mine))
    stopping: list[str] = []

    def on_signal(signum: int, _frame: object) -> None:
        stopping.append("interrupted")

    try:
        with stop_signals(on_signal):
            _await_ready(workers, stopping)
            start_at = _now() + START_MARGIN_S
            for w in workers:
                _tell(w, ("stop", "interrupted") if stopping else ("start", start_at))
            _drive(workers, stopping, on_progress, progress_every, on_worker_progress)
    finally:
        for w in workers:
            w.process.join(timeout=5)
            if w.process.is_alive():  # pragma: no cover - a worker that will not end
                w.process.kill()
            w.conn.close()
    lost = [w.index for w in workers if w.lost]
    gather_taps(taps, [None if w.last is None else w.last.taps for w in workers], lost)
    counted = [w.last for w in workers if w.last is not None]
    if not counted:
        raise PyAttackerError("every worker was lost before it counted anything")
    # a lost worker's newest progress says what it sent beyond its last snapshot
    newest_progress = [w.progress for w in workers]
    result = merge_outcomes(plan, counted, lost=lost, workers=n, per_worker=per_worker,
                            progress=newest_progress,
                            driver_cpu_s=time.process_time() - cpu0)  # fmt: skip
    if stopping and result.stop_reason is None:
        result = replace(result, stop_reason="interrupted")
    return result


def _tell(worker: _Worker, message: tuple[str, Any]) -> None:
    with contextlib.suppress(OSError):  # a worker already gone is found lost when read
        worker.conn.send(message)


def _await_ready(workers: list[_Worker], stopping: list[str]) -> None:
    """Wait until every live worker said it is ready (a dead one is lost)."""
    while not all(w.ready or w.lost for w in workers):
        waiting = [w for w in workers if not (w.ready or w.lost)]
        for w in _readable(waiting, 0.5):
            message = _read(w)
            if message is not None and message[0] == "ready":
                w.ready = True


def _readable(workers: list[_Worker], timeout: float) -> list[_Worker]:
    by_conn = {w.conn: w for w in workers}
    by_sentinel = {w.process.sentinel: w for w in workers}
    ready = wait([*by_conn, *by_sentinel], timeout=timeout)
    found = {by_conn[r].index: by_conn[r] for r in ready if r in by_conn}
    for r in ready:
        if r in by_sentinel:
            found.setdefault(by_sentinel[r].index, by_sentinel[r])
    return list(found.values())


def _read(worker: _Worker) -> tuple[str, Any] | None:
    """The worker's next message, or None if there was none; a closed pipe (the process
    died before it sent its final count) marks it lost."""
    try:
        if not worker.conn.poll():
            if not worker.process.is_alive():
                worker.lost = not worker.done
            return None
        message: tuple[str, Any] = worker.conn.recv()
    except (EOFError, OSError):
        worker.lost = not worker.done
        return None
    kind, value = message
    if kind == "progress":
        worker.progress = value
    elif kind == "snapshot":
        worker.last, worker.progress = value, value.progress
    elif kind == "done":
        worker.done = True
        if value is not None:
            worker.last = value
    return message


def _drive(
    workers: list[_Worker],
    stopping: list[str],
    on_progress: Callable[[Progress], str | None] | None,
    every: float,
    on_worker_progress: Callable[[list[WorkerOutcome | None]], None] | None,
) -> None:
    """Read every worker's messages until each is done or lost; tick the live view."""
    told = False
    next_tick = _now() + every
    while True:
        running = [w for w in workers if not (w.done or w.lost)]
        if not running:
            return
        if stopping and not told:
            told = True
            for w in running:
                _tell(w, ("stop", stopping[0]))
        for w in _readable(running, max(0.0, next_tick - _now())):
            while _read(w) is not None and not (w.done or w.lost):
                pass
        if _now() >= next_tick:
            next_tick += every
            reason = _tick(workers, on_progress, on_worker_progress)
            if reason is not None and not stopping:
                stopping.append(reason)


def _tick(
    workers: list[_Worker],
    on_progress: Callable[[Progress], str | None] | None,
    on_worker_progress: Callable[[list[WorkerOutcome | None]], None] | None,
) -> str | None:
    lasts = [newest(w.last, w.progress) for w in workers]
    if on_worker_progress is not None:
        on_worker_progress(lasts)
    if on_progress is None:
        return None
    shown = [o.progress for o in lasts if o is not None and o.progress]
    if not shown:
        return None
    return on_progress(whole_progress(lasts, shown))


def newest(last: WorkerOutcome | None, progress: Progress | None) -> WorkerOutcome | None:
    """A worker's last snapshot with its newest progress, which comes more often (None
    before its first snapshot)."""
    if last is None or progress is None or last.final:
        return last
    return replace(last, progress=progress)


def whole_progress(lasts: list[WorkerOutcome | None], shown: list[Progress]) -> Progress:
    """The workers' progress as one (``lasts``: each worker's last snapshot, ``shown``
    their progress): counts summed, percentiles of the merged totals."""
    from pyattacker.measure import RequestStats

    total = RequestStats()
    for last in lasts:
        if last is not None:
            total.merge(last.tally.total)

    def p(name: str, q: float) -> float | None:
        histogram = getattr(total, name)
        return histogram.percentile(q) if histogram.count else None

    planned = [s.planned for s in shown if s.planned is not None]
    llm = shown[0].ttft_p50 is not None or shown[0].completion_tokens is not None
    return Progress(
        elapsed=max(s.elapsed for s in shown),
        planned=max(planned) if planned else None,  # each worker walks the whole schedule
        scheduled=sum(s.scheduled for s in shown),
        sent=sum(s.sent for s in shown),
        completed=sum(s.completed for s in shown),
        in_flight=sum(s.in_flight for s in shown),
        dropped=sum(s.dropped for s in shown),
        failed=sum(s.failed for s in shown),
        throttled=sum(s.throttled for s in shown),
        latency_p50=p("latency", 50),
        latency_p99=p("latency", 99),
        service_p50=p("service_time", 50),
        service_p99=p("service_time", 99),
        ttft_p50=p("ttft", 50) if llm else None,
        ttft_p99=p("ttft", 99) if llm else None,
        completion_tokens=total.completion_tokens if llm else None,
        leases=tuple(lease for s in shown for lease in s.leases),
    )
