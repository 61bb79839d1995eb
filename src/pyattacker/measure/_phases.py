"""``Phases``: where each attempt's time went, as k6 breaks it down.

Per attempt that was sent (every attempt of every request, hops and retries included):

* ``blocked`` — ``sent - scheduled`` less the new connection's setup: the time the
  attempt waited for our side (a busy generator, the engine's queue, a full pool);
* ``connect`` — the TCP connect of the new connection it opened (only those that did);
* ``tls`` — the TLS handshake of that connection (``https`` only);
* ``waiting`` — ``first_byte - sent``: the server's time to its first byte;
* ``receiving`` — ``end - first_byte``: reading the rest of the answer.

So a new connection's setup is reported as such, not hidden in the dispatch delay:
``blocked + connect + tls`` is the attempt's ``sent - scheduled``, and ``waiting +
receiving`` its ``end - sent``. A span that comes out negative is counted as 0.
``connections`` counts the attempts that opened a connection. Mergeable (merging equals
adding every attempt to one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyattacker.measure._binned import Binned
from pyattacker.measure._histogram import Histogram
from pyattacker.measure._records import Attempt, RequestRecord

if TYPE_CHECKING:
    from pyattacker.measure._batch import OkBatch

__all__ = ["PHASES", "Phases"]

PHASES = ("blocked", "connect", "tls", "waiting", "receiving")
"""The phases, in the order an attempt goes through them."""


class Phases:
    """Histograms of the five phases (:data:`PHASES`) of the attempts added."""

    __slots__ = ("blocked", "connect", "connections", "receiving", "tls", "waiting")

    def __init__(self) -> None:
        self.blocked = Histogram()
        self.connect = Histogram()
        self.tls = Histogram()
        self.waiting = Histogram()
        self.receiving = Histogram()
        self.connections = 0

    def add_attempt(self, attempt: Attempt) -> None:
        """Add one attempt's phases (the ones it reached)."""
        sent = attempt.sent
        if sent is None:
            return
        setup = 0.0
        if attempt.connect is not None:
            self.connections += 1
            self.connect.record(max(attempt.connect, 0.0))
            setup = attempt.connect
        if attempt.tls is not None:
            self.tls.record(max(attempt.tls, 0.0))
            setup += attempt.tls
        self.blocked.record(max(sent - attempt.scheduled - setup, 0.0))
        first_byte, end = attempt.first_byte, attempt.end
        if first_byte is not None:
            self.waiting.record(first_byte - sent if first_byte > sent else 0.0)
            if end is not None:
                self.receiving.record(end - first_byte if end > first_byte else 0.0)

    def add_record(self, record: RequestRecord) -> None:
        """Add every attempt of ``record``."""
        for attempt in record.attempts:
            self.add_attempt(attempt)

    def add_ok_batch(self, batch: OkBatch) -> None:
        """Add a batch of plain OK answers, none of which opened a connection (what
        :meth:`add_attempt` of each does, from the spans the batch has binned)."""
        if not batch.count:
            return
        self.blocked.add_binned(batch.delays)
        self.waiting.add_binned(batch.ttfbs)
        if batch.ttfbs is batch.services:  # every answer came in the read it began in
            self.receiving.record(0.0, batch.count)
            return
        services, ttfbs = batch.services.values, batch.ttfbs.values
        if len(services) == len(ttfbs):  # else some answer had no first byte: not HTTP's
            self.receiving.add_binned(
                Binned([s - t if s > t else 0.0 for s, t in zip(services, ttfbs, strict=True)])
            )

    def merge(self, other: Phases) -> None:
        for name in PHASES:
            getattr(self, name).merge(getattr(other, name))
        self.connections += other.connections

    def to_dict(self) -> dict[str, Any]:
        """``connections`` and, per phase, its summary (count, mean, percentiles, seconds)."""
        data: dict[str, Any] = {"connections": self.connections}
        for name in PHASES:
            data[name] = getattr(self, name).summary().to_dict()
        return data

    def __repr__(self) -> str:
        return f"Phases(attempts={self.blocked.count}, connections={self.connections})"
