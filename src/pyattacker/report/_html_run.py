"""What a run's HTML page shows beyond ``pyattacker report --json``, read from its store.

The summary has totals; a page also wants time: attempts (throttled ones too) and finished
pipelines per window (progress over time), the leases each resource had out over time (the
``run.leases`` events a live run records at its heartbeats), the retry delays the policy
asked for, failed attempts by task and error class, and the items that failed, by key. All
of it comes from the store's public reader ``Store.rows``, streamed: the attempts are read
three times (the span, the counts, then the retries and failures) rather than held, so a
run of millions of attempts costs queries, not memory.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pyattacker.store import RowKind, Store
from pyattacker.store._results import item_key

__all__ = [
    "FAILED_ITEMS_SHOWN",
    "LEASES_EVENT",
    "MAX_WINDOWS",
    "Attempt",
    "Finished",
    "store_extras",
    "timeline",
    "window_width",
]

#: failed items listed on the page (the rest are counted; ``pyattacker export`` has all)
FAILED_ITEMS_SHOWN = 500
#: windows on the timeline at most: the width grows with the run's span
MAX_WINDOWS = 300
_NICE = (1.0, 2.0, 5.0)
_QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
#: the error class of a throttled attempt (``pyattacker.retry``'s classification)
_THROTTLED = "rate_limit"
#: the event a live run records its leases with (``pyattacker.run``'s heartbeat)
LEASES_EVENT = "run.leases"


#: an attempt as the timeline reads it: ``(ended_at, outcome, retry delay or None,
#: throttled)``
Attempt = tuple[float, str, float | None, bool]
#: a pipeline in a final state: ``(updated_at, state)``
Finished = tuple[float, str]


def store_extras(store: Store) -> dict[str, Any]:
    """The timeline, retry delays, failures by task and class, leases over time and
    failed items of every run in ``store``: three passes over its attempts."""

    def attempts() -> Iterable[Attempt]:
        return _attempt_points(store.rows(RowKind.ATTEMPTS))

    def finished() -> Iterable[Finished]:
        return _finished_points(store.rows(RowKind.PIPELINES))

    progress = timeline(attempts, finished)
    items = _failed_items(store)
    spent = {item["pipeline_id"]: 0 for item in items["shown"]}
    delays, errors_by_task = _failures(store.rows(RowKind.ATTEMPTS), spent)
    for item in items["shown"]:
        item["attempts"] = spent[item.pop("pipeline_id")]
    return {
        "timeline": progress,
        "retry_delays_s": delays,
        "failed_items": items,
        "errors_by_task": errors_by_task,
        "leases": _leases(store.rows(RowKind.EVENTS), progress["start"]),
    }


def window_width(span_s: float) -> float:
    """The smallest of 1, 2, 5 times a power of ten that cuts ``span_s`` into at most
    :data:`MAX_WINDOWS` windows (at least 1 ms)."""
    needed = max(span_s / MAX_WINDOWS, 0.001)
    power = 10.0 ** math.floor(math.log10(needed))
    for step in (*_NICE, 10.0):
        if step * power >= needed:
            return step * power
    raise AssertionError("unreachable: 10 x power >= needed")


def timeline(
    attempts: Callable[[], Iterable[Attempt]], finished: Callable[[], Iterable[Finished]]
) -> dict[str, Any]:
    """Per-window counts: attempts by outcome (``ok``/``failed``/``cancelled``), those
    throttled (failed as ``rate_limit``), retries asked for, and pipelines that finished
    (by final state), over time from the first event. Each argument gives a fresh
    iteration when called; each is iterated twice (the span, then the counts)."""
    low, high = _bounds(t for t, _, _, _ in attempts())
    low2, high2 = _bounds(t for t, _ in finished())
    start, end = min(low, low2), max(high, high2)
    if start > end:
        return {"start": None, "width_s": None, "windows": []}
    width = window_width(end - start)
    windows = [
        {"t": round(i * width, 9), "ok": 0, "failed": 0, "cancelled": 0, "retries": 0,
         "succeeded": 0, "pipelines_failed": 0, "throttled": 0}
        for i in range(int((end - start) // width) + 1)
    ]  # fmt: skip
    for at, outcome, delay, throttled in attempts():
        window = windows[int((at - start) // width)]
        window[outcome] = window.get(outcome, 0) + 1
        window["retries"] += delay is not None
        window["throttled"] += throttled
    for at, state in finished():
        window = windows[int((at - start) // width)]
        window["succeeded" if state == "succeeded" else "pipelines_failed"] += 1
    return {"start": start, "width_s": width, "windows": windows}


def _bounds(times: Iterable[float]) -> tuple[float, float]:
    """The earliest and latest of ``times``; ``(inf, -inf)`` for none."""
    low, high = math.inf, -math.inf
    for t in times:
        low, high = min(low, t), max(high, t)
    return low, high


def _attempt_points(rows: Iterable[Mapping[str, Any]]) -> Iterable[Attempt]:
    for row in rows:
        decision = row.get("decision") or {}
        delay = decision.get("delay_s") if decision.get("retry") else None
        throttled = row.get("error_class") == _THROTTLED
        yield float(row["ended_at"]), str(row["outcome"]), delay, throttled


def _failures(
    rows: Iterable[Mapping[str, Any]], spent: dict[str, int]
) -> tuple[dict[str, Any], dict[str, dict[str, int]]]:
    """In one pass: the retry delays asked for (:func:`_delays`), failed attempts by task,
    then by error class (most first within a task), and the attempts of each pipeline
    ``spent`` names (counted into it)."""
    delays: list[float] = []
    counts: dict[str, Counter[str]] = {}
    for row in rows:
        pid = row["pipeline_id"]
        if pid in spent:
            spent[pid] += 1
        decision = row.get("decision") or {}
        if decision.get("retry") and decision.get("delay_s") is not None:
            delays.append(float(decision["delay_s"]))
        if row["outcome"] == "failed":
            task = counts.setdefault(str(row["task"]), Counter())
            task[str(row.get("error_class") or "unknown")] += 1
    errors = {task: dict(c.most_common()) for task, c in sorted(counts.items())}
    return _delays(delays), errors


def _leases(events: Iterable[Mapping[str, Any]], start: float | None) -> dict[str, Any]:
    """The ``run.leases`` events as columns: ``t`` (seconds from the timeline's start, or
    from the first event when there is no attempt), and each resource's leases out then
    (``in_use``) and its ``limit`` (the last recorded). Events are few: one per heartbeat
    at most, and only when the counts changed."""
    points = [(float(e["at"]), e["data"]) for e in events if e["kind"] == LEASES_EVENT]
    if not points:
        return {"t": [], "in_use": {}, "limit": {}}
    points.sort(key=lambda point: point[0])
    origin = points[0][0] if start is None else start
    names = sorted({name for _, data in points for name in data.get("in_use", {})})
    in_use = {name: [data.get("in_use", {}).get(name) for _, data in points] for name in names}
    return {
        "t": [round(at - origin, 6) for at, _ in points],
        "in_use": in_use,
        "limit": dict(points[-1][1].get("limit", {})),
    }


def _finished_points(rows: Iterable[Mapping[str, Any]]) -> Iterable[tuple[float, str]]:
    for row in rows:
        if row["state"] in ("succeeded", "failed"):
            yield float(row["updated_at"]), str(row["state"])


def _delays(values: Iterable[float]) -> dict[str, Any]:
    """Count, sum and nearest-rank percentiles of the retry delays (seconds)."""
    ordered = sorted(float(v) for v in values)
    if not ordered:
        return {"count": 0}
    out: dict[str, Any] = {"count": len(ordered), "sum": math.fsum(ordered)}
    for name, q in _QUANTILES:
        out[name] = ordered[max(math.ceil(q * len(ordered)) - 1, 0)]
    out["max"] = ordered[-1]
    return out


def _failed_items(store: Store) -> dict[str, Any]:
    """The pipelines that did not succeed, as ``results`` gives them (key, state, the step
    they stopped at with its error class, the error), the first
    :data:`FAILED_ITEMS_SHOWN` with their ``pipeline_id`` (their attempts are counted in
    the pass over the attempts). Unlike ``results``, it decodes no artifact and does not
    read the attempts: on a big store those were most of a page's cost."""
    stopped: dict[str, Mapping[str, Any]] = {}  # the last task that did not succeed
    for task in store.rows(RowKind.TASKS):
        found = stopped.get(task["pipeline_id"])
        if task["state"] != "succeeded" and (found is None or task["seq"] >= found["seq"]):
            stopped[task["pipeline_id"]] = task
    shown: list[dict[str, Any]] = []
    count = 0
    for row in store.rows(RowKind.PIPELINES):
        if row["state"] == "succeeded":
            continue
        count += 1
        if len(shown) < FAILED_ITEMS_SHOWN:
            last = stopped.get(row["pipeline_id"])
            shown.append({
                "pipeline_id": row["pipeline_id"], "key": item_key(row), "state": row["state"],
                "step": None if last is None else last["name"],
                "error_class": None if last is None else last["error_class"],
                "error": row["error"],
            })  # fmt: skip
    return {"count": count, "shown": shown}
