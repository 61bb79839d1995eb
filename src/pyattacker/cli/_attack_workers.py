"""``attack --workers N|auto`` and ``--per-worker``: one plan on several processes.

The default is one process (``--workers 1``): on a machine that also runs the server
under test, a generator on every core takes the server's CPU and the figures then measure
the contest, not the server; and one process is the path whose accuracy every benchmark
states. ``--workers auto`` takes one process per usable core (the CPU affinity of this
process) for a generator on its own machine; the report says when one process's loop
fell behind (generator loop lag), the sign that more workers are needed.

Works with workers: a request mix, ``--scenario`` (each worker runs the flows of its
arrivals; the ``flows`` section merges exactly), ``--warmup`` (the arrivals one process
sets apart; with ``--scenario`` its flows, with all their steps), ``--goodput`` (each worker
counts, the driver adds up), ``--samples`` (a part per worker, joined in worker order:
:class:`~pyattacker.attack.SampleParts`), ``--sweep`` (each level on
:func:`level_workers` workers) and ``--serve`` (the live page fed by the merged
snapshots: :func:`~pyattacker.report.serve_workers`).
Exit code 3 when a worker process died (``WorkersResult.lost``), unless Ctrl-C (130) or
thresholds (their own codes) decide.

``--ray [ADDRESS]`` runs the same workers as Ray actors (``attack/_ray_workers.py``),
whatever ``--workers`` is, with the same flags: ``--samples`` rows are taken from the
actors as they run and joined into the one file on this machine, ``--serve`` serves the
page here from the actors' snapshots; each worker's clock offset on stderr.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import click

from pyattacker._ray import check_installed
from pyattacker.attack import (
    AttackPlan,
    AttackResult,
    ClosedModel,
    OpenModel,
    Progress,
    SampleParts,
    SampleWriter,
    WorkerFacts,
    WorkerOutcome,
    WorkersResult,
    WorkerTap,
    run_attack,
    run_ray_workers,
    run_workers,
    usable_cores,
    worker_plan,
)
from pyattacker.cli._attack_flags import AttackFlags
from pyattacker.cli._progress import LiveProgress
from pyattacker.errors import ConfigError
from pyattacker.http import Limits
from pyattacker.measure import RequestRecord
from pyattacker.report import clock_text, worker_now_line, workers_now

__all__ = [
    "AUTO",
    "LOST_EXIT",
    "WORKERS",
    "Samples",
    "Shared",
    "open_samples",
    "run_level",
    "run_plan",
    "sparse_note",
    "workers_checked",
    "workers_exit",
    "workers_options",
]

F = TypeVar("F", bound=Callable[..., Any])

#: The exit code of an attack one of whose worker processes died.
LOST_EXIT = 3
MAX_WORKERS = 1024
AUTO = 0  # --workers auto, before workers_checked resolves it
#: --samples, one file or a part per worker (see SampleParts)
Samples = SampleWriter | SampleParts


class _Workers(click.ParamType[int]):
    """A number of worker processes, or ``auto`` (:data:`AUTO`, for the caller to
    resolve)."""

    name = "N|auto"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip().lower()
        if text == "auto":
            return AUTO  # resolved against the plan by workers_checked
        try:
            n = int(text)
        except ValueError:
            self.fail(f"{value!r} is not a number of processes: give N >= 1 or auto", param, ctx)
        if not 1 <= n <= MAX_WORKERS:
            self.fail(f"must be 1 to {MAX_WORKERS}, got {n}: give N >= 1 or auto", param, ctx)
        return n


#: ``--workers N|auto``'s type (``attack``'s and ``selftest``'s)
WORKERS = _Workers()


def workers_options(command: F) -> F:
    """``--workers``, ``--per-worker``, ``--ray`` and ``--no-ray`` on ``attack``."""
    command = click.option(
        "--no-ray",
        "no_ray",
        is_flag=True,
        help="Run the workers on this machine, though the plan file (-c) says ray.",
    )(command)
    command = click.option(
        "--ray",
        "ray_address",
        is_flag=False,
        flag_value="",
        metavar="[ADDRESS]",
        help="Run the --workers as Ray actors of one CPU each, spread over the nodes (pip "
        "install 'pyattacker[ray]'): on the cluster at ADDRESS (e.g. 10.0.0.5:6379), else "
        "the RAY_ADDRESS one, else a local Ray. One start instant by wall clock; each "
        "worker's clock offset and its uncertainty are reported.",
    )(command)
    command = click.option(
        "--per-worker/--no-per-worker",
        default=False,
        help="With --workers: show each worker's counts, CPU seconds and loop lag (on "
        "stderr, and as workers.each in --json), so a worker that fell behind is named.",
    )(command)
    return click.option(
        "--workers",
        type=WORKERS,
        default="1",
        show_default=True,
        help="Processes sharing the plan: arrival k goes to worker k mod N (one seeded "
        "schedule; Poisson arrivals in runs of up to 20 ms, so a burst reaches one worker), "
        "clients and connections are divided, one report merges them. auto: one "
        "per usable core, no more than the clients or connections per target (for a "
        "generator on its own machine). Under 4,000 arrivals/s a worker one process keeps "
        "up, and spends less CPU per request beside the server under test (a note says "
        "so). Works with every flag "
        "(with --ray too: --samples rows and the --serve page end up on this machine). "
        "Exit 3 if a worker died.",
    )(command)


def workers_checked(flags: AttackFlags) -> AttackFlags:
    """``flags``, once the flags ``--workers`` (or ``--ray``) cannot go with are refused
    (ConfigError), and ``--ray`` without Ray installed."""
    if flags.ray_address is not None:
        if flags.ray_address.startswith(("http://", "https://")):
            raise ConfigError(
                f"{flags.ray_address!r} is a URL to attack, not a Ray cluster's address",
                field="--ray",
                hint="give the URL first, or the address after it: --ray HEAD:6379 (or --ray=)",
            )
        check_installed("--ray")
    auto = flags.workers == AUTO
    if auto:
        flags = replace(flags, workers=auto_workers(flags))
    alone = flags.workers == 1 and flags.ray_address is None and not auto
    if alone and flags.per_worker:
        raise ConfigError("--per-worker applies to --workers", field="--per-worker",
                          hint="add --workers 2 (or auto)")  # fmt: skip
    if flags.ray_address is not None and flags.workers == 1 and not flags.quiet:
        click.echo("note: --ray runs the plan on one actor: give --workers N to spread it "
                   "over N", err=True)  # fmt: skip
    return flags


def auto_workers(flags: AttackFlags) -> int:
    """``--workers auto``: one per usable core, but no more than the plan can be shared
    by (its clients, and its connections per target, are divided between the workers)."""
    n = min(usable_cores(), flags.connections)
    return min(n, flags.clients) if flags.clients else n


def one_process(flags: AttackFlags) -> bool:
    """Whether the attack runs in this process: one worker, no Ray, and no --per-worker
    with --workers auto (which then runs its one worker as a process, to show it)."""
    return flags.workers == 1 and flags.ray_address is None and not flags.per_worker


@dataclass(frozen=True)
class Shared:
    """An attack on ``n`` workers (local processes, or Ray actors at ``ray_address``,
    ``""`` for the default cluster), and what taps their records."""

    n: int
    per_worker: bool
    taps: tuple[WorkerTap, ...]
    samples: SampleParts | None
    ray_address: str | None = None
    live: LiveProgress | None = None

    @classmethod
    def of(
        cls,
        flags: AttackFlags,
        goodput: WorkerTap | None,
        samples: Samples | None,
        live: LiveProgress | None = None,
    ) -> Shared | None:
        """How the flags share a run (None: one process); ``goodput`` and ``samples`` (as
        :func:`open_samples` made them) tap each worker's records; ``live``, the live view
        on stderr, is closed before the workers' lines are printed."""
        if one_process(flags):
            return None
        parts = samples if isinstance(samples, SampleParts) else None
        taps = tuple(tap for tap in (goodput, parts) if tap is not None)
        return cls(flags.workers, flags.per_worker, taps, parts, flags.ray_address, live)

    def run(
        self,
        plan: AttackPlan,
        on_progress: Callable[[Progress], str | None] | None,
        limits: Limits,
    ) -> WorkersResult:
        """Run ``plan`` on the workers, and tell what they did (:meth:`told`)."""
        each = self.on_worker_progress()
        if self.ray_address is None:
            result = run_workers(plan, self.n, on_progress=on_progress,
                                 per_worker=self.per_worker, on_worker_progress=each,
                                 limits=limits, taps=self.taps)  # fmt: skip
        else:
            result = run_ray_workers(plan, self.n, self.ray_address or None,
                                     on_progress=on_progress, per_worker=self.per_worker,
                                     on_worker_progress=each, limits=limits,
                                     taps=self.taps)  # fmt: skip
        self.told(result)
        return result

    def on_worker_progress(self) -> Callable[[list[WorkerOutcome | None]], None] | None:
        """With ``--per-worker`` on a terminal, what hands the live view each worker's
        line as the workers report (None otherwise: the default view is the whole's)."""
        live = self.live
        if live is None or not self.per_worker:
            return None
        return lambda lasts: live.show_workers([worker_now_line(r) for r in workers_now(lasts)])

    def told(self, result: WorkersResult) -> None:
        """The Ray workers' clock offsets, each worker's figures (every one with
        ``--per-worker``, else the lost ones) and the samples' notes, on stderr, once the
        live view is closed: the attack is over, and its lines and the report follow it."""
        say = self._closed_live()
        if self.ray_address is not None:
            say(clock_line(result))
        for line in worker_lines(result, every=self.per_worker):
            say(line)
        for line in self.samples.notes if self.samples is not None else ():
            say(line)

    def _closed_live(self) -> Callable[[str], None]:
        """How to print a line on stderr, the live view (if any) closed first (its last
        frame cleared). Its own stream takes the lines, so that they land where a test's
        fake terminal can see them as a terminal would."""
        if self.live is None:
            return functools.partial(click.echo, err=True)
        self.live.close()
        return self.live.echo

    def finished(self, on_finish: Callable[[AttackResult], None]) -> Callable[[AttackResult], None]:
        """``on_finish``, once :meth:`told` what the workers did."""

        def finish(result: AttackResult) -> None:
            if isinstance(result, WorkersResult):
                self.told(result)
            on_finish(result)

        return finish


