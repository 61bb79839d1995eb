"""What every connection of one echo server shares: settings, dice, responses, the ledger.

The ledger is the server's ground truth: one float per held echo request (its hold time in
seconds, in the order they finished), the count of every non-200 status among them, and the
number of requests dropped because their connection closed before the response was flushed.
Control requests (``/stats``, ``/reset``, ``/stall``) never enter it.

Randomness: one ``random.Random(seed)`` for the whole server, drawn in the order requests
finish parsing: first the delay (unless it is zero or overridden), then the failure draw
(when failures are configured and not overridden). A seed and an arrival order therefore
fix every delay and every failure.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
from array import array
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import TYPE_CHECKING

from pyattacker._checks import check_number
from pyattacker.clock import LoopClock
from pyattacker.errors import ConfigError
from pyattacker.servers._delays import Delay
from pyattacker.servers._ranges import MOST_RETRY_AFTER_S, request_seconds

if TYPE_CHECKING:
    from pyattacker.servers._protocol import EchoProtocol
    from pyattacker.servers._timer import ServerTimer

__all__ = ["Control", "Core", "check_fail", "check_status"]

# (method, path, query) -> (status, JSON body), or None when it is not a control request;
# a future of the reply when it is computed later (the processes of one port asking each other).
Control = Callable[
    [bytes, bytes, bytes], "tuple[int, bytes] | asyncio.Future[tuple[int, bytes]] | None"
]

_RETRY_AFTER = re.compile(rb"[0-9]+(?:\.[0-9]+)?")
_NO_BODY_STATUSES = frozenset({204, 304})


class Core:
    """Shared state of one server's connections. Not thread-safe; lives on one loop."""

    __slots__ = (
        "_cache",
        "_fail",
        "connections",
        "control",
        "delay",
        "dropped",
        "loop",
        "now",
        "ok_response",
        "payload",
        "plain",
        "rng",
        "samples",
        "samples_append",
        "slow_until",
        "stall_until",
        "statuses",
        "timer",
    )

    def __init__(
        self,
        *,
        delay: Delay,
        seed: int,
        body_size: int,
        fail: Mapping[int, float],
        control: Control,
    ) -> None:
        self.loop: asyncio.AbstractEventLoop  # set by bind(), before any connection
        self.timer: ServerTimer  # ditto
        self.now: Callable[[], float] = LoopClock().now
        self.delay = delay
        self.rng = random.Random(seed)
        self._fail = _cumulative(fail)
        self.plain = delay.is_zero and not self._fail  # the timer-free fast path applies
        self.payload = (b"ok" * (body_size // 2 + 1))[:body_size]
        self._cache: dict[tuple[int, bool, bytes | None], bytes] = {}
        self.ok_response = self.echo_response(200, b"", True, None)
        self.control = control
        self.samples = array("d")
        self.samples_append = self.samples.append
        self.statuses: dict[int, int] = {}
        self.dropped = 0
        self.stall_until = -math.inf
        # The fast path applies to requests parsed at or after this time: never when the
        # server is not plain, else once the current stall is over.
        self.slow_until = -math.inf if self.plain else math.inf
        self.connections: set[EchoProtocol] = set()

    def bind(self, loop: asyncio.AbstractEventLoop, timer: ServerTimer) -> None:
        """Serve on ``loop`` (the running one): holds end on ``timer``, and the clock is
        the one read fit for it."""
        self.loop, self.timer, self.now = loop, timer, timer.now

    def stall(self, seconds: float) -> None:
        """No echo response is written before ``seconds`` from now (never shortens a stall)."""
        self.stall_until = max(self.stall_until, self.now() + seconds)
        if self.plain:
            self.slow_until = self.stall_until

    def record(self, hold: float, status: int) -> None:
        """One echo request held for ``hold`` seconds and answered ``status``."""
        self.samples_append(hold)
        if status != 200:
            self.statuses[status] = self.statuses.get(status, 0) + 1

    def clear(self) -> int:
        """Forget every hold time, status count and drop; return how many holds there were."""
        count = len(self.samples)
        del self.samples[:]  # in place: connections hold the bound ``append``
        self.statuses.clear()
        self.dropped = 0
        return count

    def draw(self, overrides: Mapping[bytes, bytes]) -> tuple[float, int, bytes | None]:
        """``(delay seconds, status, Retry-After value)`` for one echo request.

        ``overrides`` are the request's ``x-echo-*`` headers (names lowercased, prefix
        removed): ``delay``, ``status``, ``retry-after``. A bad one raises ``ConfigError``.
        """
        text = overrides.get(b"delay")
        if text is not None:
            delay = request_seconds(text.decode("latin-1"), "x-echo-delay")
        else:
            delay = 0.0 if self.delay.is_zero else self.delay.sample(self.rng)
        text = overrides.get(b"status")
        status = self._draw_status() if text is None else check_status(text, "x-echo-status")
        retry_after = overrides.get(b"retry-after")
        if retry_after is not None and not (
            _RETRY_AFTER.fullmatch(retry_after.strip()) and float(retry_after) <= MOST_RETRY_AFTER_S
        ):
            raise ConfigError(
                f"must be seconds, at most {MOST_RETRY_AFTER_S:g}, got {retry_after[:40]!r}",
                field="x-echo-retry-after",
                hint="e.g. 2",
            )
        if retry_after is None and status == 429:
            retry_after = b"1"
        return delay, status, retry_after.strip() if retry_after is not None else None

    def _draw_status(self) -> int:
        if not self._fail:
            return 200
        u = self.rng.random()
        for threshold, status in self._fail:
            if u < threshold:
                return status
        return 200

    def echo_response(
        self, status: int, body: bytes, keep_alive: bool, retry_after: bytes | None
    ) -> bytes:
        """The bytes of an echo reply: the request's body (or the payload) when 200."""
        if status == 200 and body:
            return self.response(200, body, keep_alive, b"application/octet-stream")
        key = (status, keep_alive, retry_after)
        cached = self._cache.get(key)
        if cached is None:
            if status == 200:
                content = self.payload
            else:
                content = f"{status} {_phrase(status)}\n".encode()
            extra = b"Retry-After: " + retry_after + b"\r\n" if retry_after else b""
            cached = self._cache[key] = self.response(
                status, content, keep_alive, b"text/plain", extra
            )
        return cached

    @staticmethod
    def response(
        status: int,
        content: bytes,
        keep_alive: bool,
        content_type: bytes = b"text/plain",
        extra: bytes = b"",
    ) -> bytes:
        """A complete HTTP/1.1 response with ``Content-Length`` (no body for 204/304)."""
        if status in _NO_BODY_STATUSES:
            content, length = b"", b""
        else:
            length = b"Content-Length: %d\r\n" % len(content)
        connection = b"keep-alive" if keep_alive else b"close"
        head = b"HTTP/1.1 %d %s\r\n" % (status, _phrase(status).encode())
        return (
            head
            + length
            + b"Content-Type: "
            + content_type
            + b"\r\nConnection: "
            + connection
            + b"\r\n"
            + extra
            + b"\r\n"
            + content
        )


def check_status(value: object, field: str, *, lowest: int = 200) -> int:
    """An HTTP status from ``lowest`` to 599, as an int or its text, else ``ConfigError``."""
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    digits = text.strip() if isinstance(text, str) else ""
    # ASCII digits, three at most: int() refuses "²" and is slow on thousands of digits.
    status = int(digits) if digits.isascii() and digits.isdigit() and len(digits) <= 3 else text
    if isinstance(status, bool) or not isinstance(status, int) or not lowest <= status <= 599:
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:60] + "..."
        raise ConfigError(f"must be an HTTP status from {lowest} to 599, got {shown}", field=field)
    return status


def check_fail(
    fail: Mapping[int, float] | None, field: str = "fail", *, hint: str = "e.g. {429: 0.1}"
) -> dict[int, float]:
    """``{status: fraction}`` with statuses 400..599, fractions in [0, 1] summing to <= 1
    (``hint``, in the caller's syntax, for the sum)."""
    checked: dict[int, float] = {}
    for status, fraction in (fail or {}).items():
        code = check_status(status, field, lowest=400)
        value = check_number(fraction, f"{field}[{code}]", at_least=0)
        if value > 1:
            raise ConfigError(f"must be a fraction from 0 to 1, got {fraction!r}", field=field)
        checked[code] = value
    total = math.fsum(checked.values())
    if total > 1:
        each = ", ".join(f"{status} {fraction:g}" for status, fraction in checked.items())
        raise ConfigError(
            f"fractions add up to {total:g}, more than 1 ({each})", field=field, hint=hint
        )
    return checked


def _cumulative(fail: Mapping[int, float]) -> tuple[tuple[float, int], ...]:
    total, table = 0.0, []
    for status, fraction in sorted(fail.items()):
        if fraction > 0:
            total += fraction
            table.append((total, status))
    return tuple(table)


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Status"
