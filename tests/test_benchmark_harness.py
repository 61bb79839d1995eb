"""The harness: one scenario, one algorithm, one seed on the virtual loop.

What makes a comparison objective is checked here on real runs: the same dice for
every algorithm, client randomness keyed by the logical identity, an algorithm that sees the
pool and nothing else, exact reproduction, no network.

Worlds are small (``with_overrides``); the one real-clock comparison is marked slow.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import itertools
import random
import socket
import subprocess
import sys
import uuid
from collections import deque
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from benchmark_helpers import BUILTIN_ALGORITHMS, BURSTY, CONTENDED
from pyattacker.benchmark import SCENARIOS, Harness, RunResult, run_benchmark
from pyattacker.benchmark import _harness as harness_module
from pyattacker.benchmark._report import default_algorithms
from pyattacker.benchmark._tally import Tally
from pyattacker.pool import (
    ALGORITHMS,
    AcquireAlgorithm,
    AcquireRequest,
    Lease,
    Pool,
    Resource,
    TaskContext,
    Wait,
    register_algorithm,
)
from pyattacker.world import ProviderModel, Scenario

SRC = Path(__file__).resolve().parents[1] / "src" / "pyattacker"


def _numbers(result: RunResult) -> dict[str, float]:
    return {k: v for k, v in result.metrics.items() if k != "wall_s"}


# ------------------------------------------------------------- common random numbers


def test_two_algorithms_see_the_same_exogenous_draws() -> None:
    """Every (endpoint, ordinal) both runs reached rolled the same dice, although the two
    algorithms sent their requests at different times."""
    runs = [Harness(CONTENDED, name, seed=8, trace=True).run() for name in ("wait", "backoff")]
    seen = [{(row[0], row[1]): (row[2], row[5]) for row in run.trace} for run in runs]
    shared = seen[0].keys() & seen[1].keys()
    assert len(shared) >= 20, f"only {len(shared)} shared requests: not a comparison"
    for key in shared:
        assert seen[0][key][1] == seen[1][key][1], key
    # not a tautology: the two runs really did differ in timing, and the dice are dice
    assert sum(seen[0][k][0] != seen[1][k][0] for k in shared) > len(shared) // 4
    assert len({seen[0][k][1] for k in shared}) == len(shared)
    assert {k[0] for k in shared} == {e.id for e in CONTENDED.endpoints}


# --------------------------------------------------------- client randomness by identity


def _draws(stream: random.Random, n: int = 5) -> list[float]:
    return [stream.random() for _ in range(n)]


def test_client_randomness_follows_the_logical_identity_not_the_worker() -> None:
    one = Harness(CONTENDED, "wait", seed=11)
    other = Harness(CONTENDED, "backoff", seed=11)  # another algorithm: same identity streams
    for make in ("acquire_stream", "retry_stream"):
        first = _draws(getattr(one, make)(3, 1, 2))
        assert _draws(getattr(one, make)(3, 1, 2)) == first  # a fresh stream, not a shared one
        assert _draws(getattr(other, make)(3, 1, 2)) == first
        for identity in ((4, 1, 2), (3, 2, 2), (3, 1, 3)):
            assert _draws(getattr(one, make)(*identity)) != first, (make, identity)
        assert _draws(getattr(Harness(CONTENDED, "wait", seed=12), make)(3, 1, 2)) != first
    assert _draws(one.acquire_stream(3, 1, 2)) != _draws(one.retry_stream(3, 1, 2))
    one.run()  # running draws from fresh streams; it does not advance these
    assert _draws(one.retry_stream(3, 1, 2)) == _draws(other.retry_stream(3, 1, 2))


class _WorkerOrder:
    """Make the workers claim their first job in reverse creation order (``reverse``) and
    remember which worker ran each job. With ``per_worker``, replace the harness's streams
    by one stream per worker, the design the rule forbids."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, reverse: bool, per_worker: bool):
        self.worker_of_job: dict[int, int] = {}
        index_of: dict[asyncio.Task[Any], int] = {}
        streams: dict[int, random.Random] = {}
        counter = itertools.count()
        original_worker = harness_module._Simulation._worker
        original_job = harness_module._Simulation._job
        order = self

        async def worker(sim: Any) -> None:
            index = next(counter)
            index_of[asyncio.current_task()] = index  # type: ignore[index]
            if reverse:
                for _ in range(sim.scenario.concurrency - index):
                    await asyncio.sleep(0)  # yields: no simulated time passes
            await original_worker(sim)

        async def job(sim: Any, number: int) -> None:
            order.worker_of_job[number] = index_of[asyncio.current_task()]  # type: ignore[index]
            await original_job(sim, number)

        def stream(harness: Harness, job: int, step: int, attempt: int) -> random.Random:
            index = index_of[asyncio.current_task()]  # type: ignore[index]
            return streams.setdefault(index, random.Random(f"{harness.seed}:worker:{index}"))

        monkeypatch.setattr(harness_module._Simulation, "_worker", worker)
        monkeypatch.setattr(harness_module._Simulation, "_job", job)
        if per_worker:
            monkeypatch.setattr(Harness, "acquire_stream", stream)
            monkeypatch.setattr(Harness, "retry_stream", stream)