def open_samples(flags: AttackFlags) -> Samples | None:
    """Where ``--samples`` rows go: one file this process writes, or with workers a part
    per worker joined into the file at the end (None without ``--samples``)."""
    if flags.samples_path is None:
        return None
    if one_process(flags):
        return SampleWriter.open(flags.samples_path, llm=flags.llm)
    return SampleParts(flags.samples_path, llm=flags.llm)


def run_plan(
    flags: AttackFlags,
    plan: AttackPlan,
    on_record: Callable[[RequestRecord], None] | None,
    on_progress: Callable[[Progress], str | None] | None,
    limits: Limits,
    shared: Shared | None = None,
) -> AttackResult:
    """Run ``plan`` in this process (``on_record`` sees every record), or on the workers
    ``shared`` says (default: the flags', with no tap); then each worker's figures are
    printed on stderr, with the lost ones named."""
    shared = shared or Shared.of(flags, None, None)
    if shared is None:
        return run_attack(plan, on_record=on_record, on_progress=on_progress, limits=limits)
    return shared.run(plan, on_progress, limits)


def check_shared(plan: AttackPlan, n: int) -> None:
    """Refuse (``ConfigError`` naming ``--workers``) a plan ``n`` workers cannot share."""
    for index in range(n):
        try:
            worker_plan(plan, index, n)
        except ConfigError as exc:
            raise ConfigError(exc.message, field="--workers", hint=exc.hint) from None


