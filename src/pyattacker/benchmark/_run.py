"""``run_benchmark``: every algorithm on every seed, serially or on several processes.

The runs are independent simulations, so a sweep parallelises perfectly across processes
(``jobs_parallel``); each run is deterministic, so the parallel report equals the serial
one in everything but ``wall_s``. Results are assembled in (algorithm, seed) order
whatever order the processes finish in.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import os
import signal
import threading
from collections.abc import Callable, Iterable, Sequence

from pyattacker._checks import check_whole
from pyattacker.benchmark._harness import ClockKind, Harness
from pyattacker.benchmark._plan_order import PlanOrder
from pyattacker.benchmark._ray import on_ray
from pyattacker.benchmark._report import BenchmarkReport, default_algorithms
from pyattacker.benchmark._result import RunResult
from pyattacker.errors import ConfigError
from pyattacker.pool import ALGORITHMS
from pyattacker.world import Scenario

__all__ = ["check_algorithms", "run_benchmark", "seeds_of", "usable_cores"]

OnResult = Callable[[RunResult], None]


def seeds_of(scenario: Scenario, seeds: int) -> list[int]:
    """The seed list of a sweep: ``scenario.seed + 0 .. seeds - 1``."""
    check_whole(seeds, "seeds")
    return [scenario.seed + i for i in range(seeds)]


def check_algorithms(names: Iterable[str]) -> list[str]:
    """``names`` as a list, or ``ConfigError`` naming the unknown ones and the valid ones."""
    chosen = list(dict.fromkeys(names))
    unknown = [n for n in chosen if n not in ALGORITHMS]
    if unknown or not chosen:
        raise ConfigError(
            f"unknown algorithm(s): {', '.join(unknown)}" if unknown else "no algorithm given",
            field="algorithms",
            hint=f"valid: {', '.join(ALGORITHMS)}",
        )
    return chosen


def run_benchmark(
    scenario: Scenario,
    algorithms: Sequence[str] | None = None,
    *,
    seeds: int = 3,
    jobs_parallel: int = 1,
    clock: ClockKind = "virtual",
    speedup: float = 10.0,
    wall_budget_s: float | None = None,
    on_result: OnResult | None = None,
    ray: str | bool = False,
) -> BenchmarkReport:
    """Run each algorithm (default: every one the scenario can exercise) on ``seeds`` seeds.

    ``jobs_parallel`` processes share the runs (1: in this process; 0: one per usable
    core, see :func:`usable_cores`). ``on_result`` is called
    in this process after each run, in completion order. A run that cannot finish raises
    (``BenchmarkTimeout``/``BenchmarkStalled``) and the sweep stops.

    ``ray``: run the runs as Ray tasks instead (``pyattacker[ray]``): ``True`` uses the
    caller's Ray session, else ``RAY_ADDRESS``, else starts a local Ray with
    ``jobs_parallel`` CPUs; a str is the address of a cluster to connect to. The report is
    the same as without it, ``wall_s`` aside.
    """
    names = check_algorithms(algorithms) if algorithms is not None else default_algorithms(scenario)
    seed_list = seeds_of(scenario, seeds)
    check_whole(jobs_parallel, "jobs_parallel", at_least=0)
    jobs_parallel = jobs_parallel or usable_cores()
    plan = [(name, seed) for name in names for seed in seed_list]
    # Build every harness now: a bad clock or speedup fails before any process starts.
    harnesses = [
        Harness(
            scenario,
            name,
            seed=seed,
            clock=clock,
            speedup=speedup,
            wall_budget_s=wall_budget_s,
        )
        for name, seed in plan
    ]
    workers = min(jobs_parallel, len(harnesses))
    if ray is not False:
        address = ray if isinstance(ray, str) else None
        runs = on_ray(harnesses, address, num_cpus=jobs_parallel, on_result=on_result)
    elif workers <= 1:
        runs = []
        for harness in harnesses:
            run = harness.run()
            if on_result is not None:
                on_result(run)
            runs.append(run)
    else:
        runs = _in_processes(harnesses, workers, on_result)
    return BenchmarkReport(scenario, names, seed_list, runs)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, as a container or ``taskset``
    limits it), else every core of the machine."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _run_indexed(item: tuple[int, Harness]) -> tuple[int, RunResult | BaseException]:
    """One run in a worker process; a run that could not finish comes back as its error,
    so the parent can decide which failure the serial sweep would have met first."""
    index, harness = item
    try:
        return index, harness.run()
    except Exception as exc:
        return index, exc


def _ignore_sigint() -> None:
    """Workers leave Ctrl-C to the parent, which stops them all (a terminal sends SIGINT to
    the whole process group)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _process_context() -> multiprocessing.context.BaseContext:
    """``fork`` where it is safe (POSIX, no other thread alive): the children start with
    everything imported and no main module to re-run. Otherwise ``forkserver`` (POSIX) or
    ``spawn``, which re-import the main module: a script must then guard its entry point
    with ``if __name__ == "__main__":``, as multiprocessing always asks."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["pyattacker.benchmark"])
        return context
    return multiprocessing.get_context("spawn")


def _in_processes(
    harnesses: list[Harness], workers: int, on_result: OnResult | None
) -> list[RunResult]:
    """Run on ``workers`` processes; results in plan order. The first failure *in plan
    order* is raised (what the serial sweep would have met), once every run before it has
    finished; on any error or Ctrl-C the worker processes are terminated at once."""
    done = PlanOrder(len(harnesses), on_result)
    with _process_context().Pool(workers, initializer=_ignore_sigint) as pool:
        for index, outcome in pool.imap_unordered(_run_indexed, enumerate(harnesses)):
            done.add(index, outcome)  # a failure raised leaves the block: workers terminated
    return done.results()
