"""Scenarios: the assumptions as values, the closed forms the metrics rely on, and the
shipped worlds doing what their summaries claim.

The checks of a shipped world run it small (``with_overrides``) on the virtual loop; each
takes well under a second.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyattacker.benchmark import SCENARIOS, Harness, get_scenario
from pyattacker.errors import ConfigError
from pyattacker.pool import ALGORITHMS
from pyattacker.retry import Retrying
from pyattacker.world import (
    CacheProfile,
    Degradation,
    EndpointProfile,
    FailureProfile,
    LatencyProfile,
    LoadCycle,
    Outage,
    ProviderModel,
    RateLimitProfile,
    Scenario,
)

NEW_SCENARIOS = ("multi_vendor", "dead_endpoint", "thundering_herd", "cache_affinity")


_GAUSS = ((-math.sqrt(0.6), 5 / 9), (0.0, 8 / 9), (math.sqrt(0.6), 5 / 9))


def _integrate(
    f: Callable[[float], float], t0: float, t1: float, breaks: Iterable[float] = (), n: int = 40
) -> float:
    """∫ f from ``t0`` to ``t1`` numerically: three-point Gauss-Legendre on ``n`` slices of
    every piece between ``breaks`` (where ``f`` jumps or bends), so no evaluation ever
    lands on a jump."""
    edges = sorted({t0, t1, *(b for b in breaks if t0 < b < t1)})
    total = 0.0
    for a, b in itertools.pairwise(edges):
        h = (b - a) / n
        for i in range(n):
            middle = a + (i + 0.5) * h
            total += sum(w * f(middle + x * h / 2) for x, w in _GAUSS) * h / 2
    return total


def _successes(trace: tuple) -> Counter[str]:
    return Counter(row[0] for row in trace if not row[3] and row[4] is None)


# ------------------------------------------------------------------ the base scenario


def test_the_base_scenario_covers_the_problems_it_claims_to() -> None:
    s = get_scenario("bursty_provider")
    assert s.summary
    assert s.problem
    # a capacity cycle that swings, starting at the trough
    assert 0 < s.cycle.trough < s.cycle.peak
    assert s.cycle.factor(0.0) == pytest.approx(s.cycle.trough)
    assert s.cycle.factor(s.cycle.period_s / 2) == pytest.approx(s.cycle.peak)
    # three endpoints of different character: latency and failures both differ
    assert len(s.endpoints) == 3
    assert len({e.latency.median_s for e in s.endpoints}) == 3
    assert len({(e.failures.error_rate, e.failures.storm_rate) for e in s.endpoints}) == 3
    # ... and the cheap fast one is the one that goes bad
    fastest = min(s.endpoints, key=lambda e: e.latency.median_s)
    assert fastest.failures.error_rate == max(e.failures.error_rate for e in s.endpoints)
    assert fastest.failures.storm_rate == max(e.failures.storm_rate for e in s.endpoints)
    # a token bucket that tightens when pushed, and storms
    limits = [e.rate_limit for e in s.endpoints]
    assert all(limit is not None and limit.tightening < 1.0 for limit in limits)
    assert any(e.failures.storm_rate > 0 and e.failures.storm_error_rate > 0 for e in s.endpoints)
    # declared quotas, for quota_aware to rank by
    assert all(e.quota_units is not None and e.quota_units > 0 for e in s.endpoints)
    assert len({e.quota_units for e in s.endpoints}) == 3
    # jobs are pipelines: sticky and least_busy have something to do
    assert s.steps_per_job > 1
    assert s.calls_per_step >= 1
    # one retry policy for every algorithm, the reference world's
    assert s.retry == Retrying(max_attempts=5, base=0.5, factor=2.0, cap=8.0, jitter="full")
    assert (s.jobs, s.steps_per_job, s.calls_per_step, s.concurrency, s.horizon_s) == (
        3000,
        3,
        2,
        12,
        600.0,
    )
    # one vendor: the single-pool algorithms are declared, not ranked
    assert s.vendors == ("provider",)
    assert set(s.unsuited) == {"failover", "least_busy"}


def test_the_base_scenario_actually_refuses_and_fails_in_a_short_run() -> None:
    """The problems are not only declared: a minute of it shows 429s, errors and storms."""
    s = get_scenario("bursty_provider").with_overrides(jobs=300, horizon_s=60.0)
    result = Harness(s, "wait", seed=1, trace=True).run()
    assert result.metrics["refusal_rate"] > 0.05
    assert result.metrics["error_rate"] > 0
    assert all(count > 0 for count in result.endpoint_admitted.values())
    model = ProviderModel(get_scenario("bursty_provider"), 1)
    assert any(model.storm_until("fast-flaky", t) is not None for t in range(0, 600, 30))


# ---------------------------------------------------------------------- closed forms


@settings(max_examples=200)
@given(
    period=st.floats(1.0, 600.0),
    trough=st.floats(0.01, 2.0),
    rise=st.floats(0.0, 2.0),
    phase=st.floats(0.0, 0.999),
    t0=st.floats(0.0, 5_000.0),
    periods=st.floats(0.0, 20.0),
)
def test_the_closed_form_integral_matches_a_numeric_one(
    period: float, trough: float, rise: float, phase: float, t0: float, periods: float
) -> None:
    cycle = LoadCycle(period_s=period, trough=trough, peak=trough + rise, phase=phase)
    t1 = t0 + periods * period
    exact = cycle.integral(t0, t1)
    numeric = _integrate(cycle.factor, t0, t1, n=max(40, math.ceil(16 * periods)))
    assert exact == pytest.approx(numeric, rel=1e-6, abs=1e-6 * period)
    # and it is an integral: additive over a split, zero over an empty span
    middle = (t0 + t1) / 2
    assert cycle.integral(t0, middle) + cycle.integral(middle, t1) == pytest.approx(
        exact, rel=1e-9, abs=1e-6
    )
    assert cycle.integral(t0, t0) == pytest.approx(0.0, abs=1e-6)


def test_a_flat_cycle_integrates_to_its_level_times_the_span() -> None:
    cycle = LoadCycle(period_s=60.0, trough=0.5, peak=0.5)
    assert cycle.integral(10.0, 130.0) == pytest.approx(60.0)


ramps = st.builds(
    lambda start, length, factor: Degradation(
        start_s=start, end_s=start + length, capacity_factor=factor
    ),
    st.floats(0.0, 300.0),
    st.floats(1.0, 300.0),
    st.floats(0.0, 1.0),
)


outages = st.builds(
    lambda start, duration, gap, which, warmup: Outage(
        start_s=start,
        duration_s=duration,
        every_s=None if gap is None else duration + gap,
        endpoints=which,
        warmup_s=warmup,
    ),
    st.floats(0.0, 600.0),
    st.floats(1.0, 120.0),
    st.none() | st.floats(1.0, 300.0),
    st.sampled_from([(), ("steady",), ("fading",), ("steady", "fading")]),
    st.sampled_from([0.0, 0.0, 5.0, 30.0]),
)


def _grid_sum(model: ProviderModel, endpoints: list[str], t0: float, t1: float) -> float:
    """capacity_at summed over 0.01 s cells: a much finer grid than offered_seconds'."""
    step, total, t = 0.01, 0.0, t0
    while t < t1 - 1e-12:
        width = min(step, t1 - t)
        total += width * sum(model.capacity_at(e, t + width / 2) for e in endpoints)
        t += width
    return total


