"""A sweep's report: one row per level, and the level where the endpoint saturates.

Each row is made of the level's own JSON report (its ``headline`` for an LLM run, its
summary and totals), so a row and the level's full report (kept whole under
``levels[i].report`` in the JSON) always agree. Latencies are on the scheduled clock
(what a user waits), like the headline's.

Saturation (an opinion, so it lives here): the rows in order of offered load, the first
row after the first that either

- offered an open-model rate and sustained less than ``1 - SHORTFALL`` of it:
  ``sustained_per_s`` (OK answers per second of the span the level sent over: the sent
  rate times the share answered OK, so a long answer's tail does not count against it)
  below 90 % of the arrivals per second, or
- has a p99 latency more than ``GROWTH`` times the first row's (TTFT on the scheduled
  clock when the level streamed, else end to end / latency on the scheduled clock), or
- in a concurrency sweep, sustained less than ``SCALING`` of the gain its added clients
  would bring if each were served as fast as at the level before: by Little's law a
  closed model's throughput grows with its clients until the endpoint has no more to
  give (from 4 to 16 clients, ``sustained_per_s`` must reach 2.5 times the level before's).
  The latency rule alone misses an endpoint that queues the extra clients evenly.

A sweep with no such row says the endpoint did not saturate within the levels run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyattacker.attack import SweepLevel, SweepResult
from pyattacker.report._lead import headline_text, warmup_text

__all__ = [
    "GROWTH",
    "SCALING",
    "SHORTFALL",
    "sweep_dict",
    "sweep_html",
    "sweep_json",
    "sweep_markdown",
    "sweep_text",
]

SHORTFALL = 0.10
GROWTH = 3.0
SCALING = 0.5

SATURATION_RULE = (
    f"the first level after the first that sustained less than {1 - SHORTFALL:.0%} of its "
    "offered rate (sustained/s: OK answers per second of the span it sent over), or whose "
    "p99 latency (TTFT when streamed, else end to end; scheduled clock) is more than "
    f"{GROWTH:g}x the first level's, or (concurrency sweeps) whose sustained/s gained less "
    f"than {SCALING:.0%} of what its added clients would at the level before's pace"
)

_COLUMNS = (
    ("level", "level"),
    ("offered", "offered"),
    ("requests", "requests"),
    ("sent_per_s", "sent/s"),
    ("requests_per_s", "OK/s"),
    ("sustained_per_s", "sustained/s"),
    ("output_tokens_per_s", "out tok/s"),
    ("ttft_p50_s", "TTFT p50"),
    ("ttft_p99_s", "TTFT p99"),
    ("itl_p50_s", "ITL p50"),
    ("itl_p99_s", "ITL p99"),
    ("tpot_p50_s", "TPOT p50"),
    ("tpot_p99_s", "TPOT p99"),
    ("e2e_p50_s", "e2e p50"),
    ("e2e_p99_s", "e2e p99"),
    ("error_rate", "errors"),
    ("throttled_rate", "throttled"),
)


def sweep_dict(result: SweepResult) -> dict[str, Any]:
    """The sweep's JSON report: ``sweep`` (what was swept, the saturation rule and the
    level it picked), ``rows`` (one per level, by offered load) and ``levels`` (each
    level's whole attack report, same order)."""
    ordered = result.ordered()
    reports = [outcome.to_dict() for _, outcome in ordered]
    rows = [level_row(level, report) for (level, _), report in zip(ordered, reports, strict=True)]
    at = saturation(rows)
    return {
        "sweep": {
            "kind": result.spec.kind,
            "levels_planned": result.spec.planned(),
            "levels_run": len(rows),
            "interrupted": result.interrupted,
            "saturation_rule": SATURATION_RULE,
            "saturated_at": None if at is None else rows[at]["level"],
            "saturated_index": at,
        },
        "rows": rows,
        "levels": [
            {"level": row["level"], "report": r} for row, r in zip(rows, reports, strict=True)
        ],
    }


def level_row(level: SweepLevel, report: Mapping[str, Any]) -> dict[str, Any]:
    """One level's row from its JSON report (durations in seconds, rates per second)."""
    s, total = report["summary"], report["total"]
    requests = total["requests"]
    outcomes = total["outcomes"]
    ok, throttled = outcomes.get("ok", 0), outcomes.get("throttled", 0)
    span = s["answer_span_s"]
    llm, head = report.get("llm"), report.get("headline") or {}
    e2e = llm["e2e_s"]["scheduled"] if llm else total["latency_s"]["scheduled"]
    tpot = llm["tpot_s"] if llm else {"count": 0}
    return {
        "level": level.name,
        "kind": level.kind,
        "offered_rate": level.offered_rate,
        "concurrency": level.concurrency,
        "requests": requests,
        "sent_per_s": s["achieved_rate"],
        "requests_per_s": ok / span if span else None,
        "sustained_per_s": ok / s["sending_span_s"] if s["sending_span_s"] else None,
        "output_tokens_per_s": head.get("output_tokens_per_s"),
        "ttft_p50_s": head.get("ttft_p50_s"),
        "ttft_p99_s": head.get("ttft_p99_s"),
        "itl_p50_s": head.get("itl_p50_s"),
        "itl_p99_s": head.get("itl_p99_s"),
        "tpot_p50_s": tpot["p50"] if tpot["count"] else None,
        "tpot_p99_s": tpot["p99"] if tpot["count"] else None,
        "e2e_p50_s": e2e["p50"] if e2e["count"] else None,
        "e2e_p99_s": e2e["p99"] if e2e["count"] else None,
        "error_rate": (requests - ok - throttled) / requests if requests else None,
        "throttled_rate": throttled / requests if requests else None,
        "stop_reason": s["stop_reason"],
        "warmup": report.get("warmup"),
    }


def saturation(rows: Sequence[Mapping[str, Any]]) -> int | None:
    """The index of the row where the endpoint saturates (module docstring), or None."""
    if not rows:
        return None
    base = _p99(rows[0])
    for i, row in enumerate(rows[1:], 1):
        offered, ok = row["offered_rate"], row["sustained_per_s"]
        if offered and (ok or 0.0) < (1 - SHORTFALL) * offered:
            return i
        p99 = _p99(row)
        if base and p99 is not None and p99 > GROWTH * base:
            return i
        if _scaled_poorly(rows[i - 1], row):
            return i
    return None


def _scaled_poorly(before: Mapping[str, Any], row: Mapping[str, Any]) -> bool:
    """Two levels of a concurrency sweep, the second with more clients, whose throughput
    gained less than ``SCALING`` of the clients' gain (module docstring)."""
    if before.get("kind") != "concurrency" or row.get("kind") != "concurrency":
        return False
    clients, clients_before = row["concurrency"], before["concurrency"]
    done, done_before = row["sustained_per_s"], before["sustained_per_s"]
    if not done_before or done is None or clients <= clients_before:
        return False
    return bool(done / done_before - 1 < SCALING * (clients / clients_before - 1))


def _p99(row: Mapping[str, Any]) -> float | None:
    value = row["ttft_p99_s"] if row["ttft_p99_s"] is not None else row["e2e_p99_s"]
    return None if value is None else float(value)


def sweep_json(result: SweepResult, data: Mapping[str, Any] | None = None) -> str:
    return json.dumps(sweep_dict(result) if data is None else data, indent=2, allow_nan=False)


def sweep_html(data: Mapping[str, Any]) -> str:
    """The sweep's page (``assets/page_sweep.js``) from its :func:`sweep_dict`: the rows
    as a table, and each figure charted against the level."""
    from pyattacker.report._html import machine, page

    extra = {"machine": machine(), "columns": [list(c) for c in _COLUMNS]}
    return page("sweep", "pyattacker sweep report", data, extra)


def sweep_text(result: SweepResult, data: Mapping[str, Any] | None = None) -> str:
    """The sweep for a terminal: what was swept, the table, the saturation verdict."""
    data = sweep_dict(result) if data is None else data
    header = [label for _, label in _COLUMNS]
    rows = [_cells(row) for row in data["rows"]]
    widths = [max(len(c) for c in col) for col in zip(header, *rows, strict=True)]
    lines = [*_intro(data), ""]
    for cells in (header, *rows):
        lines.append(
            "  ".join(_pad(c, w, i) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))
        )
    return "\n".join([*lines, "", *_verdict(data)])


