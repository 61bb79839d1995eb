"""The facts of one benchmark run: one scenario, one algorithm, one seed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RunResult", "TraceRow"]

#: one decided request: (endpoint, ordinal, simulated time, refused, failure, draws)
TraceRow = tuple[str, int, float, bool, "str | None", tuple[float, ...]]


@dataclass(frozen=True)
class RunResult:
    """What :meth:`Harness.run` returns.

    ``metrics`` has exactly the keys of ``METRICS``. ``error_classes`` counts failed requests
    by ``error_class_of`` (refusals under ``rate_limit``); ``endpoint_admitted`` and
    ``endpoint_requests`` count admitted and sent requests per endpoint. ``trace`` holds
    every decided request when the harness was asked to keep it (``Harness(trace=True)``),
    else it is empty.
    """

    scenario: str
    algorithm: str
    seed: int
    metrics: Mapping[str, float]
    error_classes: Mapping[str, int] = field(default_factory=dict)
    endpoint_admitted: Mapping[str, int] = field(default_factory=dict)
    endpoint_requests: Mapping[str, int] = field(default_factory=dict)
    trace: tuple[TraceRow, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, without the trace."""
        return {
            "scenario": self.scenario,
            "algorithm": self.algorithm,
            "seed": self.seed,
            "metrics": dict(self.metrics),
            "error_classes": dict(self.error_classes),
            "endpoint_admitted": dict(self.endpoint_admitted),
            "endpoint_requests": dict(self.endpoint_requests),
        }
