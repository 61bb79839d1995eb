"""``--warmup``: the first requests are sent and counted apart, and no figure includes
them (virtual time: every boundary is exact)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyattacker.attack import (
    AttackPlan,
    AttackResult,
    ClosedModel,
    Engine,
    OpenModel,
    Warmup,
    WorkerOutcome,
    merge_outcomes,
    worker_plan,
)
from pyattacker.attack._warmup import WarmupTally
from pyattacker.attack._workers import arrival_run
from pyattacker.errors import ConfigError
from pyattacker.measure import Attempt, Outcome, RequestRecord
from pyattacker.report import Gate
from pyattacker.testing import run_virtual
from test_attack_engine import A, B, FakeServer, attack


def test_requests_scheduled_in_the_warmup_span_are_sent_but_left_out_of_every_figure() -> None:
    # 10/s for 3 s, warmup 1 s: arrivals at 0.0 .. 0.9 are the warmup's (10 of them).
    server = FakeServer(latency=lambda n, t: 0.5 if n < 10 else 0.05)
    plan = AttackPlan.build([A], OpenModel(rate=10), duration=3.0, warmup=Warmup(seconds=1.0))
    result, records = attack(plan, server)
    assert len(server.calls) == 30  # every request was sent
    assert [r.request for r in records] == list(range(10, 30))  # on_record sees no warmup
    assert result.scheduled == result.sent == result.total.requests == 20
    assert result.total.latency.max == pytest.approx(0.05)  # the slow warmup is not in it
    assert result.schedule_s == pytest.approx(2.0)
    assert result.achieved_rate == pytest.approx(10.0)
    assert result.planned == pytest.approx(20.0)
    assert sum(w.completed for w in result.windows) == 20
    assert result.warmup is not None
    assert (result.warmup.scheduled, result.warmup.sent, result.warmup.sent_attempts) == (
        10,
        10,
        10,
    )
    assert result.warmup.outcomes == {"ok": 10}
    report = result.to_dict()
    assert report["warmup"]["sent_attempts"] + report["total"]["sent_attempts"] == 30
    assert report["plan"]["warmup"] == {"seconds": 1.0, "requests": None}


def test_the_warmup_boundary_is_the_scheduled_time_not_the_end() -> None:
    # the arrival at exactly 1.0 s is measured; the one at 0.9 s (ending at 1.4 s) is not
    server = FakeServer(latency=lambda n, t: 0.5)
    plan = AttackPlan.build([A], OpenModel(rate=10), duration=2.0, warmup=Warmup(seconds=1.0))
    result, records = attack(plan, server)
    assert records[0].request == 10
    assert records[0].scheduled == pytest.approx(1.0)
    assert result.warmup is not None
    assert result.warmup.requests == 10


def test_a_warmup_of_n_requests_leaves_out_exactly_the_first_n_arrivals() -> None:
    server = FakeServer()
    plan = AttackPlan.build([A], OpenModel(rate=20), requests=50, warmup=Warmup(requests=10))
    result, records = attack(plan, server)
    assert len(server.calls) == 50
    assert [r.request for r in records] == list(range(10, 50))
    assert result.scheduled == result.total.requests == 40
    assert result.schedule_s == pytest.approx(2.0)  # 40 arrivals at 20/s, from 0.5 s
    assert result.achieved_rate == pytest.approx(20.0)
    assert result.warmup is not None
    assert result.warmup.skipped_s == pytest.approx(0.5)


def test_failed_and_retried_warmup_requests_still_count_every_attempt_sent() -> None:
    server = FakeServer(status=lambda n, attempt: 503 if n < 3 else 200)
    plan = AttackPlan.build(
        [A], OpenModel(rate=10), requests=10, warmup=Warmup(requests=5),
        retry={"max_attempts": 2, "base": 0.01, "jitter": "none"},
    )  # fmt: skip
    result, _ = attack(plan, server)
    assert result.warmup is not None
    assert result.warmup.sent_attempts == 5 + 3  # requests 0..2 were tried twice
    assert result.warmup.outcomes == {"failed": 3, "ok": 2}
    assert result.total.by_outcome == {"ok": 5}
    assert result.errors == []  # the warmup's error messages are not quoted either
    assert result.warmup.sent_attempts + result.total.sent_attempts == len(server.calls)


def test_a_closed_model_warmup_and_several_targets_leave_out_the_same_requests() -> None:
    plan = AttackPlan.build(
        [A, B], ClosedModel(clients=2), duration=1.0, warmup=Warmup(seconds=0.5)
    )
    server = FakeServer(latency=lambda n, t: 0.1)
    result, records = attack(plan, server)
    assert all(r.scheduled >= 0.5 for r in records)
    assert result.warmup is not None
    assert result.warmup.requests == 10
    assert sum(s.requests for s in result.by_target.values()) == result.total.requests
    assert result.total.requests == len(records) == len(server.calls) - 10


def test_a_stop_during_the_warmup_reports_nothing_measured_and_what_was_sent() -> None:
    plan = AttackPlan.build([A], OpenModel(rate=10), duration=5.0, warmup=Warmup(seconds=2.0))
    server = FakeServer()
    result, records = attack(plan, server, stop_at=1.0)
    assert records == []
    assert result.total.requests == 0
    assert result.warmup is not None
    assert result.warmup.sent_attempts == len(server.calls) == 10
    assert result.schedule_s == 0.0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"duration": 1.0, "warmup": Warmup(seconds=1.0)}, "leaves nothing"),
        ({"requests": 5, "warmup": Warmup(requests=5)}, "leaves nothing"),
    ],
)
def test_a_warmup_that_leaves_nothing_to_measure_is_refused(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        AttackPlan.build([A], OpenModel(rate=10), **options)
    assert info.value.field == "warmup"


@pytest.mark.parametrize("arrival", ["constant", "poisson"])
def test_a_time_warmup_past_the_last_of_the_requests_is_refused(arrival: str) -> None:
    load = OpenModel(rate=10, arrival=arrival)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="leaves nothing of 10 requests") as info:
        AttackPlan.build([A], load, requests=10, warmup=Warmup(seconds=5.0))
    assert info.value.field == "warmup"


def test_a_time_warmup_within_the_requests_span_is_kept() -> None:
    # 10 requests at 10/s are scheduled at 0.0 ... 0.9 s: a 0.9 s warmup leaves the last.
    plan = AttackPlan.build([A], OpenModel(rate=10), requests=10, warmup=Warmup(seconds=0.9))
    assert plan.warmup == Warmup(seconds=0.9)
    with pytest.raises(ConfigError, match=r"the last is scheduled 0\.9 s after the start"):
        AttackPlan.build([A], OpenModel(rate=10), requests=10, warmup=Warmup(seconds=0.91))


@pytest.mark.parametrize("text", ["", "0", "0s", "-1", "ten", "1.5", "nan s"])
def test_a_warmup_that_is_neither_a_duration_nor_a_count_is_refused(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        Warmup.parse(text, field="--warmup")
    assert info.value.field == "--warmup"
    assert "bare number is seconds" not in str(info.value)  # a bare number is requests


@given(st.integers(min_value=1, max_value=10**9))
def test_a_whole_number_is_a_number_of_requests(n: int) -> None:
    assert Warmup.parse(str(n)) == Warmup(requests=n)


@given(st.integers(min_value=1, max_value=10**6))
def test_a_number_with_a_unit_is_a_span(ms: int) -> None:
    warmup = Warmup.parse(f"{ms}ms")
    assert warmup.requests is None
    assert warmup.seconds == pytest.approx(ms / 1000)


def test_thresholds_judge_the_measured_requests_only() -> None:
    # the first 5 requests fail (a cold server); every measured one is fast and OK
    server = FakeServer(
        latency=lambda n, t: 2.0 if n < 5 else 0.01, status=lambda n, a: 500 if n < 5 else 200
    )
    plan = AttackPlan.build([A], OpenModel(rate=10), requests=25, warmup=Warmup(requests=5))
    result, _ = attack(plan, server)
    gate = Gate.from_flags(
        ["error_rate < 1%", "p99(latency) < 50ms", "rate >= 9/s"], None, False, llm=False
    )
    assert [v.passed for v in gate.verdicts(result)] == [True, True, True]
    assert gate.exit_code(result, output_failed=False) == 0
    assert result.warmup is not None
    assert result.warmup.outcomes == {"failed": 5}


def _on_workers(plan: AttackPlan, n: int) -> tuple[AttackResult, list[int]]:
    """``plan`` on ``n`` workers (each an engine on virtual time from one start instant),
    merged; and the numbers of the requests measured (the ones ``on_record`` saw)."""
    records: list[RequestRecord] = []

    async def worker(index: int) -> WorkerOutcome:
        mine = worker_plan(plan, index, n)
        engine = Engine(mine, FakeServer(), on_record=records.append, part=(index, n),
                        run=arrival_run(plan, n), start_at=0.0)  # fmt: skip
        await engine.run()
        tally, times = engine.counted()
        return WorkerOutcome(index=index, tally=tally, times=times, decisions={},
                             stop_reason=None, loop_lag=None, cpu_s=0.0, final=True)  # fmt: skip

    outcomes = [run_virtual(worker(index), start=0.0) for index in range(n)]
    return merge_outcomes(plan, outcomes), sorted(r.request for r in records)


@pytest.mark.parametrize(
    "warmup", [Warmup(requests=7), Warmup(requests=1), Warmup(seconds=0.35)], ids=str
)
@pytest.mark.parametrize(
    "load",
    [
        OpenModel(rate=20, arrival="poisson"),
        OpenModel(rate=500, arrival="poisson"),  # in runs of 10 arrivals a worker
        ClosedModel(clients=4, think_time=0.03),
    ],
    ids=["open", "open-runs", "closed"],
)
@pytest.mark.parametrize("n", [2, 3])
def test_workers_set_apart_the_same_warmup_arrivals_as_one_process(
    warmup: Warmup, load: OpenModel | ClosedModel, n: int
) -> None:
    # enough connections that runs of Poisson arrivals at 500/s take 10, as many as come in
    # 20 ms (a quarter of a worker's connections bounds a run)
    connections = 128 if isinstance(load, OpenModel) and load.rate >= 500 else 4
    if connections == 128 and warmup.seconds is not None:
        warmup = Warmup(seconds=0.024)  # 30 arrivals take 60 ms: the first dozen or so
    plan = AttackPlan.build([A], load, requests=30, connections=connections, warmup=warmup,
                            seed=3)  # fmt: skip
    assert arrival_run(plan, n) == (10 if connections == 128 else 1)
    one, records = attack(plan, FakeServer())
    merged, measured = _on_workers(plan, n)
    # the same arrivals left out (a closed model's turns in the first span are numbered
    # by which client made them, and the clients are divided: there, the same count)
    if isinstance(load, OpenModel) or warmup.requests is not None:
        assert measured == [r.request for r in records]
    assert len(measured) == len(records)
    assert one.warmup is not None
    assert merged.warmup == one.warmup  # scheduled, sent, attempts, outcomes, skipped span
    assert merged.scheduled == one.scheduled == 30 - one.warmup.scheduled
    assert merged.total.requests == one.total.requests
    if isinstance(load, OpenModel):  # a closed model's turns depend on how clients are split
        assert merged.total.latency.to_dict() == one.total.latency.to_dict()
        assert (merged.schedule_s, merged.elapsed) == (one.schedule_s, one.elapsed)


@settings(max_examples=60, deadline=None)
@given(
    warm=st.integers(1, 40),
    n=st.integers(1, 4),
    plain=st.integers(0, 40),
    rest=st.integers(0, 30),
    run=st.integers(1, 6),
)
def test_a_warmup_of_n_split_by_arrival_index_sets_apart_what_one_tally_does(
    warm: int, n: int, plain: int, rest: int, run: int
) -> None:
    """Arrivals 0..plain-1 one by one, then the rest dropped in bulk (an overrun): each
    worker's tally sees its share (runs of ``run`` consecutive arrivals in turn), in
    order, and the merge equals one tally's count."""

    def tally(part: tuple[int, int]) -> WarmupTally:
        return WarmupTally(Warmup(requests=warm), origin=0.0, part=part, run=run, window=1.0,
                           late_after=0.01, per_target=False, on_record=None)  # fmt: skip

    whole, parts = tally((0, 1)), [tally((i, n)) for i in range(n)]
    for k in range(plain):
        for into in (whole, parts[(k // run) % n]):
            into.arrival(k / 10, 1)
            attempt = Attempt(k, 1, k / 10, sent=k / 10, end=k / 10 + 0.01, status=200)
            attempt.outcome = Outcome.OK
            into.finished([attempt])
    whole.dropped(plain / 10, rest, "dropped: the schedule overran")
    for i, part in enumerate(parts):
        mine = sum((k // run) % n == i for k in range(plain, plain + rest))
        part.dropped(plain / 10, mine, "dropped: the schedule overran")
    for part in parts[1:]:
        parts[0].merge(part)
    merged = parts[0]
    assert whole.warm_scheduled == min(warm, plain + rest)
    assert merged.warm_scheduled == whole.warm_scheduled
    assert merged.facts(0.0) == whole.facts(0.0)
    assert merged.scheduled == whole.scheduled
    assert merged.total.by_outcome == whole.total.by_outcome
