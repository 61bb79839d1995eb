"""What a harness run reports: its metrics, time on the simulated clock (cooldowns, acquisition
timeouts, budgets, stalls), and whole runs end to end."""

from __future__ import annotations

import asyncio
import math
import os
import signal
import uuid

import pytest

from benchmark_helpers import BUILTIN_ALGORITHMS, BURSTY, CALM, CONTENDED, FLAT
from pyattacker.benchmark import METRICS, SCENARIOS, BenchmarkStalled, BenchmarkTimeout, Harness
from pyattacker.clock import wall_time
from pyattacker.pool import (
    ALGORITHMS,
    AcquireAlgorithm,
    AcquireRequest,
    Lease,
    Wait,
    register_algorithm,
)
from pyattacker.retry import Retrying
from pyattacker.world import EndpointProfile, FailureProfile, LatencyProfile, Outage, Scenario


def _fixed(seconds: float) -> LatencyProfile:
    return LatencyProfile(median_s=seconds, sigma=0.0, tail_rate=0.0)


# ------------------------------------------------------------------------ metrics


@pytest.mark.parametrize("scenario_name", sorted(SCENARIOS))
def test_the_harness_emits_exactly_the_declared_metrics(scenario_name: str) -> None:
    small = SCENARIOS[scenario_name].with_overrides(jobs=30, concurrency=6, horizon_s=20.0)
    result = Harness(small, "wait", seed=1).run()
    assert set(result.metrics) == set(METRICS)
    world = SCENARIOS[scenario_name]
    # undefined in this world, so NaN (the report shows "-"), never a flattering zero
    undefined = set()
    if not any(e.cache for e in world.endpoints):
        undefined.add("cache_hit_rate")
    if not world.outages or result.metrics["makespan_s"] < 10.0 + min(
        o.start_s + o.duration_s for o in world.outages
    ):
        undefined.add("recovery_refusals_per_s")
    for name, value in result.metrics.items():
        assert type(value) is float, name
        assert math.isnan(value) == (name in undefined), name
        assert not math.isinf(value), name
    assert result.trace == ()  # kept only when asked for


def test_a_metric_with_nothing_to_measure_is_nan_not_zero() -> None:
    """A run that completes nothing has no job latency and no cost per completed job: NaN,
    which the report leaves out of its means, instead of a 0 that would look best."""
    world = _dying_world(dead_after=1_000, retry=Retrying(max_attempts=1))
    metrics = Harness(world.with_overrides(jobs=4, horizon_s=5.0), "wait", seed=1).run().metrics
    assert metrics["jobs_done"] == 0.0
    for name in (
        "attempts_per_completed_job",
        "successful_job_latency_p50_ms",
        "successful_job_latency_p99_ms",
        "throughput_rps",
    ):
        if name == "throughput_rps":
            assert metrics[name] == 0.0  # no job done per second of a real makespan
        else:
            assert math.isnan(metrics[name]), name
    assert metrics["refusal_peak_per_s"] == 0.0  # nothing refused is a count, not undefined


# ------------------------------------------------------------------- simulated time


def _cooling_world(cooldown_s: float) -> Scenario:
    """One endpoint of capacity 1, down for the first second (requests fail after 0.25 s).

    By hand: the three workers' first attempts fail at 0.25, 0.5 and 0.75; the third
    failure degrades the endpoint until 0.75 + cooldown. Every worker is then parked on a
    pool with nothing in flight: only the cooldown can end the wait. After it, the three
    retries run one after the other, 1 s each.
    """
    return Scenario(
        name="cooling",
        cycle=FLAT,
        endpoints=(EndpointProfile(id="only", capacity=1, latency=_fixed(1.0), failures=CALM),),
        outages=(Outage(start_s=0.0, duration_s=1.0, fail_after_s=0.25),),
        jobs=3,
        steps_per_job=1,
        calls_per_step=1,
        concurrency=3,
        horizon_s=100.0,
        retry=Retrying(max_attempts=2, base=0.5, jitter="none"),
        degrade_after=3,
        dead_after=10,
        cooldown_s=cooldown_s,
    )


@pytest.mark.parametrize("cooldown_s", [20.0, 45.0])
def test_a_wait_that_only_a_cooldown_can_end_advances_simulated_time(cooldown_s: float) -> None:
    result = Harness(_cooling_world(cooldown_s), "wait", seed=1).run()
    assert result.metrics["jobs_done"] == 3
    assert result.metrics["makespan_s"] == 0.75 + cooldown_s + 3 * 1.0
    assert result.error_classes == {"connection": 3}
    assert result.metrics["leases_active_at_end"] == 0


