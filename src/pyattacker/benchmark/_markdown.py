"""The Markdown rendering of a :class:`~pyattacker.benchmark._report.BenchmarkReport`.

:func:`render_markdown` is what ``BenchmarkReport.render_markdown()`` returns: the story
(summary and problem), the metric table with each cell's spread, the paired differences
behind every directional row, the completion gate's exclusions, the algorithms the scenario
cannot exercise, and the admitted requests per endpoint.

It renders and never decides: who can claim a row, and why nobody can, come from the
report's verdicts (the rule is in :mod:`pyattacker.benchmark._report`'s docstring), and the
numbers are formatted as the plain table formats them. Text from the scenario (its name,
summary, problem, unsuited reasons) may hold line breaks or ``|``; every piece that lands
in a table cell or a paragraph goes through :func:`_md_text` first.

Not here: the plain table and the JSON document, which stay with the report.
"""

from __future__ import annotations

from pyattacker.benchmark._metrics import METRICS, Metric
from pyattacker.benchmark._report import (
    _FEWER,
    _NOT_RANKED,
    _UNDEFINED,
    COMPLETION_FLOOR,
    SIGNIFICANCE_K,
    TIE_TOLERANCE,
    BenchmarkReport,
    _number,
    _plain,
    _Verdict,
)
from pyattacker.benchmark._stats import PairedDifference

__all__ = ["render_markdown"]


def render_markdown(report: BenchmarkReport) -> str:
    """``report`` as one Markdown document (see the module docstring for its sections); a
    section with nothing to say (no exclusion, no unsuited algorithm) is left out."""
    s = report.scenario
    parts = [
        f"# Benchmark: {_md_text(s.name)}",
        *_paragraphs(_md_text(s.summary), _bold("Problem.", _md_text(s.problem))),
        _md_text(report._headline()),
        _metrics_section(report),
        _paired_sections(report),
        _exclusions_section(report),
        _unsuited_section(report),
        _endpoints_section(report),
    ]
    return "\n\n".join(part for part in parts if part) + "\n"


# -- the metric table -----------------------------------------------------------------------


def _metrics_section(report: BenchmarkReport) -> str:
    algorithms = report.algorithms
    rows = [
        [
            name,
            METRICS[name].unit,
            *(_spread_cell(report, name, alg) for alg in algorithms),
            report._best(name, markdown=True),
        ]
        for name in METRICS
    ]
    header = ["metric", "unit", *algorithms, "best"]
    aligns = ["---", "---", *("---:" for _ in algorithms), "---"]
    legend = (
        "Cells: mean ±sample stdev (min .. max) over the seeds with a value; n=K when "
        "that is fewer than were run. \\* marks a row that requires comparable "
        f"completion; {_FEWER} a row decided only on the seeds where every candidate has "
        "a value; — means the row separates nobody; N/A means the scenario cannot "
        "exercise the algorithm (never ranked)."
    )
    return _md_table(header, aligns, rows) + "\n\n" + legend


def _spread_cell(report: BenchmarkReport, name: str, algorithm: str) -> str:
    """The plain table's mean, then ``±stdev``, ``(min .. max)`` and ``n=K`` where they
    say something (more than one seed; fewer seeds with a value than were run)."""
    found = report._aggregates[name].get(algorithm)
    if not report._suited(algorithm) or found is None:
        return report._mean_cell(name, algorithm)
    metric, text = METRICS[name], report._mean_cell(name, algorithm)
    if found.stdev is not None:
        text += f" ±{_number(found.stdev, metric)}"
    if found.n > 1:
        text += f" ({_number(found.min, metric)} .. {_number(found.max, metric)})"
    if found.n < len(report.seeds):
        text += f" n={found.n}"
    return text


# -- the paired differences -----------------------------------------------------------------


def _paired_sections(report: BenchmarkReport) -> str:
    title = "## Paired differences against the leader (95% CI, Student t at n-1 degrees of freedom)"
    intro = (
        "d = challenger - leader per seed, over the seeds where every candidate has a "
        "value (the leader is the best mean over those seeds). A challenger shares "
        f"the mark when its gap is within {TIE_TOLERANCE:.0%} of the leader's mean or "
        f"|mean d| ≤ {SIGNIFICANCE_K} x se(d)."
    )
    sections = [_paired_section(report, n) for n in METRICS if METRICS[n].directional]
    return "\n\n".join([title, intro, *sections])


