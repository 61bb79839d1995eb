"""``AttackResult``: the facts an attack measured, ready for any renderer.

It holds aggregates (mergeable histograms and counters), never opinions: the renderers in
:mod:`pyattacker.report` decide how to show them. ``to_dict()`` is the JSON report's body;
its ``llm`` section exists only when the run has LLM data (``RequestStats.has_llm``), so
an HTTP run's report is the same as before LLM figures existed.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, field
from typing import Any

from pyattacker._version import __version__
from pyattacker.attack._flow_stats import FlowStats
from pyattacker.attack._headline import headline
from pyattacker.attack._load import OpenModel
from pyattacker.attack._mix import name_of
from pyattacker.attack._plan import AttackPlan
from pyattacker.attack._plan_dict import plan_dict
from pyattacker.attack._tally import ErrorGroup, Tally
from pyattacker.attack._warmup import WarmupFacts
from pyattacker.measure import Histogram, Outcome, Phases, RequestStats, Window

__all__ = ["AttackResult", "RunTimes", "schedule_span"]


#: ``stop_reason`` when requests still ran one timeout after the schedule ended (see
#: ``_overrun.py``): they were cancelled, and the attack ended on time.
DRAIN_STOP = "requests still in flight one timeout after the schedule ended were cancelled"


@dataclass(frozen=True, slots=True)
class RunTimes:
    """When a run happened, on the engine's clock: its ``start``, the ``schedule_end``
    (when the schedule stopped), its ``end``; ``last_offset``, the last open-model
    arrival's offset from the start; ``started_at`` in epoch seconds (for the report)."""

    started_at: float
    start: float
    schedule_end: float
    end: float
    last_offset: float


def schedule_span(plan: AttackPlan, times: RunTimes, scheduled: int, *, stopped: bool) -> float:
    """Seconds of plan the schedule covered: until the stop when it was stopped, else the
    planned span (so 1,500 arrivals at 500/s cover 3 s, not the 2.998 s to the last
    arrival); ``scheduled`` is how many arrivals it made."""
    ran = times.schedule_end - times.start
    load = plan.load
    if stopped:
        return ran
    if isinstance(load, OpenModel):
        if plan.requests is not None and scheduled >= plan.requests:
            rate = load.rate_at(times.last_offset)
            return times.last_offset + (1 / rate if rate > 0 else 0.0)
        bounds = [b for b in (plan.duration, load.duration) if b is not None]
        return min(bounds) if bounds else ran
    if plan.duration is not None and (plan.requests is None or scheduled < plan.requests):
        return plan.duration
    return ran


