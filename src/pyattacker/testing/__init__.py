"""Fakes that ship with pyattacker, for your tests and ours.

- :class:`VirtualClock` / :func:`run_virtual`: run a coroutine on virtual time (timers jump,
  nothing sleeps for real; a stuck simulation raises instead of hanging).
- :class:`ScaledClock`: the same code on real time sped up, real I/O allowed.
- :class:`VirtualEventLoop` / :class:`ScaledEventLoop`: the loops underneath, for harnesses
  that manage loops themselves.
"""

from pyattacker.testing._clocks import ScaledClock, VirtualClock, run_virtual
from pyattacker.testing._loops import ScaledEventLoop, VirtualEventLoop

__all__ = [
    "ScaledClock",
    "ScaledEventLoop",
    "VirtualClock",
    "VirtualEventLoop",
    "check_algorithm",
    "run_virtual",
]

from pyattacker.testing._conformance import check_algorithm
