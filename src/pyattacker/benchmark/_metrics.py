"""``METRICS``: the one table of what a benchmark run measures.

The harness's output keys, the report's rows, the JSON field names and ``bench --list`` are
all derived from it; a test asserts the harness emits exactly this set.

``better`` is the direction a reader should want (``neutral`` rows describe, they do not
rank). ``requires_comparable_completion`` marks a quality claim: such a row may only crown
algorithms that completed a comparable amount of work (the completion gate in
:mod:`pyattacker.benchmark._report`), because the client controls the denominator of
almost every rate — an algorithm that asks for little is refused little.

A value that is undefined in a run (a latency percentile without a completed job, a hit
rate without a cache) is NaN there: the report leaves it out of the mean, never counts it
as a zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

__all__ = ["METRICS", "Direction", "Metric"]

Direction = Literal["higher", "lower", "neutral"]


@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    unit: str
    better: Direction
    meaning: str
    requires_comparable_completion: bool = False

    @property
    def directional(self) -> bool:
        return self.better != "neutral"


def _table(*metrics: Metric) -> Mapping[str, Metric]:
    return MappingProxyType({m.name: m for m in metrics})


_GATED = True

METRICS: Mapping[str, Metric] = _table(
    Metric(
        "jobs_done",
        "jobs",
        "higher",
        "Jobs completed among those admitted before the horizon; a job in flight at the "
        "horizon finishes, which is why makespan can exceed it",
    ),
    Metric(
        "jobs_failed",
        "jobs",
        "neutral",
        "Jobs that gave up (a step ran out of retries). Diagnostic: never starting a job "
        "also keeps it from failing",
    ),
    Metric(
        "jobs_unstarted",
        "jobs",
        "neutral",
        "Jobs never begun because the horizon came first. Diagnostic: starting everything "
        "and failing it also keeps this at zero",
    ),
    Metric(
        "makespan_s",
        "s",
        "neutral",
        "Simulated seconds until the last worker stopped; read it next to jobs_done",
    ),
    Metric(
        "throughput_rps",
        "jobs/s",
        "higher",
        "Completed jobs per simulated second of the run's own makespan",
        _GATED,
    ),
    Metric(
        "requests",
        "requests",
        "neutral",
        "Requests sent to the provider, refusals and retries included",
    ),
    Metric(
        "attempts_per_completed_job",
        "attempts",
        "lower",
        "Step attempts spent per completed job (no retries at all reads steps_per_job); "
        "attempts spent on jobs that later failed count too",
        _GATED,
    ),
    Metric(
        "attempt_inflation",
        "ratio",
        "lower",
        "Step attempts per attempted step: 1.0 means every step succeeded first time; "
        "retry pressure without the volume",
        _GATED,
    ),
    Metric(
        "failed_attempt_rate",
        "ratio",
        "lower",
        "Failed step attempts per step attempt, including those the policy then gave up on",
        _GATED,
    ),
    Metric(
        "retry_rate",
        "ratio",
        "lower",
        "Retries the policy scheduled per step attempt; failed_attempt_rate minus this is "
        "the share of failures given up on",
        _GATED,
    ),
    Metric(
        "refusal_rate",
        "ratio",
        "lower",
        "Requests refused by the provider (429) per request sent",
        _GATED,
    ),
    Metric(
        "refusal_peak_per_s",
        "refusals/s",
        "lower",
        "Refusals per second in the worst 10 simulated seconds of the run: how hard the "
        "client's worst moment hit the provider's limits",
        _GATED,
    ),
    Metric(
        "recovery_refusals_per_s",
        "refusals/s",
        "lower",
        "Refusals per second in the 10 simulated seconds after each outage ends (mean over "
        "the outages the run lived through; undefined in a world without outages): the "
        "herd at the door when the provider comes back",
        _GATED,
    ),
    Metric(
        "error_rate",
        "ratio",
        "lower",
        "Requests that failed with an error (not a refusal) per request sent",
        _GATED,
    ),
    Metric(
        "cache_hit_rate",
        "ratio",
        "higher",
        "Admitted requests served from the endpoint's cache (undefined in a world without caches)",
        _GATED,
    ),
    Metric(
        "successful_job_latency_p50_ms",
        "ms",
        "lower",
        "Median time of a job that succeeded, from its start to its last step, retries included",
        _GATED,
    ),
    Metric(
        "successful_job_latency_p95_ms",
        "ms",
        "lower",
        "95th percentile time of a successful job: the tail a user notices",
        _GATED,
    ),
    Metric(
        "successful_job_latency_p99_ms",
        "ms",
        "lower",
        "99th percentile time of a successful job",
        _GATED,
    ),
    Metric(
        "acquire_wait_p50_ms",
        "ms",
        "lower",
        "Median time a call waited for its lease (acquisitions that succeeded)",
        _GATED,
    ),
    Metric(
        "acquire_wait_p99_ms",
        "ms",
        "lower",
        "99th percentile lease wait: what a saturated pool costs a caller that waits",
        _GATED,
    ),
    Metric(
        "request_latency_p50_ms",
        "ms",
        "neutral",
        "Median latency of a request the provider admitted (a property of the world)",
    ),
    Metric(
        "utilization",
        "ratio",
        "higher",
        "Admitted request-seconds over the capacity the provider enforced during the run's "
        "own makespan (its integer in-flight limit, summed over time, not over arrivals)",
        _GATED,
    ),
    Metric(
        "endpoint_spread",
        "ratio",
        "neutral",
        "Coefficient of variation of admitted requests across endpoints (0 = even); "
        "descriptive, since the endpoints are deliberately unlike each other",
    ),
    Metric(
        "leases_active_at_end",
        "leases",
        "lower",
        "Leases still held when the run ended; must be zero. The one directional counter "
        "that is not a quality claim",
    ),
    Metric(
        "wall_s",
        "s",
        "neutral",
        "Real seconds spent simulating: cost, never quality",
    ),
)
