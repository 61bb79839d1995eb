"""The gate of ``attack --threshold/--goodput/--abort-on-fail``: measure, judge, exit.

:class:`Gate` is what the attack command holds: built from the flags before anything runs
(a bad expression is a ``ConfigError``, exit 2), it wraps the attack's ``on_record`` (to
count goodput) and ``on_progress`` (to abort) callbacks, adds a ``thresholds`` and a
``goodput`` section to the text, Markdown and JSON reports, and decides the exit code.

Exit codes when a threshold is declared (without one the command's own 0/1/2/130 stand):

* ``0`` every threshold passed (failed requests count only through ``error_rate``);
* ``99`` (:data:`EXIT_BREACHED`, as k6) a threshold failed, had nothing to judge (an empty
  distribution, no requests: a gate that cannot see must not pass), or
  ``--abort-on-fail`` stopped the attack;
* ``1`` all passed, but ``--samples`` could not be written;
* ``130`` Ctrl-C or a signal stopped the attack (the thresholds are still shown).

``--abort-on-fail`` judges each live snapshot the attack hands its progress display (every
0.5 s) on the figures it carries: :data:`LIVE_FIGURES`. At a breach its ``on_progress``
returns a stop reason, and the attack stops gracefully as it does for Ctrl-C (``stop_reason``
"threshold breached: ..."), so the report covers what ran. Other
thresholds (rates, tokens/s, goodput, other statistics) are judged only at the end: a rate
mid-ramp or a mean so far says nothing about the run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pyattacker.attack import AttackResult, Progress
from pyattacker.errors import ConfigError
from pyattacker.measure import Outcome, RequestRecord
from pyattacker.report._goodput import GoodputCounter, goodput_lines, parse_slos
from pyattacker.report._thresholds import Threshold, format_bound, judge, parse_threshold

__all__ = ["EXIT_BREACHED", "LIVE_FIGURES", "Gate", "Verdict"]

EXIT_BREACHED = 99
#: the figures --abort-on-fail judges on live snapshots (the others wait for the end)
LIVE_FIGURES = frozenset(
    {
        "p50(latency)",
        "p99(latency)",
        "p50(service_time)",
        "p99(service_time)",
        "p50(ttft)",
        "p99(ttft)",
        "error_rate",
        "throttled_rate",
    }
)
_LLM_ONLY = {"ttft", "ttft_scheduled", "itl", "tpot", "e2e", "e2e_scheduled", "tokens_per_s"}
_NEEDS_GOODPUT = {"goodput", "goodput_rate"}

Value = float | Fraction | None


@dataclass(frozen=True)
class Verdict:
    """One threshold judged: its measured ``value`` and whether it ``passed`` (``False``
    also when there was nothing to judge: ``value`` is then ``None``)."""

    threshold: Threshold
    value: Value
    passed: bool

    def to_dict(self) -> dict[str, Any]:
        t = self.threshold
        return {
            "threshold": t.text,
            "figure": t.figure,
            "op": t.op,
            "bound": float(t.bound),
            "value": None if self.value is None else float(self.value),
            "passed": self.passed,
            "live": t.figure in LIVE_FIGURES,
        }


@dataclass(frozen=True)
class Breach:
    """What stopped an attack under ``--abort-on-fail``: the threshold, its live value and
    the attack's elapsed seconds at that snapshot."""

    verdict: Verdict
    elapsed_s: float


