"""One plan, several worker processes: each worker's share, and the body a worker runs.

How a plan is shared between ``n`` workers (``docs/attack.md``, "Many processes, many
machines"):

- the open model's arrivals come from one stream of draws (the plan's seed), and arrival
  ``k`` goes to worker ``k mod n`` (Poisson arrivals: in runs of consecutive arrivals,
  :func:`arrival_run`): each worker walks the whole schedule and keeps its share, so
  every arrival has the scheduled time it has in one process, and ``--requests`` is
  counted over all workers;
- the closed model's clients, a closed model's ``--requests``, the connections (and
  preconnections) per target and the open model's ``max_in_flight`` are divided, the first
  workers taking one more when the division leaves a rest;
- every worker starts its schedule at one instant on the monotonic clock, which the
  processes of one Linux machine share; a worker started late sends its first arrivals
  late, and that lateness is recorded as any other.

:func:`work` is the body of one worker, a plain function of (plan, index, n, start
instant): a process here, a Ray actor later, calls it the same way, and gets back a
picklable :class:`WorkerOutcome` that :func:`~pyattacker.attack._merge.merge_outcomes`
adds up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from pyattacker._gc import quiet_gc
from pyattacker.attack._engine import Engine, Progress
from pyattacker.attack._flow_stats import FlowTally
from pyattacker.attack._load import CLUSTER_S, ClosedModel, OpenModel
from pyattacker.attack._plan import AttackPlan
from pyattacker.attack._result import RunTimes
from pyattacker.attack._run import (
    _client_for,
    _http_sender,
    _llm_sender,
    _Session,
    run_on_fast_loop,
)
from pyattacker.attack._tally import Tally
from pyattacker.attack._taps import WorkerTap, on_record_of
from pyattacker.errors import ConfigError
from pyattacker.http import Limits
from pyattacker.measure import Histogram

__all__ = ["WorkerOutcome", "arrival_run", "run_worker", "share", "work", "worker_plan"]

#: How often a worker hands its whole count to the driver (what is kept of a worker that
#: dies, and what the live view's percentiles merge), and its progress in between (the
#: live view's counts). Pickling the count holds the worker's loop for about a
#: millisecond per 100 KB of count, and more when the worker shares its core; twice a
#: second that was the workers' p99 loop lag and the sent clock's p99 error, while the
#: progress costs microseconds (benchmarks/README.md, "the workers' snapshots").
SNAPSHOT_EVERY_S = 2.0
PROGRESS_EVERY_S = 0.5


@dataclass
class WorkerOutcome:
    """What one worker counted: its tally (every finished request counted), its run's
    times on the shared clock, its retry decisions, why it stopped (None: the plan ran to
    its end), its loop's lag, the CPU seconds it spent, and whether this is its final
    count (``final``) or a snapshot taken while it ran; ``flows``, a scenario's flows it
    ran (None without a scenario); ``taps``, what each of its taps' parts said
    (:meth:`~pyattacker.attack._taps.RecordTap.part`, in the order of the taps). Picklable."""

    index: int
    tally: Tally
    times: RunTimes
    decisions: dict[str, int]
    stop_reason: str | None
    loop_lag: Histogram | None
    cpu_s: float
    final: bool
    progress: Progress | None = field(default=None)
    flows: FlowTally | None = field(default=None)
    taps: list[object] = field(default_factory=list)


def share(total: int, index: int, n: int) -> int:
    """Worker ``index``'s part of ``total`` divided among ``n`` (the first ones get one more
    when the division leaves a rest)."""
    return total // n + (1 if index < total % n else 0)


def arrival_run(plan: AttackPlan, n: int) -> int:
    """How many consecutive arrivals of ``plan``'s open model each of ``n`` workers takes
    in turn (``OpenModel.numbered``): 1 (arrival k to worker k mod n) but for Poisson
    arrivals, as many as come in ``CLUSTER_S`` at the plan's peak rate. Poisson arrivals
    come in bursts, and a burst dealt one by one wakes every worker where one process
    sends it on one wake-up (benchmarks/README.md, "Poisson arrivals dealt in runs"; what
    the workers still pay over one process is the half rate each runs at: "what the
    workers' Poisson excess is made of"). While it has its run a worker carries the whole
    rate, so a run is at most a quarter of a worker's connections and of its share of
    ``max_in_flight``: a run alone never fills them. From the whole plan, so that every
    worker deals alike."""
    load = plan.load
    if n == 1 or not isinstance(load, OpenModel) or load.arrival != "poisson":
        return 1
    room = min(plan.connections, load.max_in_flight) // n // 4
    return max(1, min(int(load.peak_rate * CLUSTER_S), room))


def worker_plan(plan: AttackPlan, index: int, n: int) -> AttackPlan:
    """The plan worker ``index`` of ``n`` runs (see the module docstring for the shares).

    ``ConfigError`` when a divided figure would leave a worker with nothing: fewer
    connections (or closed-model clients) than workers."""
    if n == 1:
        return plan
    if plan.connections < n:
        raise ConfigError(
            f"{n} workers cannot share {plan.connections} connections per target",
            field="workers",
            hint=f"give at most {plan.connections} workers, or more --connections",
        )
    load = plan.load
    requests = plan.requests
    if isinstance(load, ClosedModel):
        if load.clients < n:
            raise ConfigError(
                f"{n} workers cannot share {load.clients} clients",
                field="workers",
                hint=f"give at most {load.clients} workers, or more --clients",
            )
        load = replace(load, clients=share(load.clients, index, n))
        if requests is not None:
            requests = max(1, share(requests, index, n))
    elif isinstance(load, OpenModel):
        load = replace(load, max_in_flight=max(1, share(load.max_in_flight, index, n)))
    connections = share(plan.connections, index, n)
    return replace(
        plan,
        load=load,
        requests=requests,
        connections=connections,
        preconnect=min(connections, share(plan.preconnect, index, n)),
    )


async def work(
    plan: AttackPlan,
    index: int,
    n: int,
    start_at: float,
    *,
    on_snapshot: Callable[[WorkerOutcome], None] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    snapshot_every: float = SNAPSHOT_EVERY_S,
    progress_every: float = PROGRESS_EVERY_S,
    on_stop: Callable[[Callable[[str], None]], None] | None = None,
    limits: Limits | None = None,
    taps: Sequence[WorkerTap] = (),
) -> WorkerOutcome:
    """Run worker ``index`` of ``n`` of ``plan`` (the whole plan: its share is taken here)
    from ``start_at`` on the monotonic clock, and return what it counted.

    ``on_snapshot`` receives a :class:`WorkerOutcome` with ``final=False`` every
    ``snapshot_every`` seconds (how a worker that dies later still hands over what it
    counted), ``on_progress`` the worker's :class:`Progress` every ``progress_every``
    seconds in between (the live view's counts); ``on_stop`` is handed a function that
    stops the worker gracefully with a reason (how a driver asks its workers to stop).
    SIGINT and SIGTERM stop it too. ``limits`` bound what the client reads, as
    :func:`~pyattacker.attack.attack`'s. Each of ``taps`` opens its part here, which sees
    every record this worker counts."""
    mine = worker_plan(plan, index, n)
    cpu0 = time.process_time()
    client = _client_for(mine, None, limits)
    sender = _llm_sender(mine, client) if mine.llm else _http_sender(mine, client)
    parts = [tap.open(index) for tap in taps]
    engine = Engine(mine, sender, on_record=on_record_of(parts),
                    part=(index, n) if n > 1 else (0, 1), run=arrival_run(plan, n),
                    start_at=start_at)  # fmt: skip
    session = _Session(mine, engine, client)
    session.handle_signals()
    if on_stop is not None:
        on_stop(session.stop)

    def reading(progress: Progress) -> Progress:
        """``progress`` with this worker's current loop lag and CPU seconds, which name
        a worker falling behind in the live view (``--per-worker``)."""
        probe = engine._lag
        return replace(progress, loop_lag_s=None if probe is None else probe.take_recent(),
                       cpu_s=time.process_time() - cpu0)  # fmt: skip

    def outcome(final: bool) -> WorkerOutcome:
        tally, times = engine.counted()
        lag = engine._lag.lag if engine._lag is not None else None
        return WorkerOutcome(
            index=index,
            tally=tally,
            times=times,
            decisions=dict(engine.decisions),
            stop_reason=engine._flight.stopping,
            loop_lag=lag,
            cpu_s=time.process_time() - cpu0,
            final=final,
            progress=None if final else reading(engine.progress()),
            flows=engine.flows,
            taps=[p.part(final=final) for p in parts],
        )

    ticks, per_snapshot = 0, max(1, round(snapshot_every / progress_every))

    def tick(progress: Progress) -> None:
        nonlocal ticks
        ticks += 1
        if on_snapshot is not None and (ticks - 1) % per_snapshot == 0:
            on_snapshot(outcome(False))  # the first tick's, and every per_snapshot-th
        elif on_progress is not None:
            on_progress(reading(progress))

    try:
        await session.opened()
        if on_snapshot is not None or on_progress is not None:
            session.tick(tick, progress_every)
        await engine.run()
    finally:
        await session.close()
    return outcome(True)


def run_worker(
    plan: AttackPlan,
    index: int,
    n: int,
    start_at: float,
    *,
    on_snapshot: Callable[[WorkerOutcome], None] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    snapshot_every: float = SNAPSHOT_EVERY_S,
    progress_every: float = PROGRESS_EVERY_S,
    on_stop: Callable[[Callable[[str], None]], None] | None = None,
    limits: Limits | None = None,
    taps: Sequence[WorkerTap] = (),
) -> WorkerOutcome:
    """:func:`work` on a fresh fast loop, with the garbage collector quiet (as
    :func:`~pyattacker.attack.run_attack` runs one process's attack)."""
    with quiet_gc():
        return run_on_fast_loop(
            work(
                plan,
                index,
                n,
                start_at,
                on_snapshot=on_snapshot,
                on_progress=on_progress,
                snapshot_every=snapshot_every,
                progress_every=progress_every,
                on_stop=on_stop,
                limits=limits,
                taps=taps,
            )
        )
