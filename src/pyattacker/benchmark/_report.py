"""``BenchmarkReport``: which algorithms can claim each metric of a sweep, and why not others.

The winner rule in one sentence: a quality row is decided among the algorithms that did
comparable work, and only when at least two of them could be compared at all. In steps, for
each directional row of :data:`METRICS` (a neutral row describes and crowns nobody):

1. candidates are the algorithms that ran and have a finite value on the row on at least
   one seed, minus those the scenario declares ``unsuited`` (never ranked, ``N/A``
   everywhere), minus — on a row that ``requires_comparable_completion`` — those whose
   mean ``jobs_done`` is below ``COMPLETION_FLOOR`` of the best suited algorithm's (the
   completion gate);
2. fewer than two candidates crowns nobody (a lone one is named ``not_compared``: silence
   would read as "nobody did well");
3. the row is ranked on its *shared seeds* only: the seeds on which every candidate has a
   finite value (a metric is NaN where it is undefined, e.g. a latency percentile on a
   seed where an algorithm completed nothing). Every mean compared below is over exactly
   those seeds, so no algorithm is judged on a seed another one lacks. No shared seed, or
   every candidate's shared-seed mean 0, crowns nobody;
4. the leader is the best shared-seed mean; a challenger shares the mark when its gap is
   within ``TIE_TOLERANCE`` of the leader's mean, or its paired per-seed difference (over
   the shared seeds, at least two) is within ``SIGNIFICANCE_K`` standard errors of zero.
   With one shared seed only the tolerance applies: the best value wins.

The cells still show each algorithm's mean over all its defined seeds (facts, with ``n``
in the JSON and the Markdown); a row ranked on fewer seeds than were run says so in a
footnote (``†``), naming how many.

There is deliberately no composite score: its weights would be the opinion, hidden.

The plain table and the JSON document are rendered here; the Markdown report, which only
reads these verdicts, in :mod:`pyattacker.benchmark._markdown`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pyattacker.benchmark._file import to_mapping
from pyattacker.benchmark._metrics import METRICS, Metric
from pyattacker.benchmark._result import RunResult
from pyattacker.benchmark._stats import (
    Aggregate,
    PairedDifference,
    aggregate,
    on_shared_keys,
    paired_difference,
)
from pyattacker.errors import ConfigError
from pyattacker.pool import ALGORITHMS
from pyattacker.world import Scenario

__all__ = [
    "COMPLETION_FLOOR",
    "SIGNIFICANCE_K",
    "TIE_TOLERANCE",
    "BenchmarkReport",
    "default_algorithms",
]

#: an algorithm below this share of the best suited mean ``jobs_done`` is not ranked on a
#: quality row: the client controls the denominator of almost every rate.
COMPLETION_FLOOR = 0.9
#: a relative gap this small is not evidence at a handful of seeds.
TIE_TOLERANCE = 0.01
#: paired standard errors a gap must exceed; a heuristic, deliberately not called "95%".
SIGNIFICANCE_K = 2.0

_COMPLETION = "jobs_done"
_CONFIDENCE = 0.95
_NOT_RANKED = "N/A"
_UNDEFINED = "-"
_NOBODY = "—"
_FEWER = "†"


def default_algorithms(scenario: Scenario) -> list[str]:
    """Every registered algorithm, in ``ALGORITHMS`` order, that the scenario can exercise."""
    return [name for name in ALGORITHMS if name not in scenario.unsuited]


@dataclass(frozen=True)
class _Verdict:
    """One row's decision: who was compared, on which seeds, who can claim it, and why.

    ``winners`` is empty exactly when ``reason`` is set. ``seeds`` are the shared seeds
    the row was ranked on and ``means`` each candidate's mean over them (both empty when
    the row was not ranked); ``paired`` has every challenger, over the same seeds.
    """

    candidates: tuple[str, ...]
    winners: tuple[str, ...] = ()
    paired: Mapping[str, PairedDifference] = field(default_factory=dict)
    reason: str | None = None
    seeds: tuple[int, ...] = ()
    means: Mapping[str, float] = field(default_factory=dict)


class BenchmarkReport:
    """The results of ``algorithms`` x ``seeds`` on ``scenario``, read per metric.

    Raises ``ValueError`` when a run does not have exactly the keys of ``METRICS`` (naming
    the missing and unknown ones), belongs to another scenario, algorithm or seed, repeats
    an (algorithm, seed), or when an algorithm the scenario can exercise has no run. A
    non-finite metric value counts as undefined for that run: it is left out of the
    aggregate (``-`` in the table, ``None`` in JSON) and never compared.
    """

    def __init__(
        self,
        scenario: Scenario,
        algorithms: Sequence[str],
        seeds: Sequence[int],
        runs: Sequence[RunResult],
    ) -> None:
        self.scenario = scenario
        self.algorithms = _unique(algorithms, "algorithm")
        self.seeds = _unique(seeds, "seed")
        self.runs = tuple(runs)
        _check_runs(scenario, self.algorithms, self.seeds, self.runs)
        self._values = _per_seed_values(self.runs)
        self._aggregates = {
            name: {alg: aggregate(v.values()) for alg, v in by_alg.items() if v}
            for name, by_alg in self._values.items()
        }
        self._verdicts: dict[str, _Verdict] = {}

    def __repr__(self) -> str:
        return (
            f"<BenchmarkReport {self.scenario.name!r} algorithms={list(self.algorithms)} "
            f"seeds={len(self.seeds)} runs={len(self.runs)}>"
        )

    # -- numbers ------------------------------------------------------------------------------

    def aggregates(self) -> dict[str, dict[str, Aggregate]]:
        """metric -> algorithm -> its aggregate over seeds (every algorithm that ran, the
        unsuited included: these are facts; the renderings mark those ``N/A``)."""
        return {name: dict(by_alg) for name, by_alg in self._aggregates.items()}

    def completion_baseline(self) -> float | None:
        """The best mean ``jobs_done`` among the algorithms the scenario can exercise (an
        unsuited one cannot set the bar it is not ranked against); ``None`` if none ran."""
        means = [a.mean for alg, a in self._aggregates[_COMPLETION].items() if self._suited(alg)]
        return max(means) if means else None

    def completion_ratio(self, algorithm: str) -> float | None:
        """``algorithm``'s mean ``jobs_done`` over the baseline; ``None`` when either is
        undefined or the baseline is 0 (nobody completed anything: nothing to compare to)."""
        baseline = self.completion_baseline()
        own = self._aggregates[_COMPLETION].get(algorithm)
        if baseline is None or baseline <= 0.0 or own is None:
            return None
        return own.mean / baseline

    def excluded_by_completion(self) -> dict[str, float]:
        """Suited algorithms below ``COMPLETION_FLOOR`` of the baseline -> their ratio."""
        ratios = {alg: self.completion_ratio(alg) for alg in self.algorithms if self._suited(alg)}
        return {alg: r for alg, r in ratios.items() if r is not None and r < COMPLETION_FLOOR}

    # -- verdicts -----------------------------------------------------------------------------

    def winners(self, metric: str) -> tuple[str, ...]:
        """The algorithms that can claim ``metric``: the leader, then the sharers by mean.

        Empty for a neutral row, fewer than two candidates, or all-zero means (see the
        module docstring). Raises ``KeyError`` for a name not in ``METRICS``.
        """
        return self._verdict(metric).winners

    def paired_differences(self, metric: str) -> dict[str, PairedDifference]:
        """candidate -> its paired difference against the row's leader (95% CI) over the
        row's :meth:`ranked_seeds`; the leader itself is omitted, and a row without winners
        has no leader, hence ``{}``."""
        return dict(self._verdict(metric).paired)

    def ranked_seeds(self, metric: str) -> tuple[int, ...]:
        """The seeds ``metric``'s verdict was decided on: those where every candidate has a
        finite value. Empty when the row was not ranked (neutral, fewer than two candidates,
        or no seed they all share)."""
        return self._verdict(metric).seeds

    def not_compared(self) -> dict[str, str]:
        """Directional metric -> the one algorithm left eligible on it, which is therefore
        not crowned (a star is a comparison, and one algorithm is not)."""
        lone = {name: self._verdict(name).candidates for name in METRICS}
        return {name: c[0] for name, c in lone.items() if len(c) == 1}

    def _verdict(self, metric: str) -> _Verdict:
        if metric not in self._verdicts:
            self._verdicts[metric] = self._decide(METRICS[metric])
        return self._verdicts[metric]

    def _decide(self, metric: Metric) -> _Verdict:
        if not metric.directional:
            return _Verdict((), reason="neutral")
        candidates = self._candidates(metric)
        if len(candidates) < 2:
            return _Verdict(candidates, reason="unrivaled")
        values = {alg: self._values[metric.name][alg] for alg in candidates}
        shared = on_shared_keys(values, self.seeds)
        seeds = tuple(shared[candidates[0]])
        if not seeds:
            return _Verdict(candidates, reason="disjoint")
        means = {alg: statistics.fmean(v.values()) for alg, v in shared.items()}
        if all(mean == 0.0 for mean in means.values()):
            return _Verdict(candidates, reason="zero", seeds=seeds, means=means)
        return _rank(metric, shared, means)

    def _candidates(self, metric: Metric) -> tuple[str, ...]:
        gated = self.excluded_by_completion() if metric.requires_comparable_completion else {}
        measured = self._aggregates[metric.name]
        return tuple(
            alg
            for alg in self.algorithms
            if alg in measured and self._suited(alg) and alg not in gated
        )

    def _suited(self, algorithm: str) -> bool:
        return algorithm not in self.scenario.unsuited

    # -- renderings ---------------------------------------------------------------------------

    def render_table(self) -> str:
        """Plain monospace text: one row per metric, one column per algorithm (the mean),
        and the ``best`` column, then footnotes (legend, exclusions, lone survivors)."""
        header = ["metric", *self.algorithms, "best"]
        rows = [
            [name, *(self._mean_cell(name, alg) for alg in self.algorithms), self._best(name)]
            for name in METRICS
        ]
        return "\n".join([self._headline(), *_align([header, *rows]), "", *self._notes()]) + "\n"

    def render_markdown(self) -> str:
        """Markdown: summary and problem, mean ±stdev (min .. max) per cell, the paired
        differences per directional row, exclusions, unsuited algorithms with their reasons,
        and the mean admitted requests per endpoint."""
        # Imported here, not at the top: _markdown needs this module's rule constants,
        # cell formatting and _Verdict, so it imports _report; a top-level import back
        # would be a cycle. The method stays here because it is the public API.
        from pyattacker.benchmark._markdown import render_markdown

        return render_markdown(self)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable document (``json.dumps(..., allow_nan=False)`` works): an
        undefined number is ``None``, and an unsuited algorithm's aggregates are ``None``."""
        return {
            "scenario": self._scenario_dict(),
            "algorithms": list(self.algorithms),
            "unsuited": {a: r for a, r in self.scenario.unsuited.items() if a in self.algorithms},
            "metrics": {name: _metric_dict(m) for name, m in METRICS.items()},
            "aggregates": {name: self._aggregates_dict(name) for name in METRICS},
            "winners": {name: list(self.winners(name)) for name in METRICS},
            "excluded_by_completion": self.excluded_by_completion(),
            "not_compared": self.not_compared(),
            "paired_differences": {
                name: self._paired_row_dict(name) for name in METRICS if METRICS[name].directional
            },
            "runs": [_finite(run.to_dict()) for run in self.runs],
        }

    # -- rendering helpers --------------------------------------------------------------------

    def _headline(self) -> str:
        s = self.scenario
        wall = sum(a for run in self.runs if math.isfinite(a := run.metrics["wall_s"]))
        seeds = ", ".join(str(seed) for seed in self.seeds)
        # The sum of every run's own wall_s: with processes sharing the runs it exceeds the
        # elapsed time, which only the caller knows.
        return (
            f"{s.name} · {len(self.seeds)} seed(s) ({seeds}) · {s.jobs:,} jobs x "
            f"{s.steps_per_job} steps x {s.calls_per_step} calls, {s.concurrency} workers, "
            f"horizon {s.horizon_s:g}s · run time {wall:.2f}s summed over {len(self.runs)} runs"
        )

    def _mean_cell(self, name: str, algorithm: str) -> str:
        if not self._suited(algorithm):
            return _NOT_RANKED
        found = self._aggregates[name].get(algorithm)
        return _UNDEFINED if found is None else _number(found.mean, METRICS[name])

    def _best(self, name: str, *, markdown: bool = False) -> str:
        """The ``best`` cell of either rendering; the Markdown one also names a lone
        eligible algorithm and escapes the gated row's ``*``."""
        verdict = self._verdict(name)
        text = ", ".join(verdict.winners) or _NOBODY
        if markdown and verdict.reason == "unrivaled" and verdict.candidates:
            text += f" (only {verdict.candidates[0]} was eligible)"
        if name in self._ranked_on_fewer_seeds():
            text += f" {_FEWER}"
        if METRICS[name].requires_comparable_completion:
            text += " \\*" if markdown else " *"
        return text

    def _notes(self) -> list[str]:
        baseline = self.completion_baseline()
        notes = [
            f"* ranked only among algorithms with at least {COMPLETION_FLOOR:.0%} of the best "
            f"mean jobs_done ({_plain(baseline)}) of the algorithms the scenario can exercise",
            f"best: the leader, then anyone within {TIE_TOLERANCE:.0%} of its mean or "
            f"{SIGNIFICANCE_K} paired standard errors of it; {_NOBODY}: nobody can claim "
            f"the row; {_NOT_RANKED}: not exercised by this scenario, never ranked; "
            f"{_UNDEFINED}: no defined value",
        ]
        if excluded := self.excluded_by_completion():
            listed = ", ".join(f"{alg} ({ratio:.1%})" for alg, ratio in excluded.items())
            notes.append(f"excluded from * rows by completion (share of the best): {listed}")
        if lone := self.not_compared():
            listed = ", ".join(f"{name} (only {alg})" for name, alg in lone.items())
            notes.append(f"not compared, one eligible algorithm: {listed}")
        notes += self._seed_notes()
        notes += [f"{_NOT_RANKED} {alg}: {why}" for alg, why in self._unsuited_run().items()]
        return notes

    def _seed_notes(self) -> list[str]:
        fewer = self._ranked_on_fewer_seeds()
        if not fewer:
            return []
        listed = ", ".join(f"{name} ({len(seeds)})" for name, seeds in fewer.items())
        return [
            f"{_FEWER} best decided only on the seeds where every candidate has a value "
            f"(of {len(self.seeds)}): {listed}"
        ]

    def _ranked_on_fewer_seeds(self) -> dict[str, tuple[int, ...]]:
        """Ranked rows decided on fewer seeds than were run -> the seeds they were."""
        seeds = {name: self.ranked_seeds(name) for name in METRICS}
        return {name: s for name, s in seeds.items() if s and len(s) < len(self.seeds)}

    def _unsuited_run(self) -> dict[str, str]:
        unsuited = self.scenario.unsuited
        return {alg: unsuited[alg] for alg in self.algorithms if alg in unsuited}

    def _scenario_dict(self) -> dict[str, Any]:
        s = self.scenario
        return {
            "name": s.name,
            "summary": s.summary,
            "problem": s.problem,
            "seeds": [*self.seeds],
            # the whole world and workload, as a scenario file would hold it: a run with
            # overrides or from a file can be repeated from its JSON alone
            "definition": _definition(s),
        }

    def _paired_row_dict(self, name: str) -> dict[str, Any]:
        verdict = self._verdict(name)
        return {
            "leader": verdict.winners[0] if verdict.winners else None,
            "confidence": _CONFIDENCE,
            "seeds": list(verdict.seeds),
            "challengers": {
                alg: {**asdict(d), "shares": alg in verdict.winners}
                for alg, d in verdict.paired.items()
            },
        }

    def _aggregates_dict(self, name: str) -> dict[str, dict[str, Any] | None]:
        found = self._aggregates[name]
        return {
            alg: _aggregate_dict(found[alg]) if self._suited(alg) and alg in found else None
            for alg in self.algorithms
        }


