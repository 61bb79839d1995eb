"""What a run's HTML page shows beyond ``pyattacker report --json``, read from its store.

The summary has totals; a page also wants time: attempts and finished pipelines per window
(progress over time), the retry delays the policy asked for, and the items that failed,
by key. All of it comes from the store's public readers (``Store.rows``, ``results``),
streamed: the attempts are read more than once (the span, then the counts) rather than
held, so a run of millions of attempts costs queries, not memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pyattacker.store import RowKind, Store, results

__all__ = [
    "FAILED_ITEMS_SHOWN",
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


#: an attempt as the timeline reads it: ``(ended_at, outcome, retry delay or None)``
Attempt = tuple[float, str, float | None]
#: a pipeline in a final state: ``(updated_at, state)``
Finished = tuple[float, str]


def store_extras(store: Store) -> dict[str, Any]:
    """The timeline, retry delays and failed items of every run in ``store``."""

    def attempts() -> Iterable[Attempt]:
        return _attempt_points(store.rows(RowKind.ATTEMPTS))

    def finished() -> Iterable[Finished]:
        return _finished_points(store.rows(RowKind.PIPELINES))

    return {
        "timeline": timeline(attempts, finished),
        "retry_delays_s": _delays(delay for _, _, delay in attempts() if delay is not None),
        "failed_items": _failed_items(store),
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
    """Per-window counts: attempts by outcome (``ok``/``failed``/``cancelled``), retries
    asked for, and pipelines that finished (by final state), over time from the first
    event. Each argument gives a fresh iteration when called; each is iterated twice (the
    span, then the counts)."""
    low, high = _bounds(t for t, _, _ in attempts())
    low2, high2 = _bounds(t for t, _ in finished())
    start, end = min(low, low2), max(high, high2)
    if start > end:
        return {"start": None, "width_s": None, "windows": []}
    width = window_width(end - start)
    windows = [
        {"t": round(i * width, 9), "ok": 0, "failed": 0, "cancelled": 0, "retries": 0,
         "succeeded": 0, "pipelines_failed": 0}
        for i in range(int((end - start) // width) + 1)
    ]  # fmt: skip
    for at, outcome, delay in attempts():
        window = windows[int((at - start) // width)]
        window[outcome] = window.get(outcome, 0) + 1
        window["retries"] += delay is not None
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


def _attempt_points(
    rows: Iterable[Mapping[str, Any]],
) -> Iterable[tuple[float, str, float | None]]:
    for row in rows:
        decision = row.get("decision") or {}
        delay = decision.get("delay_s") if decision.get("retry") else None
        yield float(row["ended_at"]), str(row["outcome"]), delay


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
    shown: list[dict[str, Any]] = []
    count = 0
    for row in results(store):
        if row["state"] == "succeeded":
            continue
        count += 1
        if len(shown) < FAILED_ITEMS_SHOWN:
            shown.append({name: row[name] for name in _ITEM_FIELDS})
    return {"count": count, "shown": shown}


_ITEM_FIELDS = ("key", "state", "step", "error_class", "error", "attempts")
