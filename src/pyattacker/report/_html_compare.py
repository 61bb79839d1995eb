"""The page of ``pyattacker compare A.json B.json --html PATH``.

Its JSON report is the comparison exactly as ``compare --json`` writes it (``{"a", "b",
"kind", "notes", "regressions", "improvements", "rows"}``), so every figure of its table
is a value of that document. What the page adds, from the two compared reports, is
labelled as such in ``extra``: who each run is (its file, start, version and plan, or its
bench scenario and seeds) and what the charts draw (each attack's latency distributions
on both clocks; each bench algorithm's per-seed values). The page itself is built by
:func:`pyattacker.report._html.page`, like every other report page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyattacker.report._html import page

__all__ = ["compare_html"]

#: the distributions an attack's chart draws: (name, path in the attack report)
_DISTS = (
    ("latency", ("total", "latency_s", "scheduled")),
    ("service_time", ("total", "latency_s", "sent")),
    ("ttft", ("llm", "ttft_s", "sent")),
)


def compare_html(comparison: Mapping[str, Any], a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    """The page of ``comparison`` (the ``compare --json`` document, holding the two file
    names under ``"a"`` and ``"b"``) of the reports ``a`` and ``b`` it was made from."""
    names = (str(comparison.get("a", "A")), str(comparison.get("b", "B")))
    pairs = zip(names, (a, b), strict=True)
    if comparison["kind"] == "attack":
        runs = [_attack_run(name, report) for name, report in pairs]
    else:
        figures = [row["figure"] for row in comparison["rows"]]
        runs = [_bench_run(name, report, figures) for name, report in pairs]
    title = f"pyattacker compare ({comparison['kind']} reports)"
    counts = {key: len(comparison[key]) for key in ("regressions", "improvements", "rows")}
    return page("compare", title, comparison, {"runs": runs, "counts": counts})


def _attack_run(name: str, report: Mapping[str, Any]) -> dict[str, Any]:
    """Who an attack run is, and its latency distributions for the charts."""
    dists = {key: _get(report, path) for key, path in _DISTS}
    return {
        "file": name,
        "started_at": report.get("started_at"),
        "pyattacker": report.get("pyattacker"),
        "plan": report.get("plan", {}),
        "dists": {key: dist for key, dist in dists.items() if isinstance(dist, Mapping)},
    }


def _bench_run(name: str, report: Mapping[str, Any], figures: Sequence[str]) -> dict[str, Any]:
    """Who a bench sweep is, and each compared figure's per-seed values (``metric[alg]``)."""
    scenario = report["scenario"]
    values: dict[str, list[float]] = {figure: [] for figure in figures}
    for run in report["runs"]:
        for figure in figures:
            metric, _, algorithm = figure[:-1].partition("[")
            value = run["metrics"].get(metric)
            if run["algorithm"] == algorithm and isinstance(value, int | float):
                values[figure].append(float(value))
    return {
        "file": name,
        "scenario": scenario["name"],
        "seeds": scenario["seeds"],
        "algorithms": report["algorithms"],
        "values": values,
    }


def _get(report: Mapping[str, Any], path: Sequence[str]) -> Any:
    value: Any = report
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value