# -- module helpers -------------------------------------------------------------------------


def _aggregate_dict(found: Aggregate) -> dict[str, Any]:
    """An aggregate's fields and the 95 % interval of its mean (``ci95_low``/``ci95_high``,
    ``None`` with one seed)."""
    interval = found.interval(0.95)
    low, high = (None, None) if interval is None else interval
    return {**asdict(found), "ci95_low": low, "ci95_high": high}


def _definition(scenario: Scenario) -> dict[str, Any] | None:
    try:
        return to_mapping(scenario)
    except ConfigError:  # a retry policy naming exception types has no file form
        return None


def _unique(items: Sequence[Any], what: str) -> tuple[Any, ...]:
    """``items`` as a tuple; ``ValueError`` if one repeats or there are none."""
    result = tuple(items)
    if not result:
        raise ValueError(f"a report needs at least one {what}")
    if len(set(result)) != len(result):
        raise ValueError(f"a {what} is listed twice: {list(result)}")
    return result


def _check_runs(
    scenario: Scenario, algorithms: Sequence[str], seeds: Sequence[int], runs: Sequence[RunResult]
) -> None:
    """The contract of :class:`BenchmarkReport`'s constructor, checked run by run."""
    seen: set[tuple[str, int]] = set()
    for run in runs:
        _check_metric_keys(run)
        where = f"run ({run.algorithm!r}, seed {run.seed})"
        if run.scenario != scenario.name:
            raise ValueError(f"{where} is of scenario {run.scenario!r}, not {scenario.name!r}")
        if run.algorithm not in algorithms or run.seed not in seeds:
            raise ValueError(f"{where} is not among the report's algorithms and seeds")
        if (run.algorithm, run.seed) in seen:
            raise ValueError(f"{where} appears twice")
        seen.add((run.algorithm, run.seed))
    ran = {alg for alg, _ in seen}
    missing = [alg for alg in algorithms if alg not in ran and alg not in scenario.unsuited]
    if missing:
        raise ValueError(f"no run of algorithm(s): {', '.join(missing)}")


