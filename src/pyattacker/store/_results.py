"""``results``: one row per item of a store — what went in, what came out, what it cost.

The view a user asks for after a run ("which of my 2,000 items failed, and what did the
others answer?"), built from the stored rows; nothing is stored for it. Each row:

- ``key``: the pipeline's ``key`` (``--key``), else the 0-based index of its row in the
  input (``row``, when the store records it), else its admission ``ordinal``;
- ``repeat``, ``pipeline_id``, ``state`` (``succeeded``, ``failed``, ``interrupted``, ...);
- ``input``: the seed, ``output``: the last step's output (None until it succeeded) — both
  as readable values without the user's code: JSON as it is, a dataclass as its fields'
  JSON (``{"type", "value"}``'s ``value``), other bytes as ``{"codec", "data_base64"}``;
- ``step``: the step it stopped at (None once succeeded), ``error_class`` and ``error``;
- ``attempts``: every attempt of every step, ``usage``: what they reported with
  ``lease.report(usage=...)``, summed by key (None if nothing), and ``tokens``: the tokens
  among it, read as pacing reads them (``pyattacker._usage.tokens_of``; None when usage
  names none).

Cost: one pass over the attempts and one over the task rows (a small tally per pipeline
in memory), then the pipelines streamed with two artifact lookups each.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping
from typing import Any

from pyattacker._usage import tokens_of
from pyattacker.store._protocol import Store
from pyattacker.store._rows import ArtifactRow, RowKind

__all__ = ["item_key", "readable_value", "results", "tokens_of"]

Row = dict[str, Any]


def item_key(pipeline: Mapping[str, Any] | Any) -> Any:
    """How an item is named to people: its ``key``, else its input row index (``row``),
    else its ``ordinal``. Takes a ``PipelineRow`` or a ``rows("pipelines")`` dict."""
    get = pipeline.get if isinstance(pipeline, Mapping) else lambda n: getattr(pipeline, n, None)
    for name in ("key", "row", "ordinal"):
        found = get(name)
        if found is not None:
            return found
    return None


def readable_value(artifact: ArtifactRow | None) -> Any:
    """The value an artifact holds, decoded without importing anything (see above)."""
    if artifact is None:
        return None
    data = artifact.data
    if artifact.codec.startswith("@null:"):  # not kept: what is known of it
        _, size, codec = artifact.codec.split(":", 2)
        return {"kept": None, "codec": codec, "size": int(size), "digest": artifact.digest}
    if artifact.codec in ("json", "dataclass"):
        try:
            value = json.loads(data)
        except ValueError:
            pass
        else:
            if artifact.codec == "json":
                return value
            if isinstance(value, dict) and "value" in value:
                return value["value"]
    return {"codec": artifact.codec, "data_base64": base64.b64encode(data).decode("ascii")}


def results(store: Store) -> Iterator[Row]:
    """One row per pipeline of ``store``, in the order ``rows("pipelines")`` gives."""
    spent = _attempts_by_pipeline(store)
    stopped = _stopped_tasks(store)
    for pipeline in store.rows(RowKind.PIPELINES):
        pid = pipeline["pipeline_id"]
        attempts, usage = spent.get(pid, (0, None))
        task = stopped.get(pid)
        succeeded = pipeline["state"] == "succeeded"
        output = None
        if pipeline["output_artifact"] is not None:
            output = readable_value(store.artifact(pid, pipeline["ntasks"] - 1))
        yield {
            "key": item_key(pipeline),
            "repeat": pipeline["repeat"],
            "pipeline_id": pid,
            "state": pipeline["state"],
            "input": readable_value(store.artifact(pid, -1)),
            "output": output,
            "step": None if succeeded or task is None else task["name"],
            "error_class": None if task is None else task["error_class"],
            "error": pipeline["error"] if not succeeded else None,
            "attempts": attempts,
            "usage": usage,
            "tokens": tokens_of(usage),
        }


def _attempts_by_pipeline(store: Store) -> dict[str, tuple[int, dict[str, float] | None]]:
    spent: dict[str, tuple[int, dict[str, float] | None]] = {}
    for attempt in store.rows(RowKind.ATTEMPTS):
        pid = attempt["pipeline_id"]
        count, total = spent.get(pid, (0, None))
        used = attempt.get("usage")
        if used:
            if total is None:
                total = {}
            for unit, amount in used.items():
                total[unit] = total.get(unit, 0) + amount
        spent[pid] = (count + 1, total)
    return spent


def _stopped_tasks(store: Store) -> dict[str, Row]:
    """Per pipeline, its last task row that did not succeed (the step it stopped at)."""
    stopped: dict[str, Row] = {}
    for task in store.rows(RowKind.TASKS):
        if task["state"] == "succeeded":
            continue
        pid = task["pipeline_id"]
        found = stopped.get(pid)
        if found is None or task["seq"] >= found["seq"]:
            stopped[pid] = {k: task[k] for k in ("name", "seq", "error_class")}
    return stopped
