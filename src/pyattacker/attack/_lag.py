"""``LagProbe``: how late the generator's own event loop ran, so a report can say when its
latencies include our delay rather than the server's.

Every timestamp the engine takes (a send, a first byte, a token) is taken when the loop
gets round to the callback that sees it. While the loop is busy (too many streams, a
garbage collection, a neighbour stealing the CPU) the bytes wait in the socket and are
stamped late: the server did nothing wrong, the generator did. The open model's dispatch
delay shows this for sends; nothing showed it for reads. The probe is a timer due every
``every`` seconds, on a grid fixed when it starts, that records how late each instant of
the grid was served (the time it ran minus the time it was due) into a histogram.
A busy loop is late for every callback alike, so the probe's lag bounds how late any read
was stamped. When the loop stalls past several instants, each one missed is recorded with
its own lateness when the loop comes back (a 100 ms stall: 100, 90, ... 10 ms): the
histogram is the share of the run's *time* the loop was that late, as a read arriving at
a random moment would find it, not one sample per stall (the coordinated omission the
attack's own clocks avoid).

Resolution: on Linux the probe rides the run's :class:`~pyattacker.clock.PreciseTimer`
(one kernel timer, which never fires early and wakes the loop once an instant, shared
with the open model's schedule), so an idle loop reads tens of microseconds, the kernel's
wake-up. Elsewhere it uses the loop's own timer, which fires up to about a millisecond
early or late by itself (see :meth:`pyattacker.clock.LoopClock.sleep_until`), so lags under
~1 ms are timer noise there; the report warns only well above that. An early firing
counts as 0.

When a lag is worth a warning (:func:`lag_is_large`): a lag matters for what it does to
the figures, so it is judged against the latencies measured, not alone. A p99 lag of 6 ms
on a machine shared with other work is a fifth of a 30 ms median but a rounding error on
a 2 s one; a warning that fires on both is one users learn to ignore.
"""

from __future__ import annotations

from collections.abc import Callable

from pyattacker.attack._time import CallAt, Cancellable
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
    """A timer due every ``every`` seconds of ``now``'s clock, recording how late it ran
    into :attr:`lag`. ``call_at(deadline, callback)`` calls ``callback()`` at ``deadline``
    (``now``'s clock) and returns a handle whose ``cancel()`` forgets it: the run's
    :attr:`~pyattacker.attack._time.RunTime.call_at`. :meth:`start` once, :meth:`stop` when
    the run is over."""

    __slots__ = ("_call_at", "_due", "_handle", "_now", "_recent", "every", "lag")

    def __init__(self, call_at: CallAt, now: Callable[[], float], every: float = 0.01) -> None:
        self._call_at = call_at
        self._now = now
        self.every = every
        self.lag = Histogram()
        self._due = 0.0
        self._handle: Cancellable | None = None
        self._recent = 0.0  # the largest lag since take_recent last read it

    def start(self) -> None:
        self._due = self._now() + self.every
        self._handle = self._call_at(self._due, self._fire)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def take_recent(self) -> float:
        """The largest lag since the last call (0 when on time), and start again: a
        worker's *current* lag, which names it while it falls behind, where the whole
        run's p99 would hide a stall of a second among thousands of timely ticks."""
        recent, self._recent = self._recent, 0.0
        return recent

    def _fire(self) -> None:
        now, due, every = self._now(), self._due, self.every
        late = now - due
        if late > self._recent:
            self._recent = late
        while True:  # this instant, and every later one the loop missed meanwhile
            self.lag.record(late if late > 0.0 else 0.0)
            due += every
            late = now - due
            if late < 0.0:
                break
        self._due = due
        self._handle = self._call_at(due, self._fire)