@dataclass
class AttackResult:
    """What one attack did. Times are seconds; rates are per second.

    ``schedule_s`` is the span of plan the schedule covered (its planned duration when it
    ran to the end, else until the stop); ``send_span_s`` runs from the start to the last
    request's first send, which is later than ``schedule_s`` only when the generator fell
    behind; ``elapsed`` is the wall time until the last request ended. Rates per minute are
    over :attr:`sending_span_s` (sent) and :attr:`answer_span_s` (answers and tokens).
    ``errors`` groups the error messages requests ended with (the last attempt's
    ``error``) by kind, most common first, one example each (see
    :class:`~pyattacker.attack._tally.ErrorMessages`). ``stop_reason`` is None when the plan
    ran to its end. ``loop_lag`` is how late the generator's own event loop ran (see
    :mod:`pyattacker.attack._lag`): when it is large, the latencies include our delay, and
    the reports say so. ``warmup`` (a plan with one) says what the warmup sent: every
    other field leaves its requests out, and the spans start where the measured part
    starts (``pyattacker.attack._warmup``).
    """

    plan: AttackPlan
    started_at: float  # epoch seconds, for the report header only
    schedule_s: float
    elapsed: float
    send_span_s: float
    scheduled: int
    sent: int
    late: int
    total: RequestStats
    by_target: dict[str, RequestStats] = field(default_factory=dict)
    windows: list[Window] = field(default_factory=list)
    # with several targets, each one's windows: its requests by the window they ended in
    target_windows: dict[str, list[Window]] = field(default_factory=dict)
    decisions: dict[str, int] = field(default_factory=dict)
    errors: list[ErrorGroup] = field(default_factory=list)
    stop_reason: str | None = None
    loop_lag: Histogram | None = None  # how late our own event loop ran (None: simulated)
    # requests that carry a name (a targets file's line, a scenario's step), by name
    by_name: dict[str, RequestStats] = field(default_factory=dict)
    name_windows: dict[str, list[Window]] = field(default_factory=dict)
    # with a warmup: what it sent (left out of every figure above; spans start after it)
    warmup: WarmupFacts | None = None
    flows: FlowStats | None = None  # a scenario's flows (plan.scenario), set by the engine
    phases: Phases | None = None  # where the attempts' time went (None: not measured)
    # this process's user + system CPU seconds over the run (None: simulated; see cpu_dict)
    cpu_s: float | None = None

    @classmethod
    def build(
        cls,
        plan: AttackPlan,
        tally: Tally,
        times: RunTimes,
        *,
        decisions: dict[str, int],
        stop_reason: str | None,
        loop_lag: Histogram | None,
    ) -> AttackResult:
        """The result of a run of ``plan`` from what it counted (``tally``, read once
        every request is counted) and when it ran (``times``)."""
        targets = [target.id for target in plan.resolved_targets()]
        return cls(
            plan=plan,
            started_at=times.started_at,
            schedule_s=schedule_span(plan, times, tally.scheduled, stopped=stop_reason is not None),
            elapsed=times.end - times.start,
            send_span_s=max(0.0, tally.last_sent - times.start),
            scheduled=tally.scheduled,
            sent=tally.sent,
            late=tally.late,
            total=tally.total,
            by_target=dict(tally.by_target) if len(targets) > 1 else {targets[0]: tally.total},
            windows=tally.windows.windows(),
            target_windows={t: w.windows() for t, w in tally.windows_by_target.items()}
            if len(targets) > 1
            else {},
            errors=tally.errors.groups(),
            decisions=dict(decisions),
            stop_reason=stop_reason,
            loop_lag=loop_lag,
            by_name=dict(tally.names.stats),
            name_windows={n: w.windows() for n, w in tally.names.windows.items()},
            phases=tally.phases,
        )

    def name_order(self) -> list[str]:
        """The names figures are broken down by, in the order reports show them: a mix's in
        the order of its lines (the targets file's), then any other (a scenario's steps)
        as first seen."""
        mix = self.plan.mix
        if mix is None:
            return list(self.by_name)
        rank: dict[str | None, int] = {}
        for i, line in enumerate(mix.lines):
            rank.setdefault(name_of(line, self.plan.method), i)
        return sorted(self.by_name, key=lambda name: rank.get(name, len(rank)))

    @property
    def interrupted(self) -> bool:
        """Stopped by a signal or a caller; not when the attack's own time bound stopped it
        (:data:`DRAIN_STOP`: its cancelled requests then count as failed)."""
        return self.stop_reason is not None and self.stop_reason != DRAIN_STOP

    @property
    def dropped(self) -> int:
        return self.total.by_outcome[Outcome.DROPPED.value]

    @property
    def failed_requests(self) -> int:
        """Requests that did not end OK (failed, throttled, dropped or cancelled)."""
        return self.total.requests - self.total.by_outcome[Outcome.OK.value]

    @property
    def failed_flows(self) -> int:
        """A scenario's flows that did not complete: failed (at a step, or in the flow's own
        code, which fails no request), cancelled or dropped; 0 without a scenario."""
        flows = self.flows
        if flows is None:
            return 0
        return sum(flows.failed.values()) + flows.cancelled + flows.dropped

    @property
    def all_succeeded(self) -> bool:
        """Every request ended OK and, with a scenario, every flow completed: what the
        command's exit code 0 says (docs/attack.md, "Exit codes")."""
        return self.failed_requests == 0 and self.failed_flows == 0

    @property
    def planned(self) -> float | None:
        """Arrivals the plan called for over the time the schedule actually ran: evenly
        spaced, those due by then (arrival k comes when Λ reaches k, k = 0, 1, ...: a span
        that ends between two arrivals has had ⌈Λ⌉ of them, as ``scheduled`` counts them);
        Poisson, their expected number, Λ."""
        return self._arrivals_planned(due=True)

    def _arrivals_planned(self, *, due: bool) -> float | None:
        load = self.plan.load
        if not isinstance(load, OpenModel):
            return None
        skip, warm = self._warm_span()
        first, last = load.planned(skip), load.planned(skip + self.schedule_s)
        if due and load.arrival == "constant":
            first, last = _due(first), _due(last)
        planned = last - first
        if self.plan.requests is not None:
            planned = min(planned, float(self.plan.requests - warm))
        return planned

    def _warm_span(self) -> tuple[float, int]:
        """The span the warmup took at the start, and its arrivals (0, 0 without one)."""
        warmup = self.warmup
        return (0.0, 0) if warmup is None else (warmup.skipped_s, warmup.scheduled)

    @property
    def planned_rate(self) -> float | None:
        """The plan's rate over its span: the expected arrivals a second, not the count
        due (which is up to one more over a cut span)."""
        planned = self._arrivals_planned(due=False)
        return None if planned is None or self.schedule_s <= 0 else planned / self.schedule_s

    @property
    def has_llm(self) -> bool:
        """Whether the report has an ``llm`` section: the plan was an LLM attack, or any
        request streamed, reported token usage or carried a utilisation header."""
        return (
            self.plan.llm is not None
            or self.total.has_llm
            or any(s.has_llm for s in self.by_target.values())
        )

    @property
    def sending_span_s(self) -> float:
        """The span the sent rate is over: from the start to the last send, or the
        schedule when that is longer (the last arrival comes before the schedule's end)."""
        return max(self.schedule_s, self.send_span_s)

    @property
    def answer_span_s(self) -> float:
        """The span answers and tokens per minute are over: from the start to the end of
        the run (:attr:`elapsed`: the last request's end, an answer or not), or the
        schedule or :attr:`sending_span_s` when longer. Never shorter than
        :attr:`sending_span_s` (every answer comes after its send), so when every request
        succeeded the answered rate is at most the sent rate."""
        return max(self.schedule_s, self.send_span_s, self.elapsed)

    @property
    def achieved_rate(self) -> float:
        """Requests sent per second (each counted once, at its first send), over
        :attr:`sending_span_s`."""
        span = self.sending_span_s
        return self.sent / span if span > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        started = datetime.datetime.fromtimestamp(self.started_at, tz=datetime.UTC)
        names = self.name_order()
        report: dict[str, Any] = _json_safe(
            {
                "pyattacker": __version__,
                "started_at": started.isoformat(timespec="seconds"),
                "plan": plan_dict(self.plan),
                "summary": {
                    "schedule_s": self.schedule_s,
                    "elapsed_s": self.elapsed,
                    "send_span_s": self.send_span_s,
                    "sending_span_s": self.sending_span_s,
                    "answer_span_s": self.answer_span_s,
                    "planned": self.planned,
                    "scheduled": self.scheduled,
                    "sent": self.sent,
                    "completed": self.total.requests,
                    "dropped": self.dropped,
                    "late": self.late,
                    "late_after_s": self.plan.late_after,
                    "planned_rate": self.planned_rate,
                    "achieved_rate": self.achieved_rate,
                    "stop_reason": self.stop_reason,
                    "loop_lag_s": None
                    if self.loop_lag is None
                    else self.loop_lag.summary().to_dict(),
                },
                "total": stats_dict(self.total),
                "targets": {target: stats_dict(s) for target, s in self.by_target.items()},
                "retry_decisions": dict(sorted(self.decisions.items())),
                "errors": [group.to_dict() for group in self.errors],
                "windows": [w.to_dict() for w in self.windows],
                "target_windows": {
                    target: [w.to_dict() for w in windows]
                    for target, windows in self.target_windows.items()
                },
                "names": {name: stats_dict(self.by_name[name]) for name in names},
                "name_windows": {
                    name: [w.to_dict() for w in self.name_windows[name]]
                    for name in names
                    if name in self.name_windows
                },
                "timing": None if self.phases is None else self.phases.to_dict(),
            }
        )
        report["cpu"] = self.cpu_dict()
        if self.has_llm:
            report["llm"] = _json_safe(self._llm_dict())
            report["headline"] = _json_safe(headline(report["summary"], report["llm"]))
        if self.warmup is not None:
            report["warmup"] = _json_safe(self.warmup.to_dict())
        if self.flows is not None:
            report["flows"] = _json_safe(self.flows.to_dict())
        return report

    def cpu_dict(self) -> dict[str, float | None]:
        """``process_s``: this process's user + system CPU seconds (every thread) from the
        run's start to its result; ``per_request_s``: that over the requests scheduled (sent
        or dropped). With a scenario, the requests are its steps (an arrival is a flow, not
        a request), and ``per_flow_s`` is the CPU over the flows scheduled. All None on
        simulated time, where CPU says nothing of the run."""
        cpu, flows = self.cpu_s, self.flows
        requests = self.scheduled if flows is None else self.total.requests
        section = {"process_s": cpu, "per_request_s": _share(cpu, requests)}
        if flows is not None:
            section["per_flow_s"] = _share(cpu, flows.scheduled)
        return section

    def _llm_dict(self) -> dict[str, Any]:
        answers = self.answer_span_s
        section = llm_stats_dict(self.total, answers)
        span = self.sending_span_s
        section["per_minute"]["sent"] = _per_minute(self.sent, span)
        section["per_minute"]["sending_span_s"] = span
        if len(self.by_target) > 1:
            section["targets"] = {
                target: llm_stats_dict(stats, answers)
                for target, stats in self.by_target.items()
                if stats.has_llm
            }
        if self.by_name:
            section["names"] = {
                name: llm_stats_dict(self.by_name[name], answers)
                for name in self.name_order()
                if self.by_name[name].has_llm
            }
        # the windows keep the run's clock: their span counts the warmup's too
        whole = span + self._warm_span()[0]
        section["windows"] = [llm_window_dict(w, whole) for w in self.windows]
        return section