@settings(max_examples=40, deadline=None)
@given(
    ramp=ramps,
    period=st.floats(30.0, 600.0),
    phase=st.floats(0.0, 0.999),
    down=st.lists(outages, max_size=2),
    t0=st.floats(0.0, 300.0),
    span=st.floats(1.0, 120.0),
)
def test_the_offered_capacity_is_the_enforced_limit_summed_over_time(
    ramp: Degradation, period: float, phase: float, down: list[Outage], t0: float, span: float
) -> None:
    """Utilisation's denominator is the integer in-flight limit the provider enforces,
    integrated over time on a quarter-second grid: it agrees with a grid 25 times finer to
    within what a quarter second per change of the limit can move, in every world."""
    world = Scenario(
        name="moving",
        cycle=LoadCycle(period_s=period, trough=0.3, peak=1.0, phase=phase),
        endpoints=(
            EndpointProfile(id="steady", capacity=4),
            EndpointProfile(id="fading", capacity=6, weight=1.5, degradation=ramp),
        ),
        outages=tuple(down),
    )
    model = ProviderModel(world, 0)
    t1 = t0 + span
    fine = _grid_sum(model, ["steady", "fading"], t0, t1)
    changes = sum(
        model.capacity_at(e, t) != model.capacity_at(e, t + 0.25)
        for e in ("steady", "fading")
        for t in [t0 + 0.25 * i for i in range(int(span / 0.25) + 2)]
    )
    peak = 4 + 9  # the most both endpoints can hold at once
    assert model.offered_seconds(t0, t1) == pytest.approx(fine, abs=0.25 * peak * (changes + 2))


