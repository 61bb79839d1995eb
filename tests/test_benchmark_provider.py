"""The provider model (`pyattacker.world`): the weather is a function of time, the dice are
a function of the request's ordinal, and what the client sees is what a vendor SDK raises.

Every test builds a small world by hand and drives `ProviderModel` directly (no loop, no
harness) except the one that checks the harness counts error classes the way
`error_class_of` does.
"""

from __future__ import annotations

import dataclasses
import math
import pickle
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyattacker.benchmark import SCENARIOS, Harness
from pyattacker.benchmark import _harness as harness_module
from pyattacker.errors import ConfigError, error_class_of, retry_after_of
from pyattacker.world import (
    DRAWS_PER_REQUEST,
    CacheProfile,
    Degradation,
    EndpointProfile,
    FailureProfile,
    LatencyProfile,
    LoadCycle,
    Outage,
    ProviderError,
    ProviderModel,
    RateLimitProfile,
    Scenario,
    Verdict,
)

FLAT = LoadCycle(period_s=100.0, trough=1.0, peak=1.0)
CALM = FailureProfile(error_rate=0.0, storm_rate=0.0)
ONE_SECOND = LatencyProfile(median_s=1.0, sigma=0.0, tail_rate=0.0)


def _world(*endpoints: EndpointProfile, **changes: object) -> Scenario:
    fields: dict[str, object] = {"cycle": FLAT}
    fields.update(changes)
    return Scenario(name="hand-built", endpoints=endpoints, **fields)  # type: ignore[arg-type]


def _reference_draws(seed: int, endpoint: str, count: int) -> list[tuple[float, ...]]:
    """Ordinal n's dice as the model documents them: draws [5n, 5n+5) of one stream."""
    draw = random.Random(f"{seed}:{endpoint}").random
    return [tuple(draw() for _ in range(DRAWS_PER_REQUEST)) for _ in range(count)]


# ------------------------------------------------------------------- the weather: storms

STORMY = FailureProfile(error_rate=0.0, storm_rate=0.4, storm_duration_s=10.0)
STORM_WORLD = _world(
    EndpointProfile(id="a", capacity=1000, latency=ONE_SECOND, failures=STORMY),
    EndpointProfile(id="b", capacity=1000, latency=ONE_SECOND, failures=STORMY),
)
PROBES = [i * 2.5 for i in range(121)]  # 0 .. 300 s, four probes per storm window


def _drive(model: ProviderModel, schedule: list[tuple[str, float]]) -> None:
    for endpoint, t in schedule:
        model.admit(endpoint, t)
        model.finish(endpoint)


schedules = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.floats(0.0, 300.0, allow_nan=False)),
    max_size=60,
).map(lambda events: sorted(events, key=lambda e: e[1]))


@settings(max_examples=60)
@given(first=schedules, second=schedules, seed=st.integers(0, 2**31))
def test_storm_state_does_not_depend_on_request_cadence(
    first: list[tuple[str, float]], second: list[tuple[str, float]], seed: int
) -> None:
    """Two models of the same seed, driven by different traffic (and a third driven by
    none, asked in reverse time order), agree on the storm at every probed instant."""
    busy, other, idle = (ProviderModel(STORM_WORLD, seed) for _ in range(3))
    _drive(busy, first)
    _drive(other, second)
    for endpoint in ("a", "b"):
        expected = [idle.storm_until(endpoint, t) for t in reversed(PROBES)][::-1]
        assert [busy.storm_until(endpoint, t) for t in PROBES] == expected
        assert [other.storm_until(endpoint, t) for t in PROBES] == expected


def test_storm_probes_see_both_weathers_so_the_cadence_check_is_not_vacuous() -> None:
    model = ProviderModel(STORM_WORLD, 7)
    seen = {model.storm_until("a", t) is None for t in PROBES}
    assert seen == {True, False}


def test_a_storm_marks_the_failures_of_requests_admitted_inside_it() -> None:
    world = _world(
        EndpointProfile(
            id="a",
            capacity=1000,
            latency=ONE_SECOND,
            failures=FailureProfile(
                error_rate=1.0, storm_rate=0.4, storm_duration_s=10.0, storm_error_rate=1.0
            ),
        )
    )
    model = ProviderModel(world, 11)
    marked = set()
    for t in PROBES:
        verdict = model.admit("a", t)
        model.finish("a")
        assert verdict.failure is not None
        stormy = model.storm_until("a", t) is not None
        assert ("(storm)" in verdict.reason) == stormy
        marked.add(stormy)
    assert marked == {True, False}


