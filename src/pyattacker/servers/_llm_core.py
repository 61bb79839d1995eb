"""What every connection of one mock LLM server shares: settings, clock, slots, limits, truth.

:class:`LlmCore` holds the server-wide state and the small decisions on it: request ids,
each request's random stream, the concurrency slots and their FIFO queue, the headers every
completion response carries. Not thread-safe; lives on one loop.

Capacity: at most ``capacity`` completions generate at once. With ``overflow="queue"`` (the
default) a request beyond it waits, first come first served, for a slot; its TTFT timer
starts when it gets one, and the wait shows in its recorded TTFT and e2e (both count from
when the request was received). With ``overflow="refuse"`` it is answered 429 at once.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from pyattacker._rng import LazyRandom
from pyattacker.clock import LoopClock, epoch_time
from pyattacker.servers._core import Control
from pyattacker.servers._llm_dice import Failures
from pyattacker.servers._llm_limits import Limiter
from pyattacker.servers._llm_settings import Settings
from pyattacker.servers._llm_ticker import Ticker
from pyattacker.servers._llm_truth import Ledger

if TYPE_CHECKING:
    from pyattacker.servers._llm_exchange import Exchange
    from pyattacker.servers._llm_protocol import LlmProtocol

__all__ = ["Incoming", "LlmCore"]


class Incoming:
    """One parsed HTTP request: what the handler decides on."""

    __slots__ = ("body", "headers", "keep_alive", "method", "received", "url")

    def __init__(
        self,
        method: bytes,
        url: bytes,
        headers: dict[bytes, bytes],
        body: bytes,
        keep_alive: bool,
        received: float,
    ) -> None:
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive
        self.received = received


class LlmCore:
    """Shared state of one mock LLM server (see the module docstring)."""

    def __init__(self, settings: Settings, control: Control) -> None:
        self.settings = settings
        self.control = control
        self.models = frozenset(settings.models)
        self.keys = frozenset(key.encode() for key in settings.api_keys)
        self.loop: asyncio.AbstractEventLoop  # set by bind(), before any connection
        self.ticker: Ticker  # ditto
        self.now: Callable[[], float] = LoopClock().now
        self.origin = 0.0  # when the server started: t = 0 of the storm windows
        self.created = int(epoch_time())
        self.ledger = Ledger()
        self.failures = Failures(settings.fail, settings.storms, settings.models, settings.seed)
        self.limiter: Limiter | None = None
        self.capacity = settings.capacity
        self.in_flight = 0
        self.waiting: deque[Exchange] = deque()
        self.connections: set[LlmProtocol] = set()
        self._ordinals = dict.fromkeys(settings.models, 0)
        self._prefix = os.urandom(4).hex()  # ids unique across servers, not just requests
        self._sequence = 0

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serve on ``loop`` (the running one): its timers, its clock, and t = 0 now."""
        self.loop = loop
        self.now = LoopClock().reader()
        self.ticker = Ticker(loop, self.now)
        self.origin = self.now()
        rpm, tpm = self.settings.rpm, self.settings.tpm
        self.limiter = Limiter(rpm, tpm, self.origin) if rpm or tpm else None

    def next_id(self) -> str:
        """A fresh request id (``x-request-id``; the completion id is derived from it)."""
        self._sequence += 1
        return f"{self._prefix}{self._sequence:08x}"

    def rng(self, model: str) -> LazyRandom:
        """The random stream of ``model``'s next request: ``f"{seed}:{model}:{n}"``."""
        n = self._ordinals[model]
        self._ordinals[model] = n + 1
        return LazyRandom(f"{self.settings.seed}:{model}:{n}")

    def headers(self, request_id: str, now: float) -> list[tuple[bytes, bytes]]:
        """The headers of every completion response: id, rate limits, utilisation."""
        headers = [(b"x-request-id", request_id.encode())]
        if self.limiter is not None:
            headers += self.limiter.headers(now)
        if self.settings.utilization_header and self.capacity:
            share = 100.0 * self.in_flight / self.capacity
            headers.append((b"azure-openai-deployment-utilization", b"%.1f%%" % share))
        return headers

    # -- slots ------------------------------------------------------------------------------

    def full(self) -> bool:
        """Whether every slot is taken (a new request would wait, or be refused)."""
        return self.capacity is not None and self.in_flight >= self.capacity

    def acquire(self, exchange: Exchange, now: float) -> None:
        """Start ``exchange`` in a free slot now, or queue it for the next one."""
        if self.full():
            self.waiting.append(exchange)
        else:
            self.in_flight += 1
            exchange.start(now)

    def release(self) -> None:
        """A slot is free: the longest-waiting live exchange gets it."""
        self.in_flight -= 1
        waiting = self.waiting
        while waiting and (self.capacity is None or self.in_flight < self.capacity):
            exchange = waiting.popleft()
            if exchange.live:
                self.in_flight += 1
                exchange.start(self.now())

    def clear(self) -> int:
        """Forget every record and fill the rate-limit buckets; return the records cleared."""
        if self.limiter is not None:
            self.limiter.fill(self.now())
        return self.ledger.clear()

    def in_progress(self) -> tuple[int, int]:
        """``(generating, waiting for a slot)`` right now."""
        return self.in_flight, sum(1 for exchange in self.waiting if exchange.live)