def _json_safe(value: Any) -> Any:
    """``value`` with every NaN or infinity (an empty summary's figures) turned into None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def stats_dict(stats: RequestStats) -> dict[str, Any]:
    """The report's view of one aggregate: counts, and summaries on both clocks."""
    return {
        "requests": stats.requests,
        "attempts": stats.attempts,
        "sent_attempts": stats.sent_attempts,
        "outcomes": dict(sorted(stats.by_outcome.items())),
        "status": {str(k): v for k, v in sorted(stats.by_status.items())},
        "error_classes": dict(sorted(stats.by_error_class.items())),
        "attempts_per_request": {str(k): v for k, v in sorted(stats.attempts_per_request.items())},
        "throttled_requests": stats.throttled_requests,
        "early_sends": stats.early_sends,
        "throttled_attempts": stats.throttled_attempts,
        "latency_s": {
            "scheduled": stats.latency.summary().to_dict(),
            "sent": stats.service_time.summary().to_dict(),
        },
        "latency_ok_s": stats.latency_ok.summary().to_dict(),
        "dispatch_delay_s": stats.dispatch_delay.summary().to_dict(),
        "ttfb_s": stats.ttfb.summary().to_dict(),
        "attempt_service_time_s": stats.attempt_service_time.summary().to_dict(),
        "bytes_sent": stats.bytes_sent,
        "bytes_received": stats.bytes_received,
    }


