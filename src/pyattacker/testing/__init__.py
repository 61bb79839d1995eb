"""Fakes that ship with pyattacker, for your tests and ours.

- :class:`VirtualClock` / :func:`run_virtual`: run a coroutine on virtual time (timers jump,
  nothing sleeps for real; a stuck simulation raises instead of hanging).
- :class:`ScaledClock`: the same code on real time sped up, real I/O allowed.
- :class:`VirtualEventLoop` / :class:`ScaledEventLoop`: the loops underneath, for harnesses
  that manage loops themselves.

The loops and clocks live in the kernel (``pyattacker._sim``), because the algorithm
benchmark runs on them too; this module is their public face.
"""

from pyattacker._sim import (
    ScaledClock,
    ScaledEventLoop,
    VirtualClock,
    VirtualEventLoop,
    run_virtual,
)

__all__ = [
    "ScaledClock",
    "ScaledEventLoop",
    "VirtualClock",
    "VirtualEventLoop",
    "check_algorithm",
    "run_virtual",
]

from pyattacker.testing._conformance import check_algorithm
