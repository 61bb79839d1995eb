"""A sweep's runs as Ray tasks: ``run_benchmark(..., ray=...)`` and ``bench --ray``.

Each run is one deterministic simulation, shipped to a Ray worker whole (its
:class:`Harness`) and shipped back as its :class:`RunResult`; the report is assembled in
(algorithm, seed) order whatever order the tasks finish in, so it equals the serial one in
everything but ``wall_s``. Failures keep the serial sweep's meaning: the first failure *in
plan order* is raised once every run before it has finished, and the rest are cancelled.
A run's own error comes back as a value, so an error Ray raises is Ray's: the cluster (or
the worker a run was on) was lost, a :class:`ClusterLost` (exit 1) saying how many runs
were done. A sweep reports all its runs or none (as a wall budget that runs out), so none.
Ray is imported through :mod:`pyattacker._ray`, so only when this path is used.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from pyattacker._ray import ray_session
from pyattacker.benchmark._harness import Harness
from pyattacker.benchmark._plan_order import PlanOrder
from pyattacker.benchmark._result import RunResult
from pyattacker.errors import PyAttackerError

__all__ = ["ClusterLost", "on_ray"]


class ClusterLost(PyAttackerError):
    """The Ray cluster (or the worker of a run) went away before the sweep finished."""


OnResult = Callable[[RunResult], None]


def _run_one(harness: Harness) -> RunResult | BaseException:
    """One run on a Ray worker; an error comes back as a value, so the driver decides
    which failure the serial sweep would have met first (as with local processes)."""
    try:
        return harness.run()
    except Exception as exc:
        return exc


def on_ray(
    harnesses: list[Harness],
    address: str | None,
    *,
    num_cpus: int | None,
    on_result: OnResult | None,
) -> list[RunResult]:
    """Run ``harnesses`` as Ray tasks (one CPU each) on the cluster at ``address`` (``None``:
    the caller's Ray session, else ``RAY_ADDRESS``, else a local Ray of ``num_cpus``);
    results in plan order; ``on_result`` is called in this process as each run finishes."""
    with ray_session(address, num_cpus=num_cpus, field="--ray") as ray:
        # No retries by Ray: a run is deterministic, so a run that failed fails again.
        remote = ray.remote(num_cpus=1, max_retries=0)(_run_one)
        pending = {remote.remote(h): index for index, h in enumerate(harnesses)}
        try:
            return _collect(ray, pending, len(harnesses), on_result)
        finally:
            for ref in pending:
                with contextlib.suppress(Exception):  # a lost cluster cancels nothing
                    ray.cancel(ref, force=True)


def _collect(
    ray: Any, pending: dict[Any, int], total: int, on_result: OnResult | None
) -> list[RunResult]:
    done = PlanOrder(total, on_result)
    while pending:
        try:
            finished, _ = ray.wait(list(pending), num_returns=1)
            outcomes = [(ref, ray.get(ref)) for ref in finished]
        except ray.exceptions.RayError as exc:  # a run's own error is a value: this is Ray's
            raise _lost(exc, total - len(pending), total) from None
        for ref, outcome in outcomes:
            done.add(pending.pop(ref), outcome)
    return done.results()


def _lost(exc: BaseException, finished: int, total: int) -> ClusterLost:
    """What the user reads when Ray fails under the sweep: what was lost, and how far the
    sweep had got, on one line (Ray's messages run to paragraphs)."""
    said = str(exc).strip().splitlines()
    name = type(exc).__name__
    lost = "a Ray worker died" if name in _WORKER_ONLY else "the Ray cluster was lost"
    return ClusterLost(
        f"{lost}: {finished} of {total} runs done, so no report (a sweep reports all its "
        f"runs); Ray said {name}: {said[0] if said else ''} — check the cluster (ray status) "
        "and run the sweep again"
    )


#: Ray's errors for one worker lost (killed, out of memory) with the cluster still up.
_WORKER_ONLY = frozenset({"WorkerCrashedError", "OutOfMemoryError"})