def llm_stats_dict(stats: RequestStats, answer_span_s: float) -> dict[str, Any]:
    """The LLM view of one aggregate (definitions: ``RequestStats``' docstring).

    Durations in seconds. ``per_minute`` rates of answers and tokens are over
    ``answer_span_s`` (``AttackResult.answer_span_s``: from the run's start to its end, or
    the schedule when longer), ``None`` when it is 0; the caller adds the sent rate and
    its span (``sending_span_s``). ``utilisation_pct`` is ``None`` when no attempt carried
    the header; ``retry_after_s`` (the waits throttled attempts were asked for) is ``None``
    when none carried a ``Retry-After``.
    ``sent_attempts_per_sent_request`` is what a server saw per request that reached it.
    ``ok_answers`` counts the OK LLM answers, streamed or whole body (the end-to-end
    population); ``ok_streams`` the OK ones that streamed (the ITL and TPOT population).
    """
    ok = stats.by_outcome[Outcome.OK.value]
    sent_requests = stats.dispatch_delay.count  # every request that was sent, once
    return {
        "streamed_requests": stats.ttft_scheduled.count,
        "ok_streams": stats.ttft_scheduled.count - stats.failed_after_first_token,
        "ok_answers": stats.e2e_scheduled.count,
        "failed_after_first_token": stats.failed_after_first_token,
        "ttft_s": {"sent": _summary(stats.ttft), "scheduled": _summary(stats.ttft_scheduled)},
        "itl_s": _summary(stats.itl),
        "tpot_s": _summary(stats.tpot),
        "e2e_s": {"sent": _summary(stats.e2e), "scheduled": _summary(stats.e2e_scheduled)},
        "tokens": {
            "prompt": stats.prompt_tokens,
            "completion": stats.completion_tokens,
            "requests_with_usage": stats.usage_requests,
        },
        "per_minute": {
            "answer_span_s": answer_span_s,
            "ok_requests": _per_minute(ok, answer_span_s),
            "prompt_tokens": _per_minute(stats.prompt_tokens, answer_span_s),
            "completion_tokens": _per_minute(stats.completion_tokens, answer_span_s),
        },
        "throttled_requests": stats.throttled_requests,
        "throttled_attempts": stats.throttled_attempts,
        "requests": stats.requests,
        "attempts": stats.attempts,
        "sent_attempts": stats.sent_attempts,
        "attempts_per_request": stats.attempts / stats.requests if stats.requests else None,
        "sent_attempts_per_sent_request": stats.sent_attempts / sent_requests
        if sent_requests
        else None,
        "utilisation_pct": _summary(stats.utilisation) if stats.utilisation.count else None,
        "retry_after_s": _summary(stats.retry_after) if stats.retry_after.count else None,
    }


