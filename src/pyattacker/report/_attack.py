"""The attack report in three forms, all from ``AttackResult.to_dict()``.

One source (the dict) keeps the three in agreement: the terminal table, the Markdown file
and the JSON document show the same numbers. Every latency row says which clock it uses:
``scheduled`` (from when the request should have started: what a user sees) or ``sent``
(from when it left: service time).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from pyattacker.attack import AttackResult

__all__ = ["attack_json", "attack_markdown", "attack_text"]

_COLUMNS = ("count", "min", "p50", "p90", "p95", "p99", "p99.9", "max")
_MAX_WINDOW_ROWS = 120


def attack_json(result: AttackResult, *, indent: int | None = 2) -> str:
    """The full report as JSON (seconds, counts and rates; no opinions)."""
    return json.dumps(result.to_dict(), indent=indent, allow_nan=False, default=_unserialisable)


def attack_markdown(result: AttackResult) -> str:
    """The report as a Markdown document (headline, latency table, counts, time series)."""
    data = result.to_dict()
    lines = [f"# pyattacker attack — {_title(data)}", "", *_headline(data), ""]
    lines += ["## Latency (ms)", "", *_markdown_table(_latency_header(), _latency_rows(data)), ""]
    lines += ["## Counts", "", *(f"- {line}" for line in _count_lines(data)), ""]
    windows = data["windows"]
    if windows:
        lines += [f"## Time series ({data['plan']['window_s']:g} s windows)", ""]
        lines += _markdown_table(_window_header(), _window_rows(windows))
        lines.append("")
    return "\n".join(lines)


def attack_text(result: AttackResult) -> str:
    """The report for a terminal: plain aligned text (rich renders it as is)."""
    data = result.to_dict()
    lines = [f"pyattacker attack — {_title(data)}", *_headline(data), ""]
    lines += ["Latency (ms)", *_aligned(_latency_header(), _latency_rows(data)), ""]
    lines += _count_lines(data)
    windows = data["windows"]
    if windows:
        lines += ["", f"Time series ({data['plan']['window_s']:g} s windows)"]
        rows = _window_rows(windows)
        if len(rows) > _MAX_WINDOW_ROWS:
            lines.append(f"(first {_MAX_WINDOW_ROWS} of {len(rows)} windows; --json has all)")
            rows = rows[:_MAX_WINDOW_ROWS]
        lines += _aligned(_window_header(), rows)
    return "\n".join(lines)


# -- pieces ------------------------------------------------------------------------------


def _title(data: Mapping[str, Any]) -> str:
    plan = data["plan"]
    load = plan["load"]
    if load["model"] == "open":
        if load["stages"]:
            shape = " → ".join(f"{r:g}/s over {d:g}s" for d, r in load["stages"])
            what = f"open model, {load['arrival']} arrivals, from {load['rate']:g}/s: {shape}"
        else:
            what = f"open model, {load['arrival']} arrivals at {load['rate']:g}/s"
    else:
        think = f", think {load['think_time']:g}s" if load["think_time"] else ""
        what = f"closed model, {load['clients']} clients{think}"
    targets = plan["targets"]
    where = targets[0] if len(targets) == 1 else f"{len(targets)} targets"
    return f"{plan['method']} {where}, {what}, retry {plan['retry']}"


def _headline(data: Mapping[str, Any]) -> list[str]:
    s = data["summary"]
    planned = "" if s["planned"] is None else f"planned {s['planned']:.0f} · "
    rate = f"{s['achieved_rate']:.1f}/s"
    if s["planned_rate"] is not None:
        rate += f" of {s['planned_rate']:.1f}/s planned"
    lines = [
        f"Plan span {s['schedule_s']:.2f}s, finished after {s['elapsed_s']:.2f}s: "
        f"{planned}scheduled {s['scheduled']} · sent {s['sent']} ({rate}) · "
        f"late {s['late']} (> {s['late_after_s'] * 1000:g} ms) · dropped {s['dropped']}",
    ]
    if s["stop_reason"]:
        lines.append(f"Stopped early: {s['stop_reason']} (figures cover what ran).")
    return lines


def _latency_header() -> list[str]:
    return ["", "clock", *_COLUMNS]


def _latency_rows(data: Mapping[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []
    sections = [("total", data["total"])]
    if len(data["targets"]) > 1:
        sections += list(data["targets"].items())
    for name, stats in sections:
        rows.append([name, "scheduled", *_cells(stats["latency_s"]["scheduled"])])
        rows.append(["", "sent", *_cells(stats["latency_s"]["sent"])])
        if name == "total":
            rows.append(["  ok only", "scheduled", *_cells(stats["latency_ok_s"])])
            rows.append(["  dispatch delay", "sched→sent", *_cells(stats["dispatch_delay_s"])])
            rows.append(["  first byte", "sent", *_cells(stats["ttfb_s"])])
    return rows


def _cells(summary: Mapping[str, Any]) -> list[str]:
    cells = [str(summary.get("count", 0))]
    for key in _COLUMNS[1:]:
        value = summary.get(key)
        cells.append(_ms(value))
    return cells


def _ms(value: object) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool) or math.isnan(value):
        return "-"
    return f"{value * 1000:.2f}"


def _count_lines(data: Mapping[str, Any]) -> list[str]:
    total = data["total"]
    per_request = total["requests"] and total["attempts"] / total["requests"]
    lines = [
        "Outcomes: " + _pairs(total["outcomes"]),
        "Status codes: " + _pairs(total["status"]),
        "Error classes: " + _pairs(total["error_classes"]),
        f"Attempts: {total['attempts']} for {total['requests']} requests "
        f"({per_request:.2f} per request; histogram {_pairs(total['attempts_per_request'])}); "
        f"throttled requests {total['throttled_requests']}, "
        f"throttled attempts {total['throttled_attempts']}",
        "Retry decisions: " + _pairs(data["retry_decisions"]),
    ]
    if total["early_sends"]:
        lines.append(
            f"WARNING: {total['early_sends']} requests were sent before their scheduled time "
            "(a timer fired early); their dispatch delay counts as 0"
        )
    if len(data["targets"]) > 1:
        for target, stats in data["targets"].items():
            lines.append(
                f"  {target}: {_pairs(stats['outcomes'])}; status {_pairs(stats['status'])}"
            )
    return lines


def _pairs(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in counts.items()) or "none"


def _window_header() -> list[str]:
    return [
        "t (s)",
        "sched",
        "sent",
        "ok",
        "failed",
        "throttled",
        "dropped",
        "in flight",
        "p50 sched",
        "p99 sched",
        "p99 sent",
    ]


def _window_rows(windows: list[Mapping[str, Any]]) -> list[list[str]]:
    rows = []
    for w in windows:
        rows.append(
            [
                f"{w['start']:g}",
                str(w["scheduled"]),
                str(w["sent"]),
                str(w["ok"]),
                str(w["failed"]),
                str(w["throttled"]),
                str(w["dropped"]),
                str(w["max_in_flight"]),
                _ms(w["latency"].get("p50")),
                _ms(w["latency"].get("p99")),
                _ms(w["service_time"].get("p99")),
            ]
        )
    return rows


def _aligned(header: list[str], rows: list[list[str]]) -> list[str]:
    table = [header, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    out = []
    for row in table:
        cells = [
            cell.ljust(widths[i]) if i < 2 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        ]
        out.append("  ".join(cells).rstrip())
    return out


def _markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _unserialisable(value: object) -> object:
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
