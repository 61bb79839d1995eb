"""The ``flows`` section of an attack's text and Markdown reports (a scenario's flows).

Read from the JSON report's ``flows`` (``FlowStats.to_dict()``): how many flows were
scheduled, started, completed, failed (by the step that ended them), cancelled and dropped,
and the completed flows' duration on the scheduled clock. Each step's own figures are the
report's per-name rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["flow_lines", "flow_markdown", "flow_schedule"]

_PERCENTILES = ("p50", "p90", "p99", "max")


def flow_lines(data: Mapping[str, Any]) -> list[str]:
    """The section for a terminal; none when the attack ran no scenario."""
    flows = data.get("flows")
    if flows is None:
        return []
    facts = _facts(flows, data["summary"]["schedule_s"])
    return [f"Flows ({flows['scenario']})", *(f"  {line}" for line in facts)]


def flow_markdown(data: Mapping[str, Any]) -> list[str]:
    """The section as Markdown; none when the attack ran no scenario."""
    flows = data.get("flows")
    if flows is None:
        return []
    facts = _facts(flows, data["summary"]["schedule_s"])
    return [f"## Flows ({flows['scenario']})", "", *(f"- {line}" for line in facts), ""]


def flow_schedule(summary: Mapping[str, Any]) -> str:
    """The headline's schedule for a scenario's run, from the JSON report's ``summary``: the
    plan's arrivals are flows (``--rate`` is flows a second), the requests sent are their
    steps, so each count and rate says which it is (never steps "of" a flow rate)."""
    flows = f"flows scheduled {summary['scheduled']}"
    if summary["planned"] is not None:
        flows = f"flows planned {summary['planned']:.0f} · scheduled {summary['scheduled']}"
    if summary["planned_rate"] is not None:
        flows += f" ({summary['planned_rate']:.1f}/s planned)"
    return (
        f"{flows}; requests (their steps) sent {summary['sent']} ({summary['achieved_rate']:.1f}/s)"
    )


def _facts(flows: Mapping[str, Any], schedule_s: float) -> list[str]:
    rate = f" ({flows['completed'] / schedule_s:.1f}/s over the plan)" if schedule_s > 0 else ""
    lines = [
        f"scheduled {flows['scheduled']} · started {flows['started']} · completed "
        f"{flows['completed']}{rate} · failed {flows['failed']} · cancelled "
        f"{flows['cancelled']} · dropped {flows['dropped']}"
        + (f" · still running {flows['in_progress']}" if flows["in_progress"] else ""),
    ]
    if flows["failed_by_step"]:
        ranked = sorted(flows["failed_by_step"].items(), key=lambda item: (-item[1], item[0]))
        lines.append("failed at: " + ", ".join(f"{step} {count}" for step, count in ranked))
    duration = flows["duration_s"]
    if duration.get("count"):
        figures = " · ".join(f"{key} {_ms(duration.get(key))}" for key in _PERCENTILES)
        lines.append(
            f"duration of the {duration['count']} completed (scheduled start to end, ms): "
            + figures
        )
    if flows.get("warmup"):
        lines.append(f"the warmup's {flows['warmup']} flows are set apart, in none of these")
    for group in flows["errors"][:5]:
        if group["example"] is not None:
            lines.append(f"error in the flow's code ({group['count']}): {group['example']}")
    lines.append("each step's latency and outcomes: the rows named after it above")
    return lines


def _ms(value: object) -> str:
    return f"{value * 1000:.2f}" if isinstance(value, int | float) else "-"