def sweep_markdown(result: SweepResult, data: Mapping[str, Any] | None = None) -> str:
    data = sweep_dict(result) if data is None else data
    header = [label for _, label in _COLUMNS]
    lines = ["# pyattacker sweep", "", *(f"- {line}" for line in _intro(data)), ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cells(row)) + " |" for row in data["rows"]]
    lines += ["", *(f"- {line}" for line in _verdict(data)), ""]
    return "\n".join(lines)


def _intro(data: Mapping[str, Any]) -> list[str]:
    sweep = data["sweep"]
    first = data["levels"][0]["report"] if data["levels"] else None
    lines = [
        f"Sweep ({sweep['kind']}): {sweep['levels_run']} of {sweep['levels_planned']} levels "
        "run, one attack each; latencies on the scheduled clock, in ms; rates per second "
        "(OK/s: OK answers; out tok/s: completion tokens)."
    ]
    if first is not None:
        plan = first["plan"]
        each = [f"{plan['duration_s']:g}s" if plan["duration_s"] else "",
                f"{plan['requests']} requests" if plan["requests"] else ""]  # fmt: skip
        lines.append(f"Each level: {' or '.join(e for e in each if e)}; targets "
                     f"{', '.join(plan['targets'])}")  # fmt: skip
        if first.get("warmup") is not None:
            lines.append(
                "Each level warms up first; the first level's " + warmup_text(first["warmup"])
            )
        if first.get("headline") is not None:
            lines.append("First level: " + headline_text(first["headline"]))
    return lines


def _verdict(data: Mapping[str, Any]) -> list[str]:
    sweep = data["sweep"]
    lines = []
    if sweep["saturated_at"] is not None:
        lines.append(f"Saturates at: {sweep['saturated_at']}")
    else:
        lines.append("Saturates at: not within the levels run")
    lines.append(f"Saturation: {sweep['saturation_rule']}.")
    if sweep["interrupted"]:
        lines.append("Interrupted: the sweep stopped at Ctrl-C; the last level covers what ran.")
    return lines


def _cells(row: Mapping[str, Any]) -> list[str]:
    out = []
    for key, _ in _COLUMNS:
        value = row[key] if key != "offered" else _offered(row)
        out.append(_format(key, value))
    return out


def _offered(row: Mapping[str, Any]) -> str:
    if row["offered_rate"] is not None:
        return f"{row['offered_rate']:.2f}/s"
    return f"{row['concurrency']} client{'s' if row['concurrency'] != 1 else ''}"


def _format(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if key.endswith("_s") and not key.endswith("_per_s"):
        return f"{value * 1000:.1f}"
    if key.endswith("_rate"):
        return f"{value:.1%}"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.2f}"


def _pad(cell: str, width: int, index: int) -> str:
    return cell.ljust(width) if index == 0 else cell.rjust(width)