class Gate:
    """Thresholds and goodput of one attack (see the module docstring)."""

    def __init__(
        self,
        thresholds: Sequence[Threshold],
        goodput: GoodputCounter | None = None,
        *,
        abort_on_fail: bool = False,
    ) -> None:
        self.thresholds = tuple(thresholds)
        self.goodput = goodput
        self.abort_on_fail = abort_on_fail
        self.breach: Breach | None = None

    def __repr__(self) -> str:
        return f"<Gate thresholds={len(self.thresholds)} breach={self.breach is not None}>"

    @classmethod
    def from_flags(
        cls,
        thresholds: Sequence[str],
        goodput: str | None,
        abort_on_fail: bool,
        *,
        llm: bool,
        scenario: bool = False,
    ) -> Gate:
        """The gate the flags declare; ``ConfigError`` naming the flag for anything wrong
        (an unreadable expression, an LLM figure on an HTTP attack, ``goodput`` without
        ``--goodput``, a flows' figure without ``--scenario``, ``--abort-on-fail`` without
        a threshold)."""
        parsed = [parse_threshold(text) for text in thresholds]
        for t in parsed:
            if t.metric == "flow_failure_rate" and not scenario:
                raise ConfigError(
                    f"{t.text!r}: flows are counted only with --scenario",
                    field="--threshold",
                    hint="add --scenario FILE.py:FUNCTION, or bound error_rate",
                )
            if t.metric in _LLM_ONLY and not llm:
                raise ConfigError(
                    f"{t.text!r}: {t.metric} is measured on LLM attacks only",
                    field="--threshold",
                    hint="add --llm, or bound latency/service_time",
                )
            if t.metric in _NEEDS_GOODPUT and goodput is None:
                raise ConfigError(
                    f"{t.text!r} needs --goodput",
                    field="--threshold",
                    hint="e.g. --goodput ttft<500ms",
                )
        if goodput is not None and not llm:
            raise ConfigError(
                "--goodput applies to LLM attacks only", field="--goodput", hint="add --llm"
            )
        if abort_on_fail and not parsed:
            raise ConfigError(
                "--abort-on-fail needs a threshold to judge",
                field="--abort-on-fail",
                hint="add --threshold 'p99(latency) < 1s'",
            )
        counter = None if goodput is None else GoodputCounter(parse_slos(goodput))
        return cls(parsed, counter, abort_on_fail=abort_on_fail)

    @property
    def declared(self) -> bool:
        """Whether thresholds decide the exit code."""
        return bool(self.thresholds)

    def on_record(
        self, inner: Callable[[RequestRecord], None] | None
    ) -> Callable[[RequestRecord], None] | None:
        """The attack's ``on_record``: ``inner`` (may be None), and goodput's count."""
        counter = self.goodput
        if counter is None:
            return inner
        if inner is None:
            return counter.add

        def both(record: RequestRecord) -> None:
            inner(record)
            counter.add(record)

        return both

    def on_progress(
        self, inner: Callable[[Progress], None] | None
    ) -> Callable[[Progress], str | None] | None:
        """The attack's ``on_progress``: ``inner`` (may be None), then, with
        ``--abort-on-fail``, a judgement of the live figures that returns the attack's
        stop reason at the first breach."""
        if not self.abort_on_fail:
            return inner

        def watch(progress: Progress) -> str | None:
            if inner is not None:
                inner(progress)
            breach = self.judge_live(progress)
            return (
                None if breach is None else f"threshold breached: {breach.verdict.threshold.text}"
            )

        return watch

    def judge_live(self, progress: Progress) -> Breach | None:
        """Judge the :data:`LIVE_FIGURES` thresholds on ``progress``; the first breach is
        remembered and returned from then on. Figures with no value yet are skipped."""
        if self.breach is not None:
            return self.breach
        for t in self.thresholds:
            if t.figure not in LIVE_FIGURES:
                continue
            value = live_value(t, progress)
            if judge(t, value) is False:
                self.breach = Breach(Verdict(t, value, False), progress.elapsed)
                return self.breach
        return None

    def verdicts(self, result: AttackResult) -> list[Verdict]:
        """Every threshold judged on the final ``result``."""
        out = []
        for t in self.thresholds:
            value = final_value(t, result, self.goodput)
            out.append(Verdict(t, value, judge(t, value) is True))
        return out

    def sections(self, result: AttackResult) -> dict[str, Any]:
        """The JSON report's ``thresholds`` and ``goodput`` sections (each only if declared)."""
        out: dict[str, Any] = {}
        if self.thresholds:
            verdicts = self.verdicts(result)
            out["thresholds"] = {
                "passed": self.breach is None and all(v.passed for v in verdicts),
                "exit_code_on_breach": EXIT_BREACHED,
                "aborted": None if self.breach is None else _breach_dict(self.breach),
                "results": [v.to_dict() for v in verdicts],
            }
        if self.goodput is not None:
            out["goodput"] = self.goodput.summary(result.answer_span_s, result.dropped)
        return out

    def text(self, result: AttackResult, report: str) -> str:
        """``report`` (the text report) with the thresholds and goodput appended."""
        lines = [report]
        if self.goodput is not None:
            lines += [
                "",
                *goodput_lines(self.goodput.summary(result.answer_span_s, result.dropped)),
            ]
        if self.thresholds:
            lines += ["", *threshold_lines(self.verdicts(result), self.breach)]
        return "\n".join(lines)

    def markdown(self, result: AttackResult, report: str) -> str:
        """``report`` (the Markdown report) with the goodput and thresholds sections;
        unchanged without."""
        if not self.thresholds and self.goodput is None:
            return report
        lines = [report.rstrip("\n")]
        if self.goodput is not None:
            head, *rest = goodput_lines(self.goodput.summary(result.answer_span_s, result.dropped))
            lines += ["", f"## {head}", "", *(f"- {line.strip()}" for line in rest)]
        if self.thresholds:
            lines += ["", *threshold_markdown(self.verdicts(result), self.breach)]
        return "\n".join(lines) + "\n"

    def json(self, result: AttackResult, report: str) -> str:
        """``report`` (the JSON report) with :meth:`sections` added; unchanged without."""
        sections = self.sections(result)
        if not sections:
            return report
        return json.dumps({**json.loads(report), **sections}, indent=2, allow_nan=False)

    def exit_code(self, result: AttackResult, *, output_failed: bool) -> int:
        """The exit code when :attr:`declared` (see the module docstring)."""
        if result.interrupted and self.breach is None:
            return 130
        if self.breach is not None or not all(v.passed for v in self.verdicts(result)):
            return EXIT_BREACHED
        return 1 if output_failed else 0


