"""Simulated time: the virtual and scaled event loops and the clocks that own them.

This is kernel code, not a test fake: the algorithm benchmark runs every scenario on these
loops, and the tests run on them too. It lives beside ``clock`` at the bottom of the layers
(see "Layers" and "The time seam" in ``docs/architecture.md``) and imports nothing but
``errors`` and ``_checks``, so ``benchmark`` can depend on it without depending on
``testing``. It is private: users reach the same objects through :mod:`pyattacker.testing`,
which re-exports them under their public names.
"""

from pyattacker._sim._clocks import ScaledClock, VirtualClock, run_virtual
from pyattacker._sim._loops import ScaledEventLoop, VirtualEventLoop

__all__ = ["ScaledClock", "ScaledEventLoop", "VirtualClock", "VirtualEventLoop", "run_virtual"]
