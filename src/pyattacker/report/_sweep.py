"""A sweep's report: one row per level, and the level where the endpoint saturates.

Each row is made of the level's own JSON report (its ``headline`` for an LLM run, its
summary and totals), so a row and the level's full report (kept whole under
``levels[i].report`` in the JSON) always agree. Latencies are on the scheduled clock
(what a user waits), like the headline's.

Saturation (an opinion, so it lives here): the rows in order of offered load, the first
row after the first that either

- offered an open-model rate and sustained less than ``1 - SHORTFALL`` of the arrivals it
  was offered: ``sustained_per_s`` (OK answers per second of the span it sent over, so
  the last answers' tail does not count against it) below 90 % of ``arrivals_per_s``
  (the arrivals the schedule made a second: Poisson arrivals draw more or fewer than the
  nominal rate), or
- has a p99 latency more than ``GROWTH`` times the first row's (TTFT on the scheduled
  clock when the level streamed, else end to end / latency on the scheduled clock), or
- in a concurrency sweep, sustained less than ``SCALING`` of the gain its added clients
  would bring if each were served as fast as at the level before: by Little's law a
  closed model's throughput grows with its clients until the endpoint has no more to
  give (from 4 to 16 clients, ``sustained_per_s`` must reach 2.5 times the level before's).
  The latency rule alone misses an endpoint that queues the extra clients evenly.

A closed-model row's ``sustained_per_s`` is its OK answers per second of the whole run
(``requests_per_s``): its clients send only as answers come back, so the last answers'
tail is part of its pace (over the sending span alone, the request each client still had
in flight at its end would add to the count and not to the time). An open-model row's
counts an endpoint that answers late, but answers, as sustaining: the latency rule is what
catches that one.

A level stopped by Ctrl-C (``stopped``) takes no part: its figures cover a part of it.
The first row is the baseline: when it failed more than half its requests, no level can
be judged against it, and the verdict says so. The verdict names the rule that fired.

A sweep with no such row says the endpoint did not saturate within the levels run.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyattacker.attack import SweepLevel, SweepResult
from pyattacker.report._lead import warmup_what

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
    f"the first level after the first that sustained less than {1 - SHORTFALL:.0%} of the "
    "arrivals it was offered (sustained/s: OK answers per second of the span it sent over; "
    "a closed model's, of the whole run), or whose "
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
    rows = [
        level_row(level, report, stopped=outcome.interrupted)
        for (level, outcome), report in zip(ordered, reports, strict=True)
    ]
    at, reason = saturation(rows)
    return {
        "sweep": {
            "kind": result.spec.kind,
            "levels_planned": result.spec.planned(),
            "levels_run": len(rows),
            "interrupted": result.interrupted,
            "saturation_rule": SATURATION_RULE,
            "saturated_at": None if at is None else rows[at]["level"],
            "saturated_index": at,
            "saturation_reason": reason,
        },
        "rows": rows,
        "levels": [
            {"level": row["level"], "report": r} for row, r in zip(rows, reports, strict=True)
        ],
    }


def level_row(
    level: SweepLevel, report: Mapping[str, Any], *, stopped: bool = False
) -> dict[str, Any]:
    """One level's row from its JSON report (durations in seconds, rates per second);
    ``stopped``: the level was cut short (Ctrl-C), so it covers a part of itself."""
    s, total = report["summary"], report["total"]
    outcomes = total["outcomes"]
    # Requests cancelled by a Ctrl-C are ours, not the endpoint's: in no rate.
    requests = total["requests"] - outcomes.get("cancelled", 0)
    ok, throttled = outcomes.get("ok", 0), outcomes.get("throttled", 0)
    span = s["answer_span_s"]
    sending = s["sending_span_s"]
    closed = level.offered_rate is None
    over = span if closed else sending  # a closed model's pace includes its answers' tail
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
        "arrivals_per_s": None if closed or not sending else s["scheduled"] / sending,
        "requests_per_s": ok / span if span else None,
        "sustained_per_s": ok / over if over else None,
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
        "stopped": stopped,
        "warmup": report.get("warmup"),
        "top_error": report["errors"][0]["example"] if report.get("errors") else None,
    }


def saturation(rows: Sequence[Mapping[str, Any]]) -> tuple[int | None, str | None]:
    """The index of the row where the endpoint saturates (module docstring) and why, or
    ``(None, None)``; ``(None, why)`` when the first row cannot be the baseline."""
    judged = [(i, row) for i, row in enumerate(rows) if not row.get("stopped")]
    if not judged:
        return None, None
    first = judged[0][1]
    if (first["error_rate"] or 0.0) > 0.5:
        return None, (
            f"the first level ({first['level']}) failed {first['error_rate']:.0%} of its "
            "requests, so no level can be judged against it (see the errors)"
        )
    base = _p99(first)
    for (_, before), (i, row) in itertools.pairwise(judged):
        reason = _why(row, before, base)
        if reason is not None:
            return i, reason
    return None, None


def _why(row: Mapping[str, Any], before: Mapping[str, Any], base: float | None) -> str | None:
    """Why ``row`` saturates (module docstring), or None; ``before`` is the row before."""
    offered, ok = row.get("arrivals_per_s"), row["sustained_per_s"]
    if offered and (ok or 0.0) < (1 - SHORTFALL) * offered:
        return (
            f"sustained {ok or 0.0:,.2f}/s, under {1 - SHORTFALL:.0%} of the "
            f"{offered:,.2f} arrivals/s it was offered"
        )
    p99 = _p99(row)
    if base and p99 is not None and p99 > GROWTH * base:
        what = "TTFT" if row["ttft_p99_s"] is not None else "latency"
        return (
            f"{what} p99 {p99 * 1000:,.1f} ms, over {GROWTH:g}x the first level's "
            f"{base * 1000:,.1f} ms"
        )
    if _scaled_poorly(before, row):
        return (
            f"{row['concurrency']} clients sustained {row['sustained_per_s']:,.2f}/s against "
            f"{before['sustained_per_s']:,.2f}/s with {before['concurrency']}: less than "
            f"{SCALING:.0%} of what the added clients would bring"
        )
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

    notes = [*_lead(data["rows"]), *_errors(data["rows"])]
    extra = {"machine": machine(), "columns": [list(c) for c in _COLUMNS], "notes": notes}
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
        lines += _lead(data["rows"])
    return lines


def _lead(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the levels' warmups sent in all, and the level of the highest output: the
    lines the text, Markdown and HTML reports lead with."""
    lines = _warmups(rows)
    best = _best_output(rows)
    if best is not None:
        lines.append(
            f"Highest output: {best['output_tokens_per_s']:,.1f} tokens/s at {best['level']} "
            f"({best['requests_per_s'] or 0.0:,.2f} OK/s); each level's headline figures "
            "are its row (out tok/s, OK/s, TTFT and ITL p50/p99)"
        )
    return lines