def _run_ordered(*, reverse: bool, per_worker: bool) -> tuple[dict[str, float], dict[int, int]]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        order = _WorkerOrder(monkeypatch, reverse=reverse, per_worker=per_worker)
        result = Harness(CONTENDED, "backoff", seed=11).run()
    return _numbers(result), order.worker_of_job


def test_which_worker_takes_a_job_does_not_change_the_numbers() -> None:
    """Reversing the order in which the workers start changes which worker runs each job
    but nothing a job sees: the numbers are identical. The same permutation under a
    per-worker stream (the design the rule forbids) does change them, which is what makes
    this check able to fail."""
    forward, forward_jobs = _run_ordered(reverse=False, per_worker=False)
    backward, backward_jobs = _run_ordered(reverse=True, per_worker=False)
    moved = sum(forward_jobs[j] != backward_jobs.get(j) for j in forward_jobs)
    assert moved > len(forward_jobs) // 2  # most jobs ran on another worker
    assert backward == forward
    assert forward["retry_rate"] > 0  # the retry policy drew from its streams

    per_worker_forward, _ = _run_ordered(reverse=False, per_worker=True)
    per_worker_backward, _ = _run_ordered(reverse=True, per_worker=True)
    assert per_worker_backward != per_worker_forward


# ------------------------------------------------------------------------ unsuited


def test_a_scenario_declares_which_algorithms_it_cannot_exercise() -> None:
    for name, scenario in SCENARIOS.items():
        single_pool = len(scenario.vendors) == 1
        assert ("failover" in scenario.unsuited) == single_pool, name
        assert ("least_busy" in scenario.unsuited) == single_pool, name
        assert "wait" not in scenario.unsuited
        assert not set(scenario.unsuited) & set(default_algorithms(scenario)), name
        assert set(default_algorithms(scenario)) | set(scenario.unsuited) >= set(BUILTIN_ALGORITHMS)


@pytest.mark.parametrize("algorithm", sorted(BURSTY.unsuited))
def test_an_unsuited_algorithm_really_is_wait_in_a_one_pool_world(algorithm: str) -> None:
    """The declaration is a measured fact, not an opinion: in bursty_provider's single
    pool the declared algorithms produce wait's numbers exactly."""
    assert _numbers(Harness(CONTENDED, algorithm, seed=2).run()) == _numbers(
        Harness(CONTENDED, "wait", seed=2).run()
    )


# -------------------------------------------------------- the algorithm's whole world

_FORBIDDEN: tuple[type, ...] = (
    Scenario,
    ProviderModel,
    Harness,
    harness_module._Simulation,
    Tally,
)


def _reachable(root: object) -> Iterator[object]:
    """Everything reachable from ``root`` through attributes, slots, containers, bound
    methods, partials and closures. The event loop, futures and tasks are ambient (any
    coroutine can get the running loop) and are not entered; neither are modules, classes
    or a function's globals."""
    seen: set[int] = set()
    todo: deque[object] = deque([root])
    while todo:
        obj = todo.popleft()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        yield obj
        if isinstance(
            obj,
            (asyncio.AbstractEventLoop, asyncio.Future, type, type(sys), str, bytes, int, float),
        ):
            continue
        if isinstance(obj, Mapping):
            for key, value in list(obj.items()):
                todo.extend((key, value))
            continue
        if isinstance(obj, (list, tuple, set, frozenset, deque)):
            todo.extend(list(obj))
            continue
        bound_to = getattr(obj, "__self__", None)
        if bound_to is not None and not isinstance(bound_to, type(sys)):
            todo.append(bound_to)
        for attribute in ("func", "args", "keywords"):  # functools.partial
            if hasattr(obj, attribute) and callable(getattr(obj, "func", None)):
                todo.append(getattr(obj, attribute))
        closure = getattr(obj, "__closure__", None)
        if closure:
            todo.extend(cell.cell_contents for cell in closure)
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            todo.extend(getattr(obj, f.name) for f in dataclasses.fields(obj))
        state = getattr(obj, "__dict__", None)
        if isinstance(state, dict):
            todo.extend(state.values())
        for cls in type(obj).__mro__:  # (a class compiled by mypyc names its fields so)
            for slot in (*getattr(cls, "__slots__", ()), *getattr(cls, "__mypyc_attrs__", ())):
                if isinstance(slot, str) and hasattr(obj, slot):
                    todo.append(getattr(obj, slot))


