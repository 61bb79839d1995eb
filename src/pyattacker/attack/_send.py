"""How one attempt reaches a target: the ``Sender`` seam, and its HTTP implementation.

The engine decides *when* and *where* (schedule, lease, retries); a sender only performs
one attempt and writes what happened into the :class:`~pyattacker.measure.Attempt`: the
``sent``/``first_byte``/``end`` timestamps, the status and the byte counts. It raises for
a failed attempt, a status of 400 or more included (as
:class:`~pyattacker.errors.HttpStatusError`), so that the engine classifies every failure
with the one classifier. It never retries.

Tests and simulations swap in their own sender (one that sleeps on a virtual clock), which
is how the engine's timelines are pinned exactly without sockets.
"""

from __future__ import annotations

from typing import Protocol

from pyattacker.attack._plan import Target
from pyattacker.http import HttpClient, Timing
from pyattacker.measure import Attempt

__all__ = ["HttpSender", "Sender"]


class Sender(Protocol):
    async def send(self, target: Target, attempt: Attempt) -> None:
        """Perform ``attempt`` against ``target`` (its URL, with its headers); raise if it
        failed (status >= 400 too)."""
        ...


class HttpSender:
    """One HTTP request per attempt through a shared :class:`HttpClient` (no retries).

    The headers are the target's (the plan's, with its key filled in)."""

    def __init__(
        self, client: HttpClient, *, method: str = "GET", body: bytes | None = None
    ) -> None:
        self.client = client
        self.method = method
        self.body = body
        self._bytes_out = len(body) if body else 0

    async def send(self, target: Target, attempt: Attempt) -> None:
        attempt.bytes_sent = self._bytes_out
        timing = Timing(0.0)  # ours, so a cancelled request still tells when it was sent
        try:
            response = await self.client.request(
                self.method, target.url, headers=target.headers, body=self.body, timing=timing
            )
        finally:
            _copy(timing, attempt)
        attempt.status = response.status
        attempt.bytes_received = len(response.body)
        if response.status >= 400:
            response.raise_for_status()


def _copy(timing: Timing, attempt: Attempt) -> None:
    attempt.sent = timing.sent
    attempt.first_byte = timing.first_byte
    attempt.end = timing.end
