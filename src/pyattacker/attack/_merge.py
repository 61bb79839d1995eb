"""Several workers' counts made one report, as one process would have counted them.

The workers' tallies hold mergeable aggregates only (counters, histograms with fixed
buckets, window series on one origin), so adding them is exact: the merged report equals
the report of one tally that counted every worker's requests (``tests/test_workers_merge.py``
checks it field by field). Two figures are not sums of the workers' own:

- a window's ``max_in_flight`` is the largest of the workers' peaks (each worker knows
  only its own requests in flight): the whole's peak lies between it and their sum;
- the error messages keep :data:`~pyattacker.attack._tally.MAX_MESSAGES` kinds in all, the
  first kept by the workers in index order.

A warmup's facts add up too (:meth:`WarmupTally.merge`: each worker set apart the
arrivals among the plan's first ones, or scheduled in its first span, that one process
would have). A scenario's flows (``flows``: started, completed, failed by step, cancelled, the
durations' histogram) add up the same way (:meth:`FlowTally.merge`); its steps are named
requests, merged with the tally's per-name figures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pyattacker.attack._engine import Progress
from pyattacker.attack._flow_stats import FlowTally
from pyattacker.attack._plan import AttackPlan
from pyattacker.attack._result import AttackResult, RunTimes, schedule_span
from pyattacker.attack._warmup import WarmupTally, without_warmup
from pyattacker.attack._workers import WorkerOutcome
from pyattacker.measure import Histogram, Outcome

__all__ = ["WorkerFacts", "WorkersResult", "merge_outcomes"]


@dataclass(frozen=True, slots=True)
class WorkerFacts:
    """One worker's figures beside the whole: ``state`` is ``finished`` or ``lost`` (the
    process died), and ``stop_reason`` why a finished one stopped early (``interrupted``,
    a breached threshold), None when it ran its share to the end; a lost worker's counts
    are those of its last snapshot (``partial``), or none (``counted`` False) when it died
    before sending one. ``late`` counts its
    requests sent later than the plan's limit after their scheduled time. A worker on Ray
    also has its clock's offset from the driver's wall clock and that offset's uncertainty
    (half the shortest round trip it was measured with), and the node it ran on (Ray's
    node id and the node's IP address); None for processes of this machine.

    Of a lost worker, what its progress (which comes more often than its snapshots) told
    beyond its counts: when its last snapshot was taken (``snapshot_at_s``) and when it was
    last heard from (``heard_at_s``), in seconds into the run, and how many requests it had
    sent by then beyond those counted (``sent_after_snapshot``): at least that many of its
    requests reached the server and are in no figure of the report. None when not known."""

    index: int
    state: str
    counted: bool
    scheduled: int
    sent: int
    completed: int
    failed: int
    cpu_s: float
    loop_lag: Histogram | None
    late: int = 0
    clock_offset_s: float | None = None
    clock_uncertainty_s: float | None = None
    node_id: str | None = None  # a Ray worker's node: Ray's id for it, and its IP address
    node_ip: str | None = None
    snapshot_at_s: float | None = None
    heard_at_s: float | None = None
    sent_after_snapshot: int | None = None
    stop_reason: str | None = None  # why it stopped before its share's end (Ctrl-C...)

    def to_dict(self) -> dict[str, Any]:
        lag = self.loop_lag
        return {
            "index": self.index,
            "state": self.state,
            "stop_reason": self.stop_reason,
            "partial": self.state == "lost" and self.counted,
            "counted": self.counted,
            "scheduled": self.scheduled,
            "sent": self.sent,
            "completed": self.completed,
            "failed": self.failed,
            "late": self.late,
            "cpu_s": self.cpu_s,
            "loop_lag_p99_s": lag.percentile(99) if lag is not None and lag.count else None,
            "loop_lag_max_s": lag.max if lag is not None and lag.count else None,
            **self._on_ray(),
            **(
                {}
                if self.state != "lost"
                else {
                    "snapshot_at_s": self.snapshot_at_s,
                    "last_heard_at_s": self.heard_at_s,
                    "sent_after_snapshot_at_least": self.sent_after_snapshot,
                }
            ),
        }

    def _on_ray(self) -> dict[str, Any]:
        """A Ray worker's node and clock offset; nothing for a process of this machine."""
        facts: dict[str, Any] = {}
        if self.node_id is not None:
            facts |= {"node_id": self.node_id, "node_ip": self.node_ip}
        if self.clock_offset_s is not None:
            facts |= {"clock_offset_s": self.clock_offset_s,
                      "clock_uncertainty_s": self.clock_uncertainty_s}  # fmt: skip
        return facts

    @classmethod
    def of(cls, outcome: WorkerOutcome, state: str) -> WorkerFacts:
        total = outcome.tally.total
        return cls(
            index=outcome.index,
            state=state,
            counted=True,
            scheduled=outcome.tally.scheduled,
            sent=outcome.tally.sent,
            completed=total.requests,
            failed=total.requests - total.by_outcome[Outcome.OK.value],
            cpu_s=outcome.cpu_s,
            loop_lag=outcome.loop_lag,
            late=outcome.tally.late,
            stop_reason=outcome.stop_reason,
            # a snapshot's progress was taken with its counts: when they stop
            snapshot_at_s=None
            if outcome.final or outcome.progress is None
            else outcome.progress.elapsed,
        )

    def heard(self, newest: Progress | None) -> WorkerFacts:
        """These facts of a lost worker with what its ``newest`` progress said: when it was
        last heard from and how many requests it had sent beyond those counted (it may
        have sent more before it died, unheard). Unchanged for a finished worker."""
        if self.state != "lost" or newest is None:
            return self
        return replace(self, heard_at_s=newest.elapsed,
                       sent_after_snapshot=max(0, newest.sent - self.sent))  # fmt: skip

    @classmethod
    def nothing(cls, index: int) -> WorkerFacts:
        """A worker lost before it sent any count."""
        return cls(index, "lost", False, 0, 0, 0, 0, 0.0, None)


@dataclass
class WorkersResult(AttackResult):
    """An :class:`AttackResult` merged from several workers, with each worker's figures
    (``workers``, by index). ``lost`` names the workers whose process died; ``per_worker``
    puts each worker's figures in :meth:`to_dict` (the count of workers and the lost ones
    are always there)."""

    workers: list[WorkerFacts] = field(default_factory=list)
    per_worker: bool = False

    @property
    def lost(self) -> list[int]:
        return [w.index for w in self.workers if w.state == "lost"]

    def clocks(self) -> tuple[float, float, float] | None:
        """Of the Ray workers whose clock was measured: the lowest and highest offset from
        the driver's, and the largest uncertainty (None: no clock measured, or no Ray)."""
        measured = [w for w in self.workers if w.clock_offset_s is not None]
        if not measured:
            return None
        offsets = [w.clock_offset_s or 0.0 for w in measured]
        within = max(w.clock_uncertainty_s or 0.0 for w in measured)
        return min(offsets), max(offsets), within

    def to_dict(self) -> dict[str, Any]:
        report = super().to_dict()
        section: dict[str, Any] = {"count": len(self.workers), "lost": self.lost}
        if self.lost:  # what each lost worker's figures leave out (docs/attack.md)
            section["lost_each"] = [w.to_dict() for w in self.workers if w.state == "lost"]
        clocks = self.clocks()
        if clocks is not None:  # workers on Ray: their clocks, and how exact their start was
            low, high, within = clocks
            section |= {"clock_offset_min_s": low, "clock_offset_max_s": high,
                        "clock_uncertainty_s": within}  # fmt: skip
        section["on_ray"] = any(w.node_id is not None for w in self.workers) or bool(clocks)
        if self.per_worker:
            section["each"] = [w.to_dict() for w in self.workers]
        report["workers"] = section
        return report


def merge_outcomes(
    plan: AttackPlan,
    outcomes: Sequence[WorkerOutcome],
    *,
    lost: Sequence[int] = (),
    workers: int | None = None,
    per_worker: bool = False,
    progress: Sequence[Progress | None] = (),
    driver_cpu_s: float = 0.0,
) -> WorkersResult:
    """One result from the workers' ``outcomes`` of ``plan`` (the whole plan; at least one
    outcome), as one process would have counted their requests. ``lost`` lists the workers
    whose process died (their outcome, if any, is their last snapshot); ``workers`` is how
    many there were (default: the outcomes'); ``progress``, each worker's newest progress
    by index, says what a lost one sent beyond its last snapshot; ``driver_cpu_s``, the CPU
    the driver spent on them, is counted with the workers'. The outcomes' tallies are
    consumed."""
    assert outcomes, "nothing to merge"
    ordered = sorted(outcomes, key=lambda o: o.index)
    # each worker's own figures first: merging adds the others into the first one's tally
    facts = {o.index: WorkerFacts.of(o, "lost" if o.index in lost else "finished") for o in ordered}
    tally = ordered[0].tally
    for other in ordered[1:]:
        tally.merge(other.tally)
    times = RunTimes(
        started_at=min(o.times.started_at for o in ordered),
        start=ordered[0].times.start,
        schedule_end=max(o.times.schedule_end for o in ordered),
        end=max(o.times.end for o in ordered),
        last_offset=max(o.times.last_offset for o in ordered),
    )
    decisions: Counter[str] = Counter()
    for o in ordered:
        decisions.update(o.decisions)
    reasons = [o.stop_reason for o in ordered if o.stop_reason is not None]
    if not reasons and {o.index for o in ordered} <= set(lost):
        # every count is a lost worker's last snapshot: the run stopped there, and its
        # rates are over the time up to then, not over the whole plan nobody sent
        reasons = ["every worker lost"]
    lags = [o.loop_lag for o in ordered if o.loop_lag is not None]
    count = workers if workers is not None else len(ordered)
    base = AttackResult.build(
        plan,
        tally,
        times,
        decisions=decisions,
        stop_reason=reasons[0] if reasons else None,
        loop_lag=_merged(lags),
    )
    # every worker's CPU and the driver's: what the attack cost, the report's per request
    base.cpu_s = driver_cpu_s + sum(o.cpu_s for o in ordered)
    flows = _merged_flows([o.flows for o in ordered if o.flows is not None])
    if flows is not None:  # a scenario's flows, as one process counts them
        base.flows = flows.stats(tally.scheduled)
    if isinstance(tally, WarmupTally):  # the spans start where the measured part starts
        full = schedule_span(plan, times, tally.scheduled + tally.warm_scheduled,
                             stopped=bool(reasons))  # fmt: skip
        base = without_warmup(base, tally, full)
    return WorkersResult(
        **{name: getattr(base, name) for name in AttackResult.__dataclass_fields__},
        workers=[
            (facts.get(i) or WorkerFacts.nothing(i)).heard(
                progress[i] if i < len(progress) else None
            )
            for i in range(count)
        ],
        per_worker=per_worker,
    )


def _merged_flows(tallies: Sequence[FlowTally]) -> FlowTally | None:
    """The workers' flow tallies added into the first one (None when there are none)."""
    if not tallies:
        return None
    whole = tallies[0]
    for other in tallies[1:]:
        whole.merge(other)
    return whole


def _merged(histograms: Sequence[Histogram]) -> Histogram | None:
    if not histograms:
        return None
    whole = histograms[0].copy()
    for other in histograms[1:]:
        whole.merge(other)
    return whole
