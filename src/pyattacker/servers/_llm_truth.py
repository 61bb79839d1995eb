"""The mock LLM server's ground truth: one :class:`Record` per completion request.

Times are the server's monotonic clock in seconds (``time.monotonic()`` on a real loop:
the same clock as any process on the machine reading it). A record is complete, and
enters the :class:`Ledger`, when its response has ended (flush included) or its connection
was lost; requests still generating are counted as in flight, not recorded.

Outcomes: ``ok`` (a full, well-formed 200), ``error`` (an error status was answered),
``fault`` (a 200 deliberately wrong: ``not-openai``, ``broken-sse``), ``cut`` (the server
closed the connection mid-response on purpose), ``dropped`` (the client left first).

Summaries (:meth:`Ledger.summary`) are over ``ok`` records only: TTFT is first content
token written - request received (streamed requests with at least one token), e2e is
ended - received (every ``ok`` request, streamed or not), ITL the gaps between consecutive
token writes of one stream, and TPOT per stream ``(last - first token) / (tokens - 1)``
(streams of two tokens or more).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable
from itertools import pairwise
from typing import Any

from pyattacker.measure import exact_percentile

__all__ = ["PERCENTILES", "Ledger", "Record"]

#: The percentiles /stats reports, by key.
PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("p99.9", 99.9))


class Record:
    """The truth about one completion request (attempt). ``None`` where it did not happen."""

    __slots__ = (
        "completion_tokens",
        "end",
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

    def __init__(self, request_id: str, kind: str, received: float) -> None:
        self.id = request_id
        self.kind = kind
        self.received = received
        self.model: str | None = None
        self.stream = False
        self.status: int | None = None
        self.outcome = "dropped"
        self.error: str | None = None
        self.started: float | None = None
        # every content token's write, the first included; 8 bytes a token on long runs
        self.token_times = array("d")
        self.end: float | None = None
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.finish_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """Every field, plus ``first_token``, ``ttft`` and ``e2e`` (``None`` when undefined)."""
        first = self.token_times[0] if self.token_times else None
        return {
            "id": self.id,
            "model": self.model,
            "endpoint": self.kind,
            "stream": self.stream,
            "status": self.status,
            "outcome": self.outcome,
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

    def __repr__(self) -> str:
        return f"<Record {self.id} {self.status} {self.outcome} tokens={self.completion_tokens}>"


class Ledger:
    """Every completed record since the last :meth:`clear`, in the order they ended."""

    __slots__ = ("records",)

    def __init__(self) -> None:
        self.records: list[Record] = []

    def add(self, record: Record) -> None:
        self.records.append(record)

    def clear(self) -> int:
        count = len(self.records)
        self.records.clear()
        return count

    def summary(self) -> dict[str, Any]:
        """Counts by status and outcome, throttled (429s), token totals, and the exact
        distributions of TTFT, e2e, ITL and TPOT (see the module docstring)."""
        records = self.records
        statuses: dict[int, int] = {}
        outcomes: dict[str, int] = {}
        for record in records:
            if record.status is not None:
                statuses[record.status] = statuses.get(record.status, 0) + 1
            outcomes[record.outcome] = outcomes.get(record.outcome, 0) + 1
        ok = [r for r in records if r.outcome == "ok"]
        streams = [r for r in ok if r.stream and r.token_times]
        itl = [b - a for r in streams for a, b in pairwise(r.token_times)]
        return {
            "requests": len(records),
            "statuses": {str(s): statuses[s] for s in sorted(statuses)},
            "outcomes": {o: outcomes[o] for o in sorted(outcomes)},
            "throttled": statuses.get(429, 0),
            "prompt_tokens": sum(r.prompt_tokens for r in ok),
            "completion_tokens": sum(r.completion_tokens for r in ok),
            "ttft": distribution(r.token_times[0] - r.received for r in streams),
            "e2e": distribution(r.end - r.received for r in ok if r.end is not None),
            "itl": distribution(itl),
            "tpot": distribution(
                (r.token_times[-1] - r.token_times[0]) / (len(r.token_times) - 1)
                for r in streams
                if len(r.token_times) > 1
            ),
        }


def distribution(values: Iterable[float]) -> dict[str, Any]:
    """``count``, ``min``, ``mean``, the :data:`PERCENTILES` (nearest rank) and ``max``, in
    seconds; ``None`` for all but ``count`` when there are no values."""
    ordered = sorted(values)
    count = len(ordered)
    result: dict[str, Any] = {"count": count}
    result["min"] = ordered[0] if count else None
    result["mean"] = math.fsum(ordered) / count if count else None
    for key, q in PERCENTILES:
        result[key] = exact_percentile(ordered, q) if count else None
    result["max"] = ordered[-1] if count else None
    return result