#: Below this many arrivals a second each, one process keeps up with room to spare, and
#: local workers on a machine shared with the server under test cost more CPU per request
#: than one process at the same rate: three busy processes contend for the cores where two
#: did not, and the server's own CPU per request rises with the workers' (benchmarks/
#: README.md, "the server's own CPU as a control"). With the server on cores of its own,
#: workers cost about what one process costs from well below this rate.
SPARSE_WORKER_RATE = 4000.0


def sparse_note(plan: AttackPlan, n: int, *, on_ray: bool) -> str | None:
    """A note when ``n`` local workers each have so few plain arrivals a second that one
    process would keep up, and spend less CPU per request where the server under test
    shares the machine (None otherwise: one process, Ray, a closed model, LLM streams or
    scripted flows, whose cost per arrival is of another size)."""
    load = plan.load
    if n < 2 or on_ray or not isinstance(load, OpenModel):
        return None
    if plan.llm is not None or plan.scenario is not None:
        return None
    peak = load.peak_rate
    if peak / n >= SPARSE_WORKER_RATE:
        return None
    at = "at up to" if load.stages else "at"
    return (f"note: {n} workers {at} {peak:g}/s have {peak / n:g}/s each; below about "
            f"{SPARSE_WORKER_RATE:,.0f}/s a worker one process keeps up, and on a machine shared "
            "with the server under test workers spend more CPU per request than one process "
            "(they contend with it for the cores): --workers pays once one process falls "
            "behind (docs/attack.md, \"Many processes, many machines\")")  # fmt: skip


def level_workers(flags: AttackFlags, plan: AttackPlan) -> int:
    """How many of the ``--workers`` run one ``--sweep`` level of ``plan``: all of them,
    but no more than a closed level's clients (a synchronous level runs on one) nor the
    connections per target, which are divided between them."""
    n = min(flags.workers, plan.connections)
    return min(n, plan.load.clients) if isinstance(plan.load, ClosedModel) else n