def test_the_walker_finds_an_environment_hidden_in_a_closure() -> None:
    """The spy below is only as good as its walker: a scenario behind a list, a dict, a
    bound method's instance and a closure is found."""
    hidden = SCENARIOS["bursty_provider"]

    def peek() -> object:
        return hidden

    class Holder:
        def __init__(self) -> None:
            self.callbacks = [{"peek": peek}]

        def method(self) -> None: ...

    assert any(obj is hidden for obj in _reachable(Holder().method))


@pytest.mark.parametrize("scenario_name", ["bursty_provider", "multi_vendor"])
def test_the_algorithm_is_handed_the_pool_but_never_the_environment(scenario_name: str) -> None:
    calls: list[set[str]] = []
    leaks: list[str] = []  # recorded, not raised: the harness would count a raise as a failure
    name = f"spy-{uuid.uuid4().hex}"

    class Spy(AcquireAlgorithm):
        """Delegates to wait; first walks everything the request lets it reach."""

        async def acquire(self, request: AcquireRequest) -> Lease:
            if len(calls) < 40:
                kinds: set[str] = set()
                for obj in _reachable(request):
                    kind = type(obj)
                    if isinstance(obj, _FORBIDDEN) or kind.__module__.startswith(
                        "pyattacker.world"
                    ):
                        leaks.append(f"{kind.__module__}.{kind.__qualname__}")
                    kinds.add(kind.__name__)
                calls.append(kinds)
            return await Wait().acquire(request)

    Spy.name = name  # type: ignore[misc]
    register_algorithm(Spy)
    try:
        scenario = SCENARIOS[scenario_name].with_overrides(jobs=20, horizon_s=20.0)
        result = Harness(scenario, name, seed=1).run()
    finally:
        ALGORITHMS.pop(name, None)
    assert name not in ALGORITHMS
    assert sorted(set(leaks)) == []
    assert result.metrics["jobs_done"] > 0
    assert len(calls) == 40
    # what it was handed: the pools, their resources and the task's context
    for kind in (Pool.__name__, Resource.__name__, TaskContext.__name__):
        assert all(kind in kinds for kinds in calls), kind


# --------------------------------------------------------------- reproducibility


@pytest.mark.parametrize("algorithm", ["wait", "backoff", "sticky", "quota_aware", "adaptive"])
def test_the_same_seed_and_scenario_reproduce_the_same_numbers(algorithm: str) -> None:
    first = Harness(CONTENDED, algorithm, seed=5, trace=True).run()
    second = Harness(CONTENDED, algorithm, seed=5, trace=True).run()
    assert _numbers(first) == _numbers(second)
    assert first.error_classes == second.error_classes
    assert first.endpoint_admitted == second.endpoint_admitted
    assert first.trace == second.trace
    other = Harness(CONTENDED, algorithm, seed=6).run()
    assert _numbers(other) != _numbers(first)


def test_the_scenario_seed_is_the_default_seed() -> None:
    reseeded = CONTENDED.with_overrides(seed=5)
    assert Harness(reseeded, "wait").seed == 5
    assert _numbers(Harness(reseeded, "wait").run()) == _numbers(
        Harness(CONTENDED, "wait", seed=5).run()
    )


# --------------------------------------------------------------------- no network


