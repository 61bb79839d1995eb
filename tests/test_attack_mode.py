"""The engine's decisions that need no loop: its mode, read once off the plan, and admit()."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.attack import AttackPlan, ClosedModel, HttpSender, OpenModel, Target
from pyattacker.attack._mode import Admit, Flight, Mode, admit
from pyattacker.attack._schedule import POLL_SHARE, WAKE_EARLY_S, wake_early
from pyattacker.http import HttpClient
from pyattacker.measure import Attempt
from pyattacker.pool import Immediate, Wait, resolve_algorithm

URL = "http://127.0.0.1:9/"


class OwnSender:
    async def send(self, target: Target, attempt: Attempt) -> None:  # pragma: no cover
        pass


class SubclassedSender(HttpSender):
    """Not *the* HttpSender: its send may do anything, so the engine never bypasses it."""


def mode_of(plan: AttackPlan, sender: object) -> Mode:
    return Mode.of(plan, resolve_algorithm(plan.algorithm), sender)  # type: ignore[arg-type]


def test_an_open_plan_of_one_attempt_through_the_http_sender_is_sent_directly() -> None:
    plan = AttackPlan.build([URL], OpenModel(rate=100), requests=10)
    assert mode_of(plan, HttpSender(HttpClient())) == Mode(
        open=True, try_first=True, queue_when_full=True, direct=True
    )


@pytest.mark.parametrize(
    ("plan", "sender"),
    [
        (AttackPlan.build([URL], OpenModel(rate=100), requests=10, retry="exponential"), "http"),
        (AttackPlan.build([URL], OpenModel(rate=100), requests=10), "own"),
        (AttackPlan.build([URL], OpenModel(rate=100), requests=10), "subclass"),
        (AttackPlan.build([URL], ClosedModel(clients=2), requests=10), "http"),
        (AttackPlan.build([URL], OpenModel(rate=100), requests=10, algorithm="least_busy"), "http"),
    ],
)
def test_retries_another_sender_a_closed_model_or_an_algorithm_of_its_own_go_through_tasks(
    plan: AttackPlan, sender: str
) -> None:
    senders = {"http": HttpSender, "subclass": SubclassedSender}
    made = OwnSender() if sender == "own" else senders[sender](HttpClient())
    assert mode_of(plan, made).direct is False


def test_only_wait_without_a_timeout_queues_arrivals_in_the_engine() -> None:
    plan = AttackPlan.build([URL], OpenModel(rate=100), requests=10)
    waits = Mode.of(plan, Wait(), OwnSender())  # type: ignore[arg-type]
    assert (waits.queue_when_full, waits.try_first) == (True, True)
    timed = Mode.of(plan, Wait(timeout=1.0), OwnSender())  # type: ignore[arg-type]
    assert (timed.queue_when_full, timed.try_first) == (False, True)
    immediate = Mode.of(plan, Immediate(), OwnSender())  # type: ignore[arg-type]
    assert (immediate.queue_when_full, immediate.try_first) == (False, True)


def test_an_arrival_at_max_in_flight_is_dropped_even_with_connections_free() -> None:
    assert admit(in_flight=10, max_in_flight=10, queued=0, busy=0, capacity=4) is Admit.DROP


def test_an_arrival_queues_behind_earlier_ones_even_when_a_connection_is_free() -> None:
    assert admit(in_flight=3, max_in_flight=10, queued=1, busy=2, capacity=4) is Admit.QUEUE


def test_an_arrival_queues_when_every_connection_is_busy_and_starts_when_one_is_free() -> None:
    assert admit(in_flight=4, max_in_flight=10, queued=0, busy=4, capacity=4) is Admit.QUEUE
    assert admit(in_flight=3, max_in_flight=10, queued=0, busy=3, capacity=4) is Admit.START


@given(st.integers(0, 50), st.integers(1, 50), st.integers(0, 50))
def test_without_a_queue_an_arrival_is_dropped_only_at_max_in_flight_else_started(
    in_flight: int, max_in_flight: int, busy: int
) -> None:
    verdict = admit(in_flight, max_in_flight, 0, busy, math.inf)
    assert verdict is (Admit.DROP if in_flight >= max_in_flight else Admit.START)


def test_a_flight_counts_promised_connections_as_busy() -> None:
    flight = Flight(capacity=2)
    flight.leased, flight.unstarted = 1, {7: 0.5}
    assert (flight.busy(), flight.has_room()) == (2, False)
    assert flight.statistics() == {
        "in_flight": 0,
        "queued": 0,
        "leased": 1,
        "unstarted": 1,
        "tasks": 0,
        "direct": 0,
    }


waits = st.floats(min_value=40e-6, max_value=10.0)


@given(wait=waits, workers=st.integers(min_value=1, max_value=64))
def test_the_early_wake_is_capped_and_a_share_of_the_wait_divided_among_the_workers(
    wait: float, workers: int
) -> None:
    early = wake_early(wait, workers)
    assert 0 < early <= WAKE_EARLY_S
    assert early <= POLL_SHARE / workers * wait * (1 + 1e-12)


@given(wait=waits, workers=st.integers(min_value=2, max_value=64))
def test_a_worker_wakes_as_early_before_an_arrival_as_one_process_at_the_same_total_rate(
    wait: float, workers: int
) -> None:
    # One process waits `wait` between arrivals; each of `workers` waits that many times
    # as long for its share. Both poll the same stretch before an arrival, so the workers
    # together poll what the one process polls.
    assert math.isclose(wake_early(wait * workers, workers), wake_early(wait, 1), rel_tol=1e-12)
