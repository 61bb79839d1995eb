"""The liveness decider: every combination of facts, and what a reader is told."""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.store import RunRow, RunState
from pyattacker.store._lifecycle import Facts, Liveness, judge, judge_here, this_host

STALE = 30.0


def _run(**fields: Any) -> RunRow:
    values: dict[str, Any] = {
        "run_id": "r1",
        "state": RunState.RUNNING,
        "started_at": 900.0,
        "heartbeat_at": 1000.0,
        "pid": 10711,
        "host": "here",
    }
    return RunRow(**{**values, **fields})


def _facts(
    *, now: float = 1012.0, same_host: bool = True, lock: bool | None, pid: bool | None
) -> Facts:
    return Facts(now=now, same_host=same_host, lock_held=lock, pid_alive=pid, stale_after_s=STALE)


# -- the stated examples -------------------------------------------------------------------


def test_a_run_whose_process_is_gone_is_crashed_with_the_pid_and_the_heartbeat_age() -> None:
    verdict = judge(_run(), _facts(lock=False, pid=False))
    assert verdict == Liveness(
        state="crashed",
        live=False,
        reason="process 10711 gone; last heartbeat 12 s ago",
        heartbeat_age_s=12.0,
    )
    assert verdict.shown == "crashed (process 10711 gone; last heartbeat 12 s ago)"


def test_a_paused_run_holding_the_lock_is_live_however_old_its_heartbeat() -> None:
    verdict = judge(_run(), _facts(now=1_000_000.0, lock=True, pid=True))
    assert (verdict.state, verdict.live, verdict.reason) == ("running", True, None)
    assert verdict.shown == "running"


def test_a_run_whose_process_lives_but_holds_no_lock_is_crashed() -> None:
    verdict = judge(_run(), _facts(lock=False, pid=True))
    assert verdict.reason == "process 10711 holds no lock on the store; last heartbeat 12 s ago"


def test_a_run_of_another_host_is_judged_by_its_heartbeat_alone() -> None:
    facts = _facts(now=1095.0, same_host=False, lock=True, pid=None)
    verdict = judge(_run(host="gpu-7"), facts)
    assert verdict.reason == "no heartbeat on gpu-7 for 95 s (several heartbeat periods)"
    assert judge(_run(host="gpu-7"), _facts(now=1030.0, same_host=False, lock=False, pid=None)).live


@pytest.mark.parametrize(
    ("age", "text"),
    [(0.4, "0 s ago"), (119.9, "119 s ago"), (185.0, "3 min 5 s ago"), (7440.0, "2 h 4 min ago")],
)
def test_heartbeat_ages_read_in_whole_units(age: float, text: str) -> None:
    verdict = judge(_run(), _facts(now=1000.0 + age, lock=False, pid=False))
    assert verdict.reason == f"process 10711 gone; last heartbeat {text}"


def test_a_run_without_a_heartbeat_is_aged_from_its_start() -> None:
    verdict = judge(_run(heartbeat_at=None), _facts(now=950.0, lock=False, pid=False))
    assert verdict.heartbeat_age_s == 50.0


def test_a_heartbeat_from_a_clock_ahead_of_ours_is_zero_seconds_old() -> None:
    verdict = judge(_run(), _facts(now=990.0, lock=False, pid=False))
    assert verdict.heartbeat_age_s == 0.0


# -- every combination -------------------------------------------------------------------

STATES = list(RunState)
LOCKS = [True, False, None]
PIDS = [True, False, None]
AGES = [5.0, 500.0]  # fresh, stale


def _expected(
    state: RunState, same_host: bool, lock: bool | None, pid: bool | None, age: float
) -> tuple[str, bool]:
    """The rules of ``_lifecycle``, spelled out case by case."""
    if state != RunState.RUNNING:
        return state.value, False
    if same_host and pid is False:
        return "crashed", False
    if same_host and lock is True:
        return "running", True
    if same_host and lock is False:
        return "crashed", False
    return ("running", True) if age <= STALE else ("crashed", False)


@pytest.mark.parametrize(
    ("state", "same_host", "lock", "pid", "age"),
    list(itertools.product(STATES, [True, False], LOCKS, PIDS, AGES)),
)
def test_every_combination_of_facts_gets_the_rule_it_falls_under(
    state: RunState, same_host: bool, lock: bool | None, pid: bool | None, age: float
) -> None:
    run = _run(state=state)
    verdict = judge(run, _facts(now=1000.0 + age, same_host=same_host, lock=lock, pid=pid))
    assert (verdict.state, verdict.live) == _expected(state, same_host, lock, pid, age)
    assert (verdict.reason is not None) == (state == RunState.RUNNING and not verdict.live)
    assert (verdict.heartbeat_age_s is None) == (state != RunState.RUNNING)


@given(
    age=st.floats(min_value=0, max_value=1e9),
    pid=st.sampled_from(PIDS),
)
def test_a_held_lock_outweighs_any_heartbeat_age_unless_the_pid_is_gone(
    age: float, pid: bool | None
) -> None:
    verdict = judge(_run(), _facts(now=1000.0 + age, lock=True, pid=pid))
    assert verdict.live is (pid is not False)


@given(
    age=st.floats(min_value=0, max_value=1e9),
    lock=st.sampled_from(LOCKS),
    pid=st.sampled_from(PIDS),
)
def test_on_another_host_only_the_heartbeat_counts(
    age: float, lock: bool | None, pid: bool | None
) -> None:
    facts = _facts(now=1000.0 + age, same_host=False, lock=lock, pid=pid)
    assert judge(_run(host="elsewhere"), facts).live is (age <= STALE)


# -- the facts gathered here ---------------------------------------------------------------


def test_judge_here_asks_whether_the_pid_lives_only_for_a_running_run_of_this_host() -> None:
    mine = _run(pid=os.getpid(), host=this_host())
    assert judge_here(mine, now=1e9, lock_held=True).live
    assert not judge_here(mine, now=1012.0, lock_held=False).live
    unknown_host = _run(pid=os.getpid(), host=None)  # a hand-made row: this host's rules
    assert judge_here(unknown_host, now=1e9, lock_held=True).live
    elsewhere = _run(pid=os.getpid(), host="elsewhere")
    assert not judge_here(elsewhere, now=1e9, lock_held=True).live
