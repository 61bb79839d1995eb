"""What every connection of one mock LLM server shares: settings, clock, slots, limits, truth.

:class:`LlmCore` holds the server-wide state and the small decisions on it: request ids,
each request's random stream, the concurrency slots and their FIFO queue, the headers every
completion response carries, and the current :class:`~pyattacker.servers._llm_truth.Epoch`.
Not thread-safe; lives on one loop.

Capacity: at most ``capacity`` completions generate at once. With ``overflow="queue"`` (the
default) a request beyond it waits, first come first served, for a slot; its TTFT timer
starts when it gets one, and the wait shows in its recorded TTFT and e2e (both count from
when the request was received). With ``overflow="refuse"`` it is answered 429 at once. A
queued request whose client leaves is dropped from the queue (lazily: the queue is
compacted once departed entries are half of it, so nothing is left behind and no
departure costs more than its share).

Reset (:meth:`LlmCore.reset`): a new epoch (storm windows count from now, each model's
requests are numbered from 0 again, nothing recorded), both rate-limit buckets full. What
is already in progress goes on (it holds its slot and has paid its limits) and is
answered, but is never recorded in the new epoch: a server reset while idle replays
exactly the dice of a fresh one for the same request order.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from pyattacker._rng import LazyRandom
from pyattacker.clock import LoopClock, epoch_time
from pyattacker.servers._llm_dice import Failures
from pyattacker.servers._llm_limits import Limiter
from pyattacker.servers._llm_settings import Settings
from pyattacker.servers._llm_ticker import Ticker
from pyattacker.servers._llm_truth import Epoch, Ledger

if TYPE_CHECKING:
    from pyattacker.servers._llm_exchange import Exchange
    from pyattacker.servers._llm_protocol import LlmProtocol
    from pyattacker.servers._timer import ServerTimer

__all__ = ["Control", "Incoming", "LlmCore", "Tally", "Work"]

#: A reply computed in steps: each ``yield`` gives the loop a turn; the generator returns
#: ``(status, pieces of the JSON body)``.
Work = Generator[None, None, tuple[int, list[bytes]]]
#: ``(path, query)`` of an authorized control request (``/stats``, ``/reset``) -> its reply.
Control = Callable[[bytes, bytes], Work]


class Incoming:
    """One parsed HTTP request: what the handler decides on.

    ``completion`` says whether it asks for a completion (and so will be recorded);
    ``epoch`` is the epoch it was received in; ``http10`` that it spoke HTTP/1.0 (no
    chunked response).
    """

    __slots__ = (
        "body",
        "completion",
        "epoch",
        "headers",
        "http10",
        "keep_alive",
        "method",
        "received",
        "url",
    )

    def __init__(
        self,
        method: bytes,
        url: bytes,
        headers: dict[bytes, bytes],
        body: bytes,
        keep_alive: bool,
        received: float,
        epoch: Epoch,
        *,
        completion: bool = False,
        http10: bool = False,
    ) -> None:
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive
        self.received = received
        self.epoch = epoch
        self.completion = completion
        self.http10 = http10


class Tally:
    """Requests in progress, by where they are: filled by each connection (``tally``)."""

    __slots__ = ("earlier", "in_flight", "pending", "queued")

    def __init__(self) -> None:
        self.in_flight = 0  # generating (this epoch)
        self.queued = 0  # waiting for a slot (this epoch)
        self.pending = 0  # received, not yet handled, or ended and not yet flushed
        self.earlier = 0  # any of those, received before the last reset


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
        self.epoch = Epoch(0, 0.0)
        self.created = int(epoch_time())
        self.ledger = Ledger(self.epoch)
        self.failures = Failures(settings.fail, settings.storms, settings.models, settings.seed)
        self.limiter: Limiter | None = None
        self.capacity = settings.capacity
        self.in_flight = 0  # slots taken, whatever the epoch
        self.waiting: deque[Exchange] = deque()
        self._departed = 0  # entries of waiting whose client left
        self.connections: set[LlmProtocol] = set()
        self._prefix = os.urandom(4).hex()  # ids unique across servers, not just requests
        self._sequence = 0
        # One of ``lanes`` processes behind one port (llm-server --processes): this one
        # numbers its dice streams lane, lane + lanes, ... so no two processes share one.
        self.lane, self.lanes = 0, 1

    def bind(self, loop: asyncio.AbstractEventLoop, timer: ServerTimer) -> None:
        """Serve on ``loop`` (the running one): tokens due on ``timer``, its clock, and
        t = 0 now."""
        self.loop = loop
        self.now = timer.now
        self.ticker = Ticker(timer)
        self.epoch.origin = self.now()
        rpm, tpm = self.settings.rpm, self.settings.tpm
        self.limiter = Limiter(rpm, tpm, self.epoch.origin) if rpm or tpm else None

    def reset(self) -> int:
        """A new epoch from now, both buckets full; return the records forgotten."""
        now = self.now()
        self.epoch = Epoch(self.epoch.number + 1, now)
        if self.limiter is not None:
            self.limiter.fill(now)
        return self.ledger.clear(self.epoch)

    def next_id(self) -> str:
        """A fresh request id (``x-request-id``; the completion id is derived from it)."""
        self._sequence += 1
        return f"{self._prefix}{self._sequence:08x}"

    def rng(self, model: str, epoch: Epoch) -> LazyRandom:
        """The random stream of ``model``'s next request received in ``epoch``:
        ``f"{seed}:{model}:{n}"``, ``n`` counting that model's requests of that epoch (with
        several processes, process ``lane`` of ``lanes`` takes ``n = lane + k * lanes``)."""
        n = epoch.ordinals.get(model, 0)
        epoch.ordinals[model] = n + 1
        return LazyRandom(f"{self.settings.seed}:{model}:{n * self.lanes + self.lane}")

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
        while waiting and not self.full():
            exchange = waiting.popleft()
            if exchange.live:
                self.in_flight += 1
                exchange.start(self.now())
            else:
                self._departed -= 1

    def leave(self) -> None:
        """A queued exchange's client left (the exchange is no longer live)."""
        self._departed += 1
        if 2 * self._departed >= len(self.waiting):
            self.waiting = deque(exchange for exchange in self.waiting if exchange.live)
            self._departed = 0

    # -- what /stats reports ---------------------------------------------------------------

    def tally(self) -> Tally:
        """Every request received and not yet recorded, by where it is."""
        tally = Tally()
        for conn in self.connections:
            conn.tally(self.epoch, tally)
        return tally

    def statistics(self) -> dict[str, Any]:
        """A snapshot of the slots and the queue (entries include departed clients)."""
        return {
            "epoch": self.epoch.number,
            "slots_taken": self.in_flight,
            "capacity": self.capacity,
            "queue_entries": len(self.waiting),
            "queue_departed": self._departed,
            "connections": len(self.connections),
            "due": len(self.ticker) if hasattr(self, "ticker") else 0,
        }

    def __repr__(self) -> str:
        s = self.statistics()
        return (
            f"<LlmCore epoch {s['epoch']}: {s['slots_taken']}/{s['capacity']} slots, "
            f"{s['queue_entries']} queued ({s['queue_departed']} departed), "
            f"{s['connections']} connections>"
        )
