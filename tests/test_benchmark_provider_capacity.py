"""The provider model's capacity and limits: the load cycle, outages, the token bucket and
rate groups, the cache and degradation."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmark_helpers import CALM, ONE_SECOND, _world
from pyattacker.errors import ConfigError
from pyattacker.world import (
    CacheProfile,
    Degradation,
    EndpointProfile,
    FailureProfile,
    LoadCycle,
    Outage,
    ProviderModel,
    RateLimitProfile,
    Scenario,
    Verdict,
)

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