def test_the_storm_interval_is_anchored_to_its_window() -> None:
    """A storm covers its whole window [w·D, (w+1)·D) and ends at the window's end, however
    late in the window it is first asked about; the window is a storm exactly when
    ``Random(f"{seed}:{endpoint}:storm:{w}")`` rolls below ``storm_rate``."""
    duration = STORMY.storm_duration_s
    seed = 20260917
    for asked_first in ("start", "middle", "end"):
        model = ProviderModel(STORM_WORLD, seed)
        stormy_windows = 0
        for w in range(60):
            start, end = w * duration, (w + 1) * duration
            inside = {"start": start, "middle": start + duration / 2, "end": end - 1e-6}
            order = [asked_first, *(k for k in inside if k != asked_first)]
            roll = random.Random(f"{seed}:a:storm:{w}").random()
            expected = end if roll < STORMY.storm_rate else None
            for key in order:
                assert model.storm_until("a", inside[key]) == expected, (w, key)
            stormy_windows += expected is not None
        assert 0 < stormy_windows < 60


def test_storm_rates_of_zero_and_one_mean_never_and_always() -> None:
    never = FailureProfile(storm_rate=0.0, storm_duration_s=30.0)
    always = FailureProfile(storm_rate=1.0, storm_duration_s=30.0)
    model = ProviderModel(
        _world(
            EndpointProfile(id="calm", failures=never), EndpointProfile(id="dead", failures=always)
        ),
        3,
    )
    for t in PROBES:
        assert model.storm_until("calm", t) is None
        assert model.storm_until("dead", t) == (math.floor(t / 30.0) + 1) * 30.0


# ------------------------------------------------------------- common random numbers

CRN_WORLD = _world(
    EndpointProfile(
        id="x",
        capacity=3,
        failures=FailureProfile(error_rate=0.2, storm_rate=0.3, storm_duration_s=5.0),
        rate_limit=RateLimitProfile(per_window=60.0, window_s=60.0, burst=4.0),
    ),
    EndpointProfile(id="y", capacity=2, failures=FailureProfile(error_rate=0.1)),
)

traffic = st.lists(
    st.tuples(st.sampled_from(["x", "y"]), st.floats(0.0, 5.0), st.booleans()), max_size=50
)


def _play(model: ProviderModel, events: list[tuple[str, float, bool]]) -> dict:
    """Send ``events`` (endpoint, gap, finish?) at increasing times; a request that is not
    finished keeps its unit of capacity, so later ones are refused (429) instead."""
    seen: dict[tuple[str, int], tuple[float, ...]] = {}
    now = 0.0
    for endpoint, gap, finish in events:
        now += gap
        verdict = model.admit(endpoint, now, key=now)
        assert (endpoint, verdict.ordinal) not in seen
        seen[(endpoint, verdict.ordinal)] = verdict.draws
        if finish and not verdict.refused:
            model.finish(endpoint)
    return seen


@settings(max_examples=80)
@given(first=traffic, second=traffic, seed=st.integers(0, 2**31))
def test_each_request_sees_the_world_by_its_ordinal_whatever_the_timing(
    first: list[tuple[str, float, bool]], second: list[tuple[str, float, bool]], seed: int
) -> None:
    """Whatever the timing, order and outcome (admitted, refused, failed), request ordinal
    n at an endpoint rolls draws [5n, 5n+5) of that endpoint's stream: the same dice in
    any two runs that reach it."""
    a = _play(ProviderModel(CRN_WORLD, seed), first)
    b = _play(ProviderModel(CRN_WORLD, seed), second)
    for endpoint in ("x", "y"):
        count = max([n + 1 for (e, n) in (*a, *b) if e == endpoint], default=0)
        reference = _reference_draws(seed, endpoint, count)
        for run in (a, b):
            ordinals = sorted(n for (e, n) in run if e == endpoint)
            assert ordinals == list(range(len(ordinals)))  # refusals count too
            for n in ordinals:
                assert run[(endpoint, n)] == reference[n]


