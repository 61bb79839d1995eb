"""Row builders and store probes the store tests share (imported as ``store_helpers``).

Each builder fills the fields a test does not care about.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from typing import Any

from pyattacker.store import (
    ArtifactRow,
    AttemptRow,
    Batch,
    EventRow,
    PipelineRow,
    PipelineState,
    ResourceRow,
    RowKind,
    RunRow,
    RunState,
    Store,
    TaskRow,
    TaskState,
)
from pyattacker.store._lifecycle import this_host

# -- row builders -----------------------------------------------------------------------


def run(run_id: str = "r1", **fields: Any) -> RunRow:
    values: dict[str, Any] = {"state": RunState.RUNNING, "started_at": 1000.0}
    return RunRow(run_id=run_id, **{**values, **fields})


def live_run(run_id: str = "r1", **fields: Any) -> RunRow:
    """A run owned by this very process, with a heartbeat at its start."""
    values: dict[str, Any] = {"pid": os.getpid(), "host": this_host(), "heartbeat_at": 1000.0}
    return run(run_id, **{**values, **fields})


def pipeline(pipeline_id: str = "p1", **fields: Any) -> PipelineRow:
    values: dict[str, Any] = {
        "template": "summarise",
        "chain_digest": "chain-1",
        "seed_digest": "seed-1",
        "seed_artifact": "seed-1",
        "repeat": 0,
        "key": None,
        "state": PipelineState.PENDING,
        "cursor": 0,
        "ntasks": 3,
        "run_id": "r1",
        "ordinal": 0,
        "created_at": 1000.0,
        "updated_at": 1000.0,
    }
    return PipelineRow(pipeline_id=pipeline_id, **{**values, **fields})


def task(pipeline_id: str = "p1", seq: int = 0, **fields: Any) -> TaskRow:
    values: dict[str, Any] = {
        "name": f"task-{seq}",
        "task_digest": f"task-digest-{seq}",
        "state": TaskState.SUCCEEDED,
        "attempts": 1,
        "run_id": "r1",
        "started_at": 1001.0,
        "ended_at": 1002.0,
        "input_artifact": "seed-1",
        "output_artifact": f"out-{pipeline_id}-{seq}",
        "resources": [],
    }
    return TaskRow(pipeline_id=pipeline_id, seq=seq, **{**values, **fields})


def attempt(pipeline_id: str = "p1", seq: int = 0, number: int = 1, **fields: Any) -> AttemptRow:
    values: dict[str, Any] = {
        "run_id": "r1",
        "task": f"task-{seq}",
        "outcome": "ok",
        "started_at": 1001.0,
        "ended_at": 1002.0,
        "duration_s": 1.0,
        "decision": {"retry": False, "reason": "ok"},
        "resources": ["openai/key-1"],
    }
    return AttemptRow(pipeline_id=pipeline_id, seq=seq, attempt=number, **{**values, **fields})


def artifact(digest: str = "out-p1-0", data: Any = b'{"answer": 42}', **fields: Any) -> ArtifactRow:
    values: dict[str, Any] = {"pipeline_id": "p1", "seq": 0, "codec": "json", "created_at": 1002.0}
    return ArtifactRow(digest=digest, data=data, **{**values, **fields})


def event(kind: str = "task.succeeded", **fields: Any) -> EventRow:
    values: dict[str, Any] = {"run_id": "r1", "at": 1002.0, "data": {"n": 1}}
    return EventRow(kind=kind, **{**values, **fields})


def resource(resource_id: str = "key-1", **fields: Any) -> ResourceRow:
    values: dict[str, Any] = {
        "run_id": "r1",
        "pool": "openai",
        "kind": "api_key",
        "spec": {"api_key": "***", "rpm": 60},
    }
    return ResourceRow(resource_id=resource_id, **{**values, **fields})


def checkpoint(pipeline_id: str = "p1", seq: int = 0, **fields: Any) -> Batch:
    """What the Runner commits when task ``seq`` of a pipeline succeeds."""
    digest = f"out-{pipeline_id}-{seq}"
    return Batch(
        artifacts=[artifact(digest, pipeline_id=pipeline_id, seq=seq)],
        tasks=[task(pipeline_id, seq)],
        pipelines=[pipeline(pipeline_id, state=PipelineState.RUNNING, cursor=seq + 1, **fields)],
        attempts=[attempt(pipeline_id, seq)],
    )


def _add(batch: Batch, more: Batch) -> None:
    for name in ("artifacts", "tasks", "pipelines", "attempts", "events", "resources"):
        getattr(batch, name).extend(getattr(more, name))


def snapshot(store: Store) -> dict[str, list[dict[str, Any]]]:
    """Every row of every kind: what "nothing changed" compares."""
    return {kind.value: list(store.rows(kind)) for kind in RowKind}


def dead_pid() -> int:
    """The id of a process that has exited and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


POISONS: dict[str, Batch] = {
    "artifact data that is not bytes": Batch(artifacts=[artifact("bad", data="not bytes")]),
    "an event whose data is not JSON": Batch(events=[event(data={"when": object()})]),
    "a pipeline state nobody knows": Batch(pipelines=[pipeline("bad", state="paused")]),
    "a task without a name": Batch(tasks=[task("bad", name=None)]),
    "an int beyond 64 bits": Batch(attempts=[attempt("bad", number=2**64)]),
    "a NaN time in a required column": Batch(events=[event(at=math.nan)]),
}