def _paired_section(report: BenchmarkReport, name: str) -> str:
    metric, verdict = METRICS[name], report._verdict(name)
    heading = f"### {name} ({metric.better} is better)"
    if not verdict.winners:
        return f"{heading}\n\nNo comparison: {_no_winner_reason(verdict)}."
    leader, seeds, total = verdict.winners[0], len(verdict.seeds), len(report.seeds)
    lead = f"Leader: **{leader}** ({_number(verdict.means[leader], metric)}"
    lead += f", over {seeds} of {total} seeds)." if seeds < total else ")."
    rows = [
        _paired_row(alg, d, metric, alg in verdict.winners) for alg, d in verdict.paired.items()
    ]
    header = ["challenger", "mean d", "95% CI", "se", "n", "shares the mark"]
    table = _md_table(header, ["---", "---:", "---:", "---:", "---:", "---"], rows)
    return f"{heading}\n\n{lead}\n\n{table}"


def _no_winner_reason(verdict: _Verdict) -> str:
    if verdict.reason == "zero":
        return "every eligible algorithm scored 0"
    if verdict.reason == "disjoint":
        return "the eligible algorithms have no seed with a value in common"
    if verdict.candidates:
        return f"only {verdict.candidates[0]} was eligible"
    return "no algorithm was eligible"


def _paired_row(alg: str, d: PairedDifference, metric: Metric, shares: bool) -> list[str]:
    def fmt(value: float | None) -> str:
        return "n/a" if value is None else _number(value, metric)

    ci = "n/a (one seed)" if d.ci_low is None else f"[{fmt(d.ci_low)}, {fmt(d.ci_high)}]"
    return [alg, fmt(d.mean), ci, fmt(d.se), str(d.n), "yes" if shares else "no"]


# -- exclusions, the unsuited, the endpoints ------------------------------------------------


def _exclusions_section(report: BenchmarkReport) -> str:
    excluded = report.excluded_by_completion()
    if not excluded:
        return ""
    lines = [
        "## Excluded by the completion gate",
        f"Baseline: {_plain(report.completion_baseline())} jobs (the best mean jobs_done "
        "among the algorithms the scenario can exercise). Below "
        f"{COMPLETION_FLOOR:.0%} of it an algorithm is not ranked on any \\* row.",
        "\n".join(f"- {alg}: {ratio:.1%} of the baseline" for alg, ratio in excluded.items()),
    ]
    return "\n\n".join(lines)


def _unsuited_section(report: BenchmarkReport) -> str:
    unsuited = report._unsuited_run()
    if not unsuited:
        return ""
    items = "\n".join(f"- **{alg}** (N/A): {_md_text(why)}" for alg, why in unsuited.items())
    return f"## Not ranked: algorithms the scenario cannot exercise\n\n{items}"


def _endpoints_section(report: BenchmarkReport) -> str:
    """The scenario's endpoints in its order, then any other a run admitted to, sorted."""
    algorithms = report.algorithms
    endpoints = list(dict.fromkeys([e.id for e in report.scenario.endpoints]))
    endpoints += sorted({e for r in report.runs for e in r.endpoint_admitted} - set(endpoints))
    rows = [[e, *(_admitted_cell(report, e, alg) for alg in algorithms)] for e in endpoints]
    aligns = ["---", *("---:" for _ in algorithms)]
    table = _md_table(["endpoint", *algorithms], aligns, rows)
    return f"## Admitted requests per endpoint (mean per run)\n\n{table}"


def _admitted_cell(report: BenchmarkReport, endpoint: str, algorithm: str) -> str:
    if not report._suited(algorithm):
        return _NOT_RANKED
    runs = [r for r in report.runs if r.algorithm == algorithm]
    if not runs:
        return _UNDEFINED
    return f"{sum(r.endpoint_admitted.get(endpoint, 0) for r in runs) / len(runs):,.2f}"


# -- Markdown text --------------------------------------------------------------------------


def _md_table(header: list[str], aligns: list[str], rows: list[list[str]]) -> str:
    lines = [[_md_text(c) for c in header], aligns, *([_md_text(c) for c in r] for r in rows)]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def _md_text(text: str) -> str:
    """``text`` safe in a Markdown table cell or one paragraph: line breaks become spaces
    (a newline ends a table row) and ``|`` is escaped (it separates cells)."""
    return " ".join(text.splitlines()).replace("|", "\\|")


def _paragraphs(*texts: str) -> list[str]:
    return [text for text in texts if text]


def _bold(label: str, text: str) -> str:
    return f"**{label}** {text}" if text else ""
