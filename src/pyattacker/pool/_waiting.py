"""The pool's wait queue: who is parked, who gets woken, and the cooldown notifier.

Three kinds of wake-up, each as narrow as it can be:

- **Hand-over** (a release, a raised limit): each freed unit of a resource is held for the
  first parked waiter, in arrival order, whose selector accepts that resource. Nobody else
  is woken, and a caller arriving meanwhile finds the unit taken (no barging).
- **Everyone** (a health or membership change): the change may help any selector, so every
  waiter retries.
- **The cooldown notifier**: when resources are blocked by time (a DEGRADED cooldown, a
  throttle's "not before", a paced key's next instant), no release may ever come. One
  task per pool, alive only while somebody waits, sleeps on the pool's clock until the
  earliest *future* moment a blocked resource comes back, then wakes everyone. Expired
  deadlines and DEAD/REVOKED resources arm nothing (a zero-delay timer would livelock a
  simulation; the dead never come back), and a deadline earlier than the armed one
  replaces it. One exception, used once: a block that ended between a caller's missed
  try and its parking (real time passes between the two) wakes it at once; nothing else
  would.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import deque
from collections.abc import Callable, Sequence

from pyattacker.clock import Clock
from pyattacker.pool._selector import Selector
from pyattacker.pool._slot import Slot

__all__ = ["WaitQueue"]


class _Waiter:
    __slots__ = ("future", "queued", "reservation", "selector")

    def __init__(self, selector: Selector, future: asyncio.Future[None]) -> None:
        self.selector = selector
        self.future = future
        self.reservation: Slot | None = None
        # Still in the queue? A waiter served by hand_over/wake_all has left it already, so
        # its exit costs O(1) instead of a scan of thousands of waiters (an attack at high
        # rate parks that many: the scan made every release O(n) and the run quadratic).
        self.queued = True


class WaitQueue:
    def __init__(
        self,
        name: str,
        clock: Clock,
        slots: Callable[[], Sequence[Slot]],
        *,
        warn_after_s: float | None,
        is_stuck: Callable[[], bool],
        on_stuck: Callable[[float], None],
    ) -> None:
        self._name = name
        self._clock = clock
        self._slots = slots
        self._warn_after_s = warn_after_s
        self._is_stuck = is_stuck
        self._on_stuck = on_stuck
        self._waiters: deque[_Waiter] = deque()
        self._notifier: asyncio.Task[None] | None = None
        self._notifier_deadline = math.inf
        # When the pool last found nothing usable for a caller (``Pool.try_acquire``). A
        # caller parks after its try, and a rest may end in between (a retry timed to a
        # Retry-After tries a hair before its end): the notifier looks from the try.
        self.missed_at = math.inf

    def __len__(self) -> int:
        return len(self._waiters)

    async def wait(self, selector: Selector, timeout: float | None) -> bool:
        """Park until woken (True) or until ``timeout`` passes (False)."""
        if timeout is not None and timeout <= 0:
            return False
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        waiter = _Waiter(selector, future)
        self._waiters.append(waiter)
        since, self.missed_at = self.missed_at, math.inf  # each miss serves one wait
        self.arm_notifier(since=since)
        returned = False
        try:
            woken = await self._park(future, timeout)
            returned = True
            return woken
        finally:
            if not future.done():
                future.cancel()
            if waiter.queued:  # timed out or cancelled: still queued (rare, so O(n) is fine)
                waiter.queued = False
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            slot = waiter.reservation
            if slot is not None:
                slot.reserved -= 1
                if returned:
                    # The caller takes the unit now, unless it prefers another resource:
                    # look again once it has run, so the unit is never stranded.
                    loop.call_soon(self.hand_over, slot)
                else:
                    self.hand_over(slot)
            if not self._waiters:
                self._disarm_notifier()

    async def _park(self, future: asyncio.Future[None], timeout: float | None) -> bool:
        warn = self._warn_after_s
        if warn is not None and (timeout is None or timeout > warn):
            if await _wait(future, warn):
                return True
            if self._notifier is None and self._is_stuck():
                self._on_stuck(warn)
            timeout = None if timeout is None else timeout - warn
        return await _wait(future, timeout)

    def hand_over(self, slot: Slot) -> None:
        """Hold each free unit of ``slot`` for the first parked waiter that accepts it."""
        waiters = self._waiters
        if not waiters:
            return
        now = self._clock.now()
        i = 0
        while i < len(waiters) and slot.usable(now):
            waiter = waiters[i]
            if waiter.future.done() or not waiter.selector.matches(slot.resource):
                i += 1
                continue
            del waiters[i]  # O(1) for the head of a deque, the usual case
            waiter.queued = False
            waiter.reservation = slot
            slot.reserved += 1
            waiter.future.set_result(None)

    def wake_all(self) -> None:
        waiters, self._waiters = self._waiters, deque()
        for waiter in waiters:
            waiter.queued = False
            if not waiter.future.done():
                waiter.future.set_result(None)
        self._disarm_notifier()

    def arm_notifier(self, since: float = math.inf) -> None:
        """Make sure someone wakes the waiters when the first blocked resource comes back:
        one blocked at ``since`` (a caller's missed try) or now, whichever is earlier; one
        that came back between the two is woken for at once."""
        if not self._waiters:
            return
        at = min(self._clock.now(), since)
        times = [t for s in self._slots() if (t := s.comes_back_at(at)) is not None]
        if not times:
            return
        deadline = min(times)
        if self._notifier is not None and self._notifier_deadline <= deadline:
            return
        self._disarm_notifier()
        self._notifier_deadline = deadline
        # The waiters' loop, not "the running one": a report may come from plain sync code.
        loop = self._waiters[0].future.get_loop()
        self._notifier = loop.create_task(
            self._notify_at(deadline), name=f"pyattacker.pool[{self._name}].cooldown"
        )

    def _disarm_notifier(self) -> None:
        if self._notifier is not None:
            self._notifier.cancel()
            self._notifier = None
            self._notifier_deadline = math.inf

    async def _notify_at(self, deadline: float) -> None:
        await self._clock.sleep(max(0.0, deadline - self._clock.now()))
        self._notifier = None
        self._notifier_deadline = math.inf
        self.wake_all()


async def _wait(future: asyncio.Future[None], timeout: float | None) -> bool:
    if timeout is None:
        await future
        return True
    # asyncio.wait, not asyncio.timeout: a timeout must leave the future alive for the
    # caller to keep waiting on (the deadlock warning waits in two legs).
    done, _ = await asyncio.wait((future,), timeout=timeout)
    return bool(done)
