"""``LagProbe``: how late the generator's own event loop ran, so a report can say when its
latencies include our delay rather than the server's.

Every timestamp the engine takes (a send, a first byte, a token) is taken when the loop
gets round to the callback that sees it. While the loop is busy (too many streams, a
garbage collection, a neighbour stealing the CPU) the bytes wait in the socket and are
stamped late: the server did nothing wrong, the generator did. The open model's dispatch
delay shows this for sends; nothing showed it for reads. The probe is a timer that fires
every ``every`` seconds and records how late it ran (its real time minus the time it was
due), into a histogram. A busy loop is late for every callback alike, so the probe's lag
bounds how late any read was stamped.

Resolution: uvloop's timers fire up to about a millisecond early or late by themselves
(see :meth:`pyattacker.clock.LoopClock.sleep_until`), so lags under ~1 ms are
timer noise; the report warns only well above that. An early firing counts as 0.

When a lag is worth a warning (:func:`lag_is_large`): a lag matters for what it does to
the figures, so it is judged against the latencies measured, not alone. A p99 lag of 6 ms
on a machine shared with other work is a fifth of a 30 ms median but a rounding error on
a 2 s one; a warning that fires on both is one users learn to ignore.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pyattacker.measure import Histogram

__all__ = ["LAG_SHARE", "LAG_WARN_S", "LagProbe", "lag_is_large"]

LAG_WARN_S = 0.005
"""The floor of :func:`lag_is_large` for the loop lag: below it, never a warning."""

LAG_SHARE = 0.1
"""The share of the median latency a lag's p99 must pass to be worth a warning."""


def lag_is_large(
    lag_p99: float | None, latency_p50: float | None, floor: float = LAG_WARN_S
) -> bool:
    """Whether a delay of our own (its p99: the loop's lag, or the dispatch delay) is large
    against the latencies measured: ``lag_p99 > max(floor, LAG_SHARE * latency_p50)``.

    ``latency_p50`` is the sent clock's median (the server's time plus the network's; None
    when no answer was timed: then the floor alone decides). Past that line, one
    measurement in a hundred carries more of our delay than a tenth of a typical
    request's time: the upper percentiles include our delay, not the server's.
    """
    if lag_p99 is None:
        return False
    return lag_p99 > max(floor, LAG_SHARE * (latency_p50 or 0.0))


class LagProbe:
    """A self-rescheduling timer on ``loop`` recording its lateness (seconds, ``now``'s
    clock) into :attr:`lag`. :meth:`start` once, :meth:`stop` when the run is over."""

    __slots__ = ("_due", "_handle", "_loop", "_now", "_recent", "every", "lag")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, now: Callable[[], float], every: float = 0.01
    ) -> None:
        self._loop = loop
        self._now = now
        self.every = every
        self.lag = Histogram()
        self._due = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self._recent = 0.0  # the largest lag since take_recent last read it

    def start(self) -> None:
        self._arm()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _arm(self) -> None:
        self._due = self._now() + self.every
        self._handle = self._loop.call_at(self._loop.time() + self.every, self._fire)

    def take_recent(self) -> float:
        """The largest lag since the last call (0 when on time), and start again: a
        worker's *current* lag, which names it while it falls behind, where the whole
        run's p99 would hide a stall of a second among thousands of timely ticks."""
        recent, self._recent = self._recent, 0.0
        return recent

    def _fire(self) -> None:
        late = self._now() - self._due
        if late > self._recent:
            self._recent = late
        self.lag.record(late if late > 0.0 else 0.0)
        self._arm()