def _warmups(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """How much every level's warmup sent, in all (each level warms up anew)."""
    warmups = [row["warmup"] for row in rows if row.get("warmup")]
    if not warmups:
        return []
    sent = sum(w["sent"] for w in warmups)
    attempts = sum(w["sent_attempts"] for w in warmups)
    first = warmup_what(warmups[0])
    return [
        f"Warmup: each level first sends {first}, excluded from every figure; in all the "
        f"warmups sent {attempts:,} attempts for {sent:,} requests over {len(warmups)} "
        "levels (count them against the server's own count; per level: rows[].warmup in "
        "the JSON)"
    ]


def _best_output(rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    produced = [row for row in rows if row.get("output_tokens_per_s")]
    return max(produced, key=lambda row: row["output_tokens_per_s"]) if produced else None


def _verdict(data: Mapping[str, Any]) -> list[str]:
    sweep = data["sweep"]
    reason = sweep.get("saturation_reason")
    lines = _errors(data["rows"])
    if sweep["saturated_at"] is not None:
        lines.append(f"Saturates at: {sweep['saturated_at']} ({reason})")
    elif reason is not None:
        lines.append(f"Saturates at: cannot say: {reason}")
    else:
        lines.append("Saturates at: not within the levels run")
    lines.append(f"Saturation: {sweep['saturation_rule']}.")
    if sweep["interrupted"]:
        lines.append(
            "Interrupted: the sweep was stopped (Ctrl-C or a signal); a level marked "
            "(stopped) covers what ran of it and takes no part in the verdict."
        )
    return lines


def _errors(rows: Sequence[Mapping[str, Any]], most: int = 3) -> list[str]:
    """The levels' most common error messages, each once, with the levels it ended."""
    by_message: dict[str, list[str]] = {}
    for row in rows:
        if row.get("top_error"):
            by_message.setdefault(row["top_error"], []).append(row["level"])
    return [f"Errors ({', '.join(levels)}): {message}"
            for message, levels in list(by_message.items())[:most]]  # fmt: skip


def _cells(row: Mapping[str, Any]) -> list[str]:
    out = []
    for key, _ in _COLUMNS:
        value = row[key] if key != "offered" else _offered(row)
        out.append(_format(key, value))
    if row.get("stopped"):
        out[0] += " (stopped)"
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