def llm_window_dict(window: Window, sending_span_s: float) -> dict[str, Any]:
    """One row of the LLM time series, in the columns LLM load tools commonly report.

    ``rpm``: requests first sent in the window, per minute of the part of the window
    sending covered (``sending_span_s`` seconds from the start:
    ``AttackResult.sending_span_s``, the span of the summary's sent rate), so a last window
    cut short does not read low; ``covered_s`` is that part, and ``rpm`` is ``None`` for a
    window after it. ``max_in_flight``, ``completed`` (answered: OK, failed or throttled),
    ``failed`` (answered with an error other than a throttle) and ``throttled`` (requests
    whose last attempt was refused) mean what they do in the report's ``windows``:
    requests by the window of their end. ``throttled_attempts``: refused *attempts*, each
    in the window where it ended (a throttled call is an attempt). ``ttft_sent_s``: TTFT
    on the sent clock of the streamed requests; ``e2e_scheduled_s``: end to end on the
    scheduled clock of the OK answers, streamed or not; ``itl_s`` and ``tpot_s``: of the
    streams that ended OK (the populations of the summary's figures).
    """
    covered = min(window.width, sending_span_s - window.start)
    return {
        "start": window.start,
        "width": window.width,
        "covered_s": max(covered, 0.0),
        "rpm": window.sent * 60.0 / covered if covered > 0 else None,
        "max_in_flight": window.max_in_flight,
        "completed": window.completed,
        "failed": window.failed,
        "throttled": window.throttled,
        "throttled_attempts": window.throttled_attempts,
        "ttft_sent_s": window.ttft.to_dict(),
        "e2e_scheduled_s": window.e2e_scheduled.to_dict(),
        "itl_s": window.itl.to_dict(),
        "tpot_s": window.tpot.to_dict(),
        "prompt_tokens": window.prompt_tokens,
        "completion_tokens": window.completion_tokens,
    }


def _summary(histogram: Histogram) -> dict[str, Any]:
    return histogram.summary().to_dict()


def _due(expected: float) -> float:
    """Evenly spaced arrivals before the point where Λ is ``expected``: ⌈Λ⌉ (less a hair
    of float error, so that a span of exactly 20 arrivals counts 20, not 21)."""
    return float(math.ceil(expected - 1e-9 * max(1.0, expected)))


def _share(cpu: float | None, count: int) -> float | None:
    """``cpu`` seconds over ``count`` things, None when either is missing."""
    return None if cpu is None or not count else cpu / count


def _per_minute(count: float, span_s: float) -> float | None:
    return count * 60.0 / span_s if span_s > 0 else None
