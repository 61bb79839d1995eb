"""The run report: what a store says happened, summed up (docs/run.md, "What the store holds").

:func:`summarize` reads only ``store.runs()`` and ``store.rows(kind)``, so it works on any
``Store`` (memory or SQLite, a finished run or a live one opened read-only beside it) and
stores nothing: the summary is an opinion computed from facts, every time it is asked for.
Rows are streamed; memory grows with the number of distinct keys (task names, resources,
error classes, decision reasons, event kinds, distinct error messages), never with the
number of rows. Attempt durations go into one bounded :class:`~pyattacker.measure.Histogram`
per task, so their percentiles are nearest-rank within the histogram's 0.05 %.

:func:`render_run_text` (in ``_run_text``) turns a summary into rich tables;
``json.dumps(summary)`` is the JSON form. Both show the same numbers because both read the
same dict.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyattacker.errors import ConfigError
from pyattacker.measure import Histogram
from pyattacker.report._run_text import pacing_lines, render_run_text
from pyattacker.store import RowKind, Store
from pyattacker.store._liveness import judged_runs, run_view
from pyattacker.store._results import item_key

__all__ = ["pacing_lines", "pacing_summary", "render_run_text", "summarize"]

_TASK_STATES = ("succeeded", "failed", "interrupted")
_IN_FLIGHT = ("running", "pending")  # pipeline states a dead run leaves behind
_THROTTLED = "rate_limit"


def summarize(store: Store, *, errors: int = 5) -> dict[str, Any]:
    """Everything the report prints, as plain JSON-ready values. Keys:

    - ``store``: its location.
    - ``runs``, oldest first: ``run_id``, ``state``, ``started_at``/``ended_at`` (epoch
      seconds), ``elapsed_s``, ``stop_reason``, ``resumes``, and what
      :func:`pyattacker.store._liveness.run_view` adds: a run still marked ``running``
      whose process died shows ``state`` ``crashed``, with ``crashed_because``,
      ``stored_state``, ``live``, ``consumed`` and ``resume_command``.
    - ``pipelines``: ``total``, ``by_state``, ``interrupted_by_crash`` (pipelines a dead run
      left ``running``/``pending``, counted as ``interrupted``: what a resume will record
      and continue) and ``failed_because``: the ``errors`` most frequent errors that ended
      failed pipelines, each with ``error``, ``count``, ``example_pipeline_id`` and
      ``example_keys`` (the first five items it ended, by key: the ``--key`` value, else
      the input row index).
    - ``tasks``, by name in pipeline order: ``succeeded``/``failed``/``interrupted`` task
      rows, ``attempts`` rows, and ``duration_s`` = ``count``/``p50``/``p95``/``max`` over
      *every* attempt of the task, failed ones included (``None`` when there are none).
    - ``attempts``: ``total``, ``by_outcome``, ``by_error_class``, ``retries`` and
      ``retry_wait_s`` (the decisions that said "try again" and the delays they chose),
      ``decisions`` by reason, ``by_resource`` (per ``pool/resource`` the attempts that
      leased it, by outcome, and ``throttled``) and ``usage`` (what every attempt reported
      with ``lease.report(usage=...)``, summed by name).
    - ``errors``: the ``errors`` most frequent failed-attempt messages (``error_class``,
      ``message``, ``count``, ``gave_up``: how many of them ended their task, ``tasks``,
      ``example_pipeline_id``), and ``errors_distinct``.
    - ``events`` by kind.
    - ``steps``: ``{run_id: {"reused": n, "ran": m}}`` for each run that recorded it (a run
      does when it ends): the steps it took from the store and the steps it ran.
    - ``pacing``: :func:`pacing_summary`, per paced ``pool/resource`` its limits and how it
      was paced.

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
