"""The health state machine: every legal transition, every illegal one, the cooldown rule."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.errors import ConfigError, IllegalTransition
from pyattacker.pool import Health, HealthEvent, HealthPolicy, HealthState, transition
from pyattacker.pool._health import TRANSITIONS

POLICY = HealthPolicy(degrade_after=3, dead_after=8, cooldown_s=30.0)


def step(h: HealthState, event: HealthEvent, now: float = 100.0) -> HealthState:
    return transition(h, event, now=now, policy=POLICY)


def test_two_failures_keep_a_resource_ready_and_count() -> None:
    h = step(step(HealthState(), HealthEvent.FAILURE), HealthEvent.FAILURE)
    assert h == HealthState(Health.READY, failures=2, blocked_until=None)


def test_the_third_consecutive_failure_degrades_for_the_cooldown() -> None:
    h = HealthState(Health.READY, failures=2)
    assert step(h, HealthEvent.FAILURE, now=10.0) == HealthState(Health.DEGRADED, 3, 40.0)


def test_each_failure_while_degraded_rearms_the_cooldown() -> None:
    h = HealthState(Health.DEGRADED, 3, 40.0)
    assert step(h, HealthEvent.FAILURE, now=20.0) == HealthState(Health.DEGRADED, 4, 50.0)


def test_the_eighth_consecutive_failure_kills() -> None:
    h = HealthState(Health.DEGRADED, 7, 40.0)
    assert step(h, HealthEvent.FAILURE) == HealthState(Health.DEAD, 8, None)


def test_a_dead_resource_stays_dead_on_failure_and_recovers_on_success() -> None:
    dead = HealthState(Health.DEAD, 8, None)
    assert step(dead, HealthEvent.FAILURE) == HealthState(Health.DEAD, 9, None)
    assert step(dead, HealthEvent.SUCCESS) == HealthState()


def test_success_resets_the_counter_from_every_live_state() -> None:
    for h in (HealthState(Health.READY, 2), HealthState(Health.DEGRADED, 5, 9.0)):
        assert step(h, HealthEvent.SUCCESS) == HealthState()


def test_an_expired_cooldown_reads_ready_but_keeps_the_counter() -> None:
    h = HealthState(Health.DEGRADED, 3, 40.0)
    assert h.state_at(39.999) is Health.DEGRADED
    assert h.state_at(40.0) is Health.READY
    assert h.failures == 3
    # One more failure after the cooldown degrades again at once (the counter was kept).
    assert step(h, HealthEvent.FAILURE, now=41.0) == HealthState(Health.DEGRADED, 4, 71.0)


def test_degrade_blocks_for_the_cooldown_without_touching_the_counter() -> None:
    assert step(HealthState(Health.READY, 1), HealthEvent.DEGRADE, now=5.0) == HealthState(
        Health.DEGRADED, 1, 35.0
    )
    dead = HealthState(Health.DEAD, 8)
    assert step(dead, HealthEvent.DEGRADE) == dead


def test_revoke_is_legal_from_every_live_state_and_terminal() -> None:
    for state in (Health.READY, Health.DEGRADED, Health.DEAD):
        assert step(HealthState(state, 2, None), HealthEvent.REVOKE).state is Health.REVOKED


@pytest.mark.parametrize(("state", "event"), list(itertools.product(Health, HealthEvent)))
def test_every_pair_is_either_in_the_table_or_raises_and_changes_nothing(
    state: Health, event: HealthEvent
) -> None:
    h = HealthState(state, 4, 50.0 if state is Health.DEGRADED else None)
    if (state, event) in TRANSITIONS:
        assert isinstance(step(h, event), HealthState)
    else:
        assert state is Health.REVOKED  # the only terminal state
        with pytest.raises(IllegalTransition):
            step(h, event)
        assert h == HealthState(state, 4, None)


@given(st.lists(st.sampled_from([HealthEvent.SUCCESS, HealthEvent.FAILURE]), max_size=40))
def test_the_counter_always_equals_the_failures_since_the_last_success(
    events: list[HealthEvent],
) -> None:
    h = HealthState()
    streak = 0
    for event in events:
        h = step(h, event)
        streak = 0 if event is HealthEvent.SUCCESS else streak + 1
        assert h.failures == streak
        expected = (
            Health.DEAD
            if streak >= POLICY.dead_after
            else Health.DEGRADED
            if streak >= POLICY.degrade_after
            else Health.READY
        )
        assert h.state is expected


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"degrade_after": 0}, "degrade_after"),
        ({"dead_after": 2}, "dead_after"),
        ({"cooldown_s": -1.0}, "cooldown_s"),
        ({"cooldown_s": float("nan")}, "cooldown_s"),
        ({"degrade_after": True}, "degrade_after"),
    ],
)
def test_a_bad_policy_is_a_config_error_naming_the_field(
    kwargs: dict[str, object], field: str
) -> None:
    with pytest.raises(ConfigError) as info:
        HealthPolicy(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field