def test_the_benchmark_opens_no_network_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[str] = []

    def refuse(name: str) -> Any:
        def refused(*args: object, **kwargs: object) -> Any:
            attempts.append(name)
            raise AssertionError(f"the benchmark tried {name}{args!r}")

        return refused

    monkeypatch.setattr(socket.socket, "connect", refuse("socket.connect"))
    monkeypatch.setattr(socket.socket, "connect_ex", refuse("socket.connect_ex"))
    monkeypatch.setattr(socket, "create_connection", refuse("socket.create_connection"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("socket.getaddrinfo"))
    small = BURSTY.with_overrides(jobs=40, horizon_s=20.0)
    result = Harness(small, "wait", seed=1).run()
    report = run_benchmark(small, ["wait", "immediate"], seeds=1)
    assert result.metrics["requests"] > 0
    assert report is not None
    assert attempts == []


_DENIED_STDLIB = {
    "socket",
    "ssl",
    "http",
    "urllib",
    "ftplib",
    "smtplib",
    "poplib",
    "imaplib",
    "nntplib",
    "telnetlib",
    "socketserver",
    "xmlrpc",
    "webbrowser",
    "selectors",
    "asyncio.streams",
    "asyncio.base_events",
    "multiprocessing.connection",
    "multiprocessing.managers",
    "concurrent.futures.thread",
}
_DENIED_PYATTACKER = {
    "pyattacker.http",
    "pyattacker.attack",
    "pyattacker.servers",
    "pyattacker.llm",
    "pyattacker.run",
    "pyattacker.store",
}
#: asyncio itself cannot be refused (the harness runs on an event loop), so its ways onto
#: the network are refused by name: an attribute or imported name spelled like one of them.
_NETWORK_CALLS = {
    "open_connection",
    "open_unix_connection",
    "start_server",
    "start_unix_server",
    "create_connection",
    "create_server",
    "create_datagram_endpoint",
    "create_unix_connection",
    "create_unix_server",
    "sock_connect",
    "getaddrinfo",
    "urlopen",
}
#: a third-party import is allowed only inside a function (never at import time) and only
#: for a file format: the package must import nothing but the stdlib.
_LAZY_THIRD_PARTY = {"yaml"}


def _imports(tree: ast.Module, module: str) -> Iterator[tuple[str, bool]]:
    """(imported module, at module level?) for every import in ``tree``."""
    top_level = {id(node) for node in tree.body}
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, id(node) in top_level
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            yield base, id(node) in top_level
            for alias in node.names:
                yield f"{base}.{alias.name}", id(node) in top_level


def _denied(name: str, denied: set[str]) -> bool:
    return any(name == d or name.startswith(d + ".") for d in denied)


def test_the_benchmark_package_imports_nothing_that_can_reach_the_network() -> None:
    files = sorted((SRC / "benchmark").glob("*.py")) + sorted((SRC / "world").glob("*.py"))
    assert len(files) >= 8
    problems: list[str] = []
    for path in files:
        module = f"pyattacker.{path.parent.name}.{path.stem}"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, top_level in _imports(tree, module):
            root = name.split(".")[0]
            where = f"{path.parent.name}/{path.name}: {name}"
            if root == "__future__":
                continue
            if root == "pyattacker":
                if _denied(name, _DENIED_PYATTACKER):
                    problems.append(f"{where} (a part of pyattacker that does I/O)")
            elif root in sys.stdlib_module_names:
                if _denied(name, _DENIED_STDLIB):
                    problems.append(f"{where} (a stdlib module that can reach the network)")
            elif not (root in _LAZY_THIRD_PARTY and not top_level):
                problems.append(f"{where} (not the stdlib)")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in _NETWORK_CALLS:
                problems.append(f"{path.name}:{node.lineno}: .{node.attr}")
            if isinstance(node, ast.alias) and node.name in _NETWORK_CALLS:
                problems.append(f"{path.name}: imports {node.name}")
    assert problems == []


def test_importing_the_benchmark_loads_no_network_module_of_its_own() -> None:
    """What ``import pyattacker`` already loads is the root package's business; what the
    benchmark adds on top must not be a network client or an I/O part of pyattacker."""
    code = (
        "import sys, pyattacker\n"
        "before = set(sys.modules)\n"
        "import pyattacker.benchmark, pyattacker.world\n"
        "print('\\n'.join(sorted(set(sys.modules) - before)))\n"
    )
    added = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60
    ).stdout.split()
    assert "pyattacker.benchmark._harness" in added
    denied = _DENIED_PYATTACKER | {"ssl", "http.client", "urllib.request", "ftplib", "smtplib"}
    assert [m for m in added if _denied(m, denied)] == []


# --------------------------------------------------------- the real-clock differential


@pytest.mark.slow
def test_the_same_run_finishes_every_job_on_virtual_and_on_scaled_real_time() -> None:
    """The same run on virtual time and on real time sped up: both finish every job.

    Real timers wake late and the lateness is multiplied by the speedup, so how far the
    real run's makespan and utilisation drift from the virtual one's depends on how busy
    the machine is, not on us: that comparison is a measurement,
    ``benchmarks/clock_differential.py``. The virtual loop's advance rule (never too far,
    no timer early) is checked exactly in ``tests/test_clock.py``."""
    scenario = BURSTY.with_overrides(jobs=120, concurrency=6, horizon_s=600.0)
    virtual = Harness(scenario, "wait", seed=3).run().metrics
    real = Harness(scenario, "wait", seed=3, clock="real", speedup=6.0).run().metrics
    assert virtual["jobs_done"] == real["jobs_done"] == 120
