"""A run's store as Prometheus metrics, and its page as a live server shows it.

:func:`prometheus_text` is what ``pyattacker serve STORE`` answers on ``/metrics``: the text
exposition format (version 0.0.4) that Prometheus and every scraper compatible with it
read. The figures are those of :func:`~pyattacker.report.summarize` (the same dict
``pyattacker report --json`` prints), plus one extra stream over the attempts for the
attempts by task *and* outcome, which the summary keeps apart. So a scrape and a report of
the same store agree, and a scrape of a live run shows how far it got.

What the store does not hold is not made up: leases are recorded per attempt (which
resource each attempt leased), not as "held now", so there is no gauge of leases in use;
``pyattacker_run_resource_attempts_total`` counts the attempts that leased each resource.

Label values (task names, error classes, resource names, run ids) are escaped as the
format requires (backslash, double quote, new line), so no value can forge a line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from pyattacker.report._html import page
from pyattacker.report._html_run import store_extras
from pyattacker.report._run import summarize
from pyattacker.store import RowKind, Store

__all__ = ["CONTENT_TYPE", "live_run_page", "metric_lines", "prometheus_text"]

#: the Content-Type of the text exposition format
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: a metric: name, type, help, and its samples as ``(labels, value)``
_Metric = tuple[str, str, str, list[tuple[dict[str, str], float]]]


def prometheus_text(store: Store) -> str:
    """The Prometheus text of ``store`` (see the module docstring): pipelines by state,
    attempts by task and outcome, errors by class, retries and their delays, attempts and
    throttles per resource, and whether a run is live. Reads only; whatever the store
    raises passes through."""
    summary = summarize(store, errors=0)
    by_task: Counter[tuple[str, str]] = Counter(
        (str(row["task"]), str(row["outcome"])) for row in store.rows(RowKind.ATTEMPTS)
    )
    return "".join(metric_lines(_metrics(summary, by_task)))


def live_run_page(store: Store, *, refresh_s: int) -> str:
    """The run's page (as :func:`~pyattacker.report.run_html` draws it), reloading itself
    every ``refresh_s`` seconds while a run of ``store`` is live; a finished run's page
    does not reload. The reload is a ``<meta http-equiv="refresh">``: the page stays the
    self-contained one, only fetched again."""
    summary = summarize(store)
    html = page("run", "pyattacker run report", summary, store_extras(store))
    if any(run.get("live") for run in summary["runs"]):
        meta = f'<meta http-equiv="refresh" content="{int(refresh_s)}">\n'
        html = html.replace("<head>\n", f"<head>\n{meta}", 1)
    return html


def _metrics(summary: Mapping[str, Any], by_task: Counter[tuple[str, str]]) -> list[_Metric]:
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
