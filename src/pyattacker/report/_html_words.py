"""The warnings an HTML attack report puts into words, from ``AttackResult.to_dict()``.

Each warning is one sentence a person can act on, with the figures it rests on; they are
the ones the terminal report prints (loop lag, early sends, stopped early) and the ones a
chart would otherwise leave to the reader (a generator that fell behind, dropped arrivals,
a rate short of the plan, failures and throttling). A clean run has none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyattacker.attack import lag_is_large

__all__ = ["SHORT_RATE", "attack_warnings"]

#: an achieved rate below this share of the planned one is worth a warning
SHORT_RATE = 0.95


def attack_warnings(report: Mapping[str, Any]) -> list[str]:
    """The warnings for one attack report, most important first; ``[]`` when none apply."""
    summary, total = report["summary"], report["total"]
    found = [
        _stopped(summary),
        _behind(summary, total),
        _dropped(summary, report["plan"]),
        _short(summary, flows=bool(report.get("flows"))),
        _lag(summary, total),
        _early(total),
        _failed(total),
        _throttled(total),
    ]
    return [line for line in found if line]


def _stopped(summary: Mapping[str, Any]) -> str:
    reason = summary.get("stop_reason")
    return f"The attack stopped early ({reason}); every figure covers what ran." if reason else ""


def _behind(summary: Mapping[str, Any], total: Mapping[str, Any]) -> str:
    # Named only when the dispatch delay is large against the latencies (the loop lag's
    # rule, with the plan's late_after as its floor): a few late sends in a run of slow answers
    # move no figure a reader would act on.
    late = summary["late"]
    delay = total.get("dispatch_delay_s") or {}
    if not late or not lag_is_large(delay.get("p99"), _sent_p50(total), summary["late_after_s"]):
        return ""
    return (
        f"The load generator fell behind: {late:,} of {summary['scheduled']:,} requests were "
        f"sent more than {summary['late_after_s'] * 1000:g} ms after their scheduled time "
        f"(dispatch delay p99 {delay['p99'] * 1000:.2f} ms). "
        "The scheduled clock counts that wait (what users would have seen); the sent clock "
        "does not."
    )


def _dropped(summary: Mapping[str, Any], plan: Mapping[str, Any]) -> str:
    dropped = summary["dropped"]
    if not dropped:
        return ""
    cap = plan["load"].get("max_in_flight")
    why = f" because {cap:,} requests were already in progress" if cap else ""
    return f"{dropped:,} arrivals were dropped{why}: they were never sent."


def _short(summary: Mapping[str, Any], flows: bool = False) -> str:
    planned, achieved = summary.get("planned_rate"), summary["achieved_rate"]
    # With a scenario the planned rate counts flows and the achieved one their steps: the
    # two do not compare (a flow that falls behind shows as dispatch delay and late sends).
    if flows or not planned or achieved >= planned * SHORT_RATE:
        return ""
    return (
        f"The achieved rate, {achieved:.1f}/s, fell short of the planned {planned:.1f}/s "
        f"({achieved / planned:.0%})."
    )


def _lag(summary: Mapping[str, Any], total: Mapping[str, Any]) -> str:
    lag = summary.get("loop_lag_s")
    median = _sent_p50(total)
    if not lag or not lag["count"] or not lag_is_large(lag["p99"], median):
        return ""
    against = "" if median is None else f", against a median latency of {median * 1000:.2f} ms"
    return (
        f"The generator itself fell behind (loop lag p99 {lag['p99'] * 1000:.2f} ms{against}): "
        "one answer in a hundred may have been timed up to that much late, so the upper "
        "percentiles include our own delay, not the server's. Lower the rate, the clients "
        "or the streams, or give the generator a CPU of its own."
    )


def _sent_p50(total: Mapping[str, Any]) -> float | None:
    """The sent clock's median latency, None when nothing was timed."""
    sent = (total.get("latency_s") or {}).get("sent") or {}
    return sent.get("p50") if sent.get("count") else None


def _early(total: Mapping[str, Any]) -> str:
    early = total.get("early_sends", 0)
    if not early:
        return ""
    return (
        f"{early:,} requests were sent before their scheduled time (a timer fired early); "
        "their dispatch delay counts as 0."
    )


def _failed(total: Mapping[str, Any]) -> str:
    failed, requests = total["outcomes"].get("failed", 0), total["requests"]
    if not failed:
        return ""
    classes = ", ".join(f"{name} {count:,}" for name, count in total["error_classes"].items())
    share = f"{failed / requests:.1%}"
    return f"{failed:,} of {requests:,} requests failed ({share}); by class: {classes}."


def _throttled(total: Mapping[str, Any]) -> str:
    ended, requests = total["outcomes"].get("throttled", 0), total["requests"]
    once = total.get("throttled_requests", 0)
    if not ended and not once:
        return ""
    return (
        f"{ended:,} of {requests:,} requests ended throttled ({ended / requests:.1%}); "
        f"{once:,} were throttled at least once, in {total.get('throttled_attempts', 0):,} "
        "throttled attempts."
    )