def _saturated_world(acquire_timeout_s: float | None) -> Scenario:
    """Capacity 1 and two single-call jobs of exactly 10 s: job 1 waits for job 0's lease.

    By hand, with a 2.5 s acquisition timeout: job 1's first attempt gives up at 2.5, the
    retry policy (no jitter) waits 8 s, and at 10.5 the lease is free: 10 s of work end at
    20.5. Without the timeout, job 1 gets the lease at 10 and ends at 20.
    """
    return Scenario(
        name="saturated",
        cycle=FLAT,
        endpoints=(EndpointProfile(id="only", capacity=1, latency=_fixed(10.0), failures=CALM),),
        jobs=2,
        steps_per_job=1,
        calls_per_step=1,
        concurrency=2,
        horizon_s=100.0,
        retry=Retrying(max_attempts=2, base=8.0, jitter="none"),
        acquire_timeout_s=acquire_timeout_s,
    )


def test_an_acquisition_timeout_fires_at_the_simulated_instant() -> None:
    timed = Harness(_saturated_world(2.5), "wait", seed=1).run().metrics
    assert timed["jobs_done"] == 2
    assert timed["makespan_s"] == 2.5 + 8.0 + 10.0
    assert timed["failed_attempt_rate"] == pytest.approx(1 / 3)  # the timeout, then success
    assert timed["retry_rate"] == pytest.approx(1 / 3)
    assert timed["requests"] == 2  # the timed-out attempt never reached the provider
    assert timed["acquire_wait_p50_ms"] == 0.0  # successful acquisitions waited for nothing
    patient = Harness(_saturated_world(None), "wait", seed=1).run().metrics
    assert patient["makespan_s"] == 20.0
    assert patient["failed_attempt_rate"] == 0.0
    assert patient["acquire_wait_p99_ms"] == pytest.approx(10_000.0, rel=0.02)


def test_an_acquisition_timeout_without_a_retry_fails_the_job_at_the_timeout() -> None:
    scenario = _saturated_world(4.0).with_overrides(retry=Retrying(max_attempts=1))
    metrics = Harness(scenario, "wait", seed=1).run().metrics
    assert (metrics["jobs_done"], metrics["jobs_failed"]) == (1, 1)
    assert metrics["makespan_s"] == 10.0
    assert metrics["failed_attempt_rate"] == 0.5


def test_the_wall_budget_is_real_time_and_reported_as_a_failure_not_a_result() -> None:
    endless = BURSTY.with_overrides(jobs=1_000_000, horizon_s=1e7)
    started = wall_time()
    with pytest.raises(BenchmarkTimeout) as caught:
        Harness(endless, "wait", seed=1, wall_budget_s=0.3).run()
    elapsed = wall_time() - started
    assert 0.3 <= elapsed < 5.0
    error = caught.value
    simulated = error.context["simulated_s"]
    assert simulated > 0.0  # time did advance: this run is slow, not stalled
    message = str(error)
    assert "stalled" not in message
    assert f"{simulated:.1f} simulated s" in message
    assert "of 1000000 jobs done" in message
    assert "wall budget" in message


def _dying_world(**changes: object) -> Scenario:
    """Every request fails: every endpoint goes DEAD and nothing can ever be leased."""
    fields: dict[str, object] = {
        "name": "dying",
        "cycle": FLAT,
        "endpoints": tuple(
            EndpointProfile(
                id=f"e{n}",
                capacity=2,
                latency=_fixed(0.1),
                failures=FailureProfile(error_rate=1.0, storm_rate=0.0),
            )
            for n in (1, 2)
        ),
        "jobs": 50,
        "concurrency": 4,
        "horizon_s": 10_000.0,
        "retry": Retrying(max_attempts=3, base=0.1, jitter="none"),
        "degrade_after": 2,
        "dead_after": 3,
        "cooldown_s": 0.5,
    }
    fields.update(changes)
    return Scenario(**fields)  # type: ignore[arg-type]


def test_a_stalled_simulation_says_so_instead_of_timing_out_silently() -> None:
    world = _dying_world()
    # A stall, not a timeout: it is found as soon as it happens, not when the 30 s budget
    # runs out (how soon in real seconds is this machine's business).
    with pytest.raises(BenchmarkStalled) as caught:
        Harness(world, "wait", seed=1, wall_budget_s=30.0).run()
    error = caught.value
    assert not isinstance(error, BenchmarkTimeout)
    assert error.context["simulated_s"] > 0.0
    assert error.context["workers"] == world.concurrency  # every worker still there ...
    assert error.context["parked"] == world.concurrency  # ... and parked on a lease
    message = str(error)
    assert f"{world.concurrency} workers left" in message
    assert f"{world.concurrency} parked" in message
    assert "of 50 jobs done" in message


@pytest.mark.parametrize("clock", ["virtual", "real"])
def test_a_world_with_no_lease_left_is_reported_as_a_stall_before_its_budget_ends(
    clock: str,
) -> None:
    harness = Harness(
        _dying_world(),
        "wait",
        seed=1,
        clock=clock,  # type: ignore[arg-type]
        speedup=20.0,
        wall_budget_s=4.0,
    )
    # BenchmarkStalled, not BenchmarkTimeout (its sibling): reported before the 4 s
    # budget ran out, however busy the machine
    with pytest.raises(BenchmarkStalled):
        harness.run()


