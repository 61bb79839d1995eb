"""Who may begin a run on a store: the rules of ``Store.begin_run`` as pure decisions.

Both stores read the same facts (the runs still marked ``running``, whether the new run's
id is taken, how many pipelines are held), ask :func:`plan_begin` what to do, and apply the
answer inside one transaction. Nothing here touches a store.

A run marked ``running`` is *live* when all of these hold:

- its last sign of life (``heartbeat_at``, else ``started_at``) is at most
  ``stale_after_s`` seconds before the new run's ``started_at`` — the new run's start is
  "now", so no clock is read here and tests can use any epoch floats;
- if it ran on this host with a known ``pid``, that process still exists. On another host
  the pid says nothing, so a fresh heartbeat alone counts as live.

A run marked ``running`` that is not live died without ending: it is taken over.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Sequence

from pyattacker.errors import ConfigError
from pyattacker.store._rows import RunRow, RunState

__all__ = ["DEFAULT_STALE_AFTER_S", "is_live", "pid_alive", "plan_begin", "this_host"]

#: A run whose last heartbeat is older than this (seconds) is presumed dead. The Runner
#: must heartbeat well within it.
DEFAULT_STALE_AFTER_S = 30.0


def this_host() -> str:
    return socket.gethostname()


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (a zombie counts: it has not been reaped)."""
    if pid <= 0:  # kill(0, ...) and kill(-n, ...) address process groups, not a process
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by someone else
        return True
    return True


def is_live(run: RunRow, *, now: float, host: str, stale_after_s: float) -> bool:
    """Whether ``run`` is still owned by a working process (rules in the module docstring)."""
    if run.state != RunState.RUNNING:
        return False
    last_sign = run.started_at if run.heartbeat_at is None else run.heartbeat_at
    if now - last_sign > stale_after_s:
        return False
    if run.host == host and run.pid is not None:
        return pid_alive(run.pid)
    return True


def plan_begin(
    new: RunRow,
    *,
    resume: bool,
    running: Sequence[RunRow],
    id_taken: bool,
    pipelines: int,
    location: str,
    stale_after_s: float,
) -> list[RunRow]:
    """The runs ``new`` takes over, as they must be stored (``crashed``); or refuse.

    Raises ``ConfigError`` when another run is live (field ``resume``), when the store holds
    pipelines and ``resume`` is false (field ``resume``), or when ``new.run_id`` is already
    recorded (field ``run_id``). Without ``resume`` a dead run can only be taken over when
    there are no pipelines, which is harmless and keeps the record honest.
    """
    host = this_host()
    live = [
        r for r in running if is_live(r, now=new.started_at, host=host, stale_after_s=stale_after_s)
    ]
    if live:
        raise _live_refusal(live[0], new, location)
    if pipelines and not resume:
        raise ConfigError(
            f"the store {location} already holds {pipelines} pipeline(s)",
            field="resume",
            hint="pass resume=True (--resume) to continue them, or use another store",
        )
    if id_taken:
        raise ConfigError(
            f"a run with id {new.run_id!r} is already recorded in {location}",
            field="run_id",
            hint="give each run a new id",
        )
    return [_crashed(r, new.run_id) for r in running]


def _live_refusal(live: RunRow, new: RunRow, location: str) -> ConfigError:
    last_sign = live.started_at if live.heartbeat_at is None else live.heartbeat_at
    return ConfigError(
        f"run {live.run_id!r} is still live in {location} (pid {live.pid} on "
        f"{live.host}, last heartbeat {new.started_at - last_sign:.1f}s ago)",
        field="resume",
        hint="wait for it to end or stop it; a store has one run at a time",
    )


def _crashed(run: RunRow, by: str) -> RunRow:
    last_sign = run.started_at if run.heartbeat_at is None else run.heartbeat_at
    return dataclasses.replace(
        run,
        state=RunState.CRASHED,
        ended_at=last_sign if run.ended_at is None else run.ended_at,
        stop_reason=run.stop_reason or f"owner died; taken over by run {by}",
    )