def run_level(
    flags: AttackFlags,
    plan: AttackPlan,
    on_progress: Callable[[Progress], str | None] | None,
    limits: Limits,
    samples_path: str | None = None,
    live: LiveProgress | None = None,
) -> tuple[AttackResult, bool]:
    """One ``--sweep`` level: ``plan`` on :func:`level_workers` workers (or this process),
    its rows written to ``samples_path`` if given, as one attack's ``--samples`` are;
    and whether writing them failed (stderr said so, naming the sweep's ``--samples``)."""
    level = replace(flags, workers=level_workers(flags, plan), samples_path=samples_path)
    if not one_process(level):  # (a plain attack's plan is checked before it starts)
        check_shared(plan, level.workers)
    samples = open_samples(level)
    on_record = samples.write if isinstance(samples, SampleWriter) else None
    try:
        result = run_plan(level, plan, on_record, on_progress, limits,
                          Shared.of(level, None, samples, live))  # fmt: skip
    finally:
        if samples is not None:
            samples.close()
    return result, samples is not None and samples_failed(samples, flags.samples_path)


def samples_failed(samples: Samples, path: str | None) -> bool:
    """Whether writing the samples failed; if so, says so on stderr (the run went on)."""
    if samples.failed is None:
        return False
    reason = samples.failed.strerror or str(samples.failed)
    missing = f": {samples.lost:,} rows or more are missing" if samples.lost else ""
    click.echo(f"--samples: writing {path} failed ({reason}); the file is incomplete" + missing,
               err=True)  # fmt: skip
    return True


def worker_lines(result: WorkersResult, *, every: bool) -> list[str]:
    """One line per worker (``every``) or per lost worker: state, counts (late sends
    too), CPU, and loop lag p99 and max (a worker that stalled for a second shows it in
    its max while its p99 stays small)."""
    lines = []
    for w in result.workers:
        if not every and w.state != "lost":
            continue
        facts = w.to_dict()
        lines.append(
            f"worker {w.index}: {_state(w)}; scheduled {w.scheduled}, sent {w.sent}, "
            f"completed {w.completed}, failed {w.failed}, late {w.late}; CPU {w.cpu_s:.2f}s; "
            f"loop lag p99 {_lag_ms(facts['loop_lag_p99_s'])}, "
            f"max {_lag_ms(facts['loop_lag_max_s'])}"
            f"{_node_part(w)}"
        )
    return lines


def _node_part(w: WorkerFacts) -> str:
    """Of a Ray worker, the node it ran on and its clock's offset from this machine's (a
    node whose clock is off by seconds is one to check); nothing for a local process."""
    parts = []
    if w.node_ip is not None:
        parts.append(f"node {w.node_ip} (id {(w.node_id or '')[:8]})")
    if w.clock_offset_s is not None:
        offset, within = w.clock_offset_s * 1000, (w.clock_uncertainty_s or 0.0) * 1000
        parts.append(f"clock offset {offset:+.3f}ms ±{within:.3f}ms")
    return f"; {', '.join(parts)}" if parts else ""


def _state(w: WorkerFacts) -> str:
    """``finished``, or of a lost worker where its figures stop and what it sent after."""
    if w.state != "lost":
        return w.state if w.stop_reason is None else f"stopped ({w.stop_reason})"
    if not w.counted:
        state = "lost, nothing counted"
    elif w.snapshot_at_s is None:
        state = "lost, counted up to its last snapshot"
    else:
        state = f"lost, counted up to its last snapshot at {w.snapshot_at_s:.2f}s"
    if w.sent_after_snapshot:
        state += f" (it sent at least {w.sent_after_snapshot} more, not counted)"
    return state


def _lag_ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}ms"


def _where(flags: AttackFlags) -> str:
    return "--ray" if flags.ray_address is not None else f"--workers {flags.workers}"


def clock_line(result: WorkersResult) -> str:
    """The Ray workers' clock offsets from the driver's wall clock, and how exact they are:
    a start agreed across machines is no more exact than the largest uncertainty."""
    clocks = result.clocks()
    if clocks is None:
        return "Ray workers: no clock measured (every worker was lost before it answered)"
    return f"Ray workers: {len(result.workers)}; {clock_text(*clocks)}"


def workers_exit(result: AttackResult, code: int) -> int:
    """``code``, or :data:`LOST_EXIT` when a worker process died."""
    if isinstance(result, WorkersResult) and result.lost:
        return LOST_EXIT
    return code
