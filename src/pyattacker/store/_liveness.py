"""What every reader shows about a store's runs: each run judged live or dead, once.

``pyattacker report`` (text and JSON), :func:`pyattacker.report._run.summarize` and
``export --rows runs`` all call :func:`run_views`, so they agree: a run still marked
``running`` whose process died is shown ``crashed``, with why, how much of its input it
had read and the command that resumes it. Reading never writes: the row stays ``running``
until a resume takes the run over.

One consistent look: the runs are read, then the writer lock is probed. A run that ended
between the two would look dead (its row says ``running``, its lock is free), so when the
lock is free the runs still ``running`` are read again: a run ``running`` before *and*
after a free lock had no live owner in between (a live owner takes the lock before its
row exists and lets go of it only after its row is ended).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyattacker.clock import epoch_time
from pyattacker.store._lifecycle import DEFAULT_STALE_AFTER_S, Liveness, judge_here, this_host
from pyattacker.store._protocol import Store
from pyattacker.store._rows import RunRow, RunState

__all__ = ["judged_runs", "run_view", "run_views"]


def judged_runs(store: Store, *, now: float | None = None) -> list[tuple[RunRow, Liveness]]:
    """Every run of ``store``, oldest first, with its :class:`Liveness` (see the module
    docstring). ``now`` is epoch seconds (default: the clock's)."""
    runs = store.runs()
    running = [r for r in runs if r.state == RunState.RUNNING]
    held: bool | None = None
    if running:
        held = store.lock_held()
        if held is False:
            again = {r.run_id: r for r in store.runs()}
            runs = [again.get(r.run_id, r) if r.state == RunState.RUNNING else r for r in runs]
    stale = float(getattr(store, "stale_after_s", DEFAULT_STALE_AFTER_S))
    at = epoch_time() if now is None else now
    host = this_host()
    return [
        (r, judge_here(r, now=at, lock_held=held, stale_after_s=stale, host=host)) for r in runs
    ]


def run_views(store: Store, *, now: float | None = None) -> list[dict[str, Any]]:
    """:func:`run_view` of every run of ``store``, oldest first."""
    return [run_view(run, liveness) for run, liveness in judged_runs(store, now=now)]


def run_view(run: RunRow, liveness: Liveness) -> dict[str, Any]:
    """What a reader shows of one run, as plain JSON-ready values.

    ``state`` is the shown state (``crashed`` for a dead ``running`` run) and
    ``stored_state`` what the row says; ``live``; ``crashed_because`` (why a ``running``
    run is judged dead, else None); ``heartbeat_age_s`` (``running`` rows only); ``pid``
    and ``host``; ``consumed`` (``rows_read``, ``rows_total``, ``exhausted``, ``path``,
    ``source`` from the run's ``input`` record, or None when none was recorded);
    ``resume_command`` (the command that resumes a run that did not finish, when the run
    was started from the CLI: ``config["command"]``).
    """
    record = run.input if isinstance(run.input, Mapping) else {}
    unfinished = not liveness.live and liveness.state not in (RunState.SUCCEEDED.value,)
    command = run.config.get("command") if isinstance(run.config, Mapping) else None
    return {
        "state": liveness.state,
        "stored_state": str(run.state),
        "live": liveness.live,
        "crashed_because": liveness.reason,
        "heartbeat_age_s": liveness.heartbeat_age_s,
        "pid": run.pid,
        "host": run.host,
        "consumed": _consumed(record) if record else None,
        "resume_command": command if unfinished and isinstance(command, str) else None,
    }


def _consumed(record: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "path": record.get("path"),
        "source": record.get("source"),
        "rows_read": record.get("rows_read"),
        "rows_total": record.get("rows_total"),
        "exhausted": record.get("exhausted"),
    }
