"""Who owns a run, and who may begin one: the liveness rules as pure decisions.

A run marked ``running`` may be *live* (its process is at work) or *dead* (the process
died without ending it). :func:`judge` tells which from the run's row and a few facts the
caller gathered (:class:`Facts`); every reader (report, export, JSON) and ``begin_run`` ask
it, so they all agree. The rules, in order:

1. On **this host** (the row's ``host`` is this machine's, or unknown):

   - the recorded ``pid`` is gone → dead, "process 10711 gone";
   - the store's writer lock is held → live, however old the heartbeat: a paused process
     (SIGSTOP, Ctrl-Z, a long synchronous task) still holds its lock, and the OS releases
     the lock of a process that died, whatever killed it;
   - the lock is free → dead, "no process holds the store's lock";
   - the lock cannot be asked (a store without one, such as ``MemoryStore``) → the
     heartbeat rule below.

2. On **another host** the lock and the pid say nothing (a lock file on NFS is not shared
   reliably across machines), so only the heartbeat is left: the run is live while its last
   sign of life (``heartbeat_at``, else ``started_at``) is at most ``stale_after_s`` seconds
   old, several heartbeat periods. A run paused longer than that on another host is taken
   over; when it wakes, its next write finds its row no longer ``running`` and it stops.

"Now" is a fact too (the new run's ``started_at``, or the reader's clock), so nothing here
reads a clock and tests can use any epoch floats. :func:`plan_begin` applies the rules to
``begin_run``; nothing here touches a store.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass

from pyattacker.errors import ConfigError, StoreError
from pyattacker.store._rows import RunRow, RunState

__all__ = [
    "DEFAULT_STALE_AFTER_S",
    "Facts",
    "Liveness",
    "judge",
    "judge_here",
    "not_running",
    "pid_alive",
    "plan_begin",
    "this_host",
]

#: A run on another host whose last heartbeat is older than this (seconds) is presumed
#: dead. The Runner must heartbeat well within it.
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


@dataclass(frozen=True, slots=True)
class Facts:
    """What a judge of one run needs to know besides its row.

    ``now``: epoch seconds. ``same_host``: the run was recorded on this machine (or its
    host is unknown). ``lock_held``: whether some process holds the store's writer lock
    (None: the store has no lock to ask). ``pid_alive``: whether the run's ``pid`` exists
    here (None: not known, or not asked because the run is on another host).
    """

    now: float
    same_host: bool
    lock_held: bool | None
    pid_alive: bool | None
    stale_after_s: float = DEFAULT_STALE_AFTER_S


@dataclass(frozen=True, slots=True)
class Liveness:
    """What a reader shows about one run.

    ``state`` is the stored state, except ``crashed`` for a ``running`` run judged dead.
    ``live`` is true only for a ``running`` run judged alive. ``reason`` says why a
    ``running`` run is dead ("process 10711 gone; last heartbeat 12 s ago"), else None.
    ``heartbeat_age_s`` is how long ago a ``running`` run last gave a sign of life (never
    negative), None for an ended run.
    """

    state: str
    live: bool
    reason: str | None = None
    heartbeat_age_s: float | None = None

    @property
    def shown(self) -> str:
        """The state as a person reads it: ``crashed (process 10711 gone; ...)``."""
        return self.state if self.reason is None else f"{self.state} ({self.reason})"


def judge(run: RunRow, facts: Facts) -> Liveness:
    """Whether ``run`` is live, by the rules of the module docstring. Pure."""
    if run.state != RunState.RUNNING:
        return Liveness(state=str(run.state), live=False)
    age = max(0.0, facts.now - last_sign_of_life(run))
    beat = f"last heartbeat {_ago(age)}"
    if facts.same_host:
        if run.pid is not None and facts.pid_alive is False:
            return _dead(f"process {run.pid} gone; {beat}", age)
        if facts.lock_held is True:
            return Liveness(state=RunState.RUNNING.value, live=True, heartbeat_age_s=age)
        if facts.lock_held is False:
            owner = "its process" if run.pid is None else f"process {run.pid}"
            return _dead(f"{owner} holds no lock on the store; {beat}", age)
    if age > facts.stale_after_s:
        where = "" if facts.same_host or run.host is None else f" on {run.host}"
        return _dead(
            f"no heartbeat{where} for {_ago(age, ago=False)} (several heartbeat periods)", age
        )
    return Liveness(state=RunState.RUNNING.value, live=True, heartbeat_age_s=age)


def judge_here(
    run: RunRow,
    *,
    now: float,
    lock_held: bool | None,
    stale_after_s: float = DEFAULT_STALE_AFTER_S,
    host: str | None = None,
) -> Liveness:
    """:func:`judge` with the host and pid facts gathered on this machine (the pid is
    asked only for a ``running`` run of this host)."""
    here = this_host() if host is None else host
    same_host = run.host is None or run.host == here
    alive = None
    if run.state == RunState.RUNNING and same_host and run.pid is not None:
        alive = pid_alive(run.pid)
    facts = Facts(now, same_host, lock_held, alive, stale_after_s)
    return judge(run, facts)


def not_running(
    run_id: str, found: tuple[str, str | None] | None, what: str, location: str
) -> StoreError:
    """The error for a write (``what``: "write for", "end", ...) about a run that is not
    ``running``: unknown (``found`` None), or taken over by another process (``found``
    is its stored ``(state, stop_reason)``)."""
    if found is None:
        return StoreError(f"no run {run_id!r} to {what}", location=location)
    state, reason = found
    because = f" ({reason})" if reason else ""
    return StoreError(
        f"cannot {what} run {run_id!r}: it is no longer running but {state}{because}; "
        "another process took it over, so this one stops writing",
        location=location,
    )


def last_sign_of_life(run: RunRow) -> float:
    return run.started_at if run.heartbeat_at is None else run.heartbeat_at


def plan_begin(
    new: RunRow,
    *,
    resume: bool,
    running: Sequence[RunRow],
    id_taken: bool,
    pipelines: int,
    location: str,
    stale_after_s: float,
    lock_held: bool | None = None,
    other_writer: bool = False,
) -> list[RunRow]:
    """The runs ``new`` takes over, as they must be stored (``crashed``); or refuse.

    ``lock_held`` is whether the store's writer lock was held when ``new`` asked for it
    (None: the store has none); ``other_writer`` that another process holds it now.

    Raises ``ConfigError`` when another run is live or another process writes the store
    (field ``resume``), when the store holds pipelines and ``resume`` is false (field
    ``resume``), or when ``new.run_id`` is already recorded (field ``run_id``). Without
    ``resume`` a dead run can only be taken over when there are no pipelines, which is
    harmless and keeps the record honest.
    """
    judged = [
        (r, judge_here(r, now=new.started_at, lock_held=lock_held, stale_after_s=stale_after_s))
        for r in running
    ]
    live = [(r, verdict) for r, verdict in judged if verdict.live]
    if live:
        raise _live_refusal(*live[0], location, lock_held=lock_held)
    if other_writer:
        raise ConfigError(
            f"another process is writing {location} (it holds {location}.lock)",
            field="resume",
            hint="wait for it to end or stop it; a store has one run at a time",
        )
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
    return [_crashed(r, verdict, new.run_id) for r, verdict in judged]


def _live_refusal(
    live: RunRow, verdict: Liveness, location: str, *, lock_held: bool | None
) -> ConfigError:
    holds = ", holding the store's lock" if lock_held and live.host in (None, this_host()) else ""
    age = verdict.heartbeat_age_s or 0.0
    return ConfigError(
        f"run {live.run_id!r} is still live in {location} (pid {live.pid} on "
        f"{live.host}{holds}; last heartbeat {age:.1f}s ago)",
        field="resume",
        hint="wait for it to end or stop it; a store has one run at a time",
    )


def _crashed(run: RunRow, verdict: Liveness, by: str) -> RunRow:
    why = f" ({verdict.reason})" if verdict.reason else ""
    return dataclasses.replace(
        run,
        state=RunState.CRASHED,
        ended_at=last_sign_of_life(run) if run.ended_at is None else run.ended_at,
        stop_reason=run.stop_reason or f"owner died{why}; taken over by run {by}",
    )


def _dead(reason: str, age: float) -> Liveness:
    return Liveness(state=RunState.CRASHED.value, live=False, reason=reason, heartbeat_age_s=age)


def _ago(seconds: float, *, ago: bool = True) -> str:
    """``12 s ago``, ``95 s``, ``3 min 5 s``, ``2 h 4 min``: whole units, for people."""
    whole = int(seconds)
    if whole < 120:
        text = f"{whole} s"
    elif whole < 7200:
        text = f"{whole // 60} min {whole % 60} s"
    else:
        text = f"{whole // 3600} h {whole % 3600 // 60} min"
    return f"{text} ago" if ago else text
