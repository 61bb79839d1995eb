"""``ServerTimer``: when a server's hold or token is due, on the best timer the loop has.

A server's waits are its truth: a hold of ``fixed:1ms`` must last 1 ms, a 2 ms gap between
tokens 2 ms. uvloop's timers count whole milliseconds: a 1 ms hold came out 1 to 2 ms,
which put a step in the truth's tail that a client's percentiles straddled. On Linux a
:class:`~pyattacker.clock.PreciseTimer` (the kernel's ``timerfd``) never fires early and
late only by a wake-up. Elsewhere, and on a simulated loop, the loop's own timers are used;
they may fire early, so a caller re-checks its deadline on its clock and calls again for
the rest. :class:`~pyattacker.servers._listening.ListeningServer` opens one when it starts
and closes it when it stops.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pyattacker.clock import LoopClock, PreciseTimer, TimerEntry

__all__ = ["Cancellable", "ServerTimer"]

# What ``ServerTimer.call_at`` returns: its ``cancel()`` forgets the call.
Cancellable = asyncio.TimerHandle | TimerEntry


class ServerTimer:
    """Calls at instants of :attr:`now`'s clock on ``loop``: the clock fit for the loop
    (the kernel timer's, on a real one), or ``now`` on a simulated loop (a test's clock;
    there is no kernel timer there); see the module docstring."""

    __slots__ = ("kernel", "loop", "now")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, now: Callable[[], float] | None = None
    ) -> None:
        self.loop = loop
        self.now: Callable[[], float] = now or LoopClock().reader()
        self.kernel = PreciseTimer.open(loop)  # None: the loop's timers

    def call_at(self, deadline: float, callback: Callable[[], object]) -> Cancellable:
        """Call ``callback()`` at ``deadline`` or later (on the loop's timers, possibly a
        little before it: the caller checks)."""
        if self.kernel is not None:
            return self.kernel.call_at(deadline, callback)
        return self.loop.call_later(max(0.0, deadline - self.now()), callback)

    def close(self) -> None:
        """Let the kernel's timer go, cancelling what waits on it (idempotent)."""
        if self.kernel is not None:
            self.kernel.close()
