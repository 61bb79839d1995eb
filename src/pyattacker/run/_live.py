"""The live pipelines of a run: the room left for more, the parked ones, and stopping.

A pipeline is *live* from its admission until its coroutine ends, whether it is queued
for a worker slot, running, committing or *parked* (waiting out a retry delay, holding no
slot). Admission waits for room here; the executor parks here; stopping happens here:
admission ends at once, parked pipelines wake (and are recorded ``interrupted``), and the
attempts in flight get ``grace_s`` to finish before every live pipeline is cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from pyattacker.run._stats import RunCounters

__all__ = ["LivePipelines"]


class LivePipelines:
    """Live pipelines by id, at most ``admission`` of them; see the module docstring.

    ``scrub`` cleans a stop reason of secrets before it is kept (it is recorded)."""

    def __init__(
        self,
        *,
        admission: int,
        grace_s: float,
        counters: RunCounters,
        scrub: Callable[[str], str],
    ) -> None:
        self._admission = admission
        self._grace_s = grace_s
        self._counters = counters
        self._scrub = scrub
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._seeds: dict[str, str] = {}  # seed digest of each live pipeline
        self._room = asyncio.Event()  # set when a live pipeline ends
        self._parked: set[asyncio.Future[bool]] = set()
        self.stop_reason: str | None = None

    # -- membership -----------------------------------------------------------------------

    def __contains__(self, pipeline_id: object) -> bool:
        return pipeline_id in self._tasks

    def seed_of(self, pipeline_id: str) -> str | None:
        """The seed digest of a live pipeline (None: not live)."""
        return self._seeds.get(pipeline_id)

    def start(self, pipeline_id: str, seed_digest: str, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` as the live pipeline ``pipeline_id`` until it ends."""
        self._counters.admitted += 1
        self._counters.live += 1
        task = asyncio.get_running_loop().create_task(work)
        self._tasks[pipeline_id] = task
        self._seeds[pipeline_id] = seed_digest
        task.add_done_callback(lambda _: self._ended(pipeline_id))

    def _ended(self, pipeline_id: str) -> None:
        self._tasks.pop(pipeline_id, None)
        self._seeds.pop(pipeline_id, None)
        self._counters.live -= 1
        self._room.set()

    async def wait_room(self) -> int:
        """Wait until fewer than ``admission`` pipelines are live; the free room."""
        while self._counters.live >= self._admission:
            self._room.clear()
            await self._room.wait()
        return self._admission - self._counters.live

    async def drain(self) -> None:
        """Wait until no pipeline is live."""
        while self._tasks:
            await asyncio.wait(tuple(self._tasks.values()))

    # -- stopping -------------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self.stop_reason is not None

    def stop(self, reason: str) -> None:
        """Stop admitting, wake parked pipelines, give running attempts ``grace_s``."""
        if self.stop_reason is not None:
            return
        self.stop_reason = self._scrub(reason)
        for parked in tuple(self._parked):
            if not parked.done():
                parked.set_result(False)
        loop = asyncio.get_running_loop()
        loop.call_later(self._grace_s, self.cancel_all)

    def cancel_all(self) -> None:
        """Cancel every live pipeline now (the grace period is over, or a second signal)."""
        for task in tuple(self._tasks.values()):
            task.cancel()

    async def park(self, delay_s: float) -> bool:
        """Wait out a retry delay holding no worker slot. False when the run stops first
        (or has already begun stopping: a retry scheduled now would never be made)."""
        if self.stopping:
            return False
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[bool] = loop.create_future()
        timer = loop.call_later(delay_s, _wake, woken)
        self._parked.add(woken)
        self._counters.parked += 1
        try:
            return await woken
        finally:
            timer.cancel()
            self._parked.discard(woken)
            self._counters.parked -= 1


def _wake(woken: asyncio.Future[bool]) -> None:
    if not woken.done():
        woken.set_result(True)
