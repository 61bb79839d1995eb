"""The run report as text: rich tables and lines from a :func:`~pyattacker.report._run.summarize`
summary.

Reads only the summary dict, so equal summaries render equally and the JSON form
(``json.dumps(summary)``) shows the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pyattacker.store._lifecycle import DEFAULT_STALE_AFTER_S

__all__ = ["pacing_lines", "render_run_text"]

_TASK_STATES = ("succeeded", "failed", "interrupted")
_TEXT = ("class", "tasks", "message")
_NONE = "\N{EN DASH}"  # what a table shows for "no value"


def render_run_text(summary: Mapping[str, Any]) -> RenderableType:
    """The summary as rich tables for a terminal (``Console.print`` it; any width works).

    Shows a headline, the runs, the tasks with their attempt durations, the resources, the
    attempts with the retry decisions, the top errors and the events. Sections with nothing
    to show are left out. Reads only ``summary``: equal summaries render equally.
    """
    head = Text(f"pyattacker run report — {summary['store']}\n", style="bold")
    head.append(_headline(summary["pipelines"]) + _crash_note(summary["pipelines"]), style="")
    parts: list[RenderableType] = [head, Text()]
    for section in (_runs_table, _tasks_table, _resources_table):
        table = section(summary)
        if table is not None:
            parts.append(table)
        if section is _runs_table and _liveness_lines(summary):
            parts += [Text("\n".join(_liveness_lines(summary))), Text()]
    paced = pacing_lines(summary.get("pacing") or {})
    if paced:
        parts += [Text("\n".join(paced)), Text()]
    lines = [*_steps_lines(summary.get("steps") or {}), *_attempt_lines(summary["attempts"])]
    if lines:
        parts += [Text("\n".join(lines)), Text()]
    for section in (_failures_grid, _errors_table):
        table = section(summary)
        if table is not None:
            parts += [table, Text()]
    if summary["events"]:
        parts.append(Text(f"Events: {_counts(summary['events'])}"))
    return Group(*parts)


def _headline(pipelines: Mapping[str, Any]) -> str:
    total = pipelines["total"]
    if not total:
        return "No pipelines recorded yet."
    noun = "pipeline" if total == 1 else "pipelines"
    return f"{total} {noun}: {_counts(pipelines['by_state'])}"


def _table(title: str, *columns: str, left: tuple[str, ...] = ()) -> Table:
    """A table whose first column and the ``left`` ones are text; the rest are numbers."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for i, column in enumerate(columns):
        text = i == 0 or column in left
        table.add_column(column, justify="left" if text else "right", no_wrap=i == 0)
    return table


def _runs_table(summary: Mapping[str, Any]) -> Table | None:
    if not summary["runs"]:
        return None
    table = _table(
        "Runs",
        "run",
        "state",
        "started",
        "elapsed",
        "stop reason",
        left=("state", "started", "stop reason"),
    )
    for run in summary["runs"]:
        table.add_row(
            run["run_id"],
            run["state"],  # why a run is judged crashed: on its own line, below the table
            _local_time(run["started_at"]),
            _seconds(run["elapsed_s"]),
            run["stop_reason"] or _NONE,
        )
    return table


def _shown_state(run: Mapping[str, Any]) -> str:
    """``crashed (process 10711 gone; last heartbeat 12 s ago)``, or the state alone."""
    why = run.get("crashed_because")
    return str(run["state"]) if not why else f"{run['state']} ({why})"


def _crash_note(pipelines: Mapping[str, Any]) -> str:
    stranded = pipelines.get("interrupted_by_crash") or 0
    if not stranded:
        return ""
    return f" ({stranded} of them running when their run crashed: a resume continues them)"


def _liveness_lines(summary: Mapping[str, Any]) -> list[str]:
    """Under the runs table: the live run, or each dead one with how far it read and the
    command that resumes it."""
    lines = []
    for run in summary["runs"]:
        if run.get("live"):
            facts = [] if run.get("pid") is None else [f"process {run['pid']}"]
            if facts and run.get("host"):
                facts[0] += f" on {run['host']}"
            age = run.get("heartbeat_age_s") or 0.0
            facts.append(f"last heartbeat {age:.0f} s ago")
            if age > DEFAULT_STALE_AFTER_S:  # alive by its lock, yet silent: say what it means
                facts.append(
                    "paused or blocked: it still holds the store, nothing can take it over"
                )
            lines.append(f"Run {run['run_id']} is running ({'; '.join(facts)}).")
        elif run.get("crashed_because"):
            lines.append(f"Run {run['run_id']} {_shown_state(run)}.")
        else:
            continue
        consumed = _consumed_text(run.get("consumed"))
        if consumed:
            lines.append(f"  Input: {consumed}.")
        if run.get("resume_command"):
            lines.append(f"  Resume it with: {run['resume_command']}")
    return lines


def _consumed_text(record: Mapping[str, Any] | None) -> str:
    """``1,673 of 2,000 rows read from items.jsonl (not to the end)``; empty when no
    input was recorded."""
    if not record or record.get("rows_read") is None:
        return ""
    read, total = record["rows_read"], record.get("rows_total")
    text = f"{read:,} of {total:,} rows read" if total is not None else f"{read:,} rows read"
    where = record.get("path") or record.get("source")
    if where:
        text += f" from {where}"
    if record.get("exhausted"):
        return f"{text} (all of it)"
    return f"{text} (not to the end)" if record.get("exhausted") is False else text


