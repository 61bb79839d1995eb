"""A run whose Ray cluster is lost under it stops, as on a signal: the attempt that met the
loss fails with Ray's error, and the pipelines not done wait for a resume instead of
each failing in turn; a worker's or a node's death stays a failed attempt for the task's
policy. A stand-in for Ray's errors: no cluster needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pyattacker.run import Runner, pipeline, task
from pyattacker.run import _task as task_module
from pyattacker.store import SQLiteStore


def ray_error(name: str) -> type[Exception]:
    """An exception class as Ray names it (``ray.exceptions.<name>``)."""
    return type(name, (Exception,), {"__module__": "ray.exceptions"})


def double(x: int) -> int:
    return 2 * x


def run_with(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, error: type[Exception]) -> Any:
    """Six pipelines, one at a time, of a step on Ray whose every call raises ``error``;
    the run's report."""
    pytest.importorskip("ray")

    async def lost(fn: Any, value: Any) -> Any:
        raise error("the raylet of this node died")

    monkeypatch.setattr(task_module, "call_on_ray", lost)
    store = SQLiteStore(tmp_path / "r.db")
    try:
        with Runner(store, concurrency=1, handle_signals=False) as runner:
            return runner.run(pipeline("p", task(double, executor="ray")).map(range(6)))
    finally:
        store.close()


def test_a_lost_cluster_stops_the_run_and_leaves_the_rest_for_a_resume(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    report = run_with(monkeypatch, tmp_path, ray_error("LocalRayletDiedError"))
    assert report.stop_reason is not None
    assert report.stop_reason.startswith("the Ray cluster was lost (LocalRayletDiedError)")
    assert report.by_state.get("failed", 0) == 1  # the one that met it; not all six
    assert report.by_state.get("succeeded", 0) == 0


def test_a_dead_worker_or_node_is_the_tasks_failure_and_the_run_goes_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("WorkerCrashedError", "NodeDiedError"):
        (tmp_path / name).mkdir()
        report = run_with(monkeypatch, tmp_path / name, ray_error(name))
        assert report.stop_reason is None
        assert report.by_state == {"failed": 6}
