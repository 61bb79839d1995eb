"""``attack --ray``: the workers of ``attack --workers`` as Ray actors, on a cluster.

Each worker is one actor of one CPU, placed by a placement group of one CPU bundle per
worker with the SPREAD strategy (the bundles go to as many nodes as the cluster has, as
far as its free CPUs allow), and runs the body every worker runs
(:func:`~pyattacker.attack._workers.run_worker`). The driver merges their outcomes with
:func:`~pyattacker.attack._merge.merge_outcomes`, as it merges local processes'.

- **One start instant, by wall clock.** The machines' monotonic clocks have nothing in
  common, so the driver measures each actor's wall clock against its own
  (:func:`~pyattacker.attack._ray_clock.measure_offset`: the round trip with the
  shortest time wins; the offset is the actor's reading minus its midpoint, uncertain by
  half of it), then hands each actor the start instant on the actor's own wall clock,
  which the actor turns into an instant on its monotonic clock. The offsets and their
  uncertainties are in the report: a schedule split across machines is no more exact.
- **On one clock.** Each actor counts on its own monotonic clock; the driver moves each
  outcome onto the common start (the shared start instant reads 0) as it arrives, so
  the windows of every worker line up by index.
- **Snapshots.** Every :data:`~pyattacker.attack._processes` worker sends its count twice
  a second; an actor keeps its newest one (pickled at once, on its own loop) and the
  driver asks for it every ``progress_every`` seconds, puts it on the common clock, and
  hands the round to ``on_worker_progress`` (the live page of ``--serve``). An actor that
  dies is *lost*; the report keeps its requests up to the last snapshot the driver
  fetched, as for a process.
- **Taps that write files** (``--samples``) cannot write on a node the user never sees: a
  :class:`~pyattacker.attack._taps.FetchedTap` ships its held twin, and the driver takes
  what each actor's part wrote with every round of snapshots (one take in flight per
  actor, so that they arrive in order), and once more when the actor has ended.
- **Stopping.** Ctrl-C (SIGINT, SIGTERM) on the driver calls every actor's ``stop``,
  waits up to :data:`STOP_GRACE_S` for their counts, then kills what still runs (lost,
  kept up to its last snapshot). Every actor and the placement group go at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import pickle
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pyattacker._ray import by_value, ray_session
from pyattacker._signals import stop_signals
from pyattacker.attack._engine import Progress
from pyattacker.attack._merge import WorkerFacts, WorkersResult, merge_outcomes
from pyattacker.attack._plan import AttackPlan
from pyattacker.attack._processes import newest, usable_cores, whole_progress
from pyattacker.attack._ray_clock import ClockOffset, measure_offset, on_common_clock
from pyattacker.attack._taps import FetchedTap, HeldTap, WorkerTap, gather_taps
from pyattacker.attack._workers import WorkerOutcome, run_worker, worker_plan
from pyattacker.clock import LoopClock, epoch_time
from pyattacker.errors import ConfigError, PyAttackerError
from pyattacker.http import Limits

__all__ = ["WorkerActor", "run_ray_workers"]

#: How far ahead of the last clock measurement the start instant is set: the time to hand
#: it to every actor (one call each) and for each to open its first connections.
START_MARGIN_S = 1.0
#: How the actors of an attack are named: this, a run's random id, ``-``, the index.
ACTOR_PREFIX = "pyattacker-attack-"
#: How long the actors may take to start (a cold node imports Ray and pyattacker first).
READY_TIMEOUT_S = 120.0
#: How long stopped actors may take to send their counts before they are killed.
STOP_GRACE_S = 10.0

# The clock machines share is the wall clock (each node's kept by NTP, or not): the start
# instant travels on it, with the offset measured; each process counts on its monotonic
# clock (outside any loop, what the engines read too).
_wall = epoch_time
_now = LoopClock().now


class WorkerActor:
    """One worker on a Ray node (made a Ray actor by :func:`run_ray_workers`). Its methods
    run on threads of their own (the actor's ``max_concurrency``): ``run`` blocks one for
    the attack while ``clock``, ``snapshot`` and ``stop`` answer on the others."""

    def __init__(
        self,
        plan: AttackPlan,
        index: int,
        n: int,
        limits: Limits | None,
        taps: Sequence[WorkerTap] = (),
    ) -> None:
        self._work = (plan, index, n, limits)
        self._taps = taps
        self._last: bytes | None = None
        self._kept = 0  # snapshots kept so far: the driver fetches only a newer one
        self._progress: Progress | None = None
        self._lock = threading.Lock()
        self._stopper: tuple[asyncio.AbstractEventLoop, Callable[[str], None]] | None = None
        self._stop_reason: str | None = None

    def clock(self) -> float:
        """This node's wall clock."""
        return _wall()

    def node(self) -> tuple[str, str]:
        """The Ray node this actor runs on: Ray's id for it, and its IP address (the report
        names each worker's node, beside the offset of that node's clock)."""
        ray: Any = importlib.import_module("ray")  # on the actor: Ray is there

        return ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address()

    def run(self, start_wall: float) -> WorkerOutcome:
        """Run this worker's share from ``start_wall`` on this node's wall clock."""
        plan, index, n, limits = self._work
        start_at = start_wall - _wall() + _now()
        return run_worker(plan, index, n, start_at, on_snapshot=self._keep,
                          on_progress=self._keep_progress, on_stop=self._listen,
                          limits=limits, taps=self._taps)  # fmt: skip

    def snapshot(self, seen: int) -> tuple[int, bytes | None, Progress | None]:
        """How many snapshots were kept, the newest (a pickled :class:`WorkerOutcome`) if
        that is more than ``seen`` (else None), and the newest progress."""
        kept, last, progress = self._kept, self._last, self._progress
        return kept, last if kept > seen else None, progress

    def take(self) -> list[bytes | None]:
        """What each held tap's part wrote since the last take (None: not a held tap)."""
        index = self._work[1]
        return [t.take(index) if isinstance(t, HeldTap) else None for t in self._taps]

    def stop(self, reason: str) -> None:
        """Stop the attack as Ctrl-C stops one process (now, or as soon as it runs)."""
        with self._lock:
            self._stop_reason = reason
            stopper = self._stopper
        if stopper is not None:
            loop, stop = stopper
            with contextlib.suppress(RuntimeError):  # the loop already closed: it ended
                loop.call_soon_threadsafe(stop, reason)

    def _keep(self, outcome: WorkerOutcome) -> None:
        # Pickled here, on the worker's loop: the tally must not change while it is read.
        self._last = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
        self._kept += 1
        self._progress = outcome.progress

    def _keep_progress(self, progress: Progress) -> None:
        self._progress = progress

    def _listen(self, stop: Callable[[str], None]) -> None:
        with self._lock:
            self._stopper = (asyncio.get_running_loop(), stop)
            reason = self._stop_reason
        if reason is not None:
            stop(reason)


@dataclass
class _Actor:
    index: int
    handle: Any
    offset: ClockOffset | None = None
    node: tuple[str, str] | None = None  # (Ray's node id, its IP address)
    last: WorkerOutcome | None = None
    seen: int = 0  # snapshots of the actor's read (it sends only a newer one)
    progress: Progress | None = None
    final: bool = False
    lost: bool = False
    taking: Any = None  # the take in flight (one at a time: they must arrive in order)


@dataclass(frozen=True)
class _Watch:
    """What the driver does with each round of snapshots: the live view's calls, and the
    taps whose parts' data it takes."""

    on_progress: Callable[[Progress], str | None] | None
    on_worker_progress: Callable[[list[WorkerOutcome | None]], None] | None
    every: float
    taps: Sequence[WorkerTap]


def run_ray_workers(
    plan: AttackPlan,
    n: int,
    address: str | None = None,
    *,
    on_progress: Callable[[Progress], str | None] | None = None,
    progress_every: float = 0.5,
    per_worker: bool = False,
    on_worker_progress: Callable[[list[WorkerOutcome | None]], None] | None = None,
    limits: Limits | None = None,
    taps: Sequence[WorkerTap] = (),
) -> WorkersResult:
    """Run ``plan`` on ``n`` Ray actors and merge what they counted (see the module
    docstring). ``address``: the cluster's (``None``: the caller's Ray session, else
    ``RAY_ADDRESS``, else a local Ray of this machine's usable cores). The result's
    ``workers`` carry each actor's clock offset. ``on_progress`` and
    ``on_worker_progress`` mean what :func:`~pyattacker.attack.run_workers`' do (each
    snapshot on the common clock). ``taps`` travel to each actor (picklable, and gathered
    as ``run_workers`` gathers them); a :class:`~pyattacker.attack.FetchedTap` (such as
    :class:`~pyattacker.attack.SampleParts`) sends its held twin, and what its parts
    write arrives on this machine. A scenario's code travels with the plan.
    ``ConfigError`` for a plan ``n`` workers cannot share, Ray missing, a cluster that
    cannot be reached or has fewer CPUs than ``n``."""
    if n < 1:
        raise ConfigError(f"must be >= 1, got {n}", field="workers", hint="e.g. 2")
    for index in range(n):
        worker_plan(plan, index, n)  # refuse a plan that cannot be shared before starting
    scenario = None if plan.scenario is None else plan.scenario.function.__module__
    with (
        ray_session(address, num_cpus=usable_cores(), field="--ray") as ray,
        _placed(ray, n) as strategies,
        by_value(scenario),  # the user's file is on this machine only
    ):
        remote = ray.remote(num_cpus=1, max_concurrency=4, max_restarts=0)(WorkerActor)
        shipped = [t.held() if isinstance(t, FetchedTap) else t for t in taps]
        run = secrets.token_hex(4)  # names that say whose actors these are (`ray list actors`)
        actors = [
            _Actor(i, remote.options(scheduling_strategy=s, name=f"{ACTOR_PREFIX}{run}-{i}")
                   .remote(plan, i, n, limits, shipped))
            for i, s in enumerate(strategies)
        ]  # fmt: skip
        try:
            watch = _Watch(on_progress, on_worker_progress, progress_every, taps)
            result = _drive(ray, plan, actors, watch, per_worker)
            words = [None if a.last is None else a.last.taps for a in actors]
            gather_taps(taps, words, result.lost)
            return result
        finally:
            for actor in actors:
                with contextlib.suppress(Exception):
                    ray.kill(actor.handle)


@contextlib.contextmanager
def _placed(ray: Any, n: int) -> Iterator[list[Any]]:
    """One scheduling strategy per worker: a bundle of one CPU each, spread over nodes."""
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    cpus = int(ray.cluster_resources().get("CPU", 0))
    if n > cpus:
        raise ConfigError(
            f"{n} workers need one CPU each; the Ray cluster has {cpus}",
            field="--workers",
            hint=f"give at most {cpus} workers, or add nodes (ray start --address=HEAD:6379)",
        )
    group = placement_group([{"CPU": 1}] * n, strategy="SPREAD")
    try:
        ready, _ = ray.wait([group.ready()], timeout=READY_TIMEOUT_S)
        if not ready:
            raise ConfigError(
                f"the Ray cluster found no room for {n} workers of one CPU each in "
                f"{READY_TIMEOUT_S:.0f}s (its CPUs are busy)",
                field="--workers",
                hint="give fewer workers, or wait until the cluster's CPUs are free",
            )
        yield [
            PlacementGroupSchedulingStrategy(placement_group=group, placement_group_bundle_index=i)
            for i in range(n)
        ]
    finally:
        with contextlib.suppress(Exception):
            remove_placement_group(group)


def _drive(
    ray: Any, plan: AttackPlan, actors: list[_Actor], watch: _Watch, per_worker: bool
) -> WorkersResult:
    stopping: list[str] = []
    cpu0 = time.process_time()  # the driver's own, from the actors' start (Ray's start aside)

    def on_signal(signum: int, _frame: object) -> None:
        stopping.append("interrupted")

    with stop_signals(on_signal):
        _await_ready(ray, actors, stopping)
        for actor in actors:
            if not (actor.lost or stopping):
                try:
                    actor.offset = measure_offset(_asker(ray, actor.handle))
                except Exception:  # it died since it answered
                    actor.lost = True
        if stopping:  # Ctrl-C before the start: nothing ran, nothing to report
            raise PyAttackerError("interrupted before the Ray workers started")
        start_wall = _wall() + START_MARGIN_S
        running = {
            actor.handle.run.remote(start_wall + actor.offset.offset_s): actor
            for actor in actors
            if actor.offset is not None and not actor.lost
        }
        _collect(ray, running, actors, stopping, watch)
    return _merged(plan, actors, stopping, per_worker, time.process_time() - cpu0)


def _asker(ray: Any, handle: Any) -> Callable[[], float]:
    def ask() -> float:
        theirs: float = ray.get(handle.clock.remote())
        return theirs

    return ask


def _await_ready(ray: Any, actors: list[_Actor], stopping: list[str]) -> None:
    """Wait until every actor answers with its node (one that cannot start in time is
    lost), in short waits so that a Ctrl-C is seen."""
    pings = {actor.handle.node.remote(): actor for actor in actors}
    give_up = _now() + READY_TIMEOUT_S
    while pings and not stopping and _now() < give_up:
        done, _ = ray.wait(list(pings), num_returns=1, timeout=0.5)
        for ref in done:
            actor = pings.pop(ref)
            try:
                actor.node = ray.get(ref)
            except Exception:  # its process could not start, or died at once
                actor.lost = True
    for actor in pings.values():
        actor.lost = True


def _collect(
    ray: Any, running: dict[Any, _Actor], actors: list[_Actor], stopping: list[str], watch: _Watch
) -> None:
    """Wait for every actor's final count (and its taps' last data), fetching snapshots
    every ``watch.every`` seconds."""
    next_tick = _now() + watch.every
    kill_at: float | None = None
    while running:
        if stopping and kill_at is None:
            kill_at = _now() + STOP_GRACE_S
            for actor in running.values():
                actor.handle.stop.remote(stopping[0])
        if kill_at is not None and _now() > kill_at:
            for actor in running.values():  # would not stop: lost, up to its last snapshot
                actor.lost = True
                with contextlib.suppress(Exception):
                    ray.kill(actor.handle)
            return
        wait = max(0.0, min(next_tick - _now(), 0.5))
        done, _ = ray.wait(list(running), num_returns=1, timeout=wait)
        for ref in done:
            actor = running.pop(ref)
            try:
                actor.last, actor.final = on_common_clock(ray.get(ref)), True
            except Exception:  # the actor (or its node) died: lost
                actor.lost = True
            else:  # the take in flight, if any, then one that sees the last rows
                for _ in range(2):
                    _take(ray, [actor], watch.taps, STOP_GRACE_S)
        if _now() >= next_tick:
            next_tick += watch.every
            _fetch_snapshots(ray, list(running.values()))
            _take(ray, list(running.values()), watch.taps, 1.0)
            reason = _tick(actors, watch)
            if reason is not None and not stopping:
                stopping.append(reason)


def _fetch_snapshots(ray: Any, actors: list[_Actor]) -> None:
    asks = {actor.handle.snapshot.remote(actor.seen): actor for actor in actors}
    done, _ = ray.wait(list(asks), num_returns=len(asks), timeout=1.0)
    for ref in done:
        actor = asks[ref]
        with contextlib.suppress(Exception):  # a dead actor is found by its run's result
            kept, data, progress = ray.get(ref)
            if actor.final:
                continue
            if data is not None:
                actor.last, actor.seen = on_common_clock(pickle.loads(data)), kept
            actor.progress = progress


def _take(ray: Any, actors: list[_Actor], taps: Sequence[WorkerTap], timeout: float) -> None:
    """Hand what each actor's held parts wrote since the last take to the driver's taps.
    One take per actor is in flight at a time (two could be answered out of order by the
    actor's threads); one not answered within ``timeout`` is read at the next call."""
    if not any(isinstance(t, FetchedTap) for t in taps):
        return
    for actor in actors:
        if actor.taking is None and not actor.lost:
            actor.taking = actor.handle.take.remote()
    asks = {actor.taking: actor for actor in actors if actor.taking is not None}
    done, _ = ray.wait(list(asks), num_returns=len(asks), timeout=timeout) if asks else ([], [])
    for ref in done:
        actor = asks[ref]
        actor.taking = None
        try:
            data = ray.get(ref)
        except Exception:  # a dead actor is found by its run's result
            continue
        for tap, chunk in zip(taps, data, strict=True):
            if chunk and isinstance(tap, FetchedTap):
                tap.receive(actor.index, chunk)


def _tick(actors: list[_Actor], watch: _Watch) -> str | None:
    lasts = [newest(a.last, a.progress) for a in actors]
    if watch.on_worker_progress is not None:
        watch.on_worker_progress(lasts)
    if watch.on_progress is None:
        return None
    shown = [o.progress for o in lasts if o is not None and o.progress is not None]
    return watch.on_progress(whole_progress(lasts, shown)) if shown else None


def _merged(
    plan: AttackPlan,
    actors: list[_Actor],
    stopping: list[str],
    per_worker: bool,
    driver_cpu_s: float,
) -> WorkersResult:
    counted = [a.last for a in actors if a.last is not None]  # on the common clock
    if not counted:
        raise PyAttackerError("every Ray worker was lost before it counted anything")
    lost = [a.index for a in actors if a.lost]
    # each actor's newest progress (actors are by index): what a lost one sent beyond its counts
    result = merge_outcomes(plan, counted, lost=lost, workers=len(actors), per_worker=per_worker,
                            progress=[a.progress for a in actors],
                            driver_cpu_s=driver_cpu_s)  # fmt: skip
    for a in actors:
        result.workers[a.index] = _on_ray(result.workers[a.index], a)
    if stopping and result.stop_reason is None:
        result = replace(result, stop_reason="interrupted")
    return result


def _on_ray(facts: WorkerFacts, actor: _Actor) -> WorkerFacts:
    """A worker's facts with what only Ray knows: its node, and its clock's offset."""
    if actor.node is not None:
        facts = replace(facts, node_id=actor.node[0], node_ip=actor.node[1])
    if actor.offset is not None:
        facts = replace(facts, clock_offset_s=actor.offset.offset_s,
                        clock_uncertainty_s=actor.offset.uncertainty_s)  # fmt: skip
    return facts