def _tasks_table(summary: Mapping[str, Any]) -> Table | None:
    if not summary["tasks"]:
        return None
    table = _table(
        "Tasks (durations over every attempt)",
        "task",
        *_TASK_STATES,
        "attempts",
        "p50",
        "p95",
        "max",
    )
    for name, task in summary["tasks"].items():
        durations = task["duration_s"]
        table.add_row(
            name,
            *(str(task[state]) for state in _TASK_STATES),
            str(task["attempts"]),
            *(_seconds(durations[q]) for q in ("p50", "p95", "max")),
        )
    return table


def _resources_table(summary: Mapping[str, Any]) -> Table | None:
    resources = summary["attempts"]["by_resource"]
    if not resources:
        return None
    columns = ("attempts", "ok", "failed", "throttled", "cancelled")
    table = _table("Resources (attempts that leased each)", "resource", *columns)
    for name, counts in resources.items():
        table.add_row(name, *(str(counts[column]) for column in columns))
    return table


def _attempt_lines(attempts: Mapping[str, Any]) -> list[str]:
    if not attempts["total"]:
        return []
    lines = [f"Attempts: {attempts['total']} — {_counts(attempts['by_outcome'])}"]
    if attempts["by_error_class"]:
        lines.append(f"Error classes: {_counts(attempts['by_error_class'])}")
    lines.append(f"Retry decisions: {_counts(attempts['decisions'])}")
    if attempts["retries"]:
        lines.append(
            f"{attempts['retries']} retries, waiting {_seconds(attempts['retry_wait_s'])} "
            "in total (parked, holding no worker)"
        )
    usage = attempts.get("usage")
    if usage:
        lines.append(f"Usage reported: {', '.join(f'{_number(n)} {u}' for u, n in usage.items())}")
    return lines


def _number(value: float) -> str:
    """``12,345`` for whole numbers, ``0.25`` otherwise (usage may be tokens or dollars)."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.4g}"


def _steps_lines(steps: Mapping[str, Mapping[str, int]]) -> list[str]:
    """What the last run that recorded its steps took from the store and what it ran."""
    if not steps:
        return []
    run_id, last = list(steps.items())[-1]
    return [f"Steps of run {run_id}: {last['reused']} reused from the store, {last['ran']} ran"]


def _failures_grid(summary: Mapping[str, Any]) -> Table | None:
    causes = summary["pipelines"]["failed_because"]
    if not causes:
        return None
    grid = Table(
        title="Failed pipelines, by the error that ended them",
        title_justify="left",
        box=None,
        show_header=False,
        pad_edge=False,
    )
    grid.add_column(justify="right", no_wrap=True)
    grid.add_column()
    grid.add_column(no_wrap=True, style="dim")
    for cause in causes:
        grid.add_row(str(cause["count"]), cause["error"], _failed_items(cause))
    return grid


def _errors_table(summary: Mapping[str, Any]) -> Table | None:
    errors = summary["errors"]
    if not errors:
        return None
    title = f"Top errors ({len(errors)} of {summary['errors_distinct']} distinct)"
    table = _table(title, "count", "gave up", "class", "tasks", "message", left=_TEXT)
    table.columns[0].justify = "right"
    for error in errors:
        table.add_row(
            str(error["count"]),
            str(error["gave_up"]),
            error["error_class"],
            ",".join(error["tasks"]),
            error["message"],
        )
    table.caption = "gave up: attempts after which the retry policy stopped and the task failed"
    table.caption_justify = "left"
    return table


def _failed_items(cause: Mapping[str, Any]) -> str:
    """Which items a cause ended, by key (the ``--key`` value or the input row index); the
    pipeline id for a summary that has no keys."""
    keys = cause.get("example_keys")
    if not keys:
        return f"e.g. {_short_id(cause['example_pipeline_id'])}"
    more = ", …" if cause["count"] > len(keys) else ""
    noun = "key" if len(keys) == 1 and not more else "keys"
    return f"{noun} {', '.join(str(k) for k in keys)}{more}"


def _short_id(pipeline_id: str | None) -> str:
    """A pipeline id shortened for a table (``--json`` has it whole); git-style prefix."""
    if not pipeline_id:
        return _NONE
    return pipeline_id if len(pipeline_id) <= 12 else f"{pipeline_id[:12]}…"


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{count} {name}" for name, count in counts.items()) or "none"


def _seconds(value: float | None) -> str:
    if value is None:
        return _NONE
    if value < 0.001:
        return f"{value * 1000:.2f} ms"
    if value < 1.0:
        return f"{value * 1000:.1f} ms" if value < 0.1 else f"{value * 1000:.0f} ms"
    return f"{value:.2f} s"


def _local_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def pacing_lines(pacing: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per paced resource: ``Paced llm/metered (rpm 1800, burst 6): 412 leases,
    rested 96 times, 3.20 s in all``."""
    lines = []
    for name, entry in pacing.items():
        limits = [
            f"{limit} {entry[limit]:g}"
            for limit in ("rpm", "tpm", "rpd")
            if isinstance(entry.get(limit), int | float)
        ]
        limits.append(f"burst {entry.get('burst') or 1}")
        if entry.get("quota_group"):
            limits.append(f"group {entry['quota_group']}")
        lines.append(
            f"Paced {name} ({', '.join(limits)}): {entry['leases']} leases, rested "
            f"{entry['paced']} times, {_seconds(entry['paced_s'])} in all"
        )
    return lines
