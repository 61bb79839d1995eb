"""``Runner``: finish every pipeline across a pool of endpoints, and lose nothing.

::

    with Runner(store="runs/eval.db", pools=[pool], concurrency=16) as runner:
        report = runner.run(template.map(rows))          # later: resume=True

The Runner owns one store and the pools; each ``run`` is one execution
(``pyattacker.run._execute``) recorded as one row of ``runs``. ``run()`` blocks (on uvloop
when installed); inside a running event loop (a notebook) it runs on a helper thread with
a loop of its own, so it works there too; ``await run_async()`` runs on the caller's loop
(the virtual-time loop in tests).

Stopping: ``stop(reason)`` from any thread, the stop conditions ``stop_after_failures``
and ``stop_after_s``, or SIGINT/SIGTERM (with ``handle_signals``, in the main thread): the
first stops gracefully (admission ends, parked pipelines are recorded ``interrupted``,
attempts in flight get ``grace_s`` seconds), the second cancels what is still running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Iterable, Mapping
from typing import Any

from pyattacker._secrets import mask
from pyattacker.clock import LoopClock, epoch_time, wall_time
from pyattacker.errors import ConfigError, PyAttackerError
from pyattacker.pool import Pool
from pyattacker.run._blocking import on_loop_thread, run_blocking
from pyattacker.run._codecs import DEFAULT_CODECS, CodecRegistry
from pyattacker.run._commit import Committer
from pyattacker.run._execute import Execution
from pyattacker.run._input import Tracked, as_iterable, input_of
from pyattacker.run._pacing import PacingTotals, pacing_events, pacing_totals
from pyattacker.run._ray import check_ray_address
from pyattacker.run._records import new_run_id, resource_rows
from pyattacker.run._reuse import check_known, known_names, template_of
from pyattacker.run._scrub import Scrubber
from pyattacker.run._settings import checked_settings, pools_by_name
from pyattacker.run._stats import RunCounters, RunReport, end_of_run
from pyattacker.run._vendor import check_captured_clients
from pyattacker.run._watch import watch
from pyattacker.store import RunRow, RunState, Store, open_store

__all__ = ["Runner"]

log = logging.getLogger("pyattacker.run")


class Runner:
    """Runs pipelines to completion with a durable record; see the module docstring.

    - ``store``: a path (SQLite), ``":memory:"`` or a ``Store``.
    - ``concurrency``: attempts in flight at most. ``admission``: live pipelines at most
      (default ``4 * concurrency``); the input is pulled only as room frees up.
    - ``write_behind``: attempts and events are written in batches of ``history_batch``
      rows or every ``heartbeat_s`` seconds (checkpoints never wait); ``False`` writes
      every history row before the pipeline goes on.
    - ``strict_leases``: a lease a task forgot fails that attempt (else it is reclaimed
      and recorded as a ``lease.leaked`` event).
    - ``command``: the shell command that resumes the run (the CLI passes it), recorded as
      ``config["command"]`` for readers to show.
    - ``config_file``: the effective config file the run was started from (``run -c``),
      recorded as ``config["file"]`` with its secrets masked.

    Bad settings raise ``ConfigError`` naming the argument, before anything is opened.
    """

    def __init__(
        self,
        store: str | os.PathLike[str] | Store = ":memory:",
        pools: Iterable[Pool] | Mapping[str, Pool] = (),
        *,
        concurrency: int = 16,
        admission: int | None = None,
        stop_after_failures: int | None = None,
        stop_after_s: float | None = None,
        handle_signals: bool = True,
        grace_s: float = 10.0,
        write_behind: bool = True,
        history_batch: int = 1024,
        heartbeat_s: float = 1.0,
        strict_leases: bool = False,
        codecs: CodecRegistry | None = None,
        report_failures: int = 10,
        command: str | None = None,
        config_file: Mapping[str, Any] | None = None,
    ) -> None:
        self._pools = pools_by_name(pools)
        self.settings = checked_settings(
            concurrency=concurrency,
            admission=admission,
            stop_after_failures=stop_after_failures,
            stop_after_s=stop_after_s,
            grace_s=grace_s,
            history_batch=history_batch,
            heartbeat_s=heartbeat_s,
            strict_leases=strict_leases,
            report_failures=report_failures,
        )
        self._store_spec = store
        self._store: Store | None = store if isinstance(store, Store) else None
        self._owns_store = False
        self.stop_after_s = stop_after_s
        self.handle_signals = handle_signals
        self.write_behind = write_behind
        self.history_batch = history_batch
        self.heartbeat_s = heartbeat_s
        self.codecs = codecs if codecs is not None else DEFAULT_CODECS
        self.command = command
        self.config_file = config_file
        self._execution: Execution | None = None
        self._stop_on_start: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._counters = RunCounters()
        self._started = 0.0

    # -- the store ------------------------------------------------------------------------

    @property
    def store(self) -> Store:
        """The open store (opened on first use)."""
        if self._store is None:
            self._store = open_store(self._store_spec)
            self._owns_store = True
        return self._store

    def close(self) -> None:
        if self._store is not None and self._owns_store:
            self._store.close()
            self._store = None
            self._owns_store = False

    def __enter__(self) -> Runner:
        _ = self.store
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- running --------------------------------------------------------------------------

    def run(
        self,
        specs: Iterable[Any] | Any,
        *,
        resume: bool = False,
        fresh: bool = False,
        add_pipeline: bool = False,
    ) -> RunReport:
        """Run ``specs`` to the end and return the report; blocks. See ``run_async``."""
        coro = self.run_async(specs, resume=resume, fresh=fresh, add_pipeline=add_pipeline)
        return run_blocking(coro, self._interrupted)

    def _interrupted(self, interrupts: int) -> None:
        """Ctrl-C in the caller's thread while the run is on the helper thread (a notebook):
        the first stops it gracefully, the next ones cancel what still runs."""
        if self._execution is None:  # not started yet: stop it as soon as it does
            self._stop_on_start = "KeyboardInterrupt"
        elif interrupts == 1:
            self.stop("KeyboardInterrupt")
        else:
            self._cancel_from_another_thread()

    def _cancel_from_another_thread(self) -> None:
        execution, loop = self._execution, self._loop
        if execution is not None and loop is not None:
            with contextlib.suppress(RuntimeError):  # the run ended and its loop closed
                loop.call_soon_threadsafe(execution.cancel_live)

    async def run_async(
        self,
        specs: Iterable[Any] | Any,
        *,
        resume: bool = False,
        fresh: bool = False,
        add_pipeline: bool = False,
    ) -> RunReport:
        """Run every pipeline of ``specs`` (``template.map(rows)``, ``template.bind(seed)``,
        an iterable of those, or a template alone to resume its stored pipelines).

        With ``resume``, the store's pipelines of the same templates (by name) are looked
        at again, those of the input and, when the input ends, the others too (their input
        comes from the store): succeeded ones whose steps are unchanged are skipped,
        failed and interrupted ones continue from their last checkpoint, and edited ones
        (a step's fingerprint changed) rerun from their first changed step, the steps
        before it taken from the store (``pyattacker.run._reuse``). ``fresh`` (implies
        ``resume``) reruns every step of them, keeping the old outputs in the task history.
        Without ``resume``, a store that already holds pipelines is refused and left
        untouched; with it, so is a store holding pipelines of other templates only,
        unless ``add_pipeline`` (``ConfigError`` in both cases).

        The input of ``template.map(rows)`` is recorded (``pyattacker.run._input``). A
        template alone with ``resume`` goes on reading the recorded input where the last
        run stopped: a file is re-opened when unchanged; a Python iterable or stdin that
        was not read to its end is a ``ConfigError`` (pass the rows again). A run whose
        input was not read to its end never ends ``succeeded``: it is ``incomplete``.

        Raises ``ConfigError`` for bad input (before anything runs when it can be known
        then), ``StoreError`` when the store stopped recording.
        """
        if self._execution is not None:
            raise ConfigError("this Runner is already running", field="run")
        resume = resume or fresh
        store = self.store
        specs, tracker, held = self._refuse_early(specs, store, resume, add_pipeline)
        execution, committer, taken_over = self._begin(
            store, tracker, resume=resume, fresh=fresh, held=held
        )
        self._execution, self._loop = execution, asyncio.get_running_loop()
        if self._stop_on_start is not None:
            execution.stop(self._stop_on_start)
            self._stop_on_start = None
        paced_before = self._opening(execution, committer, taken_over)
        try:
            await self._drive(execution, committer, specs, paced_before, resume)
        finally:
            self._execution = None
            report = self._end(execution, committer, store)
        if committer.failure is not None:
            raise committer.failure
        if execution.input_error is not None:
            raise ConfigError(
                f"reading the input failed after {self._counters.admitted} pipelines: "
                f"{execution.input_error!r}",
                field="specs",
                hint="fix the input and run again with resume=True; finished work is kept",
            ) from execution.input_error
        return report

    def _refuse_early(
        self, specs: Any, store: Store, resume: bool, add_pipeline: bool
    ) -> tuple[Any, Tracked | None, frozenset[str] | None]:
        """``(specs, tracker, held templates)``, or ``ConfigError`` for what can be refused
        before anything is written (another template's store, captured vendor clients, an
        input that does not name its rows as the resumed run did)."""
        held = None if add_pipeline or not resume else frozenset(store.templates())
        names = known_names(specs)
        if held is not None and names is not None:
            check_known(names, held, store.location)
        template = template_of(specs)
        if template is not None:
            check_captured_clients(template.tasks)
            check_ray_address(template.tasks)
        specs, tracker = input_of(specs, store, resume=resume, add_pipeline=add_pipeline)
        return specs, tracker, held

    def _opening(
        self, execution: Execution, committer: Committer, taken_over: list[RunRow]
    ) -> PacingTotals:
        """What the run records as it begins; the pacing totals it starts from."""
        self._started = wall_time()
        paced_before = pacing_totals(self._pools.values())
        committer.resources(resource_rows(execution.run_id, self._pools))
        for old in taken_over:
            data = {"run": old.run_id, "state": old.state}
            execution.records.event("run.takeover", None, None, data)
        return paced_before

    async def _drive(
        self,
        execution: Execution,
        committer: Committer,
        specs: Any,
        paced_before: PacingTotals,
        resume: bool,
    ) -> None:
        """Run ``execution`` to its end under its watchers; the last events and the final
        flush happen whatever way it ends."""
        watching = watch(
            execution,
            committer,
            self._pools.values(),
            heartbeat_s=self.heartbeat_s,
            stop_after_s=self.stop_after_s,
            handle_signals=self.handle_signals,
        )
        with watching as leases:
            try:
                # Cancelled from outside, it stops and cancels what runs, then drains.
                await execution.admit_all(as_iterable(specs), resume=resume)
            finally:
                leases.last_look()  # none out, unless some leaked
                self._last_events(execution, paced_before)
                committer.flush()

    def _begin(
        self,
        store: Store,
        tracker: Tracked | None,
        *,
        resume: bool,
        fresh: bool,
        held: frozenset[str] | None,
    ) -> tuple[Execution, Committer, list[RunRow]]:
        """Record the run as begun (refused, writing nothing, when the store says so) and
        build its committer and execution; the runs it takes over."""
        run_id = new_run_id()
        run = RunRow(
            run_id=run_id,
            state=RunState.RUNNING,
            started_at=epoch_time(),
            heartbeat_at=epoch_time(),
            pid=os.getpid(),
            host=socket.gethostname(),
            config=self._config(),
            input=None if tracker is None else (tracker.take() or tracker.record()),
        )
        taken_over = store.begin_run(run, resume=resume)
        self._counters = RunCounters()
        committer = Committer(
            store,
            run_id,
            write_behind=self.write_behind,
            history_batch=self.history_batch,
            on_failure=lambda exc: self._stop_now(f"the store failed: {exc}"),
            input_record=None if tracker is None else tracker.take,
        )
        execution = Execution(
            run_id=run_id,
            store=store,
            committer=committer,
            pools=self._pools,
            codecs=self.codecs,
            clock=LoopClock(),
            settings=self.settings,
            counters=self._counters,
            scrubber=Scrubber(self._pools.values()),
            fresh=fresh,
            held_templates=held,
            tracker=tracker,
        )
        return execution, committer, taken_over

    def _last_events(self, execution: Execution, paced_before: PacingTotals) -> None:
        """What the run records as it ends: the steps it reused and ran, and each paced
        resource's pacing during the run."""
        execution.records.event("run.steps", None, None, self._counters.steps())
        for data in pacing_events(self._pools.values(), paced_before):
            execution.records.event("pool.pacing", None, None, data)

    def _end(self, execution: Execution, committer: Committer, store: Store) -> RunReport:
        counters = self._counters
        tracker = execution.tracker
        state, reason = end_of_run(
            stop_reason=execution.stop_reason,
            input_error=execution.input_error,
            store_failure=committer.failure,
            input_finished=tracker is None or tracker.exhausted,
            counters=counters,
        )
        stats = self._snapshot()
        try:
            # Even after a failed write: a run row left `running` reads as crashed once this
            # process lets go of the store's lock. A run taken over by another process is
            # refused here (its row is no longer `running`): the takeover's mark stays.
            store.end_run(execution.run_id, state, ended_at=epoch_time(), stop_reason=reason)
            stats["pipelines"]["by_state"] = store.count_by_state()
        except PyAttackerError as exc:
            log.warning("could not record the end of run %s: %s", execution.run_id, exc)
        stats["pipelines"].setdefault("by_state", dict(counters.pipelines))
        return RunReport(
            run_id=execution.run_id,
            state=state,
            location=store.location,
            elapsed_s=stats["elapsed_s"],
            stats=stats,
            failures=list(execution.failures),
            stop_reason=reason,
            input=None if tracker is None else tracker.record(),
        )

    # -- while it runs ----------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Counters of the current (or last) run; safe to call from any thread, mid-run."""
        return self._snapshot()

    def _snapshot(self) -> dict[str, Any]:
        elapsed = wall_time() - self._started if self._started else 0.0
        return self._counters.snapshot(elapsed_s=elapsed, concurrency=self.settings.concurrency)

    def stop(self, reason: str = "stop() called") -> None:
        """Stop the current run gracefully (see the module docstring); any thread."""
        execution, loop = self._execution, self._loop
        if execution is None or loop is None:
            return
        if on_loop_thread(loop):
            execution.stop(reason)
        else:
            with contextlib.suppress(RuntimeError):  # the run ended and its loop closed
                loop.call_soon_threadsafe(execution.stop, reason)

    def _stop_now(self, reason: str) -> None:
        execution = self._execution
        if execution is not None:
            execution.stop(reason)
            execution.cancel_live()

    # -- what is recorded about the run -----------------------------------------------------

    def _config(self) -> dict[str, Any]:
        config: dict[str, Any] = mask(
            {
                "concurrency": self.settings.concurrency,
                "admission": self.settings.admission,
                "grace_s": self.settings.grace_s,
                "stop_after_failures": self.settings.stop_after_failures,
                "stop_after_s": self.stop_after_s,
                "write_behind": self.write_behind,
                "strict_leases": self.settings.strict_leases,
                "pools": sorted(self._pools),
            }
        )
        if self.command is not None:
            config["command"] = self.command
        if self.config_file is not None:
            config["file"] = mask(dict(self.config_file))
        return config

    def __repr__(self) -> str:
        where = self._store.location if self._store is not None else str(self._store_spec)
        running = "running" if self._execution is not None else "idle"
        return (
            f"<Runner {running} store={where!r} pools={sorted(self._pools)} "
            f"concurrency={self.settings.concurrency}>"
        )