def test_ordinals_are_counted_per_endpoint_and_refusals_consume_their_dice() -> None:
    model = ProviderModel(CRN_WORLD, 5)
    verdicts = [model.admit("y", 0.0) for _ in range(4)]  # capacity 2, nothing finishes
    assert [v.refused for v in verdicts] == [False, False, True, True]
    assert [v.ordinal for v in verdicts] == [0, 1, 2, 3]
    assert [v.draws for v in verdicts] == _reference_draws(5, "y", 4)
    assert model.admit("x", 0.0).ordinal == 0
    assert model.requests_at("y") == 4
    assert model.requests_at("x") == 1


# -------------------------------------------------------- what the client is shown


def _refused(seconds: float) -> Verdict:
    return Verdict("e", 0, True, seconds, None, "over capacity", 0.0, False, (0.0,) * 5)


def test_failures_look_like_provider_errors_the_framework_can_classify() -> None:
    world = _world(
        EndpointProfile(
            id="broken",
            capacity=1000,
            latency=ONE_SECOND,
            failures=FailureProfile(error_rate=1.0, storm_rate=0.0),
        ),
        EndpointProfile(
            id="limited",
            capacity=1000,
            failures=CALM,
            rate_limit=RateLimitProfile(burst=1.0, retry_after_s=None),
        ),
        EndpointProfile(id="tiny", capacity=1, failures=CALM),
        EndpointProfile(id="down", capacity=5, failures=CALM),
        outages=(Outage(start_s=0.0, duration_s=10.0, endpoints=("down",)),),
        busy_retry_after_s=0.75,
    )
    model = ProviderModel(world, 1)
    kinds: Counter[str] = Counter()
    for i in range(300):
        verdict = model.admit("broken", float(i))
        model.finish("broken")
        error = verdict.error()
        assert verdict.failure is not None
        assert error is not None
        assert error_class_of(error) == verdict.failure
        kinds[verdict.failure] += 1
        if verdict.failure == "upstream":
            assert isinstance(error, ProviderError)
            assert error.status_code == 503
        elif verdict.failure == "connection":
            assert isinstance(error, ConnectionError)
        else:
            assert isinstance(error, TimeoutError)
    assert set(kinds) == {"upstream", "connection", "timeout"}

    # 429s: over capacity (busy_retry_after_s) and an empty bucket (when the next token is due)
    assert model.admit("tiny", 0.0).error() is None
    busy = model.admit("tiny", 0.0)
    assert model.admit("limited", 0.0).error() is None
    empty = model.admit("limited", 0.0)
    for verdict, seconds in ((busy, 0.75), (empty, None)):
        assert verdict.refused
        error = verdict.error()
        assert isinstance(error, ProviderError)
        assert error.status_code == 429
        assert error_class_of(error) == "rate_limit"
        assert retry_after_of(error) == verdict.seconds
        if seconds is not None:
            assert verdict.seconds == seconds
        assert float(error.headers["retry-after"]) == pytest.approx(verdict.seconds, abs=1e-3)
    assert empty.seconds > 0

    # an outage fails fast with a connection error; a success is no error at all
    outage = model.admit("down", 1.0)
    assert not outage.refused
    assert outage.failure == "connection"
    assert error_class_of(outage.error()) == "connection"
    assert outage.seconds == Outage(start_s=0.0, duration_s=1.0).fail_after_s
    fine = model.admit("down", 10.0)
    assert fine.failure is None
    assert fine.error() is None


def test_a_verdict_shaped_by_hand_classifies_by_its_retry_after() -> None:
    error = _refused(2.5).error()
    assert error_class_of(error) == "rate_limit"
    assert retry_after_of(error) == 2.5


