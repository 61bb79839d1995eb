"""Which acquire algorithm should this workload use? A simulation that answers it.

A :class:`~pyattacker.world.Scenario` (a provider and a workload) goes in; each algorithm
runs on it for a few seeds on the virtual-time loop, against the world model of
:mod:`pyattacker.world`, with the real pool, algorithms and retry policy; a
:class:`BenchmarkReport` comes out: one row per metric of :data:`METRICS`, the best
algorithms per row where the data can tell them apart, "no winner" where it cannot. No
composite score, no sockets. See ``docs/benchmark.md``.
"""

from pyattacker._sim import ScaledClock, VirtualClock
from pyattacker.benchmark._file import load_scenario_file
from pyattacker.benchmark._harness import BenchmarkStalled, BenchmarkTimeout, Harness
from pyattacker.benchmark._metrics import METRICS, Metric
from pyattacker.benchmark._report import BenchmarkReport, default_algorithms
from pyattacker.benchmark._result import RunResult
from pyattacker.benchmark._run import check_algorithms, run_benchmark, usable_cores
from pyattacker.benchmark._scenarios import SCENARIOS, get_scenario
from pyattacker.benchmark._stats import PairedDifference, paired_difference, t_quantile
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

__all__ = [
    "METRICS",
    "SCENARIOS",
    "BenchmarkReport",
    "BenchmarkStalled",
    "BenchmarkTimeout",
    "CacheProfile",
    "Degradation",
    "EndpointProfile",
    "FailureProfile",
    "Harness",
    "LatencyProfile",
    "LoadCycle",
    "Metric",
    "Outage",
    "PairedDifference",
    "RateLimitProfile",
    "RunResult",
    "ScaledClock",
    "Scenario",
    "VirtualClock",
    "check_algorithms",
    "default_algorithms",
    "get_scenario",
    "load_scenario_file",
    "paired_difference",
    "run_benchmark",
    "t_quantile",
    "usable_cores",
]
