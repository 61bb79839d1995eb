"""The mock LLM server's ground truth: one :class:`Record` per completion request.

Times are the server's monotonic clock in seconds (``time.monotonic()`` on a real loop:
the same clock as any process on the machine reading it). A record is complete, and
enters the :class:`Ledger`, when its response has ended (flush included) or its connection
was lost; until then its request is counted as in flight, queued or pending, never as a
record.

Outcomes (:class:`Outcome`): ``ok`` (a full, well-formed 200), ``error`` (an error status
was answered), ``fault`` (a 200 deliberately wrong: ``not-openai``, ``broken-sse``),
``cut`` (the server closed the connection mid-response on purpose), ``dropped`` (the
client left first).

**Epochs.** ``/reset`` starts a new :class:`Epoch`. A request belongs to the epoch in which
it was received; a record of an earlier epoch that completes after a reset is not
recorded, only counted (``discarded_after_reset``), so an experiment's figures never hold
a request of the one before.

**Summaries** (:meth:`Ledger.summary`) are over ``ok`` records only: TTFT is first content
token written - request received (streamed requests with at least one token), e2e is
ended - received (every ``ok`` request, streamed or not), ITL the gaps between consecutive
token writes of one stream, and TPOT per stream ``(last - first token) / (tokens - 1)``
(streams of two tokens or more). The ledger keeps counts and sums as records arrive and
the four distributions as :class:`~pyattacker.servers._llm_values.Values`, so a summary
costs work only for what is new (:meth:`Ledger.steps` does it in bounded slices).
"""

from __future__ import annotations

import enum
from array import array
from collections.abc import Iterator
from itertools import islice
from operator import sub
from typing import Any

from pyattacker.servers._llm_values import PERCENTILES, Values

__all__ = ["PERCENTILES", "Epoch", "Ledger", "Outcome", "Record"]


class Outcome(enum.StrEnum):
    """How a recorded request ended (see the module docstring)."""

    OK = "ok"
    ERROR = "error"
    FAULT = "fault"
    CUT = "cut"
    DROPPED = "dropped"


class Epoch:
    """The time from one reset (or the start) to the next: what a request belongs to.

    ``origin`` is t = 0 of the storm windows; ``ordinals`` numbers each model's requests
    for their dice (:meth:`LlmCore.rng <pyattacker.servers._llm_core.LlmCore.rng>`);
    ``received`` counts the completion requests received in it.
    """

    __slots__ = ("number", "ordinals", "origin", "received")

    def __init__(self, number: int, origin: float) -> None:
        self.number = number
        self.origin = origin
        self.ordinals: dict[str, int] = {}
        self.received = 0

    def __repr__(self) -> str:
        return f"<Epoch {self.number} from {self.origin:.6f}, {self.received} received>"


class Record:
    """The truth about one completion request (attempt). ``None`` where it did not happen."""

    __slots__ = (
        "completion_tokens",
        "end",
        "epoch",
        "error",
        "finish_reason",
        "id",
        "kind",
        "model",
        "outcome",
        "prompt_tokens",
        "received",
        "started",
        "status",
        "stream",
        "token_times",
    )

    def __init__(self, request_id: str, kind: str, received: float, epoch: Epoch) -> None:
        self.id = request_id
        self.kind = kind
        self.received = received
        self.epoch = epoch
        self.model: str | None = None
        self.stream = False
        self.status: int | None = None
        self.outcome = Outcome.DROPPED
        self.error: str | None = None
        self.started: float | None = None
        # every content token's write, the first included; 8 bytes a token on long runs
        self.token_times = array("d")
        self.end: float | None = None
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.finish_reason: str | None = None

    def as_dict(self, *, times: bool = True) -> dict[str, Any]:
        """Every field, plus ``first_token``, ``ttft`` and ``e2e`` (``None`` when undefined);
        without ``token_times`` when ``times`` is false."""
        first = self.token_times[0] if self.token_times else None
        fields = {
            "id": self.id,
            "model": self.model,
            "endpoint": self.kind,
            "stream": self.stream,
            "status": self.status,
            "outcome": str(self.outcome),
            "error": self.error,
            "received": self.received,
            "started": self.started,
            "first_token": first,
            "token_times": self.token_times.tolist(),
            "end": self.end,
            "ttft": None if first is None else first - self.received,
            "e2e": None if self.end is None else self.end - self.received,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "finish_reason": self.finish_reason,
        }
        if not times:
            del fields["token_times"]
        return fields

    def __repr__(self) -> str:
        return f"<Record {self.id} {self.status} {self.outcome} tokens={self.completion_tokens}>"


