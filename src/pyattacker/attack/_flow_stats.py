"""How the flows of a scenario went: counted as each ends (:class:`FlowTally`), reported
as a ``flows`` section (:class:`FlowStats`, in ``AttackResult.flows``).

Each arrival of the load model is one flow. Every flow admitted ends in exactly one of
``completed`` (its function returned), ``failed`` (it raised: a step's
:class:`~pyattacker.attack.StepFailed`, counted under that step's name, or any other error
of the flow's own code, counted under :data:`FLOW_CODE` with its message among ``errors``)
or ``cancelled`` (cut short by the attack's end or a stop, its step in progress counted as
a cancelled request; or stopped before it began). An arrival dropped before it began
(``--max-in-flight``, or a generator too far behind) is ``dropped``. So
``scheduled = completed + failed + cancelled + dropped + in_progress``.

``duration_s``: completed flows, from the scheduled start (the arrival) to the function's
return: the scheduled clock, as a user waiting for the whole flow sees it.

With a warmup, a flow whose arrival is the warmup's (as the requests' tally judges an
arrival) is set apart: counted in ``warmup`` only, in no other figure, as its arrival is
in no ``scheduled``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pyattacker.attack._tally import ErrorGroup, ErrorMessages
from pyattacker.measure import Histogram

__all__ = ["FLOW_CODE", "FlowStats", "FlowTally"]

FLOW_CODE = "(the flow's code)"
"""Where a flow failed when its own code raised (not a step's failure)."""


@dataclass
class FlowStats:
    """The flows of one attack (see the module docstring): ``scenario`` names the
    function (``flows.py:checkout``); ``failed`` counts failed flows by where they failed."""

    scenario: str
    scheduled: int
    admitted: int
    started: int
    completed: int
    failed: dict[str, int] = field(default_factory=dict)
    cancelled: int = 0
    duration: Histogram = field(default_factory=Histogram)
    errors: list[ErrorGroup] = field(default_factory=list)
    warmup: int = 0

    @property
    def dropped(self) -> int:
        return max(0, self.scheduled - self.admitted)

    @property
    def in_progress(self) -> int:
        return self.admitted - self.completed - sum(self.failed.values()) - self.cancelled

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "scheduled": self.scheduled,
            "started": self.started,
            "completed": self.completed,
            "failed": sum(self.failed.values()),
            "failed_by_step": dict(self.failed),
            "cancelled": self.cancelled,
            "dropped": self.dropped,
            "in_progress": self.in_progress,
            "duration_s": self.duration.summary().to_dict(),
            "errors": [group.to_dict() for group in self.errors],
            "warmup": self.warmup,
        }


class FlowTally:
    """The flows' counts as they happen (the dispatcher's; no clock, no I/O)."""

    __slots__ = ("_errors", "_failed", "admitted", "cancelled", "completed", "duration", "label",
                 "started", "warm")  # fmt: skip

    def __init__(self, label: str) -> None:
        self.label = label
        self.admitted = self.started = self.completed = self.cancelled = 0
        self.warm = 0  # flows the warmup set apart (counted in nothing else)
        self._failed: Counter[str] = Counter()
        self._errors = ErrorMessages()
        self.duration = Histogram()

    def finished(self, seconds: float) -> None:
        """A flow returned, ``seconds`` after its arrival was scheduled."""
        self.completed += 1
        self.duration.record(max(0.0, seconds))

    def failed_at(self, step: str) -> None:
        """A flow ended on the failure of its step ``step``."""
        self._failed[step] += 1

    def failed_in_code(self, message: str) -> None:
        """A flow's own code raised (``message``: one scrubbed line of the error)."""
        self._failed[FLOW_CODE] += 1
        self._errors.note(message)

    def merge(self, other: FlowTally) -> None:
        """Add ``other``'s counts (another worker's flows of the same scenario): the stats
        then equal one tally's of both sets of flows, count by count and bucket by bucket.
        The error kinds merge as :meth:`ErrorMessages.merge` says."""
        self.admitted += other.admitted
        self.started += other.started
        self.completed += other.completed
        self.cancelled += other.cancelled
        self.warm += other.warm
        self._failed.update(other._failed)
        self._errors.merge(other._errors)
        self.duration.merge(other.duration)

    def stats(self, scheduled: int) -> FlowStats:
        """What was counted, with ``scheduled`` arrivals (the engine's tally's count)."""
        return FlowStats(
            scenario=self.label,
            scheduled=scheduled,
            admitted=self.admitted,
            started=self.started,
            completed=self.completed,
            failed=dict(self._failed),
            cancelled=self.cancelled,
            duration=self.duration.copy(),
            errors=self._errors.groups(),
            warmup=self.warm,
        )