def _check_metric_keys(run: RunResult) -> None:
    missing = [name for name in METRICS if name not in run.metrics]
    unknown = sorted(set(run.metrics) - set(METRICS))
    if missing or unknown:
        raise ValueError(
            f"run ({run.algorithm!r}, seed {run.seed}) must have exactly the METRICS keys; "
            f"missing: {', '.join(missing) or 'none'}; unknown: {', '.join(unknown) or 'none'}"
        )


def _per_seed_values(runs: Sequence[RunResult]) -> dict[str, dict[str, dict[int, float]]]:
    """metric -> algorithm -> seed -> value, finite values only (non-finite = undefined)."""
    values: dict[str, dict[str, dict[int, float]]] = {name: {} for name in METRICS}
    for run in runs:
        for name in METRICS:
            per_seed = values[name].setdefault(run.algorithm, {})
            if math.isfinite(value := float(run.metrics[name])):
                per_seed[run.seed] = value
    return values


def _rank(
    metric: Metric, shared: Mapping[str, Mapping[int, float]], means: Mapping[str, float]
) -> _Verdict:
    """The leader (best mean), then the challengers that share the mark, by mean; every
    candidate's values are over the same seeds (``shared``), in ``ALGORITHMS`` order."""
    sign = 1.0 if metric.better == "lower" else -1.0
    leader, *challengers = sorted(shared, key=lambda alg: sign * means[alg])
    paired = {
        alg: paired_difference(shared[alg], shared[leader], _CONFIDENCE) for alg in challengers
    }
    gap = {alg: means[alg] - means[leader] for alg in challengers}
    sharers = [alg for alg in challengers if _shares(gap[alg], means[leader], paired[alg])]
    seeds = tuple(shared[leader])
    return _Verdict(tuple(shared), (leader, *sharers), paired, seeds=seeds, means=means)


