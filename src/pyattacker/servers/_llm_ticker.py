"""One timer for every token of every stream: a heap of due times.

Arming a loop timer per token costs more than writing the token (a handle and a libuv
timer each, on uvloop). :class:`Ticker` keeps the due times in a heap and holds a single
timer, for the earliest; when it fires, every exchange whose time has come writes its
token, in due order. Under load, one timer serves many tokens. That timer is the server's
:class:`~pyattacker.servers._timer.ServerTimer`: the kernel's where there is one.

Guarantees: a callback never runs before its due time on the clock it was given (loop
timers that fire early, as uvloop's millisecond timers do, just re-arm for the rest);
callbacks due at the same time run in the order they were scheduled. A cancelled entry is
not removed, only skipped: whoever scheduled it checks, when called, that it still wants
the call (see ``Exchange.due``).
"""

from __future__ import annotations

import math
from heapq import heappop, heappush
from itertools import count
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyattacker.servers._timer import Cancellable, ServerTimer

__all__ = ["Due", "Ticker"]


class Due(Protocol):
    """Something to call at a due time."""

    def due(self, at: float) -> None:
        """Called once the clock reads at least ``at`` (the time it was scheduled for)."""


class Ticker:
    """The due times of one loop's exchanges; see the module docstring."""

    __slots__ = ("_armed", "_call_at", "_heap", "_now", "_order", "_timer")

    def __init__(self, timer: ServerTimer) -> None:
        self._call_at, self._now = timer.call_at, timer.now
        self._heap: list[tuple[float, int, Due]] = []
        self._order = count()
        self._timer: Cancellable | None = None
        self._armed = math.inf  # the due time the timer is set for

    def at(self, when: float, item: Due) -> None:
        """Call ``item.due(when)`` once the clock reads ``when`` or later."""
        heappush(self._heap, (when, next(self._order), item))
        if when < self._armed:
            self._arm(when)

    def __len__(self) -> int:
        return len(self._heap)

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._armed = when
        self._timer = self._call_at(when, self._fire)

    def _fire(self) -> None:
        # Nothing arms the loop timer while callbacks run (they schedule their next call):
        # it is armed once, at the end, for whatever is due first by then.
        self._timer, self._armed = None, -math.inf
        heap, now = self._heap, self._now()
        try:
            while heap:
                when = heap[0][0]
                if when > now:
                    now = self._now()  # the tokens just written took time: look again
                    if when > now:
                        break
                heappop(heap)[2].due(when)
        finally:  # even after a callback raised: one broken stream must not stop the rest
            self._armed = math.inf
            if heap:
                self._arm(heap[0][0])

    def __repr__(self) -> str:
        return f"<Ticker {len(self._heap)} due, next at {self._armed}>"
