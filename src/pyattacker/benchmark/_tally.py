"""What one run accumulates, and the metrics computed from it.

:class:`Tally` is the run's counters and samples (plain attributes: the harness's hot path
adds to them); :func:`metrics` turns a finished tally into exactly the keys of ``METRICS``.
A value that is undefined in the run (no completed job, no request, no cache, no outage)
is NaN, never a flattering 0: the report leaves NaN out of its means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pyattacker.benchmark._result import TraceRow
from pyattacker.measure import exact_percentile
from pyattacker.world import ProviderModel, Scenario

__all__ = ["REFUSAL_WINDOW_S", "Tally", "metrics"]

#: the window of ``refusal_peak_per_s`` and ``recovery_refusals_per_s``
REFUSAL_WINDOW_S = 10.0
_NAN = math.nan


@dataclass
class Tally:
    """What one run accumulates (plain attributes: the hot path adds to them). Nothing that
    can be derived is kept: requests are ``sum(sent)``, refusals ``len(refusal_times)``,
    completed jobs ``len(job_latencies)``, busy seconds ``sum(served)``."""

    errored: int = 0
    cache_hits: int = 0
    step_attempts: int = 0
    failed_attempts: int = 0
    retries: int = 0
    attempted_steps: int = 0
    jobs_failed: int = 0
    #: each completed job's time, start to last step
    job_latencies: list[float] = field(default_factory=list)
    acquire_waits: list[float] = field(default_factory=list)
    #: each served request's service time
    served: list[float] = field(default_factory=list)
    refusal_times: list[float] = field(default_factory=list)
    error_classes: dict[str, int] = field(default_factory=dict)
    admitted: dict[str, int] = field(default_factory=dict)
    sent: dict[str, int] = field(default_factory=dict)
    trace: list[TraceRow] = field(default_factory=list)


def metrics(
    tally: Tally,
    scenario: Scenario,
    provider: ProviderModel,
    makespan: float,
    leases: int,
    wall_s: float,
) -> dict[str, float]:
    """Every metric of ``METRICS``; NaN where a value is undefined (no completed job, no
    request, no cache, no outage...), never a flattering zero: the report leaves NaN out
    of its means and shows it as "-"."""
    requests = sum(tally.sent.values())
    done = len(tally.job_latencies)
    attempts = tally.step_attempts
    jobs = sorted(tally.job_latencies)
    waits = sorted(tally.acquire_waits)
    cached = any(e.cache is not None for e in scenario.endpoints)
    return {
        "jobs_done": float(done),
        "jobs_failed": float(tally.jobs_failed),
        "jobs_unstarted": float(scenario.jobs - done - tally.jobs_failed),
        "makespan_s": makespan,
        "throughput_rps": _ratio(done, makespan),
        "requests": float(requests),
        "attempts_per_completed_job": _ratio(attempts, done),
        "attempt_inflation": _ratio(attempts, tally.attempted_steps),
        "failed_attempt_rate": _ratio(tally.failed_attempts, attempts),
        "retry_rate": _ratio(tally.retries, attempts),
        "refusal_rate": _ratio(len(tally.refusal_times), requests),
        "refusal_peak_per_s": _peak_rate(tally.refusal_times, REFUSAL_WINDOW_S),
        "recovery_refusals_per_s": _after_recoveries(
            tally.refusal_times, _recoveries(scenario, makespan), REFUSAL_WINDOW_S
        ),
        "error_rate": _ratio(tally.errored, requests),
        "cache_hit_rate": _ratio(tally.cache_hits, len(tally.served)) if cached else _NAN,
        "successful_job_latency_p50_ms": _percentile(jobs, 50.0) * 1000.0,
        "successful_job_latency_p95_ms": _percentile(jobs, 95.0) * 1000.0,
        "successful_job_latency_p99_ms": _percentile(jobs, 99.0) * 1000.0,
        "acquire_wait_p50_ms": _percentile(waits, 50.0) * 1000.0,
        "acquire_wait_p99_ms": _percentile(waits, 99.0) * 1000.0,
        "request_latency_p50_ms": _percentile(sorted(tally.served), 50.0) * 1000.0,
        "utilization": _ratio(math.fsum(tally.served), provider.offered_seconds(0.0, makespan)),
        "endpoint_spread": _spread([tally.admitted.get(e.id, 0) for e in scenario.endpoints]),
        "leases_active_at_end": float(leases),
        "wall_s": wall_s,
    }


def _ratio(part: float, whole: float) -> float:
    """``part / whole``; NaN (undefined) when there is no whole."""
    return part / whole if whole > 0 else _NAN


def _percentile(ordered: list[float], q: float) -> float:
    """The project's one percentile definition (nearest rank,
    :func:`pyattacker.measure.exact_percentile`); NaN for no samples."""
    return exact_percentile(ordered, q) if ordered else _NAN


def _peak_rate(times: list[float], window: float) -> float:
    """Most events in any ``window`` seconds (a sliding window: ``[t, t + window)`` for
    every event time ``t``), per second. ``times`` is in order (simulated time only
    moves forward)."""
    most, first = 0, 0
    for last, t in enumerate(times):
        while times[first] <= t - window:
            first += 1
        most = max(most, last - first + 1)
    return most / window


def _recoveries(scenario: Scenario, until: float) -> list[float]:
    """The instants an outage ended with at least a full window of the run left after."""
    ends = {end for o in scenario.outages for end in o.recoveries(until - REFUSAL_WINDOW_S)}
    return sorted(ends)


def _after_recoveries(times: list[float], recoveries: list[float], window: float) -> float:
    """Mean events per second in the ``window`` after each recovery (NaN without any)."""
    if not recoveries:
        return _NAN
    hits = sum(1 for t in times for r in recoveries if r <= t < r + window)
    return hits / (window * len(recoveries))


def _spread(counts: list[int]) -> float:
    """Population coefficient of variation: 0 when every endpoint got the same share (NaN
    when none got anything)."""
    if not counts or sum(counts) == 0:
        return _NAN
    mean = sum(counts) / len(counts)
    variance = sum((c - mean) ** 2 for c in counts) / len(counts)
    return math.sqrt(variance) / mean