def test_the_harness_counts_the_classes_error_class_of_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every verdict the harness's provider hands out is recorded; the error classes the
    run reports are exactly ``error_class_of`` of the exceptions those verdicts raise."""
    verdicts: list[Verdict] = []

    class Recording(ProviderModel):
        def admit(self, endpoint_id: str, now: float, key: object = None) -> Verdict:
            verdict = super().admit(endpoint_id, now, key)
            verdicts.append(verdict)
            return verdict

    monkeypatch.setattr(harness_module, "ProviderModel", Recording)
    scenario = SCENARIOS["bursty_provider"].with_overrides(jobs=150, horizon_s=30.0)
    result = Harness(scenario, "wait", seed=4).run()
    expected = Counter(
        str(error_class_of(error)) for v in verdicts if (error := v.error()) is not None
    )
    assert dict(result.error_classes) == dict(expected)
    assert {"rate_limit", "upstream"} <= set(expected)  # both paths exercised
    assert sum(expected.values()) < len(verdicts) == result.metrics["requests"]


def test_provider_error_pickles() -> None:
    for original in (
        ProviderError(429, "rate limit exceeded", retry_after=1.5),
        ProviderError(503, "fast-flaky: service unavailable (storm)"),
    ):
        copy = pickle.loads(pickle.dumps(original))
        assert type(copy) is ProviderError
        assert str(copy) == str(original)
        assert copy.status_code == original.status_code
        assert copy.retry_after == original.retry_after
        assert copy.headers == original.headers
        assert error_class_of(copy) == error_class_of(original)


# --------------------------------------------------------------------- capacity


def _factor(cycle: LoadCycle, t: float) -> float:
    swing = (cycle.peak - cycle.trough) / 2
    return cycle.trough + swing * (1 - math.cos(2 * math.pi * (t / cycle.period_s + cycle.phase)))


def test_capacity_follows_the_cycle_from_trough_to_peak() -> None:
    cycle = LoadCycle(period_s=100.0, trough=0.3, peak=1.0)
    model = ProviderModel(_world(EndpointProfile(id="e", capacity=10), cycle=cycle), seed=0)
    assert model.capacity_at("e", 0.0) == 3  # the trough at t = 0
    assert model.capacity_at("e", 50.0) == 10  # the peak half a period later
    assert model.capacity_at("e", 100.0) == 3  # and the trough again
    series = [model.capacity_at("e", t) for t in range(51)]
    assert series == sorted(series)  # rising from trough to peak


@given(
    capacity=st.integers(1, 50),
    weight=st.floats(0.1, 3.0),
    trough=st.floats(0.01, 1.0),
    rise=st.floats(0.0, 1.5),
    period=st.floats(1.0, 500.0),
    phase=st.floats(0.0, 0.999),
    t=st.floats(0.0, 5_000.0),
)
def test_capacity_is_the_rounded_cycle_and_never_below_one(
    capacity: int, weight: float, trough: float, rise: float, period: float, phase: float, t: float
) -> None:
    cycle = LoadCycle(period_s=period, trough=trough, peak=trough + rise, phase=phase)
    model = ProviderModel(
        _world(EndpointProfile(id="e", capacity=capacity, weight=weight), cycle=cycle), seed=0
    )
    exact = capacity * weight * _factor(cycle, t)
    got = model.capacity_at("e", t)
    assert isinstance(got, int)
    assert got >= 1
    assert abs(got - max(1.0, exact)) <= 0.5 + 1e-9


def test_a_tiny_capacity_rounds_up_to_one_and_an_outage_to_zero() -> None:
    world = _world(
        EndpointProfile(id="small", capacity=1, weight=0.2),
        EndpointProfile(id="big", capacity=8),
        outages=(Outage(start_s=10.0, duration_s=5.0, every_s=60.0, endpoints=("big",)),),
    )
    model = ProviderModel(world, seed=0)
    assert model.capacity_at("small", 0.0) == 1  # round(0.2) == 0, but max(1, ...)
    assert [model.capacity_at("big", t) for t in (9.99, 10.0, 14.99, 15.0, 70.0, 75.0)] == [
        8,
        0,
        0,
        8,
        0,
        8,
    ]
    assert model.capacity_at("small", 12.0) == 1  # the outage names only "big"
    assert model.capacity_at("big", 12.0) == 0  # down: nothing, not the floor of one


def test_an_outage_without_endpoints_covers_them_all() -> None:
    world = _world(
        EndpointProfile(id="a"),
        EndpointProfile(id="b"),
        outages=(Outage(start_s=5.0, duration_s=1.0),),
    )
    model = ProviderModel(world, seed=0)
    assert [model.capacity_at(e, 5.5) for e in ("a", "b")] == [0, 0]
    assert [model.capacity_at(e, 6.0) for e in ("a", "b")] == [8, 8]


def test_an_endpoint_comes_back_from_an_outage_cold() -> None:
    """Its capacity climbs linearly from nothing over ``warmup_s`` after every outage
    (never below one), and its token bucket restarts empty."""
    world = _world(
        EndpointProfile(id="big", capacity=10, failures=CALM),
        outages=(Outage(start_s=10.0, duration_s=5.0, every_s=60.0, warmup_s=10.0),),
    )
    model = ProviderModel(world, seed=0)
    assert [model.capacity_at("big", t) for t in (9.0, 12.0, 15.0, 20.0, 25.0, 40.0)] == [
        10, 0, 1, 5, 10, 10,
    ]  # fmt: skip
    assert [model.capacity_at("big", t) for t in (72.0, 80.0, 85.0)] == [0, 5, 10]

    limit = RateLimitProfile(per_window=60.0, window_s=60.0, burst=5.0, retry_after_s=None)
    endpoint = EndpointProfile(id="e", capacity=100, failures=CALM, rate_limit=limit)
    outage = Outage(start_s=10.0, duration_s=5.0)
    cold = ProviderModel(_world(endpoint, outages=(outage,)), seed=0)
    warm = ProviderModel(_world(endpoint), seed=0)
    assert not _send_to(cold, "e", 1.0).refused  # the bucket was full before the outage
    assert not _send_to(warm, "e", 1.0).refused
    back = _send_to(cold, "e", 15.0)
    assert back.refused
    assert back.reason == "rate limit exceeded"
    assert not _send_to(warm, "e", 15.0).refused  # the same request without the outage
    assert not _send_to(cold, "e", 17.5).refused  # tokens come back at the usual rate


# ------------------------------------------------------------------ the token bucket

BUCKET = RateLimitProfile(
    per_window=60.0,  # one token per second at full allowance
    window_s=60.0,
    burst=3.0,
    tightening=0.5,
    tightening_floor=0.25,
    recovery_per_window=3.0,  # +0.05 allowance per second
    retry_after_s=None,  # the 429 says when the next token is due: it shows the allowance
)


def _bucket_model(limit: RateLimitProfile = BUCKET) -> ProviderModel:
    endpoint = EndpointProfile(id="e", capacity=1000, failures=CALM, rate_limit=limit)
    return ProviderModel(_world(endpoint), seed=0)


def _send(model: ProviderModel, t: float) -> Verdict:
    verdict = model.admit("e", t)
    if not verdict.refused:
        model.finish("e")
    return verdict


def test_the_bucket_refuses_when_empty_and_tightens_down_to_its_floor() -> None:
    model = _bucket_model()
    assert [_send(model, 0.0).refused for _ in range(3)] == [False, False, False]  # the burst
    refusals = [_send(model, 0.0) for _ in range(4)]
    assert all(v.refused and v.reason == "rate limit exceeded" for v in refusals)
    # the next token is 1 token / (1 token/s x allowance): allowance 0.5, 0.25, then the floor
    assert [v.seconds for v in refusals] == [2.0, 4.0, 4.0, 4.0]


def test_a_tightened_bucket_refills_slower_until_it_recovers() -> None:
    model = _bucket_model(
        RateLimitProfile(
            per_window=60.0,
            window_s=60.0,
            burst=3.0,
            tightening=0.5,
            tightening_floor=0.25,
            recovery_per_window=0.0,
            retry_after_s=None,
        )
    )
    for _ in range(3):
        _send(model, 0.0)
    for _ in range(3):
        assert _send(model, 0.0).refused  # allowance now at the floor, 0.25
    # at a quarter of the rate, two seconds buy half a token, four seconds a whole one
    half = _send(model, 2.0)
    assert half.refused
    assert half.seconds == 2.0
    assert not _send(model, 4.0).refused


def test_the_bucket_recovers_with_time() -> None:
    model = _bucket_model()
    for _ in range(3):
        _send(model, 0.0)
    for _ in range(3):
        assert _send(model, 0.0).refused
    # 60 s later: allowance back to 1 (0.25 + 3 x 60/60, capped) and the burst refilled
    assert [_send(model, 60.0).refused for _ in range(3)] == [False, False, False]
    again = _send(model, 60.0)
    assert again.refused
    assert again.seconds == 2.0


def test_a_refusal_carries_the_configured_retry_after() -> None:
    model = _bucket_model(RateLimitProfile(burst=1.0, retry_after_s=1.5))
    assert not _send(model, 0.0).refused
    assert _send(model, 0.0).seconds == 1.5


def test_a_full_endpoint_refuses_and_tightens_its_bucket_too() -> None:
    endpoint = EndpointProfile(id="e", capacity=1, failures=CALM, rate_limit=BUCKET)
    model = ProviderModel(_world(endpoint, busy_retry_after_s=0.5), seed=0)
    first = model.admit("e", 0.0)  # holds the only unit
    busy = model.admit("e", 0.0)
    assert not first.refused
    assert busy.refused
    assert busy.reason == "over capacity"
    assert busy.seconds == 0.5
    model.finish("e")
    assert not _send(model, 0.0).refused
    assert not _send(model, 0.0).refused  # burst 3 - 3 admitted: empty now
    assert _send(model, 0.0).seconds == 4.0  # allowance was halved by the busy refusal


# ------------------------------------------------------------------------- the cache

CACHE = CacheProfile(hit_latency_factor=0.25, hit_cost_factor=0.5, ttl_s=10.0, entries=2)


def _cache_model() -> ProviderModel:
    endpoints = [
        EndpointProfile(id=name, capacity=100, latency=ONE_SECOND, failures=CALM, cache=CACHE)
        for name in ("a", "b")
    ]
    return ProviderModel(_world(*endpoints, tokens_per_call=2.0), seed=0)


def _ask(model: ProviderModel, endpoint: str, t: float, key: object) -> Verdict:
    verdict = model.admit(endpoint, t, key=key)
    model.finish(endpoint)
    return verdict


def test_a_cache_hits_only_where_the_key_was_served_within_its_ttl() -> None:
    model = _cache_model()
    miss = _ask(model, "a", 0.0, "job-1")
    assert (miss.cache_hit, miss.seconds, miss.cost) == (False, 1.0, 2.0)
    hit = _ask(model, "a", 5.0, "job-1")
    assert (hit.cache_hit, hit.seconds, hit.cost) == (True, 0.25, 1.0)
    assert not _ask(model, "b", 5.0, "job-1").cache_hit  # another endpoint never served it
    assert _ask(model, "a", 15.0, "job-1").cache_hit  # 10 s after the last serve: within ttl
    assert not _ask(model, "a", 25.5, "job-1").cache_hit  # 10.5 s: expired
    assert not _ask(model, "a", 26.0, "job-2").cache_hit  # another key
    assert not _ask(model, "a", 26.0, None).cache_hit  # no key, no cache
    assert not _ask(model, "a", 26.0, None).cache_hit


def test_a_cache_forgets_its_oldest_key_beyond_its_entries() -> None:
    model = _cache_model()
    for key in ("k1", "k2", "k3"):  # entries=2: k1 is evicted by k3
        _ask(model, "a", 0.0, key)
    assert not _ask(model, "a", 1.0, "k1").cache_hit
    assert _ask(model, "a", 1.0, "k3").cache_hit


def test_a_world_without_a_cache_never_hits() -> None:
    endpoint = EndpointProfile(id="a", capacity=10, latency=ONE_SECOND, failures=CALM)
    model = ProviderModel(_world(endpoint), seed=0)
    assert not any(_ask(model, "a", float(t), "same").cache_hit for t in range(5))


# ------------------------------------------------------------------------ degradation


@given(
    start=st.floats(0.0, 1_000.0),
    length=st.floats(0.01, 1_000.0),
    t=st.floats(0.0, 3_000.0),
)
def test_degradation_progress_ramps_linearly(start: float, length: float, t: float) -> None:
    ramp = Degradation(start_s=start, end_s=start + length)
    expected = min(1.0, max(0.0, (t - ramp.start_s) / (ramp.end_s - ramp.start_s)))
    assert ramp.progress(t) == pytest.approx(expected, abs=1e-9)
    assert 0.0 <= ramp.progress(t) <= 1.0


def test_a_degrading_endpoint_loses_capacity_and_gains_errors_along_the_ramp() -> None:
    ramp = Degradation(start_s=100.0, end_s=200.0, capacity_factor=0.2, error_rate=0.8)
    endpoint = EndpointProfile(
        id="e", capacity=20, latency=ONE_SECOND, failures=CALM, degradation=ramp
    )
    model = ProviderModel(_world(endpoint), seed=9)
    assert [model.capacity_at("e", t) for t in (0.0, 100.0, 150.0, 200.0, 500.0)] == [
        20,
        20,
        12,
        4,
        4,  # 20 x (1 - 0.8 x progress)
    ]
    failures_by_phase: dict[str, int] = Counter()
    for i in range(600):
        t = i * 0.5  # 0 .. 300 s
        verdict = _send_to(model, "e", t)
        error_rate = 0.8 * ramp.progress(t)
        assert (verdict.failure is not None) == (verdict.draws[3] < error_rate), t
        phase = "before" if t <= 100 else "ramp" if t < 200 else "after"
        failures_by_phase[phase] += verdict.failure is not None
    assert failures_by_phase["before"] == 0
    assert 0 < failures_by_phase["ramp"] < failures_by_phase["after"]


def _send_to(model: ProviderModel, endpoint: str, t: float) -> Verdict:
    verdict = model.admit(endpoint, t)
    if not verdict.refused:
        model.finish(endpoint)
    return verdict


def test_a_request_an_outage_turns_away_holds_no_capacity_after_it() -> None:
    """Turned away at 14.9 s by an outage that ends at 15 s, two requests must not count
    against the endpoint's two slots at 15.1 s: they were never served."""
    world = Scenario(
        name="brief-outage",
        cycle=LoadCycle(trough=1.0, peak=1.0),
        endpoints=(
            EndpointProfile(
                id="e", capacity=2, failures=FailureProfile(error_rate=0.0, storm_rate=0.0)
            ),
        ),
        outages=(Outage(start_s=10.0, duration_s=5.0),),
    )
    model = ProviderModel(world, 1)
    turned_away = [model.admit("e", 14.9), model.admit("e", 14.9)]
    assert [v.served for v in turned_away] == [False, False]
    assert [v.failure for v in turned_away] == ["connection", "connection"]
    after = model.admit("e", 15.1)
    assert not after.refused
    assert after.served


