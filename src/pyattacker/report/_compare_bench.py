"""Two bench reports compared: each algorithm's directional metrics, paired by seed.

The benchmark's world is seeded, so the same scenario and seeds in A and B put every
algorithm through the same weather: what differs is the code (or the scenario's
settings). Each row pairs an algorithm's per-seed values of one metric, B minus A, on
the seeds both reports ran, and takes the bench's own paired-difference interval
(Student's t, 95 %, :func:`pyattacker.benchmark.paired_difference`): the change is
significant when the interval excludes 0, and a regression when it moves the metric
against its ``better`` direction. One shared seed gives no interval (nothing to judge); a
difference every seed agrees on exactly (no spread) is significant unless it is 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyattacker.benchmark import paired_difference
from pyattacker.report._compare import Comparison, Row

__all__ = ["compare_benches"]

CONFIDENCE = 0.95


def compare_benches(a: Mapping[str, Any], b: Mapping[str, Any]) -> Comparison:
    """The rows of two bench reports (``BenchmarkReport.to_dict()`` documents)."""
    rows: list[Row] = []
    metrics = {**b["metrics"], **a["metrics"]}
    for name, metric in metrics.items():
        if metric.get("better") not in ("higher", "lower"):
            continue
        for algorithm in (alg for alg in a["algorithms"] if alg in b["algorithms"]):
            row = _row(name, metric, algorithm, _per_seed(a, algorithm, name),
                       _per_seed(b, algorithm, name))  # fmt: skip
            if row is not None:
                rows.append(row)
    return Comparison("bench", tuple(rows), tuple(_scenario_notes(a["scenario"], b["scenario"])))


def _scenario_notes(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """What differs between the two scenarios (name, then the definition's fields)."""
    notes = []
    if a["name"] != b["name"]:
        notes.append(f"the scenarios differ ({a['name']} and {b['name']})")
    da, db = a.get("definition") or {}, b.get("definition") or {}
    differ = [key for key in sorted({*da, *db}) if da.get(key) != db.get(key)]
    if differ:
        notes.append(f"the scenario definitions differ in {', '.join(differ)}")
    return notes


def _per_seed(report: Mapping[str, Any], algorithm: str, metric: str) -> dict[int, float]:
    out = {}
    for run in report["runs"]:
        value = run["metrics"].get(metric)
        if run["algorithm"] == algorithm and isinstance(value, int | float):
            out[run["seed"]] = float(value)
    return out


def _row(
    name: str,
    metric: Mapping[str, Any],
    algorithm: str,
    a: dict[int, float],
    b: dict[int, float],
) -> Row | None:
    if not a or not b:
        return None
    figure = f"{name}[{algorithm}]"
    mean_a, mean_b = sum(a.values()) / len(a), sum(b.values()) / len(b)
    unit = str(metric.get("unit", ""))
    test = "paired by seed (t, 95%)"
    if not a.keys() & b.keys():
        return Row(figure, unit, mean_a, mean_b, None, None, test, "no shared seed")
    d = paired_difference(b, a, CONFIDENCE)
    if d.ci_low is None or d.ci_high is None:  # one shared seed: no spread to judge by
        noise = f"1 shared seed, difference {d.mean:+.6g}"
        return Row(figure, unit, mean_a, mean_b, None, None, test, noise)
    significant = d.ci_low > 0 or d.ci_high < 0
    noise = f"B - A in [{d.ci_low:.6g}, {d.ci_high:.6g}] over {d.n} seeds"
    return _judged(figure, unit, (mean_a, mean_b), significant, d.mean, metric, test, noise)


def _judged(
    figure: str,
    unit: str,
    means: tuple[float, float],
    significant: bool,
    difference: float,
    metric: Mapping[str, Any],
    test: str,
    noise: str,
) -> Row:
    higher_is_better = metric.get("better") == "higher"
    worse = ((difference < 0) if higher_is_better else (difference > 0)) if significant else None
    return Row(figure, unit, *means, significant, worse, test, noise)
