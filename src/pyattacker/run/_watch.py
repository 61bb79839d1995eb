"""What watches a run while it runs: the heartbeat (with the leases held, ``run/_leases.py``),
``stop_after_s``, signals, pool events.

Each is armed when the run begins and disarmed when it ends, whatever way it ends, by the
one context manager :func:`watch`.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Iterable, Iterator

from pyattacker.pool import Pool
from pyattacker.run._commit import Committer
from pyattacker.run._execute import Execution
from pyattacker.run._leases import LeaseLog
from pyattacker.run._records import STORED_POOL_EVENTS

__all__ = ["watch"]


@contextlib.contextmanager
def watch(
    execution: Execution,
    committer: Committer,
    pools: Iterable[Pool],
    *,
    heartbeat_s: float,
    stop_after_s: float | None,
    handle_signals: bool,
) -> Iterator[LeaseLog]:
    """Heartbeat, stop_after_s, signal handlers and pool subscriptions, for one run; yields
    the run's :class:`LeaseLog`, for a last look before the final flush.

    The heartbeat marks the run alive every ``heartbeat_s`` and records the leases held
    when they changed (``run.leases``); ``stop_after_s`` stops it
    gracefully; with ``handle_signals`` (in the main thread), the first SIGINT/SIGTERM
    stops it gracefully and the second cancels what still runs. Pool events worth keeping
    (``STORED_POOL_EVENTS``) are recorded."""
    loop = asyncio.get_running_loop()
    handles: list[asyncio.TimerHandle] = []
    pools = tuple(pools)
    leases = LeaseLog(pools, lambda kind, data: execution.records.event(kind, None, None, data))

    def beat() -> None:
        leases.look()  # staged first, so this heartbeat's flush writes it
        committer.heartbeat()
        handles[0] = loop.call_later(heartbeat_s, beat)

    handles.append(loop.call_later(heartbeat_s, beat))
    if stop_after_s is not None:
        reason = f"stop_after_s={stop_after_s:g} reached"
        handles.append(loop.call_later(stop_after_s, execution.stop, reason))
    unsubscribe = [
        pool.subscribe(execution.records.pool_event, STORED_POOL_EVENTS) for pool in pools
    ]
    installed = _install_signals(loop, execution) if handle_signals else []
    try:
        yield leases
    finally:
        for handle in handles:
            handle.cancel()
        for undo in unsubscribe:
            undo()
        for signum in installed:
            loop.remove_signal_handler(signum)


def _install_signals(loop: asyncio.AbstractEventLoop, execution: Execution) -> list[signal.Signals]:
    if threading.current_thread() is not threading.main_thread():
        return []
    installed = []
    for signum in (signal.SIGINT, signal.SIGTERM):

        def on_signal(signum: signal.Signals = signum) -> None:
            if execution.stopping:
                execution.cancel_live()
            else:
                execution.stop(f"{signum.name} received")

        try:
            loop.add_signal_handler(signum, on_signal)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - Windows
            continue
        installed.append(signum)
    return installed