# ------------------------------------------------------------------ whole-run stories


@pytest.mark.parametrize("algorithm", BUILTIN_ALGORITHMS)
def test_no_lease_is_left_active_at_the_end(algorithm: str) -> None:
    result = Harness(CONTENDED, algorithm, seed=1).run()
    assert result.metrics["leases_active_at_end"] == 0.0
    assert result.metrics["requests"] > 0


def test_immediate_completes_far_less_than_wait_on_the_bursty_provider() -> None:
    world = BURSTY.with_overrides(jobs=300, horizon_s=60.0)
    wait = Harness(world, "wait", seed=1).run().metrics
    immediate = Harness(world, "immediate", seed=1).run().metrics
    assert wait["jobs_done"] >= 50
    assert immediate["jobs_done"] < 0.25 * wait["jobs_done"]
    assert immediate["jobs_failed"] > 4 * wait["jobs_failed"]
    assert immediate["jobs_unstarted"] < wait["jobs_unstarted"]  # it started them all


def test_a_run_of_one_job_accounts_for_it() -> None:
    one = BURSTY.with_overrides(jobs=1)
    result = Harness(one, "wait", seed=1).run()
    m = result.metrics
    assert m["jobs_done"] + m["jobs_failed"] == 1
    assert m["jobs_unstarted"] == 0
    assert m["requests"] >= one.steps_per_job * one.calls_per_step * m["jobs_done"]
    assert 0 < m["makespan_s"] < one.horizon_s
    assert m["leases_active_at_end"] == 0
    undefined = {"cache_hit_rate", "recovery_refusals_per_s"}  # no cache, no outage here
    assert all(math.isfinite(v) for k, v in m.items() if k not in undefined)


def test_a_run_whose_time_stands_still_is_called_a_livelock_not_slow() -> None:
    """An algorithm that keeps yielding at one instant never lets simulated time move: the
    wall budget runs out, and the error says time stood still, not "try fewer jobs"."""
    name = f"spinner-{uuid.uuid4().hex}"

    class Spinner(AcquireAlgorithm):
        async def acquire(self, request: AcquireRequest) -> Lease:
            if request.clock.now() < 5.0:
                return await Wait().acquire(request)
            while True:  # noqa: ASYNC110 - from t=5 on: yield forever, never sleeping (the point)
                await asyncio.sleep(0)

    Spinner.name = name  # type: ignore[misc]
    register_algorithm(Spinner)
    try:
        scenario = SCENARIOS["bursty_provider"].with_overrides(jobs=200, horizon_s=60.0)
        with pytest.raises(BenchmarkTimeout) as caught:
            Harness(scenario, name, seed=1, wall_budget_s=2.0).run()
    finally:
        ALGORITHMS.pop(name, None)
    message = str(caught.value)
    assert "stalled, not slow" in message
    assert "simulated time stopped at 5.0" in message
    assert "try fewer" not in message
    assert caught.value.context["frozen_s"] >= 1.0


def test_keys_of_one_rate_group_are_one_quota_group_to_the_client() -> None:
    """multi_vendor's two primary keys share an account-wide limit; the client is told, so
    the pool pauses both on a 429 from either (the kernel's quota groups take part)."""
    seen: dict[str, str | None] = {}
    name = f"peek-{uuid.uuid4().hex}"

    class Peek(AcquireAlgorithm):
        async def acquire(self, request: AcquireRequest) -> Lease:
            for pool in request.pools.values():
                seen.update({r.id: r.quota_group for r in pool.resources})
            return await Wait().acquire(request)

    Peek.name = name  # type: ignore[misc]
    register_algorithm(Peek)
    try:
        world = SCENARIOS["multi_vendor"].with_overrides(jobs=5, horizon_s=10.0)
        Harness(world, name, seed=1).run()
    finally:
        ALGORITHMS.pop(name, None)
    groups = {e.id: e.rate_group for e in world.endpoints}
    assert seen == groups
    assert groups["primary-1"] == groups["primary-2"] == "primary-account"


def test_ctrl_c_just_before_a_run_ends_still_stops_it() -> None:
    """Ctrl-C during a run becomes a KeyboardInterrupt raised between loop callbacks, and
    is not lost when the run ends before the loop would have looked at its signal pipe."""
    name = f"interrupter-{uuid.uuid4().hex}"
    sent: list[bool] = []

    class Interrupter(AcquireAlgorithm):
        async def acquire(self, request: AcquireRequest) -> Lease:
            if not sent:
                sent.append(True)
                os.kill(os.getpid(), signal.SIGINT)
            return await Wait().acquire(request)

    Interrupter.name = name  # type: ignore[misc]
    register_algorithm(Interrupter)
    try:
        tiny = SCENARIOS["bursty_provider"].with_overrides(jobs=1, concurrency=1)
        with pytest.raises(KeyboardInterrupt):
            Harness(tiny, name, seed=1).run()
    finally:
        ALGORITHMS.pop(name, None)
    assert sent
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
