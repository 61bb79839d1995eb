"""``--early-us N`` of ``generator_cpu.py`` and ``accuracy.py``: a variant of the generator's
timer, for measuring only (the package does not ship it).

The open model sleeps on a kernel timer (``pyattacker.clock.PreciseTimer``) armed for each
arrival's instant. This variant arms it ``N`` microseconds early and polls the clock for
the rest: less dispatch delay for more CPU. benchmarks/README.md ("Session end") has the
figures that decided against it.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["wake_early"]


def wake_early(microseconds: float) -> None:
    """From now on, in this process, every ``PreciseTimer`` wakes ``microseconds`` before
    each instant and polls the clock up to it (0: leave the timer as shipped)."""
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
