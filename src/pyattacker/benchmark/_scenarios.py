"""The scenarios that ship: ``SCENARIOS`` by name, and :func:`get_scenario`.

Each one is a world with a one-line summary and the real-world problem it stands for; the
algorithms it cannot exercise are declared with the reason (they run only when asked for,
and are never ranked). ``docs/benchmark.md`` explains each and holds their current numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from pyattacker.errors import ConfigError
from pyattacker.world import (
    CacheProfile,
    Degradation,
    EndpointProfile,
    FailureProfile,
    LatencyProfile,
    LoadCycle,
    Outage,
    RateLimitProfile,
    Scenario,
)

__all__ = ["SCENARIOS", "get_scenario"]

_NO_QUOTAS = {
    "quota_aware": "no endpoint declares a quota: it has nothing to rank by, so it is the "
    "same code path as wait",
}
_ONE_POOL = {
    "failover": "one pool: there is nothing to fail over to",
    "least_busy": "one pool: the pool's own choice is already least-busy first, so it is "
    "the same code path as wait",
}


def _bursty_provider() -> Scenario:
    return Scenario(
        name="bursty_provider",
        summary="One vendor behind three unlike endpoints; capacity swings, the bucket "
        "tightens when pushed, the fast endpoint storms",
        problem="429s with Retry-After from a provider whose capacity moves with its own "
        "load, a cheap fast endpoint that goes bad, and a burst-limited trial key",
        cycle=LoadCycle(period_s=120.0, trough=0.35, peak=1.0),
        endpoints=(
            EndpointProfile(
                id="fast-flaky",
                capacity=6,
                latency=LatencyProfile(median_s=0.25, sigma=0.5, tail_rate=0.02),
                failures=FailureProfile(error_rate=0.03, storm_rate=0.08, storm_error_rate=0.6),
                rate_limit=RateLimitProfile(per_window=1200.0, burst=20.0, tightening=0.5),
                quota_units=1200.0,
            ),
            EndpointProfile(
                id="slow-steady",
                capacity=12,
                weight=1.2,
                latency=LatencyProfile(median_s=1.2, sigma=0.3, tail_rate=0.01),
                failures=FailureProfile(error_rate=0.004, storm_rate=0.02),
                rate_limit=RateLimitProfile(per_window=900.0, burst=20.0, tightening=0.5),
                quota_units=2400.0,
            ),
            EndpointProfile(
                id="metered",
                capacity=4,
                latency=LatencyProfile(median_s=0.5, sigma=0.6, tail_rate=0.03),
                rate_limit=RateLimitProfile(
                    per_window=180.0, burst=4.0, tightening=0.35, retry_after_s=1.5
                ),
                quota_units=180.0,
            ),
        ),
        busy_retry_after_s=0.5,
        unsuited=_ONE_POOL,
    )


def _multi_vendor() -> Scenario:
    return Scenario(
        name="multi_vendor",
        summary="Two vendors, two pools; the primary degrades from minute one to minute "
        "four and stays bad while the backup stays steady",
        problem="A primary LLM vendor having a bad afternoon with a second vendor under "
        "contract: does the client move its traffic, and how soon?",
        cycle=LoadCycle(period_s=180.0, trough=0.6, peak=1.0),
        endpoints=(
            *(
                EndpointProfile(
                    id=f"primary-{n}",
                    vendor="primary",
                    capacity=6,
                    latency=LatencyProfile(median_s=0.3, sigma=0.4),
                    failures=FailureProfile(error_rate=0.01, storm_rate=0.03),
                    # two keys of one account: one organisation-wide limit, which the
                    # client knows (a quota group: a 429 on one key pauses both)
                    rate_limit=RateLimitProfile(per_window=2400.0, burst=40.0),
                    rate_group="primary-account",
                    degradation=Degradation(
                        start_s=60.0, end_s=240.0, capacity_factor=0.15, error_rate=0.4
                    ),
                )
                for n in (1, 2)
            ),
            EndpointProfile(
                id="backup-1",
                vendor="backup",
                capacity=8,
                latency=LatencyProfile(median_s=0.8, sigma=0.3),
                failures=FailureProfile(error_rate=0.005, storm_rate=0.02),
                rate_limit=RateLimitProfile(per_window=1200.0, burst=20.0),
            ),
        ),
        jobs=500,
        horizon_s=480.0,
        unsuited=_NO_QUOTAS,
    )


def _dead_endpoint() -> Scenario:
    return Scenario(
        name="dead_endpoint",
        summary="Three endpoints; one is in a storm that never ends and takes one request "
        "at a time",
        problem="A key revoked upstream, a region that is down but still resolves: which "
        "strategies notice and which keep aiming at it",
        cycle=LoadCycle(period_s=120.0, trough=0.7, peak=1.0),
        endpoints=(
            *(
                EndpointProfile(
                    id=f"alive-{n}",
                    capacity=5,
                    latency=LatencyProfile(median_s=0.4, sigma=0.4),
                    rate_limit=RateLimitProfile(per_window=1200.0, burst=20.0),
                )
                for n in (1, 2)
            ),
            EndpointProfile(
                id="dead",
                capacity=5,
                latency=LatencyProfile(median_s=0.4, sigma=0.4),
                # storms that never end, and a capacity pinned to one request in flight
                failures=FailureProfile(storm_rate=1.0, storm_error_rate=0.3),
                degradation=Degradation(
                    start_s=0.0, end_s=1.0, capacity_factor=0.0, error_rate=0.0
                ),
                rate_limit=RateLimitProfile(per_window=1200.0, burst=20.0),
            ),
        ),
        jobs=400,
        horizon_s=420.0,
        unsuited=_ONE_POOL | _NO_QUOTAS,
    )


def _thundering_herd() -> Scenario:
    return Scenario(
        name="thundering_herd",
        summary="Every endpoint drops out together for a minute, every four minutes, and "
        "comes back cold; the herd comes back at once",
        problem="A provider-wide outage: every client retries the moment it ends, and the "
        "provider's limits answer the stampede with refusals",
        cycle=LoadCycle(period_s=120.0, trough=0.8, peak=1.0),
        outages=(Outage(start_s=90.0, duration_s=60.0, every_s=240.0, warmup_s=20.0),),
        endpoints=tuple(
            EndpointProfile(
                id=f"endpoint-{n}",
                capacity=5,
                latency=LatencyProfile(median_s=0.5, sigma=0.4),
                failures=FailureProfile(error_rate=0.01, storm_rate=0.0),
                rate_limit=RateLimitProfile(per_window=900.0, burst=10.0, tightening=0.5),
            )
            for n in (1, 2, 3)
        ),
        jobs=500,
        concurrency=16,
        horizon_s=480.0,
        # A client that retires an endpoint for good after 8 straight failures would lose
        # every endpoint in the first outage (the run then stalls): probe again after 15 s.
        dead_after=1_000_000,
        cooldown_s=15.0,
        unsuited=_ONE_POOL | _NO_QUOTAS,
    )


def _cache_affinity() -> Scenario:
    return Scenario(
        name="cache_affinity",
        summary="Four equal endpoints, each with a cache that makes a job's later steps "
        "faster and cheaper where it ran before",
        problem="Prompt caching: a conversation's next turn is cheap on the replica that "
        "holds its prefix, full price anywhere else",
        cycle=LoadCycle(period_s=120.0, trough=0.9, peak=1.0),
        endpoints=tuple(
            EndpointProfile(
                id=f"replica-{n}",
                capacity=4,
                latency=LatencyProfile(median_s=0.8, sigma=0.3),
                failures=FailureProfile(error_rate=0.01, storm_rate=0.02),
                rate_limit=RateLimitProfile(per_window=600.0, burst=10.0),
                cache=CacheProfile(hit_latency_factor=0.25, hit_cost_factor=0.25, ttl_s=60.0),
            )
            for n in (1, 2, 3, 4)
        ),
        jobs=1200,
        steps_per_job=4,
        calls_per_step=1,
        concurrency=10,
        horizon_s=420.0,
        unsuited=_ONE_POOL | _NO_QUOTAS,
    )


SCENARIOS: Mapping[str, Scenario] = MappingProxyType(
    {
        s.name: s
        for s in (
            _bursty_provider(),
            _multi_vendor(),
            _dead_endpoint(),
            _thundering_herd(),
            _cache_affinity(),
        )
    }
)


def get_scenario(name: str) -> Scenario:
    """The scenario called ``name``; ``ConfigError`` listing the known ones otherwise."""
    found = SCENARIOS.get(name)
    if found is None:
        raise ConfigError(
            f"no scenario called {name!r}",
            field="scenario",
            hint=f"one of: {', '.join(SCENARIOS)}",
        )
    return found
