"""The clocks of ``attack --ray``: an actor's wall-clock offset, and the common clock.

The machines of a cluster share no monotonic clock: the start instant travels on their
wall clocks, each actor's offset from the driver's measured by round trips
(:func:`measure_offset`), and each worker's counts are moved onto one clock that reads 0
at the common start (:func:`on_common_clock`) before they are merged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from pyattacker.attack._result import RunTimes
from pyattacker.attack._workers import WorkerOutcome
from pyattacker.clock import epoch_time

__all__ = ["ROUND_TRIPS", "ClockOffset", "measure_offset", "on_common_clock"]

#: Clock readings per actor; the one with the shortest round trip is kept.
ROUND_TRIPS = 7


@dataclass(frozen=True, slots=True)
class ClockOffset:
    """An actor's wall clock minus the driver's (``offset_s``), within ``uncertainty_s``."""

    offset_s: float
    uncertainty_s: float


def measure_offset(
    ask: Callable[[], float], now: Callable[[], float] = epoch_time, trips: int = ROUND_TRIPS
) -> ClockOffset:
    """The offset of the clock ``ask`` reads (one round trip each call) from ``now``'s:
    of ``trips`` readings, the one with the shortest round trip, taken at its midpoint,
    so the true offset lies within half that round trip (if the way out and back may
    take any share of it)."""
    best: tuple[float, float] | None = None
    for _ in range(max(1, trips)):
        sent = now()
        theirs = ask()
        back = now()
        trip = back - sent
        if best is None or trip < best[0]:
            best = (trip, theirs - (sent + back) / 2)
    assert best is not None
    return ClockOffset(offset_s=best[1], uncertainty_s=max(0.0, best[0]) / 2)


def on_common_clock(outcome: WorkerOutcome) -> WorkerOutcome:
    """``outcome`` with its times counted from its start instant (which reads 0): the
    common clock of workers whose own monotonic clocks differ. Consumes ``outcome``."""
    start = outcome.times.start
    outcome.tally.rebase(0.0)
    t = outcome.times
    times = RunTimes(
        started_at=t.started_at,
        start=0.0,
        schedule_end=t.schedule_end - start,
        end=t.end - start,
        last_offset=t.last_offset,
    )
    return replace(outcome, times=times)
