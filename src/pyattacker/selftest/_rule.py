"""The accuracy rule and the clean-level rule, shared by the selftest and the benchmarks.

Both are pure functions of figures already measured: nothing here reads a clock or
touches a socket, so they are tested on plain numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "GOAL",
    "MAX_ERROR_FRACTION",
    "MAX_P99_LAG_S",
    "MAX_RATE_ERROR",
    "Rule",
    "level_problems",
]

#: A clean level's achieved rate is within this fraction of the plan.
MAX_RATE_ERROR = 0.02
#: A clean level has fewer than this fraction of requests not OK.
MAX_ERROR_FRACTION = 0.001
#: A clean level's p99 scheduling lag (sent minus scheduled) is under this (seconds).
MAX_P99_LAG_S = 0.010


@dataclass(frozen=True)
class Rule:
    """``|ours - truth| <= max(relative * truth, floor)`` (seconds)."""

    name: str
    relative: float
    floor: float

    def tolerance(self, truth: float) -> float:
        """How far from ``truth`` a figure may be and still pass."""
        return max(self.relative * truth, self.floor)

    def passes(self, ours: float, truth: float) -> bool:
        """Whether ``ours`` is within :meth:`tolerance` of ``truth``."""
        return abs(ours - truth) <= self.tolerance(truth)

    def describe(self) -> str:
        """``max(1 %, 0.5 ms)`` for the goal."""
        return f"max({self.relative * 100:g} %, {self.floor * 1e3:g} ms)"


#: The project's accuracy budget (docs/architecture.md, "Measurement").
GOAL = Rule("goal", 0.01, 0.0005)


def level_problems(
    *,
    rate: float,
    achieved_rate: float,
    requests: int,
    dropped: int,
    not_ok: int,
    lag_p99: float,
) -> list[str]:
    """Why an open-model level at ``rate`` is not clean (empty when it is).

    Clean: nothing dropped; the achieved rate within 2 % of ``rate``; fewer than 0.1 % of
    the ``requests`` not OK besides the dropped ones (``not_ok`` counts both); the p99
    scheduling lag (seconds) under 10 ms.
    """
    found = []
    if dropped:
        found.append(f"{dropped} dropped")
    if abs(achieved_rate - rate) > MAX_RATE_ERROR * rate:
        found.append(f"achieved {achieved_rate:,.0f}/s is not within 2 % of plan")
    errors = not_ok - dropped
    if errors >= MAX_ERROR_FRACTION * max(requests, 1):
        found.append(f"{errors} requests not OK (>= 0.1 %)")
    if lag_p99 >= MAX_P99_LAG_S:
        found.append(f"p99 scheduling lag {lag_p99 * 1e3:.2f} ms >= 10 ms")
    return found