def test_the_offered_capacity_does_not_depend_on_the_traffic() -> None:
    """A function of time, like the weather: what was sent does not change it."""
    world = get_scenario("thundering_herd")
    quiet, busy = ProviderModel(world, 1), ProviderModel(world, 1)
    for t in range(0, 300, 2):
        for e in world.endpoints:
            busy.admit(e.id, float(t), key=t)
    assert busy.offered_seconds(0.0, 300.0) == quiet.offered_seconds(0.0, 300.0)


def test_the_offered_capacity_is_nothing_while_an_outage_covers_every_endpoint() -> None:
    world = Scenario(
        name="outage",
        cycle=LoadCycle(period_s=100.0, trough=1.0, peak=1.0),
        endpoints=(EndpointProfile(id="a", capacity=4), EndpointProfile(id="b", capacity=2)),
        outages=(Outage(start_s=10.0, duration_s=20.0),),
    )
    model = ProviderModel(world, 0)
    assert model.capacity_at("a", 15.0) == model.capacity_at("b", 15.0) == 0
    assert model.offered_seconds(0.0, 10.0) == pytest.approx(60.0)
    assert model.offered_seconds(10.0, 30.0) == pytest.approx(0.0)
    assert model.offered_seconds(0.0, 40.0) == pytest.approx(120.0)


def test_the_offered_capacity_follows_the_warmup_after_an_outage() -> None:
    """Back from an outage, capacity climbs from nothing over ``warmup_s`` in whole
    requests, never below one while up: 10 units for 10 s, nothing for 10 s, the climb
    ``max(1, round(10 * s / 20))`` for 20 s, 10 units for 10 s."""
    world = Scenario(
        name="cold",
        cycle=LoadCycle(period_s=100.0, trough=1.0, peak=1.0),
        endpoints=(EndpointProfile(id="a", capacity=10),),
        outages=(Outage(start_s=10.0, duration_s=10.0, warmup_s=20.0),),
    )
    model = ProviderModel(world, 0)
    assert [model.capacity_at("a", t) for t in (15.0, 30.0, 40.0)] == [0, 5, 10]
    climb = sum(0.25 * max(1, round(10 * (k + 0.5) * 0.25 / 20)) for k in range(80))
    assert model.offered_seconds(0.0, 50.0) == pytest.approx(100 + 0 + climb + 100)
    assert model.offered_seconds(20.0, 40.0) == pytest.approx(climb)


# ----------------------------------------------------------------- scenarios as values


