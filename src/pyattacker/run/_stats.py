"""What a run counts while it runs (``Runner.stats()``), and the report it returns.

Counters are plain integers bumped on the loop's thread; ``snapshot()`` copies them into a
fresh dict, so reading them from another thread (a progress bar, a notebook cell) is safe:
the worst it sees is a count one step stale. Records are facts; these are tallies of the
facts this process saw, and ``RunReport.stats["pipelines"]["by_state"]`` is read back from
the store, so it covers pipelines finished by earlier runs too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyattacker.store import RunState

__all__ = [
    "RunCounters",
    "RunReport",
    "end_of_run",
]


@dataclass(slots=True)
class RunCounters:
    admitted: int = 0
    skipped: int = 0  # already succeeded in the store: nothing to do
    duplicates: int = 0  # the same pipeline id twice in the input
    live: int = 0  # admitted and not yet ended
    parked: int = 0  # waiting out a retry delay, holding no worker
    in_flight: int = 0  # attempts running now (<= concurrency)
    restarted: int = 0  # resumed pipelines whose checkpoint could not be read
    reused: int = 0  # steps taken from the store (committed before this run), not run
    pipelines: Counter[str] = field(default_factory=Counter)  # ended, by state
    tasks: Counter[str] = field(default_factory=Counter)  # ended, by state
    attempts: int = 0
    retries: int = 0
    leaks: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    error_classes: Counter[str] = field(default_factory=Counter)
    decisions: Counter[str] = field(default_factory=Counter)

    def snapshot(self, *, elapsed_s: float, concurrency: int) -> dict[str, Any]:
        return {
            "elapsed_s": elapsed_s,
            "concurrency": concurrency,
            "in_flight": self.in_flight,
            "pipelines": {
                "admitted": self.admitted,
                "skipped": self.skipped,
                "duplicates": self.duplicates,
                "live": self.live,
                "parked": self.parked,
                "restarted": self.restarted,
                "ended": dict(self.pipelines),
            },
            "tasks": dict(self.tasks),
            "steps": self.steps(),
            "attempts": {
                "total": self.attempts,
                "retries": self.retries,
                "by_outcome": dict(self.outcomes),
                "by_error_class": dict(self.error_classes),
                "decisions": dict(self.decisions),
                "leaked_leases": self.leaks,
            },
        }

    def steps(self) -> dict[str, int]:
        """Steps taken from the store (``reused``) and executed by this run (``ran``: task
        rows it wrote, whatever their state)."""
        return {"reused": self.reused, "ran": sum(self.tasks.values())}


@dataclass(frozen=True, slots=True, kw_only=True)
class RunReport:
    """What ``Runner.run`` returns: how this run ended and what the store now holds.

    ``stats`` is the final ``Runner.stats()`` snapshot plus ``stats["pipelines"]
    ["by_state"]``: every pipeline in the store by state, earlier runs included.
    ``stats["steps"]`` is ``{"reused": n, "ran": m}``: steps this run took from the store
    (committed by earlier runs) and steps it executed.
    ``failures`` lists up to ``Runner(report_failures=…)`` failed pipelines of this run
    (``key`` — the ``--key`` value, else the input row index —, ``pipeline_id``, ``task``,
    ``error_class``, ``error``). ``resume_hint`` says how to
    continue an interrupted or incomplete run; ``exit_code`` is what the CLI exits with.
    ``input`` is the run's input record (``pyattacker.run._input``; None when the specs
    were not one ``template.map(rows)``), ``source_exhausted`` whether it was read to its
    end.
    """

    run_id: str
    state: RunState
    location: str
    elapsed_s: float
    stats: dict[str, Any]
    failures: list[dict[str, Any]]
    stop_reason: str | None = None
    input: Mapping[str, Any] | None = None

    @property
    def source_exhausted(self) -> bool | None:
        """Whether the input was read to its end; None when it was not recorded."""
        return None if self.input is None else bool(self.input.get("exhausted"))

    @property
    def by_state(self) -> dict[str, int]:
        by_state: dict[str, int] = self.stats["pipelines"]["by_state"]
        return by_state

    @property
    def exit_code(self) -> int:
        if self.state is RunState.INTERRUPTED:
            return 130
        return 0 if self.state is RunState.SUCCEEDED else 1

    @property
    def resume_hint(self) -> str | None:
        if self.state is RunState.INCOMPLETE:
            read = "?" if self.input is None else self.input.get("rows_read")
            return (
                f"the input was read only up to row {read}: resume with resume=True "
                f"(CLI: --resume) on {self.location} to read the rest"
            )
        if self.state is not RunState.INTERRUPTED:
            return None
        return f"resume with resume=True (CLI: --resume) on {self.location}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "state": self.state.value,
            "location": self.location,
            "elapsed_s": self.elapsed_s,
            "stop_reason": self.stop_reason,
            "stats": self.stats,
            "failures": self.failures,
            "input": None if self.input is None else dict(self.input),
            "source_exhausted": self.source_exhausted,
        }


def end_of_run(
    *,
    stop_reason: str | None,
    input_error: BaseException | None,
    store_failure: BaseException | None,
    input_finished: bool,
    counters: RunCounters,
) -> tuple[RunState, str | None]:
    """How a run ended, and why it stopped (None: it was not stopped).

    ``interrupted`` when it was stopped, or its input or its store failed; else
    ``incomplete`` when its input was not read to the end (never ``succeeded`` on a part
    of the input); else ``failed`` when a pipeline failed; else ``succeeded``."""
    reason = stop_reason
    if reason is None and input_error is not None:
        reason = f"the input failed after {counters.admitted} pipelines"
    if reason is None and store_failure is not None:
        reason = f"the store failed: {store_failure}"
    if reason is not None:
        return RunState.INTERRUPTED, reason
    if not input_finished:
        return RunState.INCOMPLETE, None
    if counters.pipelines["failed"]:
        return RunState.FAILED, None
    return RunState.SUCCEEDED, None
