"""``pyattacker compare A.json B.json``: two reports side by side, and which differences
are larger than the noise.

Two attack reports (``attack --json``) or two bench reports (``bench --json``,
:mod:`pyattacker.report._compare_bench`). Each figure is a :class:`Row`: A's value, B's,
the change, whether the change is *significant* (outside the noise, by the test the row
names) and, if so, whether B is *worse* (a regression) or better.

The noise judgement of attack reports, each at 99 % per figure (many figures are judged at
once, so each is held to a strict level):

* **Means** of latency on both clocks: see :mod:`pyattacker.report._compare_means` (the
  figure with the most power; it also sees bursts of slow requests, through the windows).
* **Percentiles** (latency on both clocks; TTFT, TPOT, ITL and end to end of LLM runs):
  a distribution-free confidence interval of each run's percentile from the binomial
  order statistics. With ``n`` samples, the ``q``-quantile lies between the samples of
  ranks ``nq -/+ 2.576 sqrt(nq(1-q))`` with 99 % confidence (normal approximation of the
  binomial). A report holds only some percentiles (min, p50, p90, p95, p99, p99.9, max),
  so each end is widened to the nearest reported one outside it: the interval is
  conservative (never narrower than the truth's), at the price of missing small shifts.
  The difference is flagged when A's and B's intervals do not overlap. A percentile with
  fewer than :data:`MIN_TAIL` samples on either side of it is not judged ("n/a"): the
  approximation needs them, and the interval assumes independent samples, which a
  stall of the machine (a burst of slow requests) is not; the p99.9 of a short run is
  such a burst.
* **Shares** (error rate, throttled rate, goodput): a two-proportion z-test on the counts
  (pooled), flagged when ``|z| > 2.576``.
* **Rates** (achieved rate, completion tokens/s): counts over spans compared as Poisson
  rates, ``z = (rB - rA) / sqrt(cA/tA² + cB/tB²)``, flagged when ``|z| > 2.576``. An open
  model's sent rate is planned, not random, so this test is lenient there by design: it
  flags a generator that fell behind, not a jitter.

What it is not: a judgement of whether a change matters to you (a significant 1 % is
still 1 %), nor a comparison of runs with different plans (it says when plans differ).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pyattacker.errors import ConfigError

__all__ = [
    "Comparison",
    "Row",
    "compare_attacks",
    "compare_reports",
    "comparison_text",
    "percentile_interval",
]

Z99 = 2.5758293035489004  # the standard normal's 99.5th percentile: a two-sided 99 % level
#: the percentiles a report's summary holds, by level (0 is min, 1 is max)
_LEVELS = (("min", 0.0), ("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99),
           ("p99.9", 0.999), ("max", 1.0))  # fmt: skip
_COMPARED = ("p50", "p90", "p95", "p99", "p99.9")
#: samples needed on each side of a percentile to judge it (``nq`` and ``n(1-q)``)
MIN_TAIL = 10


@dataclass(frozen=True)
class Row:
    """One figure of both runs. ``change`` is ``b - a``; ``significant`` says whether it is
    outside the noise by ``test`` (``None``: nothing to judge); ``worse`` whether B is
    worse than A (``None`` unless significant). ``noise`` describes each run's interval
    or the test statistic."""

    figure: str
    unit: str
    a: float | None
    b: float | None
    significant: bool | None
    worse: bool | None
    test: str
    noise: str

    @property
    def change(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "change": self.change}


@dataclass(frozen=True)
class Comparison:
    """Every :class:`Row` of two reports of one ``kind`` (``attack`` or ``bench``), and
    notes on what makes them hard to compare (different plans)."""

    kind: str
    rows: tuple[Row, ...]
    notes: tuple[str, ...] = ()

    @property
    def regressions(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.worse is True)

    @property
    def improvements(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.significant and r.worse is False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "notes": list(self.notes),
            "regressions": [r.figure for r in self.regressions],
            "improvements": [r.figure for r in self.improvements],
            "rows": [r.to_dict() for r in self.rows],
        }


def percentile_interval(summary: Mapping[str, Any], key: str) -> tuple[float, float] | None:
    """A conservative 99 % interval of the percentile ``key`` (``"p95"``) of a report's
    summary (``count``, ``min``, ``p50``...``max``); ``None`` when fewer than
    :data:`MIN_TAIL` samples lie on either side of it (the normal approximation of the
    binomial needs them, and a tail of a few samples is one stall of the machine)."""
    n = summary.get("count") or 0
    levels = [(name, q) for name, q in _LEVELS if summary.get(name) is not None]
    q = dict(_LEVELS)[key]
    if min(n * q, n * (1 - q)) < MIN_TAIL or summary.get(key) is None:
        return None
    spread = Z99 * math.sqrt(n * q * (1 - q))
    low_rank, high_rank = math.floor(n * q - spread), math.ceil(n * q + spread) + 1
    # the reported percentile at level L is the sample of rank max(1, ceil(L n))
    below = [summary[name] for name, level in levels if max(1, math.ceil(level * n)) <= low_rank]
    above = [summary[name] for name, level in levels if math.ceil(level * n) >= high_rank]
    low = below[-1] if below else summary["min"]
    high = above[0] if above else summary["max"]
    return float(low), float(high)


def compare_attacks(a: Mapping[str, Any], b: Mapping[str, Any]) -> Comparison:
    """The rows of two attack reports (``AttackResult.to_dict()`` documents)."""
    rows: list[Row] = []
    for clock, label in (("scheduled", "latency"), ("sent", "service_time")):
        rows += _percentile_rows(
            label, _get(a, "total", "latency_s", clock), _get(b, "total", "latency_s", clock)
        )
    from pyattacker.report._compare_means import mean_rows  # it imports this module

    rows += mean_rows(a, b)
    rows += _share_rows(a, b)
    rows.append(_rate_row("rate", *_sent(a), *_sent(b)))
    if "llm" in a and "llm" in b:
        rows += _llm_rows(a["llm"], b["llm"])
    if "goodput" in a and "goodput" in b:
        ga, gb = a["goodput"], b["goodput"]
        rows.append(_share_row("goodput", ga["good"], ga["requests"], gb["good"], gb["requests"],
                               higher_is_better=True))  # fmt: skip
    return Comparison("attack", tuple(rows), tuple(_plan_notes(a, b)))


def _percentile_rows(
    name: str, a: Mapping[str, Any] | None, b: Mapping[str, Any] | None
) -> list[Row]:
    if a is None or b is None:
        return []
    rows = []
    for key in _COMPARED:
        ia, ib = percentile_interval(a, key), percentile_interval(b, key)
        va, vb = a.get(key), b.get(key)
        if ia is None or ib is None:
            few = f"fewer than {MIN_TAIL} samples beyond {key}"
            rows.append(Row(f"{key}({name})", "s", va, vb, None, None, "order statistics", few))
            continue
        significant = ia[1] < ib[0] or ib[1] < ia[0]
        worse = (ib[0] > ia[1]) if significant else None
        noise = f"A in [{_ms(ia[0])}, {_ms(ia[1])}] B in [{_ms(ib[0])}, {_ms(ib[1])}] ms"
        rows.append(Row(f"{key}({name})", "s", va, vb, significant, worse, "order statistics",
                        noise))  # fmt: skip
    return rows


def _share_rows(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Row]:
    rows = []
    na, nb = a["total"]["requests"], b["total"]["requests"]
    outcomes_a, outcomes_b = a["total"]["outcomes"], b["total"]["outcomes"]
    bad_a, bad_b = na - outcomes_a.get("ok", 0), nb - outcomes_b.get("ok", 0)
    rows.append(_share_row("error_rate", bad_a, na, bad_b, nb, higher_is_better=False))
    ta, tb = outcomes_a.get("throttled", 0), outcomes_b.get("throttled", 0)
    rows.append(_share_row("throttled_rate", ta, na, tb, nb, higher_is_better=False))
    return rows


def _share_row(name: str, ka: int, na: int, kb: int, nb: int, *, higher_is_better: bool) -> Row:
    pa = ka / na if na else None
    pb = kb / nb if nb else None
    if pa is None or pb is None:
        return Row(name, "share", pa, pb, None, None, "two proportions", "-")
    pooled = (ka + kb) / (na + nb)
    se = math.sqrt(pooled * (1 - pooled) * (1 / na + 1 / nb))
    z = 0.0 if se == 0 else (pb - pa) / se
    return _judged(name, "share", pa, pb, z, "two proportions", higher_is_better)


def _rate_row(name: str, ca: float, ta: float, cb: float, tb: float) -> Row:
    """Counts ``c`` over spans ``t`` (seconds) compared as Poisson rates; higher is better."""
    if ta <= 0 or tb <= 0:
        return Row(name, "/s", None, None, None, None, "Poisson rates", "-")
    ra, rb = ca / ta, cb / tb
    var = ca / ta**2 + cb / tb**2
    z = 0.0 if var == 0 else (rb - ra) / math.sqrt(var)
    return _judged(name, "/s", ra, rb, z, "Poisson rates", True)


def _judged(
    name: str, unit: str, a: float, b: float, z: float, test: str, higher_is_better: bool
) -> Row:
    significant = abs(z) > Z99
    worse = ((b < a) if higher_is_better else (b > a)) if significant else None
    return Row(name, unit, a, b, significant, worse, test, f"z = {z:+.2f}")


def _llm_rows(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Row]:
    rows = []
    for key, label in (("ttft_s", "ttft"), ("tpot_s", "tpot"), ("itl_s", "itl"), ("e2e_s", "e2e")):
        sa, sb = a.get(key), b.get(key)
        if isinstance(sa, Mapping) and "sent" in sa:  # the two-clock figures: the sent one
            sa, sb = sa["sent"], (sb or {}).get("sent")
        rows += _percentile_rows(label, sa, sb)
    tokens_a, tokens_b = a["tokens"]["completion"], b["tokens"]["completion"]
    span_a, span_b = a["per_minute"]["answer_span_s"], b["per_minute"]["answer_span_s"]
    rows.append(_rate_row("tokens_per_s", tokens_a, span_a, tokens_b, span_b))
    return rows


def _sent(report: Mapping[str, Any]) -> tuple[float, float]:
    summary = report["summary"]
    return float(summary["sent"]), float(summary["sending_span_s"])


def _plan_notes(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    pa, pb = a.get("plan", {}), b.get("plan", {})
    differ = [key for key in sorted({*pa, *pb}) if pa.get(key) != pb.get(key)]
    if not differ:
        return []
    return [
        f"the plans differ in {', '.join(differ)}: differences may be the plan's, not the target's"
    ]


def _get(report: Mapping[str, Any], *path: str) -> Any:
    value: Any = report
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def kind_of(report: Any, field: str) -> str:
    """``"attack"`` or ``"bench"``: which report ``report`` is; ``ConfigError`` naming
    ``field`` (the argument) when it is neither."""
    if isinstance(report, Mapping):
        if {"summary", "total", "plan"} <= report.keys():
            return "attack"
        if {"aggregates", "runs", "metrics", "algorithms"} <= report.keys():
            return "bench"
    raise ConfigError(
        "not an attack or bench JSON report",
        field=field,
        hint="give two files written by `pyattacker attack --json` or `pyattacker bench --json`",
    )


def comparison_text(comparison: Comparison, names: Sequence[str]) -> str:
    """The terminal table: one line per figure, A, B, change, verdict, noise."""
    header = ["figure", "A", "B", "change", "verdict", "noise"]
    body = [[r.figure, _value(r, r.a), _value(r, r.b), _change(r), _verdict(r), r.noise]
            for r in comparison.rows]  # fmt: skip
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = [f"compare ({comparison.kind} reports): A = {names[0]}, B = {names[1]}", ""]
    for row in [header, *body]:
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:4], widths[1:4], strict=True)
        ]
        lines.append("  ".join([*cells, row[4].ljust(widths[4]), row[5]]).rstrip())
    lines += ["", *comparison.notes] if comparison.notes else []
    worse = ", ".join(r.figure for r in comparison.regressions) or "none"
    lines.append(f"regressions beyond the noise: {worse}")
    return "\n".join(lines)


def _value(row: Row, value: float | None) -> str:
    if value is None:
        return "-"
    if row.unit == "s":
        return f"{value * 1000:.3f}ms"
    if row.unit == "share":
        return f"{value * 100:.3f}%"
    if row.unit == "/s":
        return f"{value:.2f}/s"
    return f"{value:.6g}"


def _change(row: Row) -> str:
    change = row.change
    if change is None or row.a is None:
        return "-"
    relative = f" ({change / row.a * 100:+.1f}%)" if row.a else ""
    if row.unit == "s":
        return f"{change * 1000:+.3f}ms{relative}"
    if row.unit == "share":
        return f"{change * 100:+.3f}pt"
    return f"{change:+.6g}{relative}"


def _verdict(row: Row) -> str:
    if row.significant is None:
        return "n/a"
    if not row.significant:
        return "noise"
    return "WORSE" if row.worse else "better"


def compare_reports(a: Any, b: Any, *, names: Sequence[str] = ("A", "B")) -> Comparison:
    """Compare two parsed JSON reports of the same kind; ``ConfigError`` naming the
    argument (``names``) that is not a report, or when one is an attack report and the
    other a bench report."""
    kind_a, kind_b = kind_of(a, names[0]), kind_of(b, names[1])
    if kind_a != kind_b:
        raise ConfigError(
            f"{names[0]} is an {kind_a} report and {names[1]} a {kind_b} report",
            field=names[1],
            hint="compare two attack reports or two bench reports",
        )
    try:
        if kind_a == "attack":
            return compare_attacks(a, b)
        from pyattacker.report._compare_bench import compare_benches  # loads the benchmark

        return compare_benches(a, b)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise ConfigError(
            f"a report is missing or has a malformed field ({type(exc).__name__}: {exc})",
            field=f"{names[0]}/{names[1]}",
            hint="give reports written by this version's --json",
        ) from None
