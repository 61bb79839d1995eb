"""The mean latency of two attack reports, with a noise bound that sees time-correlated
noise: the part of ``compare`` with the most power against a shifted distribution.

Each run's 99 % interval of its mean is the wider of two:

* **Within the run, samples independent**: ``mean -/+ 2.576 sqrt(V / n)``, with ``V`` an
  upper bound of the variance from the report's own percentiles: every sample of rank in
  ``(rank(p_i), rank(p_i+1)]`` is at most ``p_i+1``, so ``E[X²] <= Σ count_i p_i+1² / n``
  and ``V = that - mean²`` (values are durations, never negative). No distribution is
  assumed; only the exact mean and the percentiles are used.
* **Across the run's windows** (batch means): a machine that is busier for a while makes
  a burst of slow requests, which independent samples do not model. The windows' means
  (``--window``, weighted by their counts) give the cluster variance of the overall mean,
  ``k/(k-1) Σ c_i² (m_i - m)² / N²`` over ``k`` windows, and Student's t at 99 % with
  ``k - 1`` degrees of freedom. With one window this part is unknown (only the first
  applies); more windows (a longer run, a shorter ``--window``) make it sharper.

The difference is flagged when the two intervals do not overlap. What it cannot see:
noise *between* runs (the machine busier during all of one run than the other), which only
repeated runs measure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pyattacker.report._compare import Z99, Row

__all__ = ["mean_interval", "mean_rows"]

_LEVELS = (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99), ("p99.9", 0.999))


def mean_interval(
    summary: Mapping[str, Any], windows: Sequence[Mapping[str, Any]]
) -> tuple[float, float] | None:
    """The 99 % interval of ``summary``'s mean (see the module docstring), ``windows``
    being the per-window summaries of the same figure; ``None`` when it is empty."""
    n, mean = summary.get("count") or 0, summary.get("mean")
    if n < 1 or mean is None:
        return None
    half = Z99 * math.sqrt(_variance_bound(summary) / n)
    batches = [
        (w["count"], w["mean"]) for w in windows if w.get("count") and w.get("mean") is not None
    ]
    if len(batches) >= 2:
        half = max(half, _batch_half_width(batches))
    return mean - half, mean + half


def _variance_bound(summary: Mapping[str, Any]) -> float:
    n: int = summary["count"]
    value = float(summary["min"])
    squares, rank = value**2, 1
    for key, level in [*_LEVELS, ("max", 1.0)]:
        if summary.get(key) is not None:
            value = float(summary[key])
        upto = n if key == "max" else max(1, math.ceil(level * n))
        if upto > rank:
            squares += (upto - rank) * value**2
            rank = upto
    return max(squares / n - float(summary["mean"]) ** 2, 0.0)


def _batch_half_width(batches: Sequence[tuple[int, float]]) -> float:
    from pyattacker.benchmark import t_quantile  # the bench's exact t; loaded only here

    total = sum(c for c, _ in batches)
    mean = sum(c * m for c, m in batches) / total
    k = len(batches)
    variance = k / (k - 1) * sum(c * c * (m - mean) ** 2 for c, m in batches) / total**2
    return float(t_quantile(0.995, k - 1)) * math.sqrt(variance)


def mean_rows(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Row]:
    """``mean(latency)`` and ``mean(service_time)`` of two attack reports."""
    rows = []
    for clock, name in (("scheduled", "latency"), ("sent", "service_time")):
        sa, sb = a["total"]["latency_s"][clock], b["total"]["latency_s"][clock]
        ia = mean_interval(sa, [w.get(name, {}) for w in a.get("windows", [])])
        ib = mean_interval(sb, [w.get(name, {}) for w in b.get("windows", [])])
        figure = f"mean({name})"
        if ia is None or ib is None:
            rows.append(Row(figure, "s", sa.get("mean"), sb.get("mean"), None, None, "mean", "-"))
            continue
        significant = ia[1] < ib[0] or ib[1] < ia[0]
        worse = (ib[0] > ia[1]) if significant else None
        noise = f"A in [{_ms(ia)}] B in [{_ms(ib)}] ms"
        rows.append(Row(figure, "s", sa["mean"], sb["mean"], significant, worse, "mean", noise))
    return rows


def _ms(interval: tuple[float, float]) -> str:
    return f"{interval[0] * 1000:.3f}, {interval[1] * 1000:.3f}"