def threshold_lines(verdicts: Sequence[Verdict], breach: Breach | None) -> list[str]:
    """The text report's thresholds table, and the abort, if any."""
    width = max(len(v.threshold.text) for v in verdicts)
    lines = [f"Thresholds (a breach exits {EXIT_BREACHED})"]
    for v in verdicts:
        mark = "pass" if v.passed else "FAIL"
        measured = format_bound(v.threshold.kind, v.value)
        lines.append(f"  {mark}  {v.threshold.text:<{width}}  measured {measured}")
    if breach is not None:
        t = breach.verdict.threshold
        lines.append(
            f"  aborted by --abort-on-fail at {breach.elapsed_s:.1f}s: {t.text} was "
            f"{format_bound(t.kind, breach.verdict.value)}; the report covers what ran"
        )
    return lines


def threshold_markdown(verdicts: Sequence[Verdict], breach: Breach | None) -> list[str]:
    """The Markdown report's thresholds table, and the abort, if any."""
    lines = [f"## Thresholds (a breach exits {EXIT_BREACHED})", "", "| threshold | measured | |"]
    lines.append("|---|---|---|")
    for v in verdicts:
        measured = format_bound(v.threshold.kind, v.value)
        lines.append(f"| `{v.threshold.text}` | {measured} | {'pass' if v.passed else 'FAIL'} |")
    if breach is not None:
        t = breach.verdict.threshold
        lines += ["", f"Aborted by `--abort-on-fail` at {breach.elapsed_s:.1f}s: `{t.text}` was "
                  f"{format_bound(t.kind, breach.verdict.value)}."]  # fmt: skip
    return lines


def live_value(t: Threshold, progress: Progress) -> Value:
    """The value of a :data:`LIVE_FIGURES` threshold in a live snapshot; ``None`` when it
    has none yet (or the figure is not live)."""
    ended = progress.completed
    if t.metric == "error_rate":
        bad = progress.failed + progress.throttled + progress.dropped
        return Fraction(bad, ended) if ended else None
    if t.metric == "throttled_rate":
        return Fraction(progress.throttled, ended) if ended else None
    prefix = {"latency": "latency", "service_time": "service", "ttft": "ttft"}.get(t.metric)
    if prefix is None or t.stat not in ("p50", "p99"):
        return None
    value: float | None = getattr(progress, f"{prefix}_{t.stat}")
    return value


def final_value(t: Threshold, result: AttackResult, goodput: GoodputCounter | None) -> Value:
    """The value of ``t``'s figure in the finished attack (``None``: nothing to judge)."""
    total = result.total
    if t.stat is not None:
        histogram = getattr(total, t.metric)
        if not histogram.count:
            return None
        if t.quantile is not None:
            return float(histogram.percentile(t.quantile))
        stat: float | None = getattr(histogram, t.stat)
        return stat
    requests = total.requests
    if t.metric == "error_rate":
        return Fraction(result.failed_requests, requests) if requests else None
    if t.metric == "throttled_rate":
        throttled = total.by_outcome[Outcome.THROTTLED.value]
        return Fraction(throttled, requests) if requests else None
    if t.metric == "flow_failure_rate":  # a flow that failed in its own code fails no request
        ended = 0 if result.flows is None else result.flows.completed + result.failed_flows
        return Fraction(result.failed_flows, ended) if ended else None
    if t.metric == "rate":
        return result.achieved_rate
    span = result.answer_span_s
    if t.metric == "tokens_per_s":
        return total.completion_tokens / span if span > 0 else None
    assert goodput is not None, t.metric  # from_flags refuses goodput without --goodput
    return goodput.share(result.dropped) if t.metric == "goodput" else goodput.rate(span)


def _breach_dict(breach: Breach) -> dict[str, Any]:
    value = breach.verdict.value
    return {
        "threshold": breach.verdict.threshold.text,
        "value": None if value is None else float(value),
        "elapsed_s": breach.elapsed_s,
    }
