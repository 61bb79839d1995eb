"""The attack engine on virtual time: exact timelines, no sockets.

A fake sender stands in for the network: it "sends" at the instant it is called and
"answers" after a latency the test chooses, on the virtual clock. So every figure below
is known in advance, to the nanosecond.
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from engine_helpers import attack
from pyattacker._gc import quiet_gc
from pyattacker.attack import (
    AttackPlan,
    AttackResult,
    ClosedModel,
    Engine,
    OpenModel,
    Progress,
    Target,
    worker_plan,
)
from pyattacker.attack._tally import ErrorGroup
from pyattacker.clock import LoopClock
from pyattacker.errors import ConfigError
from pyattacker.measure import Attempt, Outcome, RequestRecord
from pyattacker.testing import run_virtual

A = "http://127.0.0.1:9/a"
B = "http://127.0.0.1:9/b"
DROPPED = "dropped: --max-in-flight requests were already in progress"


class Refused(Exception):
    """What the fake server raises for a status >= 400 (classified by its ``status``)."""

    def __init__(self, status: int, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.retry_after = retry_after


@dataclass
class FakeServer:
    """Answers after ``latency(n, t)`` seconds with ``status(n, attempt)``; one call = one
    attempt, counted like a real server would."""

    latency: Callable[[int, float], float] = lambda n, t: 0.05
    status: Callable[[int, int], int] = lambda n, attempt: 200
    retry_after: float | None = None
    calls: list[tuple[int, int, str, float]] = field(default_factory=list)

    async def send(self, target: Target, attempt: Attempt) -> None:
        clock = LoopClock()
        now = clock.now()
        attempt.sent = now
        self.calls.append((attempt.request, attempt.attempt, target.id, now))
        await clock.sleep(self.latency(attempt.request, now))
        attempt.first_byte = attempt.end = clock.now()
        code = self.status(attempt.request, attempt.attempt)
        attempt.status = code
        if code >= 400:
            raise Refused(code, self.retry_after if code == 429 else None)


def test_an_open_model_sends_each_request_at_its_scheduled_instant() -> None:
    plan = AttackPlan.build([A], OpenModel(rate=10), duration=1.0)
    result, records = attack(plan, FakeServer())
    assert [r.scheduled for r in records] == pytest.approx([k / 10 for k in range(10)])
    assert [r.sent for r in records] == [r.scheduled for r in records]
    assert all(r.latency == pytest.approx(0.05) for r in records)
    assert result.sent == result.scheduled == 10
    assert result.total.by_outcome == {"ok": 10}
    assert result.late == 0
    assert result.dropped == 0
    assert result.total.dispatch_delay.max == 0.0


def test_a_stalled_server_shows_on_the_scheduled_clock_and_not_on_the_sent_clock() -> None:
    # One connection, 100 requests/s, 5 ms answers, except request 50 (t=0.5 s) takes 1 s.
    # Requests 51..149 queue behind it for the one connection: their *scheduled* latency
    # includes the wait, their *sent* latency is the plain 5 ms.
    server = FakeServer(latency=lambda n, t: 1.0 if n == 50 else 0.005)
    plan = AttackPlan.build([A], OpenModel(rate=100), duration=2.0, connections=1)
    result, records = attack(plan, server)
    stalled = records[50]
    assert stalled.service_time == pytest.approx(1.0)
    queued = [r for r in records if r.dispatch_delay and r.dispatch_delay > 1e-9]
    # The first request after the stall was scheduled at 0.51 and sent at 1.5: 0.99 late.
    assert queued[0].request == 51
    assert queued[0].dispatch_delay == pytest.approx(0.99)
    assert queued[0].latency == pytest.approx(0.99 + 0.005)
    assert all(r.service_time == pytest.approx(0.005) for r in records if r.request != 50)
    # The backlog drains at one request per 5 ms against arrivals every 10 ms.
    assert result.total.latency.percentile(99) > 0.9
    assert result.total.service_time.percentile(99) == pytest.approx(0.005, rel=1e-3)
    assert result.late == sum(1 for r in records if r.dispatch_delay > plan.late_after)


def test_arrivals_above_max_in_flight_are_dropped_and_counted_never_skipped() -> None:
    # 10/s for 1 s, every answer takes 10 s, at most 3 in flight: 3 sent, 7 dropped.
    server = FakeServer(latency=lambda n, t: 10.0)
    plan = AttackPlan.build([A], OpenModel(rate=10, max_in_flight=3), duration=1.0)
    result, records = attack(plan, server)
    assert result.scheduled == 10
    assert result.sent == 3
    assert result.dropped == 7
    assert [r.outcome for r in records].count(Outcome.DROPPED) == 7
    assert all(r.latency is None for r in records if r.outcome is Outcome.DROPPED)
    assert result.total.latency.count == 3


def test_dropped_requests_count_as_attempts_but_not_as_sent_ones() -> None:
    # The reviewer's case: 20 arrivals, 2 in flight at most, 8 reach the server.
    server = FakeServer(latency=lambda n, t: 0.22)
    plan = AttackPlan.build([A], OpenModel(rate=20, max_in_flight=2), duration=1.0)
    result, _ = attack(plan, server)
    total = result.total
    assert (total.requests, total.attempts) == (20, 20)
    assert total.sent_attempts == len(server.calls) == result.sent == 8
    assert result.to_dict()["total"]["sent_attempts"] == 8
    assert result.errors == [ErrorGroup(DROPPED, 12, DROPPED)]


def test_the_errors_count_the_message_each_request_ended_with() -> None:
    # Requests 0-5: 404, 500, then 404s; request 1 is refused (429) before its 500.
    statuses = {(1, 1): 429}
    server = FakeServer(
        status=lambda n, a: statuses.get((n, a), 500 if n == 1 else 404 if n < 6 else 200)
    )
    plan = AttackPlan.build(
        [A], OpenModel(rate=10), requests=8, retry={"max_attempts": 2, "base": 0.01}
    )
    result, records = attack(plan, server)
    assert records[1].attempts[0].error == "Refused: HTTP 429"  # not the request's last word
    assert result.errors == [
        ErrorGroup("Refused: HTTP 404", 5, "Refused: HTTP 404"),
        ErrorGroup("Refused: HTTP 500", 1, "Refused: HTTP 500"),
    ]
    assert result.to_dict()["errors"] == [group.to_dict() for group in result.errors]


def test_retry_none_makes_exactly_one_attempt_per_request_and_counts_throttles() -> None:
    server = FakeServer(status=lambda n, a: 429 if n % 2 else 200, retry_after=1.0)
    plan = AttackPlan.build([A], OpenModel(rate=10), duration=1.0, retry="none")
    result, records = attack(plan, server)
    assert len(server.calls) == 10 == result.total.attempts
    assert result.total.by_outcome == {"ok": 5, "throttled": 5}
    assert result.total.throttled_requests == 5
    assert all(r.latency == pytest.approx(0.05) for r in records)
    assert records[1].attempts[0].retry_after == 1.0
    assert result.decisions == {"attempts_exhausted": 5}


def test_a_retried_request_spans_all_attempts_from_the_first_scheduled_instant() -> None:
    # Request 0 is refused once with Retry-After 0.5, then served.
    server = FakeServer(status=lambda n, a: 429 if a == 1 else 200, retry_after=0.5)
    plan = AttackPlan.build(
        [A], OpenModel(rate=1), requests=1, retry={"max_attempts": 3, "jitter": "none"}
    )
    result, records = attack(plan, server)
    (record,) = records
    first, second = record.attempts
    assert (first.outcome, second.outcome) == (Outcome.THROTTLED, Outcome.OK)
    assert second.scheduled == pytest.approx(0.05 + 0.5)  # refusal at 0.05, then the wait
    assert record.latency == pytest.approx(0.05 + 0.5 + 0.05)
    assert record.service_time == pytest.approx(0.6)  # first send to last byte
    assert record.throttled
    assert record.n_attempts == 2
    assert result.total.by_outcome == {"ok": 1}
    assert result.total.attempts == 2 == len(server.calls)
    assert result.decisions == {"retryable": 1}


def test_a_closed_model_schedules_each_request_when_its_client_is_free() -> None:
    plan = AttackPlan.build([A], ClosedModel(clients=2, think_time=0.05), duration=1.0)
    result, records = attack(plan, FakeServer(latency=lambda n, t: 0.15))
    # Each client: request, 0.15 s answer, 0.05 s think: starts at 0, 0.2, ..., 0.8.
    assert result.scheduled == 10
    assert sorted({round(r.scheduled, 9) for r in records}) == pytest.approx(
        [0.0, 0.2, 0.4, 0.6, 0.8]
    )
    assert {r.dispatch_delay for r in records} == {0.0}


def test_requests_stops_the_schedule_after_that_many_arrivals() -> None:
    plan = AttackPlan.build([A], OpenModel(rate=1000), requests=7)
    result, records = attack(plan, FakeServer())
    assert result.scheduled == result.sent == len(records) == 7


def test_stop_cancels_what_is_in_flight_and_records_it_as_cancelled() -> None:
    plan = AttackPlan.build([A], OpenModel(rate=10), duration=10.0)
    result, records = attack(plan, FakeServer(latency=lambda n, t: 0.25), stop_at=1.0)
    assert result.stop_reason == "test stop"
    assert result.scheduled == 10  # arrivals 0.0 .. 0.9
    outcomes = [r.outcome for r in records]
    # Requests scheduled at 0.8 and 0.9 were still waiting for their answers at 1.0.
    assert outcomes.count(Outcome.CANCELLED) == 2
    assert outcomes.count(Outcome.OK) == 8
    assert result.schedule_s == pytest.approx(1.0)


def test_several_targets_are_spread_by_the_acquire_algorithm() -> None:
    server = FakeServer(latency=lambda n, t: 0.35)
    plan = AttackPlan.build([A, B], OpenModel(rate=10), duration=1.0, connections=3)
    result, _ = attack(plan, server)
    used = [target for _, _, target, _ in server.calls]
    assert {used.count(A), used.count(B)} == {5}
    assert set(result.by_target) == {A, B}
    assert sum(s.requests for s in result.by_target.values()) == 10


def test_each_url_and_key_is_a_target_and_the_key_travels_only_in_its_header() -> None:
    seen: list[tuple[str, tuple[tuple[str, str], ...]]] = []

    class Recording(FakeServer):
        async def send(self, target: Target, attempt: Attempt) -> None:
            seen.append((target.id, target.headers))
            await super().send(target, attempt)

    plan = AttackPlan.build(
        [A],
        OpenModel(rate=10),
        duration=1.0,
        connections=1,
        headers={"Authorization": "Bearer {key}", "Accept": "*/*"},
        keys=("sk-one", "sk-two"),
    )
    result, _ = attack(plan, Recording(latency=lambda n, t: 0.15))
    assert set(result.by_target) == {f"{A} (key 1)", f"{A} (key 2)"}
    assert {dict(h)["Authorization"] for _, h in seen} == {"Bearer sk-one", "Bearer sk-two"}
    assert {(i, dict(h)["Authorization"][-3:]) for i, h in seen} == {
        (f"{A} (key 1)", "one"),
        (f"{A} (key 2)", "two"),
    }
    assert "sk-" not in json.dumps(result.to_dict())


@pytest.mark.parametrize(
    ("headers", "keys", "field"),
    [
        ({"Authorization": "Bearer x"}, ("sk-1",), "keys"),
        ({"Authorization": "Bearer {key}"}, (), "keys"),
        ({"Authorization": "Bearer {key}"}, ("sk-1", "sk-1"), "keys"),
        ({"Authorization": "Bearer {key}"}, ("sk-1", " "), "keys[1]"),
    ],
)
def test_keys_without_a_header_to_carry_them_or_the_reverse_are_refused(
    headers: dict[str, str], keys: tuple[str, ...], field: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        AttackPlan.build([A], OpenModel(rate=1), duration=1.0, headers=headers, keys=keys)
    assert caught.value.field == field


def test_arrivals_that_find_every_connection_busy_queue_in_order_and_cancel_on_stop() -> None:
    # One connection, answers take 0.3 s, 10 arrivals/s: requests queue behind each other
    # and go out in arrival order; at the stop, the queued ones were never sent.
    server = FakeServer(latency=lambda n, t: 0.3)
    plan = AttackPlan.build([A], OpenModel(rate=10), duration=10.0, connections=1)
    result, records = attack(plan, server, stop_at=1.0)
    sent_order = [n for n, _, _, _ in server.calls]
    assert sent_order == sorted(sent_order) == [0, 1, 2, 3]  # at 0.0, 0.3, 0.6, 0.9
    assert [t for _, _, _, t in server.calls] == pytest.approx([0.0, 0.3, 0.6, 0.9])
    outcomes = {r.request: r.outcome for r in records}
    assert [outcomes[n] for n in range(3)] == [Outcome.OK] * 3
    assert [outcomes[n] for n in range(3, 10)] == [Outcome.CANCELLED] * 7
    assert all(records[n].sent is None for n in range(4, 10))
    assert result.scheduled == 10
    assert result.total.latency.count == 3


def test_a_generator_that_sends_late_reports_the_rate_it_really_achieved() -> None:
    # 10 arrivals in 1 s, but one connection and 0.2 s answers: the last request leaves
    # at 1.8 s, so 10 sends over 1.8 s, not "10/s as planned".
    plan = AttackPlan.build([A], OpenModel(rate=10), duration=1.0, connections=1)
    result, _ = attack(plan, FakeServer(latency=lambda n, t: 0.2))
    assert result.planned_rate == pytest.approx(10.0)
    assert result.send_span_s == pytest.approx(1.8)
    assert result.achieved_rate == pytest.approx(10 / 1.8)


def test_a_stop_records_requests_whose_tasks_never_got_to_run() -> None:
    # Real time: request 0 blocks the loop for 50 ms, so the scheduler then spawns the ~50
    # arrivals that fell due meanwhile at once; the first of them to run stops the attack,
    # and the rest are cancelled before their first step. Each must still be counted, as
    # cancelled. Requests sent before the block (request 0, and on a busy machine perhaps
    # one or two more) end as cancelled if still waiting at the stop, else as ok.
    blocked: list[float] = []

    class Stopper:
        engine: Engine

        async def send(self, target: Target, attempt: Attempt) -> None:
            attempt.sent = LoopClock().now()
            if attempt.request == 0:
                start = attempt.sent
                block_the_loop(0.05)
                blocked[:] = [start, LoopClock().now()]
            elif blocked and blocked[0] < attempt.scheduled < blocked[1]:
                self.engine.stop("test stop")  # due during the block: spawned after it
            await asyncio.sleep(0.001)
            attempt.end = LoopClock().now()
            attempt.status = 200

    records: list[RequestRecord] = []
    sender = Stopper()
    plan = AttackPlan.build([A], OpenModel(rate=1000), duration=1.0)
    sender.engine = Engine(plan, sender, on_record=records.append)
    result = asyncio.run(sender.engine.run())
    assert result.stop_reason == "test stop"
    assert sorted(r.request for r in records) == list(range(result.scheduled))
    assert result.total.requests == result.scheduled
    due_in_the_block = [r for r in records if blocked[0] < r.scheduled < blocked[1]]
    assert len(due_in_the_block) > 10
    # of those, only the stopper got as far as sending; every one of them was cancelled
    assert sum(r.sent is not None for r in due_in_the_block) == 1
    assert {r.outcome for r in due_in_the_block} == {Outcome.CANCELLED}
    assert set(result.total.by_outcome) <= {"cancelled", "ok"}
    assert result.total.by_outcome["cancelled"] >= len(due_in_the_block) + 1  # and request 0


def block_the_loop(seconds: float) -> None:
    """Hold the event loop hostage, as a slow callback or a GC pause would."""
    time.sleep(seconds)


def test_quiet_gc_raises_the_young_threshold_and_restores_everything_after() -> None:
    before = gc.get_threshold()
    with quiet_gc(gen0=12_345):
        assert gc.get_threshold()[0] == 12_345
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_a_request_the_algorithm_gives_no_lease_is_dropped_and_has_no_latency() -> None:
    # `immediate` with one connection: arrivals while it is busy get no lease at all.
    plan = AttackPlan.build(
        [A], OpenModel(rate=10), duration=1.0, connections=1, algorithm="immediate"
    )
    result, records = attack(plan, FakeServer(latency=lambda n, t: 0.25))
    sent = [r for r in records if r.sent is not None]
    assert [r.request for r in sent] == [0, 3, 6, 9]
    assert result.total.by_outcome == {"ok": 4, "dropped": 6}
    assert result.total.latency.count == 4
    assert result.total.latency.min == pytest.approx(0.25)


def test_a_stop_during_a_retry_backoff_keeps_the_attempt_that_was_answered() -> None:
    server = FakeServer(status=lambda n, a: 429, retry_after=1.0)
    plan = AttackPlan.build([A], OpenModel(rate=1), requests=1, retry={"max_attempts": 3})
    result, (record,) = attack(plan, server, stop_at=0.5)
    assert [a.outcome for a in record.attempts] == [Outcome.THROTTLED]
    assert result.total.throttled_attempts == 1
    assert result.total.by_outcome == {"throttled": 1}


def test_cancelling_run_from_outside_stops_every_request_and_propagates() -> None:
    plan = AttackPlan.build([A], ClosedModel(clients=2), duration=100.0)
    server = FakeServer(latency=lambda n, t: 0.25)

    async def main() -> Engine:
        engine = Engine(plan, server)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(engine.run(), timeout=1.1)
        return engine

    engine = run_virtual(main(), start=0.0)
    progress = engine.progress()
    # Each client sent at 0, 0.25, 0.5, 0.75 and 1.0; the last two were cut off at 1.1.
    assert len(server.calls) == 10
    assert progress.in_flight == 0
    assert progress.completed == 10
    assert engine.total.by_outcome == {"ok": 8, "cancelled": 2}


def test_a_late_scheduler_still_lets_requests_go_out_while_it_catches_up() -> None:
    # Real time: request 0 blocks the loop for 50 ms at 20,000 arrivals/s, so ~1,000
    # arrivals are overdue at once. The scheduler hands the loop back every few dozen of
    # them, so request 1 is sent long before the backlog of arrivals is all scheduled.
    seen_at_first_send: list[int] = []

    class Blocking:
        engine: Engine

        async def send(self, target: Target, attempt: Attempt) -> None:
            attempt.sent = LoopClock().now()
            if attempt.request == 0:
                block_the_loop(0.05)
            elif attempt.request == 1:
                seen_at_first_send.append(self.engine.progress().scheduled)
            await asyncio.sleep(0)
            attempt.end = LoopClock().now()
            attempt.status = 200

    sender = Blocking()
    plan = AttackPlan.build([A], OpenModel(rate=20_000), duration=0.1)
    sender.engine = Engine(plan, sender)
    result = asyncio.run(sender.engine.run())
    assert result.scheduled == 2000
    assert seen_at_first_send[0] < 200


def test_max_in_flight_counts_the_arriving_request_so_quick_answers_show_one_not_zero() -> None:
    # Answers in 50 ms, arrivals every 100 ms: one request in flight at a time, never zero.
    plan = AttackPlan.build([A], OpenModel(rate=10), duration=2.0, window=1.0)
    result, _ = attack(plan, FakeServer())
    assert [w.max_in_flight for w in result.windows] == [1, 1]


def test_windows_with_no_arrival_show_the_requests_still_in_flight() -> None:
    # 10 arrivals in the first second, each answered 2.5 s later: windows 1 and 2 see no
    # arrival but all 10 still in flight; 5 are left when window 3 begins.
    plan = AttackPlan.build([A], OpenModel(rate=10), duration=1.0, window=1.0)
    result, _ = attack(plan, FakeServer(latency=lambda n, t: 2.5))
    assert [w.scheduled for w in result.windows] == [10, 0, 0, 0]
    assert [w.max_in_flight for w in result.windows] == [10, 10, 10, 5]


def test_a_dropped_arrival_notes_the_full_count_it_did_not_join() -> None:
    server = FakeServer(latency=lambda n, t: 10.0)
    plan = AttackPlan.build([A], OpenModel(rate=10, max_in_flight=3), duration=1.0)
    result, _ = attack(plan, server)
    assert max(w.max_in_flight for w in result.windows) == 3


def test_a_closed_model_shows_every_client_in_flight() -> None:
    plan = AttackPlan.build([A], ClosedModel(clients=4), duration=1.0, window=1.0)
    result, _ = attack(plan, FakeServer())
    # The last four requests, sent at 0.95 s, end at 1.0 s: in the second window.
    assert [w.max_in_flight for w in result.windows] == [4, 4]


class EarlyStamps:
    """Request 0 stamps its times 1 s early, as a sender on another clock would."""

    async def send(self, target: Target, attempt: Attempt) -> None:
        now = LoopClock().now()
        await asyncio.sleep(0.01)
        shift = 1.0 if attempt.request == 0 else 0.0
        attempt.sent = now - shift
        attempt.first_byte = attempt.end = LoopClock().now() - shift
        attempt.status = 200


@pytest.mark.parametrize("rate", [10, 100])  # the refused request's batch full or not
def test_a_request_stamped_on_another_clock_is_reported_and_the_run_counts_every_other(
    rate: int,
) -> None:
    reported: list[dict[str, object]] = []

    async def main() -> AttackResult:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: reported.append(context))
        plan = AttackPlan.build([A], OpenModel(rate=rate), duration=1.0)
        engine = Engine(plan, EarlyStamps())
        engine.progress()  # a reader (the live view) before and after it is harmless
        result = await engine.run()
        engine.progress()
        return result

    result = run_virtual(main(), start=1000.0)
    assert result.total.requests == rate  # in the totals, as when each was counted alone
    assert sum(w.ok for w in result.windows) == rate - 1  # its window time was refused
    assert [str(c["exception"]) for c in reported] == [
        "time 999.0 is before the series origin 1000.0"
    ]


def test_progress_reports_each_targets_leases_held_at_that_instant() -> None:
    # 100/s, each answer after 50 ms, on virtual time: at t = 1.0025 exactly the requests
    # sent in the 50 ms before hold a lease.
    plan = AttackPlan.build([A], OpenModel(rate=100), duration=2.0, connections=16)
    seen: list[Progress] = []
    records: list[RequestRecord] = []

    async def main() -> AttackResult:
        engine = Engine(plan, FakeServer(), on_record=records.append)
        asyncio.get_running_loop().call_later(1.0025, lambda: seen.append(engine.progress()))
        return await engine.run()

    run_virtual(main(), start=0.0)
    (progress,) = seen
    at = 1.0025
    holding = [r for r in records if r.sent is not None and r.sent <= at < (r.end or 0.0)]
    ((target, held, most),) = progress.leases
    assert target == plan.resolved_targets()[0].id
    assert held == len(holding) == 5
    assert most == 16


def test_several_targets_each_get_windows_that_add_up_to_the_attacks() -> None:
    # B answers 500 to every third request; windows of 250 ms over a 2 s schedule.
    plan = AttackPlan.build([A, B], OpenModel(rate=100), duration=2.0, window=0.25)
    server = FakeServer(
        latency=lambda n, t: 0.02,
        status=lambda n, attempt: 500 if n % 3 == 0 else 200,
    )
    result, _ = attack(plan, server)
    ids = [target.id for target in plan.resolved_targets()]
    assert set(result.target_windows) == set(ids)
    for i, whole in enumerate(result.windows):
        parts = [result.target_windows[t][i] for t in ids if i < len(result.target_windows[t])]
        assert sum(p.completed for p in parts) == whole.completed
        assert sum(p.sent for p in parts) == whole.sent
        assert sum(p.latency.count for p in parts) == whole.latency.count
        statuses: Counter[int] = Counter()
        for p in parts:
            statuses.update(p.statuses)
        assert statuses == Counter(whole.statuses)
    per_target = {t: sum(w.completed for w in result.target_windows[t]) for t in ids}
    assert per_target == {t: result.by_target[t].requests for t in ids}
    assert set(result.to_dict()["target_windows"]) == set(ids)


def test_one_target_has_no_windows_of_its_own_beside_the_attacks() -> None:
    result, _ = attack(AttackPlan.build([A], OpenModel(rate=10), duration=0.5), FakeServer())
    assert result.target_windows == {}
    assert result.to_dict()["target_windows"] == {}


def test_closed_model_workers_number_their_requests_apart_and_use_each_number_once() -> None:
    plan = AttackPlan.build([A], ClosedModel(clients=4), requests=11, connections=4)
    numbers: list[list[int]] = []

    async def main(server: FakeServer, part: tuple[int, int]) -> AttackResult:
        return await Engine(worker_plan(plan, *part), server, part=part).run()

    for index in range(2):
        server = FakeServer()
        run_virtual(main(server, (index, 2)), start=0.0)
        numbers.append(sorted(call[0] for call in server.calls))
    # worker i sends numbers i, i + 2, ...: a request's row of data is one process's
    assert numbers == [[0, 2, 4, 6, 8, 10], [1, 3, 5, 7, 9]]
