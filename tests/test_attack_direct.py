"""The engine's direct path records exactly what its task path records, over real sockets.

An open-model, one-attempt plan sent through the plain :class:`HttpSender` is written from
the scheduler on an idle keep-alive connection and finished from that connection's
callback (``DirectDispatcher.start`` -> ``HttpSender.start``), with no task. Each test checks
that path was really taken (a spy on ``HttpSender.start``) and, where the figures are
deterministic, compares them with the same plan forced onto the task path (a subclass of
``HttpSender``, which the engine never sends directly). Servers listen on 127.0.0.1 on a
port the OS picks; bounds come from the plan and the server, never from a stopwatch.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from direct_helpers import GUARD_S, NOTHING_IN_PROGRESS, PlanOf, Run, attack, open_plan
from http_helpers import LOOPS, closed_port, run
from llm_server_helpers import until
from pyattacker.attack import (
    AttackPlan,
    AttackResult,
    Engine,
    HttpSender,
    OpenModel,
    Target,
    Warmup,
)
from pyattacker.attack import attack as public_attack
from pyattacker.attack._send import DirectRequest
from pyattacker.errors import ConfigError
from pyattacker.http import HttpClient
from pyattacker.measure import Outcome, RequestRecord
from pyattacker.report import attack_text
from pyattacker.servers import EchoServer


@dataclass
class StartSpy:
    """What ``HttpSender.start`` did: sent a request directly, or declined (no idle
    connection at hand, so the engine fell back to a task)."""

    sent: int = 0
    declined: int = 0


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> StartSpy:
    calls = StartSpy()
    original = HttpSender.start

    def start(
        self: HttpSender, target: Target, request: DirectRequest
    ) -> Callable[[], None] | None:
        abandon = original(self, target, request)
        if abandon is None:
            calls.declined += 1
        else:
            calls.sent += 1
        return abandon

    monkeypatch.setattr(HttpSender, "start", start)
    return calls


def figures(result: AttackResult) -> dict[str, object]:
    """Every count the result holds that does not depend on how fast this machine is."""
    total, windows = result.total, result.windows
    window_counts = ("scheduled", "sent", "completed", "ok", "failed", "dropped", "cancelled")
    return {
        "scheduled": result.scheduled,
        "sent": result.sent,
        "requests": total.requests,
        "attempts": total.attempts,
        "sent_attempts": total.sent_attempts,
        "attempts_per_request": dict(total.attempts_per_request),
        "by_outcome": dict(total.by_outcome),
        "by_status": dict(total.by_status),
        "by_error_class": dict(total.by_error_class),
        "bytes": (total.bytes_sent, total.bytes_received),
        "counts": tuple(
            h.count
            for h in (
                *(total.latency, total.latency_ok, total.service_time, total.ttfb),
                *(total.dispatch_delay, total.attempt_service_time),
            )
        ),
        "windows": {name: sum(getattr(w, name) for w in windows) for name in window_counts},
        "window_latency": sum(w.latency.count for w in windows),
        "decisions": dict(result.decisions),
        "errors": [(group.key, group.count) for group in result.errors],
        "stop_reason": result.stop_reason,
    }


def both_paths(
    plan_of: PlanOf, spy: StartSpy, loop: str = "asyncio", records: bool = False, **echo: Any
) -> Run:
    """Run the plan directly and on tasks (a fresh server each, same seed); check they
    recorded the same figures and that the task path never sent directly."""

    async def main() -> tuple[Run, int, Run]:
        direct = await attack(plan_of, records=records, **echo)
        sent_directly = spy.sent
        tasks = await attack(plan_of, direct=False, records=records, **echo)
        return direct, sent_directly, tasks

    direct, sent_directly, tasks = run(main, loop)
    assert spy.sent == sent_directly  # the forced run never went direct
    assert figures(direct.result) == figures(tasks.result)
    assert direct.served["statuses"] == tasks.served["statuses"]
    return direct


@pytest.mark.parametrize("loop", LOOPS)
def test_direct_sends_record_the_same_counts_as_the_task_path(loop: str, spy: StartSpy) -> None:
    # A connection stands open for every request, so each finds one idle however the
    # arrivals bunch up on a busy machine: every one goes direct.
    direct = both_paths(open_plan(1000, 300, connections=300, preconnect=300), spy, loop)
    result = direct.result
    assert (spy.sent, spy.declined) == (300, 0)
    assert result.scheduled == result.sent == result.total.requests == 300
    assert result.total.by_outcome == {"ok": 300}
    assert result.total.by_status == {200: 300}
    assert result.total.bytes_received == 300 * 2  # the echo server's 2-byte payload
    assert direct.served["count"] == 300
    assert result.decisions == {}


def test_direct_status_failures_are_failed_with_status_class_and_retry_decision(
    spy: StartSpy,
) -> None:
    plan_of = open_plan(1000, 300, connections=300, preconnect=300)  # one idle per request
    direct = both_paths(plan_of, spy, fail={500: 0.2, 503: 0.1}, seed=7)
    total = direct.result.total
    statuses = direct.served["statuses"]
    failed = statuses.get("500", 0) + statuses.get("503", 0)
    assert (spy.sent, spy.declined) == (300, 0)
    # An error status keeps the connection: every preconnected one is still open, no
    # other was opened.
    assert (direct.client["open"], direct.client["created"]) == (300, 300)
    assert 0 < failed < 300
    assert total.by_outcome == {"ok": 300 - failed, "failed": failed}
    assert {str(k): v for k, v in total.by_status.items()} == statuses
    assert total.by_error_class == {"upstream": failed}  # 5xx: the server side failed
    assert direct.result.decisions == {"attempts_exhausted": failed}
    assert {group.count for group in direct.result.errors} <= {statuses["500"], statuses["503"]}
    assert total.latency.count == 300  # a failure is an answer: it has a latency


def test_a_refused_target_is_connection_errors_on_both_paths_not_a_crash(spy: StartSpy) -> None:
    port = closed_port()

    def plan_of(url: str) -> AttackPlan:
        return AttackPlan.build([f"http://127.0.0.1:{port}/"], OpenModel(rate=200), requests=20)

    direct = both_paths(plan_of, spy)
    result = direct.result
    # Every request was offered to the direct path, found no connection and fell back.
    assert (spy.sent, spy.declined) == (0, 20)
    assert (result.scheduled, result.sent, result.total.requests) == (20, 0, 20)
    assert result.total.by_outcome == {"failed": 20}
    assert result.total.by_error_class == {"connection": 20}
    assert result.decisions == {"attempts_exhausted": 20}
    assert direct.client["open"] == 0


def test_stop_abandons_direct_requests_as_cancelled_and_accounts_for_every_one(
    spy: StartSpy,
) -> None:
    # 400/s against a server answering in 20 ms until 50 are answered; then it stalls
    # (answers nothing for a minute): the requests on the wire, sent directly for the most
    # part, and the ones after them pile up; the stop comes once 40 wait for an answer.
    at_stop: list[int] = []

    async def stall_then_stop(engine: Engine, server: EchoServer) -> None:
        await until(lambda: engine.total.requests >= 50)
        server.stall(60.0)
        await until(lambda: engine.progress().in_flight >= 40)
        live, before = engine.statistics()["direct"], engine.total.requests
        engine.stop("test stop")
        at_stop.extend((live, engine.total.requests - before))

    async def main() -> Run:
        plan_of = open_plan(400, 4000)
        return await attack(plan_of, records=True, during=stall_then_stop, delay="fixed:20ms")

    done = run(main)
    result, total, engine = done.result, done.result.total, done.engine
    live, ended_by_stop = at_stop
    assert live > 0  # direct requests were in flight when the stop came...
    assert ended_by_stop >= live  # ...and were recorded as it returned, tasks a step later
    assert result.stop_reason == "test stop"
    assert result.scheduled == total.requests == len(done.records) < 4000
    assert total.by_outcome["ok"] >= 50
    assert total.by_outcome["ok"] + total.by_outcome["cancelled"] == total.requests
    assert total.by_outcome["cancelled"] >= 40
    # The server saw each sent request: answered, still held, or dropped with its connection.
    served = done.served
    assert result.sent == served["count"] + served["in_flight"] + served["dropped"]
    cancelled = [r for r in done.records if r.outcome is Outcome.CANCELLED]
    assert all(r.latency is None and r.error_class == "cancelled" for r in cancelled)
    # Nothing left behind: no task, no lease, no live request, no connection in use.
    assert engine.statistics() == NOTHING_IN_PROGRESS
    assert done.client["in_use"] == 0
    assert spy.sent > 0


def test_a_backlog_on_two_connections_is_sent_in_full_with_its_wait_recorded(
    spy: StartSpy,
) -> None:
    # Two connections, 20 ms answers: 100/s at most, against 200 arrivals a second.
    plan_of = open_plan(200, 100, connections=2)
    direct = both_paths(plan_of, spy, records=True, delay="fixed:20ms")
    result, total = direct.result, direct.result.total
    assert spy.sent >= 90  # all but the requests that opened the two connections
    assert result.scheduled == result.sent == total.requests == 100
    assert total.by_outcome == {"ok": 100}
    assert total.dispatch_delay.count == 100
    # The 100th arrival (t = 0.495 s) waits for 98 answers, two at a time, of >= 20 ms
    # each: it is sent at 0.98 s at the earliest.
    assert (total.dispatch_delay.max or 0.0) > 0.4
    assert result.late > 0
    assert direct.client["created"] == 2
    assert direct.served["count"] == 100
    # Never more than the two connections' worth in flight: on the client's clock, no
    # instant had three requests between sent and end (queued ones do count as in flight).
    events = sorted([(r.end, -1) for r in direct.records] + [(r.sent, +1) for r in direct.records])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert peak == 2
    assert max(w.max_in_flight for w in result.windows) > 2


@pytest.mark.parametrize("warmup", [Warmup(requests=30), Warmup(seconds=0.05)])
def test_a_warmup_sets_apart_the_same_direct_requests_as_on_the_task_path(
    warmup: Warmup, spy: StartSpy
) -> None:
    # Counted from their rows on the direct path, from their attempts on tasks.
    plan_of = open_plan(1000, 200, connections=200, preconnect=200, warmup=warmup)
    result = both_paths(plan_of, spy).result
    assert (spy.sent, spy.declined) == (200, 0)
    assert result.warmup is not None
    assert result.warmup.requests == 200 - result.total.requests > 0
    assert result.warmup.outcomes == {"ok": result.warmup.requests}
    assert result.total.by_outcome == {"ok": result.total.requests}


def test_every_direct_request_makes_one_record_with_its_attempt_filled_in(spy: StartSpy) -> None:
    async def main() -> Run:
        # one open connection per request: every request goes direct, on any machine
        return await attack(open_plan(1000, 200, connections=200, preconnect=200), records=True)

    done = run(main)
    records, target = done.records, done.engine.plan.resolved_targets()[0]
    assert [r.request for r in records] == list(range(200))
    assert (spy.sent, spy.declined) == (200, 0)
    for record in records:
        (attempt,) = record.attempts
        assert (attempt.outcome, attempt.status) == (Outcome.OK, 200)
        assert attempt.resource == target.id
        assert None not in (attempt.acquired, attempt.sent, attempt.first_byte, attempt.end)
        assert attempt.scheduled <= attempt.acquired <= attempt.sent  # type: ignore[operator]
        assert attempt.sent <= attempt.first_byte <= attempt.end  # type: ignore[operator]
        assert (attempt.bytes_sent, attempt.bytes_received) == (0, 2)
        assert (attempt.error, attempt.error_class) == (None, None)
    # The records add up to the result (what --samples would write is what was counted).
    assert sum(r.answered for r in records) == done.result.total.latency.count == 200


def test_feedback_reports_every_direct_answer_to_the_pool_as_the_task_path_does(
    spy: StartSpy,
) -> None:
    # Failures reported by lease.report(ok=False) are the pool's `failures`.
    failures: list[int] = []

    async def main() -> None:
        for direct in (True, False):
            done = await attack(
                open_plan(1000, 200, feedback=True, connections=200, preconnect=200),
                direct=direct,
                fail={500: 0.2},
                seed=3,
            )
            failures.append(done.engine.pool.statistics().failures)
            assert done.result.total.by_outcome["failed"] == failures[-1] > 0

    run(main)
    assert failures[0] == failures[1]
    assert (spy.sent, spy.declined) == (200, 0)  # one idle connection per request


def test_a_read_timeout_on_a_direct_request_is_a_timeout_failure(spy: StartSpy) -> None:
    from pyattacker.http import Timeouts

    # The server holds each request far beyond the read timeout: both paths time every
    # one out however late a busy machine runs their timers, and the server, whose
    # counts the two runs compare, answers none of them (the connections are gone).
    plan_of = open_plan(200, 30, timeouts=Timeouts(read=0.05))
    direct = both_paths(plan_of, spy, delay="fixed:2s")
    total = direct.result.total
    assert total.by_outcome == {"failed": 30}
    assert total.by_error_class == {"timeout": 30}
    assert direct.result.decisions == {"attempts_exhausted": 30}


def test_a_client_closed_mid_run_fails_the_rest_and_a_raising_on_record_kills_nothing(
    spy: StartSpy,
) -> None:
    # start() raises for a closed client; the failed attempt's record goes to an
    # on_record that raises: the run still ends with every request accounted for.
    def on_record(record: RequestRecord) -> None:
        if record.outcome is not Outcome.OK:
            raise OSError("disk full")

    async def close_client(engine: Engine, server: EchoServer) -> None:
        await until(lambda: engine.total.requests >= 50)
        sender = engine.sender
        assert isinstance(sender, HttpSender)
        await sender.client.aclose()

    async def main() -> Run:
        # one open connection per request, so every request before the close goes direct
        plan_of = open_plan(500, 300, connections=300, preconnect=300)
        return await attack(plan_of, on_record=on_record, during=close_client)

    done = run(main)
    total, engine = done.result.total, done.engine
    assert total.requests == done.result.scheduled == 300
    assert total.by_outcome["ok"] >= 50
    assert total.by_outcome["ok"] + total.by_outcome["failed"] == 300
    assert engine.statistics() == NOTHING_IN_PROGRESS
    assert spy.sent >= total.by_outcome["ok"]  # every answered request went direct


def test_preconnected_connections_carry_every_request_directly_from_the_first(
    spy: StartSpy,
) -> None:
    # One preconnected connection per request: however the arrivals bunch up on a busy
    # machine, every request finds one idle, so none can have to open one.
    async def main(preconnect: int) -> AttackResult:
        async with EchoServer() as server:
            plan = AttackPlan.build(
                [server.url + "/"], OpenModel(rate=500), requests=30, preconnect=preconnect
            )
            return await asyncio.wait_for(public_attack(plan), GUARD_S)

    cold = run(lambda: main(0))
    assert spy.declined >= 1  # the first request found no connection: it opened one
    declined, sent = spy.declined, spy.sent
    warm = run(lambda: main(30))
    # Thirty connections stood open before the first arrival: no request had to open one.
    assert (spy.declined - declined, spy.sent - sent) == (0, 30)
    assert warm.total.by_outcome == cold.total.by_outcome == {"ok": 30}
    assert warm.to_dict()["plan"]["preconnect"] == 30
    assert "30 connections per target opened first" in attack_text(warm).splitlines()[0]
    assert "opened first" not in attack_text(cold)


def test_preconnecting_to_a_refused_target_reports_connection_errors_not_a_crash() -> None:
    port = closed_port()
    plan = AttackPlan.build(
        [f"http://127.0.0.1:{port}/"], OpenModel(rate=200), requests=10, preconnect=3
    )
    result = run(lambda: asyncio.wait_for(public_attack(plan), GUARD_S))
    assert result.total.by_outcome == {"failed": 10}
    assert result.total.by_error_class == {"connection": 10}


@pytest.mark.parametrize(
    ("preconnect", "message"),
    [(-1, "preconnect"), (300, "more than the 256 connections"), (True, "preconnect")],
)
def test_a_preconnect_below_zero_or_above_the_connections_is_refused_naming_it(
    preconnect: Any, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        AttackPlan.build(
            ["http://127.0.0.1:9/"], OpenModel(rate=1), requests=1, preconnect=preconnect
        )
    assert caught.value.field == "preconnect"


def test_a_stop_while_preconnecting_ends_the_run_at_once_with_nothing_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def slow_preconnect(self: HttpClient, url: object, count: int) -> int:
        await asyncio.sleep(GUARD_S)  # a server that takes its time to accept
        return 0

    monkeypatch.setattr(HttpClient, "preconnect", slow_preconnect)
    progress: list[float] = []

    async def main() -> AttackResult:
        async with EchoServer() as server:
            plan = AttackPlan.build(
                [server.url + "/"], OpenModel(rate=100), duration=0.2, preconnect=2
            )
            loop = asyncio.get_running_loop()
            loop.call_later(0.05, os.kill, os.getpid(), signal.SIGINT)
            return await asyncio.wait_for(
                public_attack(
                    plan,
                    stop_on_signals=True,
                    on_progress=lambda p: progress.append(p.elapsed),
                    progress_every=0.01,
                ),
                GUARD_S / 2,  # the preconnect would take GUARD_S: the stop cut it short
            )

    result = run(main)
    assert result.stop_reason == "interrupted"
    assert (result.scheduled, result.sent, result.total.requests) == (0, 0, 0)
    assert progress == []  # no live view before the engine's clock started


def test_the_live_view_counts_elapsed_time_from_the_first_arrival_not_the_preconnect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = HttpClient.preconnect

    async def slow_preconnect(self: HttpClient, url: Any, count: int) -> int:
        await asyncio.sleep(0.2)
        return await original(self, url, count)

    monkeypatch.setattr(HttpClient, "preconnect", slow_preconnect)
    progress: list[float] = []

    async def main() -> AttackResult:
        async with EchoServer() as server:
            plan = AttackPlan.build(
                [server.url + "/"], OpenModel(rate=200), duration=0.3, preconnect=2
            )
            return await asyncio.wait_for(
                public_attack(
                    plan, on_progress=lambda p: progress.append(p.elapsed), progress_every=0.05
                ),
                GUARD_S,
            )

    result = run(main)
    assert result.total.by_outcome == {"ok": 60}
    assert progress, "the live view never ticked"
    # Seconds since the engine started: never the raw clock (hours of uptime) or negative.
    assert all(0.0 <= elapsed < GUARD_S for elapsed in progress), progress