def test_an_overridden_scenario_is_a_copy_and_leaves_the_registry_alone() -> None:
    original = SCENARIOS["bursty_provider"]
    before = dataclasses.asdict(original)
    copy = original.with_overrides(jobs=10, concurrency=2, horizon_s=5.0)
    assert copy is not original
    assert (copy.jobs, copy.concurrency, copy.horizon_s) == (10, 2, 5.0)
    assert copy.endpoints == original.endpoints
    assert copy.cycle == original.cycle
    assert copy.name == original.name
    assert copy.unsuited == original.unsuited
    with pytest.raises(TypeError):  # nobody scribbles on a scenario, copy or registry
        copy.unsuited["wait"] = "scribbled on the copy"  # type: ignore[index]
    with pytest.raises(TypeError):
        original.unsuited.clear()  # type: ignore[attr-defined]
    assert "wait" not in original.unsuited
    assert SCENARIOS["bursty_provider"] is original
    assert get_scenario("bursty_provider") is original
    assert dataclasses.asdict(original) == before
    with pytest.raises(dataclasses.FrozenInstanceError):
        original.jobs = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        SCENARIOS["mine"] = copy  # type: ignore[index]


def test_a_scenario_can_be_built_by_hand() -> None:
    """Two one-second calls at a time on an endpoint of capacity 2: four single-call jobs
    take exactly two simulated seconds and use all of the capacity on offer."""
    scenario = Scenario(
        name="by-hand",
        summary="one steady endpoint",
        endpoints=(
            EndpointProfile(
                id="only",
                capacity=2,
                latency=LatencyProfile(median_s=1.0, sigma=0.0, tail_rate=0.0),
                failures=FailureProfile(error_rate=0.0, storm_rate=0.0),
            ),
        ),
        cycle=LoadCycle(period_s=60.0, trough=1.0, peak=1.0),
        jobs=4,
        steps_per_job=1,
        calls_per_step=1,
        concurrency=2,
        horizon_s=100.0,
    )
    result = Harness(scenario, "wait").run()
    assert result.scenario == "by-hand"
    assert result.metrics["jobs_done"] == 4
    assert result.metrics["makespan_s"] == 2.0
    assert result.metrics["requests"] == 4
    assert result.metrics["utilization"] == pytest.approx(1.0)
    assert result.metrics["successful_job_latency_p50_ms"] == pytest.approx(1000.0)
    assert dict(result.endpoint_admitted) == {"only": 4}


def _endpoint(**changes: object) -> Callable[[], object]:
    return lambda: EndpointProfile(**{"id": "e", **changes})  # type: ignore[arg-type]


