"""The "timing" section of an attack's report: where the attempts' time went.

Read off the JSON report's ``timing`` (:class:`~pyattacker.measure.Phases`): per attempt,
blocked (waiting on our side), connect and TLS (a new connection's setup, only attempts
that opened one), waiting (sent to first byte) and receiving (first byte to end).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyattacker.measure import PHASES

__all__ = ["TIMING_NOTE", "timing_header", "timing_rows"]

TIMING_NOTE = (
    "per attempt: blocked = dispatch delay less a new connection's connect and TLS "
    "(which are their own rows, for the attempts that opened one); waiting = sent to "
    "first byte; receiving = first byte to last"
)
_COLUMNS = ("count", "mean", "p50", "p90", "p99", "max")


def timing_header() -> list[str]:
    return ["phase", *_COLUMNS]


def timing_rows(data: Mapping[str, Any]) -> list[list[str]]:
    """One row per phase that has a count (none when the report has no ``timing``)."""
    timing = data.get("timing")
    if not timing:
        return []
    rows = []
    for name in PHASES:
        summary = timing[name]
        if summary.get("count"):
            rows.append([name, str(summary["count"]), *(_ms(summary.get(k)) for k in _COLUMNS[1:])])
    return rows


def _ms(value: object) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "-"
    return f"{value * 1000:.2f}"
