"""Small worlds and scenarios the benchmark tests share (imported as ``benchmark_helpers``)."""

from __future__ import annotations

from pyattacker.benchmark import SCENARIOS
from pyattacker.pool import ALGORITHMS
from pyattacker.world import EndpointProfile, FailureProfile, LatencyProfile, LoadCycle, Scenario

FLAT = LoadCycle(period_s=100.0, trough=1.0, peak=1.0)
CALM = FailureProfile(error_rate=0.0, storm_rate=0.0)
ONE_SECOND = LatencyProfile(median_s=1.0, sigma=0.0, tail_rate=0.0)


def _world(*endpoints: EndpointProfile, **changes: object) -> Scenario:
    fields: dict[str, object] = {"cycle": FLAT}
    fields.update(changes)
    return Scenario(name="hand-built", endpoints=endpoints, **fields)  # type: ignore[arg-type]


BURSTY = SCENARIOS["bursty_provider"]
#: a minute of the base scenario with twelve workers: refusals, errors and retries happen
CONTENDED = BURSTY.with_overrides(jobs=150, horizon_s=30.0)
BUILTIN_ALGORITHMS = sorted(ALGORITHMS)
