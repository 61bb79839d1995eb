"""A run's store as Prometheus metrics: what ``pyattacker serve STORE`` answers on ``/metrics``.

:func:`prometheus_text` gives the text exposition format (version 0.0.4) that Prometheus
and every scraper compatible with it read. The figures are those of
:func:`~pyattacker.report.summarize` (the same dict ``pyattacker report --json`` prints),
plus one stream over the attempts for the attempts by task *and* outcome and their
durations, which the summary keeps apart, and one over the events for the leases held. So
a scrape and a report of the same store agree, and a scrape of a live run shows how far it
got.

Attempt durations (``duration_s``, the run's monotonic clock) are histograms by task and
outcome, over the buckets of ``attack --serve``'s latency (1 ms to 60 s, then ``+Inf``).

Leases in use: the attempts rows say which resource each attempt leased once it has ended,
not what is held now. The live Runner records a ``run.leases`` event (leases out and the
limit of each ``pool/resource``) at a heartbeat whenever they changed (``run/_leases.py``);
the gauge is the last one of a live run, so it lags the pools by about one heartbeat (1 s
by default). When no run is live, no lease is out: every resource reads 0. A store written
before runs recorded it has no such event: the gauge then lists only the resources the
attempts name, at 0 while no run is live, and leaves a live run's out.

Label values (task names, error classes, resource names, run ids) are escaped as the
format requires (backslash, double quote, new line), so no value can forge a line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from pyattacker.report._html_run import LEASES_EVENT
from pyattacker.report._metrics import Histogram
from pyattacker.report._run import summarize
from pyattacker.store import RowKind, Store

__all__ = ["CONTENT_TYPE", "metric_lines", "prometheus_text"]

#: the Content-Type of the text exposition format
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: a metric: name, type, help, and its samples as ``(labels, value)``
_Metric = tuple[str, str, str, list[tuple[dict[str, str], float]]]


def prometheus_text(store: Store) -> str:
    """The Prometheus text of ``store`` (see the module docstring): pipelines by state,
    attempts by task and outcome with their durations, errors by class, retries and their
    delays, attempts, throttles and leases in use per resource, and whether a run is live.
    Reads only; whatever the store raises passes through."""
    summary = summarize(store, errors=0)
    by_task: Counter[tuple[str, str]] = Counter()
    durations: dict[tuple[str, str], Histogram] = {}
    for row in store.rows(RowKind.ATTEMPTS):
        key = (str(row["task"]), str(row["outcome"]))
        by_task[key] += 1
        durations.setdefault(key, Histogram()).observe(float(row["duration_s"]))
    live = {run["run_id"] for run in summary["runs"] if run.get("live")}
    leases = _leases(store.rows(RowKind.EVENTS), live, summary["attempts"]["by_resource"])
    return "".join(
        [*metric_lines(_metrics(summary, by_task, leases)), *_histogram_lines(durations)]
    )


def _leases(
    events: Iterable[Mapping[str, Any]], live: set[str], resources: Iterable[str]
) -> dict[str, dict[str, int]]:
    """``{"in_use": ..., "limit": ...}`` by resource: the last ``run.leases`` of a live run,
    or none in use when no run is live (limits as last recorded)."""
    last: Mapping[str, Any] | None = None
    last_live: Mapping[str, Any] | None = None
    for event in events:
        if event["kind"] == LEASES_EVENT:
            last = event["data"]
            if event["run_id"] in live:
                last_live = event["data"]
    if live:
        if last_live is None:
            return {"in_use": {}, "limit": {}}
        return {"in_use": dict(last_live["in_use"]), "limit": dict(last_live["limit"])}
    names = [*resources, *(last["in_use"] if last else ())]
    return {"in_use": dict.fromkeys(names, 0), "limit": dict(last["limit"]) if last else {}}


def _histogram_lines(durations: Mapping[tuple[str, str], Histogram]) -> Iterable[str]:
    name = "pyattacker_run_attempt_duration_seconds"
    yield f"# HELP {name} Attempt durations (the run's monotonic clock), by task and outcome.\n"
    yield f"# TYPE {name} histogram\n"
    for (task, outcome), histogram in sorted(durations.items()):
        labels = _labels({"task": task, "outcome": outcome})[1:-1]
        for line in histogram.lines(name, labels):
            yield line + "\n"


def _metrics(
    summary: Mapping[str, Any],
    by_task: Counter[tuple[str, str]],
    leases: Mapping[str, Mapping[str, int]],
) -> list[_Metric]:
    attempts = summary["attempts"]
    resources = attempts["by_resource"]
    live = any(run.get("live") for run in summary["runs"])
    return [
        ("pyattacker_run_pipelines", "gauge", "Pipelines of the store, by state now.",
         [({"state": s}, n) for s, n in summary["pipelines"]["by_state"].items()]),
        ("pyattacker_run_attempts_total", "counter", "Attempts, by task and outcome.",
         [({"task": t, "outcome": o}, n) for (t, o), n in sorted(by_task.items())]),
        ("pyattacker_run_errors_total", "counter", "Failed attempts, by error class.",
         [({"class": c}, n) for c, n in attempts["by_error_class"].items()]),
        ("pyattacker_run_retries_total", "counter", "Decisions that said: try again.",
         [({}, attempts["retries"])]),
        ("pyattacker_run_retry_wait_seconds_total", "counter",
         "Seconds of delay the retry decisions chose.", [({}, attempts["retry_wait_s"])]),
        ("pyattacker_run_resource_attempts_total", "counter",
         "Attempts that leased each pool/resource, by outcome.",
         [({"resource": r, "outcome": o}, c[o]) for r, c in resources.items()
          for o in ("ok", "failed", "cancelled")]),
        ("pyattacker_run_resource_throttled_total", "counter",
         "Attempts on each pool/resource that failed as rate_limit.",
         [({"resource": r}, c["throttled"]) for r, c in resources.items()]),
        ("pyattacker_run_resource_leases_in_use", "gauge",
         "Leases each pool/resource has out now (as last recorded by the live run).",
         [({"resource": r}, n) for r, n in sorted(leases["in_use"].items())]),
        ("pyattacker_run_resource_lease_limit", "gauge",
         "The most leases each pool/resource may have out (as last recorded).",
         [({"resource": r}, n) for r, n in sorted(leases["limit"].items())]),
        ("pyattacker_run_live", "gauge", "1 while a run of the store is live, else 0.",
         [({}, 1 if live else 0)]),
        ("pyattacker_run_info", "gauge", "One sample per run: its id and shown state.",
         [({"run_id": r["run_id"], "state": r["state"]}, 1) for r in summary["runs"]]),
    ]  # fmt: skip


def metric_lines(metrics: Iterable[_Metric]) -> Iterable[str]:
    """The exposition text of ``metrics``, one line at a time (each ending in a new line)."""
    for name, kind, text, samples in metrics:
        yield f"# HELP {name} {text}\n"
        yield f"# TYPE {name} {kind}\n"
        for labels, value in samples:
            yield f"{name}{_labels(labels)} {_number(value)}\n"


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{key}="{_escaped(value)}"' for key, value in labels.items())
    return "{" + inner + "}"


def _escaped(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