_GOOD = EndpointProfile(id="e")


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: LoadCycle(period_s=0.0), "cycle.period_s"),
        (lambda: LoadCycle(trough=0.8, peak=0.5), "cycle.peak"),
        (lambda: LoadCycle(phase=1.0), "cycle.phase"),
        (lambda: LatencyProfile(median_s=float("nan")), "latency.median_s"),
        (lambda: LatencyProfile(tail_factor=0.5), "latency.tail_factor"),
        (lambda: FailureProfile(error_rate=1.5), "failures.error_rate"),
        (lambda: FailureProfile(storm_duration_s=0.0), "failures.storm_duration_s"),
        (lambda: RateLimitProfile(burst=0.5), "rate_limit.burst"),
        (lambda: RateLimitProfile(tightening=1.5), "rate_limit.tightening"),
        (lambda: CacheProfile(entries=0), "cache.entries"),
        (lambda: Degradation(start_s=10.0, end_s=5.0), "degradation.end_s"),
        (lambda: Outage(start_s=0.0, duration_s=10.0, every_s=5.0), "outage.every_s"),
        (_endpoint(id=""), "id"),
        (_endpoint(capacity=0), "capacity"),
        (_endpoint(weight=-1.0), "weight"),
        (_endpoint(latency=None), "latency"),
        (_endpoint(vendor=""), "vendor"),
        (lambda: Scenario(name="x", endpoints=()), "endpoints"),
        (lambda: Scenario(name="", endpoints=(_GOOD,)), "name"),
        (lambda: Scenario(name="x", endpoints=(_GOOD, _GOOD)), "endpoints[1].id"),
        (
            lambda: Scenario(
                name="x",
                endpoints=(_GOOD,),
                outages=(Outage(start_s=0, duration_s=1, endpoints=("nope",)),),
            ),
            "outages[0].endpoints",
        ),
        (lambda: Scenario(name="x", endpoints=(_GOOD,), jobs=0), "jobs"),
        (lambda: Scenario(name="x", endpoints=(_GOOD,), horizon_s=math.inf), "horizon_s"),
        (lambda: Scenario(name="x", endpoints=(_GOOD,), retry="5 times"), "retry"),
        (lambda: Scenario(name="x", endpoints=(_GOOD,), seed=1.5), "seed"),
        (
            lambda: Scenario(name="x", endpoints=(_GOOD,), acquire_timeout_s=0.0),
            "acquire_timeout_s",
        ),
        (lambda: Scenario(name="x", endpoints=(_GOOD,), unsuited={"wait": 1}), "unsuited"),
        (lambda: SCENARIOS["bursty_provider"].with_overrides(concurrency=0), "concurrency"),
        (lambda: SCENARIOS["bursty_provider"].with_overrides(jobz=10), "jobz"),
    ],
)
def test_a_bad_value_is_a_config_error_naming_the_field(
    build: Callable[[], object], field: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        build()
    assert caught.value.field == field
    assert field in str(caught.value)


def test_an_unknown_override_names_the_field_and_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        SCENARIOS["bursty_provider"].with_overrides(jobs=5, workers=3)
    assert caught.value.field == "workers"
    assert caught.value.hint is not None
    assert "concurrency" in caught.value.hint


def test_an_unknown_scenario_name_lists_the_shipped_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        get_scenario("no-such-world")
    assert caught.value.field == "scenario"
    assert all(name in str(caught.value) for name in SCENARIOS)


# --------------------------------------------------------------- the shipped scenarios


def test_every_shipped_scenario_is_registered_and_says_what_it_is_for() -> None:
    assert set(NEW_SCENARIOS) | {"bursty_provider"} <= set(SCENARIOS)
    for name, scenario in SCENARIOS.items():
        assert scenario.name == name
        assert scenario.summary.strip(), name
        assert scenario.problem.strip(), name
        for algorithm, reason in scenario.unsuited.items():
            assert algorithm in ALGORITHMS, (name, algorithm)
            assert reason.strip(), (name, algorithm)


def test_multi_vendor_has_two_pools_one_degrading_and_only_quota_aware_unsuited() -> None:
    s = get_scenario("multi_vendor")
    assert len(s.vendors) == 2
    primary, backup = s.vendors
    degrading = {e.vendor for e in s.endpoints if e.degradation is not None}
    assert degrading == {primary}
    assert all(e.degradation is None for e in s.endpoints if e.vendor == backup)
    # failover and least_busy, the reason this world exists, run; only quota_aware, with
    # no quota declared anywhere, has nothing to do
    assert set(s.unsuited) == {"quota_aware"}
    assert all(e.quota_units is None for e in s.endpoints)
    assert s.horizon_s > max(e.degradation.start_s for e in s.endpoints if e.degradation)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_world_without_declared_quotas_declares_quota_aware_unsuited(name: str) -> None:
    s = SCENARIOS[name]
    quotas = any(e.quota_units is not None for e in s.endpoints)
    assert ("quota_aware" in s.unsuited) == (not quotas)


@pytest.mark.parametrize("algorithm", ["failover", "least_busy"])
def test_multi_vendor_failover_and_least_busy_use_the_backup_pool_and_wait_does_not(
    algorithm: str,
) -> None:
    s = get_scenario("multi_vendor").with_overrides(jobs=200, horizon_s=240.0)
    backup = [e.id for e in s.endpoints if e.vendor == s.vendors[1]]
    waiting = Harness(s, "wait", seed=1).run()
    moving = Harness(s, algorithm, seed=1).run()
    assert sum(waiting.endpoint_requests[e] for e in backup) == 0
    moved = sum(moving.endpoint_admitted[e] for e in backup)
    assert moved > 0.1 * sum(moving.endpoint_admitted.values())


def test_dead_endpoint_has_a_storm_that_never_ends() -> None:
    s = get_scenario("dead_endpoint")
    endless = [e for e in s.endpoints if e.failures.storm_rate == 1.0]
    assert len(endless) == 1
    assert endless[0].failures.storm_error_rate > 0
    others = [e for e in s.endpoints if e is not endless[0]]
    assert others
    assert all(e.failures.storm_rate < 1.0 for e in others)
    model = ProviderModel(s, s.seed)
    assert all(model.storm_until(endless[0].id, float(t)) is not None for t in range(0, 601, 7))


def test_dead_endpoint_gets_almost_no_successful_requests_under_wait() -> None:
    s = get_scenario("dead_endpoint").with_overrides(jobs=200, horizon_s=120.0)
    dead = next(e.id for e in s.endpoints if e.failures.storm_rate == 1.0)
    result = Harness(s, "wait", seed=2, trace=True).run()
    successes = _successes(result.trace)
    total = sum(successes.values())
    assert total > 500
    assert successes[dead] < 0.1 * total
    for alive in (e.id for e in s.endpoints if e.id != dead):
        assert successes[alive] > 0.3 * total


def test_thundering_herd_takes_every_endpoint_down_at_once() -> None:
    s = get_scenario("thundering_herd")
    assert s.outages
    model = ProviderModel(s, s.seed)
    for outage in s.outages:
        middle = outage.start_s + outage.duration_s / 2
        assert all(model.capacity_at(e.id, middle) == 0 for e in s.endpoints)
        after = outage.start_s + outage.duration_s
        assert all(model.capacity_at(e.id, after) > 0 for e in s.endpoints)
        assert outage.start_s + outage.duration_s < s.horizon_s  # the herd does come back


def test_thundering_herd_refuses_most_right_after_the_provider_comes_back() -> None:
    """The herd is measured where it happens: the ten seconds after an outage ends are
    refused harder than the run on average, and jittered retries soften the spike."""
    s = get_scenario("thundering_herd").with_overrides(jobs=300, horizon_s=200.0)
    first = s.outages[0]
    assert first.start_s + first.duration_s < s.horizon_s
    assert first.warmup_s > 0.0  # it comes back cold
    herd = Harness(s, "wait", seed=1).run().metrics
    calm = Harness(s.with_overrides(outages=()), "wait", seed=1).run().metrics
    average = herd["refusal_rate"] * herd["requests"] / herd["makespan_s"]
    assert herd["recovery_refusals_per_s"] > 1.5 * average
    assert math.isnan(calm["recovery_refusals_per_s"])  # no outage: nothing to measure
    jittered = Harness(s, "backoff", seed=1).run().metrics
    assert jittered["recovery_refusals_per_s"] < herd["recovery_refusals_per_s"]


def test_cache_affinity_pays_sticky_far_more_than_wait() -> None:
    s = get_scenario("cache_affinity")
    assert all(e.cache is not None for e in s.endpoints)
    assert s.steps_per_job > 1  # a job's later steps are what can hit
    small = s.with_overrides(jobs=150, horizon_s=60.0)
    wait = Harness(small, "wait", seed=1).run().metrics["cache_hit_rate"]
    sticky = Harness(small, "sticky", seed=1).run().metrics["cache_hit_rate"]
    # every step after a job's first can hit, and only a served request fills the cache
    ideal = (s.steps_per_job - 1) / s.steps_per_job
    assert sticky > wait + 0.15
    assert 0.9 * ideal < sticky <= ideal