class Ledger:
    """Every completed record of the current epoch, in the order they ended, and their
    running counts and distributions."""

    __slots__ = (
        "_completion",
        "_outcomes",
        "_prompt",
        "_statuses",
        "discarded",
        "e2e",
        "epoch",
        "itl",
        "records",
        "tpot",
        "ttft",
    )

    def __init__(self, epoch: Epoch) -> None:
        self._start(epoch)

    def _start(self, epoch: Epoch) -> None:
        self.epoch = epoch
        self.records: list[Record] = []
        self.discarded = 0  # records of an earlier epoch that completed in this one
        self._statuses: dict[int, int] = {}
        self._outcomes: dict[str, int] = {}
        self._prompt = self._completion = 0
        self.ttft, self.e2e, self.itl, self.tpot = Values(), Values(), Values(), Values()

    def add(self, record: Record) -> None:
        """Record ``record`` (complete), or count it as discarded if it is of an older epoch."""
        if record.epoch is not self.epoch:
            self.discarded += 1
            return
        self.records.append(record)
        if record.status is not None:
            self._statuses[record.status] = self._statuses.get(record.status, 0) + 1
        outcome = record.outcome
        self._outcomes[outcome] = self._outcomes.get(outcome, 0) + 1
        if outcome is not Outcome.OK:
            return
        self._prompt += record.prompt_tokens
        self._completion += record.completion_tokens
        if record.end is not None:
            self.e2e.add(record.end - record.received)
        times = record.token_times
        if record.stream and times:
            self.ttft.add(times[0] - record.received)
            if len(times) > 1:
                self.tpot.add((times[-1] - times[0]) / (len(times) - 1))
                self.itl.extend(map(sub, islice(times, 1, None), times))

    def clear(self, epoch: Epoch) -> int:
        """Start ``epoch`` with nothing recorded; return how many records were forgotten."""
        count = len(self.records)
        self._start(epoch)
        return count

    def steps(self) -> Iterator[None]:
        """The work a :meth:`summary` needs, in bounded steps (see ``Values.step``)."""
        for values in (self.ttft, self.e2e, self.itl, self.tpot):
            yield from values.steps()

    def summary(self) -> dict[str, Any]:
        """Counts by status and outcome, throttled (429s), token totals, records discarded
        after a reset, and the exact distributions of TTFT, e2e, ITL and TPOT (see the
        module docstring). Cheap once :meth:`steps` ran; does what is left otherwise."""
        result = self.counts()
        for name, values in self.distributions().items():
            result[name] = values.summary()
        return result

    def counts(self) -> dict[str, Any]:
        """:meth:`summary` without the distributions: costs nothing."""
        statuses, outcomes = self._statuses, self._outcomes
        return {
            "requests": len(self.records),
            "statuses": {str(s): statuses[s] for s in sorted(statuses)},
            "outcomes": {str(o): outcomes[o] for o in sorted(outcomes)},
            "throttled": statuses.get(429, 0),
            "prompt_tokens": self._prompt,
            "completion_tokens": self._completion,
            "discarded_after_reset": self.discarded,
        }

    def distributions(self) -> dict[str, Values]:
        """The four distributions by their /stats key."""
        return {"ttft": self.ttft, "e2e": self.e2e, "itl": self.itl, "tpot": self.tpot}

    def __repr__(self) -> str:
        return f"<Ledger epoch {self.epoch.number}: {len(self.records)} records>"
