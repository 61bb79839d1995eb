"""``--early-us N`` of ``generator_cpu.py`` and ``accuracy.py``: a variant of the generator's
timer, for measuring only (the package does not ship it).

The open model sleeps on a kernel timer (``pyattacker.clock.PreciseTimer``) armed for each
arrival's instant. This variant arms it ``N`` microseconds early and polls the clock for
the rest: less dispatch delay for more CPU. Where the schedule has its own setting
(``WAKE_EARLY_S``) that is set, and the rest is polled by loop turns that serve I/O;
on older trees the timer itself is patched to spin through the last stretch.
benchmarks/README.md ("Session end" and "a schedule driven by its timer") has the figures.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["wake_early"]


def wake_early(microseconds: float, share: float | None = None) -> None:
    """From now on, in this process, the open model's timer wakes ``microseconds`` before
    each instant and polls the clock up to it (where the schedule has ``WAKE_EARLY_S``:
    at most that early, 0 for never, and with ``share`` its ``POLL_SHARE``, the most of a
    wait it may poll; elsewhere 0 leaves the timer as shipped and ``share`` is ignored)."""
    try:  # a tree whose schedule has the timer call it back: its own early wake
        from pyattacker.attack import _schedule

        if hasattr(_schedule, "WAKE_EARLY_S"):
            _schedule.WAKE_EARLY_S = microseconds / 1e6
            if share is not None:
                _schedule.POLL_SHARE = share
            return
    except ImportError:
        pass
    if microseconds <= 0:
        return
    from pyattacker.clock import PreciseTimer

    early = microseconds / 1e6
    arm, fire = PreciseTimer._arm, PreciseTimer._fire

    def arm_early(self: Any, deadline: float) -> None:
        arm(self, deadline - early)
        self._armed = deadline  # what `at` compares new instants with

    def fire_on_time(self: Any) -> None:
        heap = self._heap
        if heap:
            due = heap[0][0]
            while time.monotonic() < due <= time.monotonic() + early:
                pass  # woken early on purpose: poll the last stretch
        fire(self)

    PreciseTimer._arm = arm_early  # type: ignore[method-assign]
    PreciseTimer._fire = fire_on_time  # type: ignore[method-assign]