def _shares(gap: float, leader_mean: float, paired: PairedDifference) -> bool:
    """Within tolerance of the leader, or indistinguishable from it by the paired test."""
    if abs(gap) <= TIE_TOLERANCE * abs(leader_mean):
        return True
    return paired.se is not None and abs(paired.mean) <= SIGNIFICANCE_K * paired.se


def _decimals(metric: Metric) -> int:
    """Ratios and per-second rates read in four decimals; counts, seconds and ms in two."""
    return 4 if metric.unit == "ratio" or metric.unit.endswith("/s") else 2


def _number(value: float, metric: Metric) -> str:
    return f"{value:,.{_decimals(metric)}f}"


def _plain(value: float | None) -> str:
    return _UNDEFINED if value is None else f"{value:,.2f}"


def _align(rows: list[list[str]]) -> list[str]:
    """Columns padded to their widest cell; the algorithm columns (numbers) right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    last = len(widths) - 1
    return [
        "  ".join(
            cell.ljust(w) if i in (0, last) else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]


def _metric_dict(metric: Metric) -> dict[str, Any]:
    return {
        "unit": metric.unit,
        "better": metric.better,
        "meaning": metric.meaning,
        "gated": metric.requires_comparable_completion,
    }


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float, however deeply nested, replaced by ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
