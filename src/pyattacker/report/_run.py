"""The run report: what a store says happened, summed up (DESIGN.md §3, principle 4).

:func:`summarize` reads only ``store.runs()`` and ``store.rows(kind)``, so it works on any
``Store`` (memory or SQLite, a finished run or a live one opened read-only beside it) and
stores nothing: the summary is an opinion computed from facts, every time it is asked for.
Rows are streamed; memory grows with the number of distinct keys (task names, resources,
error classes, decision reasons, event kinds, distinct error messages), never with the
number of rows. Attempt durations go into one bounded :class:`~pyattacker.measure.Histogram`
per task, so their percentiles are nearest-rank within the histogram's 0.05 %.

:func:`render_run_text` turns a summary into rich tables; ``json.dumps(summary)`` is the
JSON form. Both show the same numbers because both read the same dict.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pyattacker.errors import ConfigError
from pyattacker.measure import Histogram
from pyattacker.store import RowKind, Store
from pyattacker.store._lifecycle import DEFAULT_STALE_AFTER_S
from pyattacker.store._liveness import judged_runs, run_view
from pyattacker.store._results import item_key

__all__ = ["pacing_lines", "pacing_summary", "render_run_text", "summarize"]

_TASK_STATES = ("succeeded", "failed", "interrupted")
_IN_FLIGHT = ("running", "pending")  # pipeline states a dead run leaves behind
_THROTTLED = "rate_limit"
_TEXT = ("class", "tasks", "message")
_NONE = "\N{EN DASH}"  # what a table shows for "no value"


def summarize(store: Store, *, errors: int = 5) -> dict[str, Any]:
    """Everything the report prints, as plain JSON-ready values.

        Keys: ``store`` (its location); ``runs`` (oldest first: ``run_id``, ``state``,
        ``started_at``/``ended_at`` epoch seconds, ``elapsed_s``, ``stop_reason``,
        ``resumes``, and what :func:`pyattacker.store._liveness.run_view` adds: a run still
        marked ``running`` whose process died shows ``state`` ``crashed`` with
        ``crashed_because``, ``stored_state``, ``live``, ``consumed``, ``resume_command``);
        ``pipelines`` (``total``, ``by_state``, ``interrupted_by_crash``: pipelines a dead run
        left ``running``/``pending``, counted as ``interrupted`` — what a resume will record
        and continue —, and ``failed_because``: the
    ``errors`` most frequent errors that ended failed pipelines, each with ``error``,
    ``count``, ``example_pipeline_id`` and ``example_keys``: the first five items it ended,
    by key — the ``--key`` value, else the input row index); ``tasks`` (by name, in pipeline
        order: ``succeeded``/``failed``/``interrupted`` task rows, ``attempts`` rows, and
        ``duration_s`` = ``count``/``p50``/``p95``/``max`` over *every* attempt of the task,
        failed ones included, ``None`` when there are none); ``attempts`` (``total``,
        ``by_outcome``, ``by_error_class``, ``retries`` and ``retry_wait_s`` — the decisions that
        said "try again" and the delays they chose —, ``decisions`` by reason, ``by_resource``:
        per ``pool/resource`` the attempts that leased it, by outcome, and ``throttled``;
        ``usage``: what every attempt reported with ``lease.report(usage=...)``, summed by
        name); ``errors`` (the ``errors`` most frequent failed-attempt messages: ``error_class``,
        ``message``, ``count``, ``gave_up`` — how many of them ended their task —, ``tasks``,
        ``example_pipeline_id``) and ``errors_distinct``; ``events`` by kind; ``steps``:
        per run that recorded it (a run records it when it ends), the steps it took from
        the store (``reused``) and the steps it ran (``ran``), ``{run_id: {...}}`` oldest
        first; ``pacing``
        (:func:`pacing_summary`: per paced ``pool/resource``, its limits and how it was paced).

        Counters are ordered by count, largest first. Raises ``ConfigError`` (field
        ``errors``) for a negative ``errors``; whatever the store raises passes through.
    """
    if isinstance(errors, bool) or not isinstance(errors, int) or errors < 0:
        raise ConfigError(f"must be an integer >= 0, got {errors!r}", field="errors")
    tally = _Tally()
    runs = [_run(run) for run in _run_dicts(store)]
    dead = {r["run_id"] for r in runs if r["stored_state"] == "running" and not r["live"]}
    stranded = 0
    for row in store.rows(RowKind.PIPELINES):
        if row["run_id"] in dead and row["state"] in _IN_FLIGHT:
            row, stranded = {**row, "state": "interrupted"}, stranded + 1
        tally.pipeline(row)
    for row in store.rows(RowKind.TASKS):
        tally.task_row(row)
    for row in store.rows(RowKind.ATTEMPTS):
        tally.attempt(row)
    events, steps = _events_and_steps(store.rows(RowKind.EVENTS))
    return {
        "store": store.location,
        "runs": runs,
        "pipelines": {
            "total": sum(tally.pipelines.values()),
            "by_state": _ranked(tally.pipelines),
            "interrupted_by_crash": stranded,
            "failed_because": tally.failure_causes(errors),
        },
        "tasks": tally.tasks_summary(),
        "attempts": tally.attempts_summary(),
        "errors": tally.top_errors(errors),
        "errors_distinct": len(tally.errors),
        "events": _ranked(events),
        "steps": steps,
        "pacing": pacing_summary(store),
    }


# -- tallies -------------------------------------------------------------------------------


@dataclass(slots=True)
class _TaskTally:
    seq: int
    states: Counter[str] = field(default_factory=Counter)
    attempts: int = 0
    durations: Histogram = field(default_factory=Histogram)


@dataclass(slots=True)
class _ErrorTally:
    count: int = 0
    gave_up: int = 0
    tasks: set[str] = field(default_factory=set)
    example: str | None = None
    keys: list[Any] = field(default_factory=list)  # the first few items it ended, by key


_EXAMPLE_KEYS = 5  # failed items named per cause: enough to look one up, bounded memory


@dataclass(slots=True)
class _Tally:
    """Running counts over streamed rows; one entry per distinct key."""

    pipelines: Counter[str] = field(default_factory=Counter)
    causes: dict[str, _ErrorTally] = field(default_factory=dict)
    tasks: dict[str, _TaskTally] = field(default_factory=dict)
    total: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    error_classes: Counter[str] = field(default_factory=Counter)
    decisions: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    retry_wait_s: float = 0.0
    resources: dict[str, Counter[str]] = field(default_factory=dict)
    errors: dict[tuple[str, str], _ErrorTally] = field(default_factory=dict)
    usage: dict[str, float] = field(default_factory=dict)  # summed over every attempt

    def pipeline(self, row: Mapping[str, Any]) -> None:
        state = str(row["state"])
        self.pipelines[state] += 1
        if state == "failed":
            message = str(row.get("error") or "(no message)")
            found = self.causes.get(message)
            if found is None:
                found = self.causes[message] = _ErrorTally(example=str(row["pipeline_id"]))
            found.count += 1
            if len(found.keys) < _EXAMPLE_KEYS:
                found.keys.append(item_key(row))

    def failure_causes(self, limit: int) -> list[dict[str, Any]]:
        ranked = sorted(self.causes.items(), key=lambda item: (-item[1].count, item[0]))
        return [
            {
                "error": message,
                "count": tally.count,
                "example_pipeline_id": tally.example,
                "example_keys": tally.keys,
            }
            for message, tally in ranked[:limit]
        ]

    def _task(self, name: str, seq: int) -> _TaskTally:
        found = self.tasks.get(name)
        if found is None:
            found = self.tasks[name] = _TaskTally(seq)
        found.seq = min(found.seq, seq)
        return found

    def task_row(self, row: Mapping[str, Any]) -> None:
        self._task(str(row["name"]), int(row["seq"])).states[str(row["state"])] += 1

    def attempt(self, row: Mapping[str, Any]) -> None:
        task = self._task(str(row["task"]), int(row["seq"]))
        task.attempts += 1
        duration = row.get("duration_s")
        if isinstance(duration, int | float) and math.isfinite(duration):
            task.durations.record(max(0.0, float(duration)))
        outcome = str(row["outcome"])
        error_class = row.get("error_class")
        self.total += 1
        self.outcomes[outcome] += 1
        if error_class is not None:
            self.error_classes[str(error_class)] += 1
        decision = row.get("decision") or {}
        self.decisions[str(decision.get("reason", outcome))] += 1
        if decision.get("retry"):
            self.retries += 1
            self.retry_wait_s += float(decision.get("delay_s") or 0.0)
        for resource in row.get("resources") or ():
            counts = self.resources.setdefault(str(resource), Counter())
            counts["attempts"] += 1
            counts[outcome] += 1
            if error_class == _THROTTLED:
                counts["throttled"] += 1
        if outcome == "failed":
            self._error(row, decision)
        used = row.get("usage")
        if used:
            for unit, amount in used.items():
                self.usage[unit] = self.usage.get(unit, 0) + amount

    def _error(self, row: Mapping[str, Any], decision: Mapping[str, Any]) -> None:
        key = (str(row.get("error_class") or "unknown"), str(row.get("error") or "(no message)"))
        found = self.errors.get(key)
        if found is None:
            found = self.errors[key] = _ErrorTally(example=str(row["pipeline_id"]))
        found.count += 1
        found.gave_up += 0 if decision.get("retry") else 1
        found.tasks.add(str(row["task"]))

    def tasks_summary(self) -> dict[str, Any]:
        ordered = sorted(self.tasks.items(), key=lambda item: (item[1].seq, item[0]))
        return {
            name: {
                **{state: tally.states.get(state, 0) for state in _TASK_STATES},
                "attempts": tally.attempts,
                "duration_s": _durations(tally.durations),
            }
            for name, tally in ordered
        }

    def attempts_summary(self) -> dict[str, Any]:
        by_resource = {
            name: {
                "attempts": counts["attempts"],
                "ok": counts["ok"],
                "failed": counts["failed"],
                "cancelled": counts["cancelled"],
                "throttled": counts["throttled"],
            }
            for name, counts in sorted(self.resources.items())
        }
        return {
            "total": self.total,
            "by_outcome": _ranked(self.outcomes),
            "by_error_class": _ranked(self.error_classes),
            "retries": self.retries,
            "retry_wait_s": self.retry_wait_s,
            "decisions": _ranked(self.decisions),
            "by_resource": by_resource,
            "usage": dict(sorted(self.usage.items())),
        }

    def top_errors(self, limit: int) -> list[dict[str, Any]]:
        ranked = sorted(self.errors.items(), key=lambda item: (-item[1].count, item[0]))
        return [
            {
                "error_class": error_class,
                "message": message,
                "count": tally.count,
                "gave_up": tally.gave_up,
                "tasks": sorted(tally.tasks),
                "example_pipeline_id": tally.example,
            }
            for (error_class, message), tally in ranked[:limit]
        ]


def _events_and_steps(
    rows: Iterable[Mapping[str, Any]],
) -> tuple[Counter[str], dict[str, dict[str, int]]]:
    """Events by kind, and the step counts each run recorded (``run.steps`` events)."""
    events: Counter[str] = Counter()
    steps: dict[str, dict[str, int]] = {}
    for row in rows:
        kind = str(row["kind"])
        events[kind] += 1
        data = row.get("data") or {}
        if kind == "run.steps":
            steps[str(row["run_id"])] = {
                "reused": int(data.get("reused", 0)),
                "ran": int(data.get("ran", 0)),
            }
    return events, steps


# -- text ----------------------------------------------------------------------------------


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


# -- pacing --------------------------------------------------------------------------------


def pacing_summary(store: Store) -> dict[str, dict[str, Any]]:
    """Per paced ``pool/resource``, from the ``pool.pacing`` events every run records:
    its limits (``rpm``, ``tpm``, ``rpd``, ``burst``, ``quota_group``, the latest run's) and,
    summed over runs, ``leases``, ``paced`` (leases after which the key had to rest) and
    ``paced_s`` (seconds it rested). Empty when no resource was paced."""
    found: dict[str, dict[str, Any]] = {}
    for row in store.rows(RowKind.EVENTS):
        if row["kind"] != "pool.pacing":
            continue
        data = row.get("data") or {}
        name = f"{data.get('pool')}/{data.get('resource')}"
        entry = found.setdefault(name, {"leases": 0, "paced": 0, "paced_s": 0.0})
        for limit in ("rpm", "tpm", "rpd", "burst", "quota_group"):
            entry[limit] = data.get(limit)
        for total in ("leases", "paced", "paced_s"):
            value = data.get(total)
            if isinstance(value, int | float) and not isinstance(value, bool):
                entry[total] += value
    return dict(sorted(found.items()))


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


# -- helpers -------------------------------------------------------------------------------


def _run_dicts(store: Store) -> Iterable[Mapping[str, Any]]:
    for run, liveness in judged_runs(store):
        yield {
            "run_id": run.run_id,
            "state": str(run.state),
            "started_at": run.started_at,
            "ended_at": run.ended_at,
            "stop_reason": run.stop_reason,
            "resumes": run.resumes,
            **run_view(run, liveness),  # the shown state replaces the stored one
        }


def _run(run: Mapping[str, Any]) -> dict[str, Any]:
    ended = run["ended_at"]
    elapsed = None if ended is None else max(0.0, ended - run["started_at"])
    return {**run, "elapsed_s": elapsed}


def _durations(histogram: Histogram) -> dict[str, Any]:
    if not histogram.count:
        return {"count": 0, "p50": None, "p95": None, "max": None}
    p50, p95 = histogram.percentiles((50.0, 95.0)).values()
    return {"count": histogram.count, "p50": p50, "p95": p95, "max": histogram.max}


def _ranked(counter: Counter[str]) -> dict[str, int]:
    """Largest first; ties by name, so equal stores give equal JSON."""
    return dict(sorted(counter.items(), key=lambda item: (-item[1], item[0])))