def test_endpoints_of_one_rate_group_share_one_bucket() -> None:
    """Two keys of one account: what one spends, the other no longer has."""
    limit = RateLimitProfile(per_window=60.0, burst=2.0, retry_after_s=1.0)
    world = Scenario(
        name="one-account",
        cycle=LoadCycle(trough=1.0, peak=1.0),
        endpoints=tuple(
            EndpointProfile(
                id=key,
                capacity=8,
                failures=FailureProfile(error_rate=0.0, storm_rate=0.0),
                rate_limit=limit,
                rate_group="account",
            )
            for key in ("key-1", "key-2")
        ),
    )
    shared = ProviderModel(world, 1)
    assert not shared.admit("key-1", 0.0).refused
    assert not shared.admit("key-1", 0.0).refused  # the burst of 2 is spent ...
    refused = shared.admit("key-2", 0.0)  # ... for the other key too
    assert refused.refused
    assert refused.reason == "rate limit exceeded"
    separate = ProviderModel(
        world.with_overrides(
            endpoints=tuple(dataclasses.replace(e, rate_group=None) for e in world.endpoints)
        ),
        1,
    )
    separate.admit("key-1", 0.0)
    separate.admit("key-1", 0.0)
    assert not separate.admit("key-2", 0.0).refused  # without the group: its own bucket


def test_a_rate_group_must_describe_one_bucket() -> None:
    with pytest.raises(ConfigError) as caught:
        Scenario(
            name="mismatch",
            endpoints=(
                EndpointProfile(
                    id="a", rate_limit=RateLimitProfile(per_window=60.0), rate_group="g"
                ),
                EndpointProfile(
                    id="b", rate_limit=RateLimitProfile(per_window=90.0), rate_group="g"
                ),
            ),
        )
    assert caught.value.field == "endpoints[1].rate_limit"
