"""Timing records: one :class:`Attempt` per try, one :class:`RequestRecord` per request.

Every timestamp is float seconds on the run's clock (``LoopClock().now()``:
only differences mean anything). An attempt is mutable because the engine fills it in as
it progresses; a request record is frozen once its last attempt has ended (the engine must
not touch the attempts afterwards).

Two clocks, always named:

* **scheduled** — from when the load model meant the request to start. What a user sees;
  corrected for coordinated omission, because a generator that falls behind cannot hide
  its lateness inside the gap before ``sent``.
* **sent** — from when the request was fully written: the service time of the endpoint.

The gap between them, ``dispatch_delay``, is reported as a figure of its own.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyattacker.errors import ErrorClass

__all__ = [
    "ANSWERED",
    "LLM_SAMPLE_COLUMNS",
    "SAMPLE_COLUMNS",
    "Attempt",
    "Outcome",
    "RequestRecord",
]

SAMPLE_COLUMNS = (
    "request",
    "scheduled",
    "sent",
    "end",
    "latency",
    "service_time",
    "dispatch_delay",
    "ttfb_scheduled",
    "ttfb_sent",
    "outcome",
    "status",
    "error_class",
    "error",
    "resource",
    "attempts",
    "throttled",
    "name",
    "connect",
    "tls",
    "waiting",
    "receiving",
)
"""The keys of ``RequestRecord.to_dict()``, in order: the ``--samples`` columns."""

LLM_SAMPLE_COLUMNS = (
    *SAMPLE_COLUMNS,
    "first_token",
    "ttft",
    "ttft_scheduled",
    "chunks",
    "prompt_tokens",
    "completion_tokens",
    "request_id",
    "retry_after",
    "rate_limit_headers",
)
"""The keys of ``RequestRecord.to_dict(llm=True)``, in order: the LLM ``--samples`` columns."""

_REQUEST_ID = "x-request-id"


class Outcome(enum.StrEnum):
    """How an attempt (and, by its last attempt, a request) ended.

    OK: a response with status < 400. THROTTLED: a refusal (HTTP 429 or 425, or error
    class ``rate_limit``). FAILED: anything else (transport error, timeout, any other
    4xx/5xx). DROPPED: never sent (the load model's in-flight cap, or the acquire algorithm
    gave no lease). CANCELLED: interrupted by stop.
    """

    OK = "ok"
    FAILED = "failed"
    THROTTLED = "throttled"
    DROPPED = "dropped"
    CANCELLED = "cancelled"

    @classmethod
    def of(cls, status: int | None, error_class: str | None = None) -> Outcome:
        """OK, THROTTLED or FAILED for an attempt that got a status and/or an error class.

        A rate-limit error class or status 425/429 is THROTTLED; a status < 400 with no
        error class is OK; everything else (no status, >= 400, any other error) is FAILED.
        """
        if error_class == ErrorClass.RATE_LIMIT or status in (425, 429):
            return cls.THROTTLED
        if status is not None and status < 400 and error_class is None:
            return cls.OK
        return cls.FAILED


ANSWERED = frozenset({Outcome.OK, Outcome.FAILED, Outcome.THROTTLED})
"""Outcomes the user saw an answer for (a response or an error): the ones with a latency."""


def _span(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else end - start


@dataclass(slots=True)
class Attempt:
    """One try of one logical request, filled in by the engine as it happens.

    ``scheduled`` is when the load model intended this attempt to start; for ``attempt >
    1`` it is when the retry policy's delay ended. Derived spans are plain timestamp
    differences and ``None`` when a timestamp they need is missing (whatever the outcome).
    """

    request: int
    attempt: int
    scheduled: float
    acquired: float | None = None
    sent: float | None = None
    first_byte: float | None = None
    first_token: float | None = None
    token_times: list[float] | None = None
    end: float | None = None
    outcome: Outcome = Outcome.FAILED
    status: int | None = None
    error_class: str | None = None
    error: str | None = None
    retry_after: float | None = None
    resource: str | None = None
    usage: dict[str, float] | None = None
    bytes_sent: int = 0
    bytes_received: int = 0
    headers: dict[str, str] | None = None
    """Rate-limit and utilisation headers the response carried (``retry-after``,
    ``x-ratelimit-*``, ...; lower-case names), when the sender records them."""
    name: str | None = None
    """The request's name when the plan names its requests (a line of a targets file, a
    step of a scenario): reports break figures down by it as they do by target."""
    connect: float | None = None
    """Seconds of the TCP connect of the new connection this attempt opened (``None``: it
    took an open one, or none was measured). Spent before ``sent``, so inside
    ``dispatch_delay``; :attr:`blocked` is that delay without it."""
    tls: float | None = None
    """Seconds of the TLS handshake of the new connection it opened (``None``: none)."""

    @property
    def wait(self) -> float | None:
        """``acquired - scheduled``: the wait for a lease."""
        return _span(self.scheduled, self.acquired)

    @property
    def dispatch_delay(self) -> float | None:
        """``sent - scheduled``: how late this attempt went out."""
        return _span(self.scheduled, self.sent)

    @property
    def service_time(self) -> float | None:
        """``end - sent``: the endpoint's time for this attempt."""
        return _span(self.sent, self.end)

    @property
    def ttfb(self) -> float | None:
        """``first_byte - sent``: time to first byte of this attempt."""
        return _span(self.sent, self.first_byte)

    @property
    def waiting(self) -> float | None:
        """``first_byte - sent``: waiting for the answer (as :attr:`ttfb`)."""
        return _span(self.sent, self.first_byte)

    @property
    def receiving(self) -> float | None:
        """``end - first_byte``: reading the answer, from its first byte to its last."""
        return _span(self.first_byte, self.end)

    @property
    def blocked(self) -> float | None:
        """``dispatch_delay`` less the new connection's ``connect`` and ``tls``: how late
        the attempt went out for another reason (a busy generator, a queue, a full pool)."""
        delay = _span(self.scheduled, self.sent)
        if delay is None:
            return None
        return delay - (self.connect or 0.0) - (self.tls or 0.0)

    @property
    def ttft(self) -> float | None:
        """``first_token - sent``: time to first token of this attempt (LLM)."""
        return _span(self.sent, self.first_token)

    @property
    def latency(self) -> float | None:
        """``end - scheduled``: this attempt as its caller saw it."""
        return _span(self.scheduled, self.end)

    def to_dict(self) -> dict[str, Any]:
        """Every field and derived span as JSON-able values (``RequestRecord.to_dict()``
        makes the ``--samples`` rows; this is the per-attempt view).

        Scalars throughout, except ``token_times`` (a list), ``usage`` and ``headers``
        (dicts), which are copies and ``None`` when absent. ``outcome`` is its string value.
        """
        return {
            "request": self.request,
            "attempt": self.attempt,
            "scheduled": self.scheduled,
            "acquired": self.acquired,
            "sent": self.sent,
            "first_byte": self.first_byte,
            "first_token": self.first_token,
            "end": self.end,
            "wait": self.wait,
            "dispatch_delay": self.dispatch_delay,
            "service_time": self.service_time,
            "ttfb": self.ttfb,
            "latency": self.latency,
            "outcome": str(self.outcome),
            "status": self.status,
            "error_class": self.error_class,
            "error": self.error,
            "retry_after": self.retry_after,
            "resource": self.resource,
            "bytes_sent": self.bytes_sent,
            "bytes_received": self.bytes_received,
            "token_times": None if self.token_times is None else list(self.token_times),
            "usage": None if self.usage is None else dict(self.usage),
            "headers": None if self.headers is None else dict(self.headers),
            "name": self.name,
            "connect": self.connect,
            "tls": self.tls,
            "waiting": self.waiting,
            "receiving": self.receiving,
        }


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One logical request: all its attempts, in order.

    Construction checks that ``attempts`` is non-empty, all of request ``request``, with
    strictly increasing attempt numbers (``ValueError`` otherwise).

    ``latency`` and ``service_time`` exist only for :data:`ANSWERED` outcomes: a dropped
    request never ran, and a cancelled one's end is when we stopped, not an answer.
    ``sent`` is the first send of any attempt (normally the first attempt's), so a first
    attempt that failed before sending still gives the request a send time.
    """

    request: int
    attempts: tuple[Attempt, ...]

    def __post_init__(self) -> None:
        if not self.attempts:
            raise ValueError(f"request {self.request} has no attempts")
        numbers = [a.attempt for a in self.attempts]
        if any(a.request != self.request for a in self.attempts):
            ids = sorted({a.request for a in self.attempts})
            raise ValueError(f"attempts of requests {ids} mixed in request {self.request}")
        if any(b <= a for a, b in itertools.pairwise(numbers)):
            raise ValueError(f"attempt numbers {numbers} of request {self.request} not in order")

    @classmethod
    def from_attempts(cls, attempts: Sequence[Attempt]) -> RequestRecord:
        """The record of ``attempts`` (one request's, in order); ``ValueError`` otherwise."""
        if not attempts:
            raise ValueError("a request record needs at least one attempt")
        return cls(attempts[0].request, tuple(attempts))

    @property
    def first(self) -> Attempt:
        return self.attempts[0]

    @property
    def last(self) -> Attempt:
        return self.attempts[-1]

    @property
    def scheduled(self) -> float:
        """The first attempt's ``scheduled``: when the user meant the request to start."""
        return self.attempts[0].scheduled

    @property
    def sent(self) -> float | None:
        """The first time any attempt was sent; ``None`` if none ever was."""
        sent = self.attempts[0].sent
        if sent is not None:
            return sent
        return next((a.sent for a in self.attempts if a.sent is not None), None)

    @property
    def end(self) -> float | None:
        return self.attempts[-1].end

    @property
    def outcome(self) -> Outcome:
        return self.attempts[-1].outcome

    @property
    def status(self) -> int | None:
        return self.attempts[-1].status

    @property
    def error_class(self) -> str | None:
        return self.attempts[-1].error_class

    @property
    def resource(self) -> str | None:
        return self.attempts[-1].resource

    @property
    def name(self) -> str | None:
        """The request's name (its first attempt's: every attempt repeats the request)."""
        return self.attempts[0].name

    @property
    def n_attempts(self) -> int:
        return len(self.attempts)

    @property
    def throttled(self) -> bool:
        """Whether any attempt was refused (THROTTLED), even if a retry then succeeded."""
        return any(a.outcome is Outcome.THROTTLED for a in self.attempts)

    @property
    def retried(self) -> bool:
        return len(self.attempts) > 1

    @property
    def answered(self) -> bool:
        """Whether the user saw an answer: an :data:`ANSWERED` outcome with an end time."""
        return self.outcome in ANSWERED and self.end is not None

    @property
    def latency(self) -> float | None:
        """Scheduled clock: ``end - scheduled`` across all attempts; ``None`` if unanswered."""
        end = self.attempts[-1].end
        return end - self.scheduled if end is not None and self.outcome in ANSWERED else None

    @property
    def service_time(self) -> float | None:
        """Sent clock: last attempt's ``end`` minus first ``sent``; ``None`` if unanswered."""
        return _span(self.sent, self.end) if self.answered else None

    @property
    def dispatch_delay(self) -> float | None:
        """``sent - scheduled``: how late the generator sent the request (any outcome)."""
        return _span(self.scheduled, self.sent)

    @property
    def ttfb_scheduled(self) -> float | None:
        """Last attempt's ``first_byte`` minus the first ``scheduled``."""
        return _span(self.scheduled, self.attempts[-1].first_byte)

    @property
    def ttfb_sent(self) -> float | None:
        """Last attempt's ``first_byte`` minus the first ``sent``."""
        return _span(self.sent, self.attempts[-1].first_byte)

    def to_dict(self, *, llm: bool = False) -> dict[str, Any]:
        """A flat row of scalars for ``--samples`` (one per request), keyed by
        :data:`SAMPLE_COLUMNS`; with ``llm``, by :data:`LLM_SAMPLE_COLUMNS` (see
        :meth:`llm_columns`)."""
        row = {
            "request": self.request,
            "scheduled": self.scheduled,
            "sent": self.sent,
            "end": self.end,
            "latency": self.latency,
            "service_time": self.service_time,
            "dispatch_delay": self.dispatch_delay,
            "ttfb_scheduled": self.ttfb_scheduled,
            "ttfb_sent": self.ttfb_sent,
            "outcome": str(self.outcome),
            "status": self.status,
            "error_class": self.error_class,
            "error": self.attempts[-1].error,
            "resource": self.resource,
            "attempts": self.n_attempts,
            "throttled": self.throttled,
            "name": self.name,
            **self.timing_columns(),
        }
        if llm:
            row.update(self.llm_columns())
        return row

    def timing_columns(self) -> dict[str, float | None]:
        """The timing breakdown of a ``--samples`` row: ``connect`` and ``tls``, the
        seconds spent opening new connections (summed over the attempts; ``None`` when no
        attempt opened one), ``waiting`` (first byte minus sent) and ``receiving`` (end
        minus first byte) of the last attempt."""
        connect = tls = None
        for attempt in self.attempts:
            if attempt.connect is not None:
                connect = (connect or 0.0) + attempt.connect
            if attempt.tls is not None:
                tls = (tls or 0.0) + attempt.tls
        last = self.attempts[-1]
        return {
            "connect": connect,
            "tls": tls,
            "waiting": last.waiting,
            "receiving": last.receiving,
        }

    def llm_columns(self) -> dict[str, Any]:
        """The LLM columns of a ``--samples`` row, all from the **last** attempt.

        * ``first_token``: a clock time.
        * ``ttft``: sent clock, the last attempt's own (its first token minus its own
          ``sent``: the exchange the server logged under ``request_id``); for a one-attempt
          request, the summary's sent-clock TTFT.
        * ``ttft_scheduled``: that first token minus the request's first ``scheduled``,
          every attempt included (as ``RequestStats.ttft_scheduled``).
        * ``chunks``: content chunks that arrived (``None`` for an answer that did not
          stream).
        * ``prompt_tokens``, ``completion_tokens``: its usage (whole numbers as ``int``).
        * ``request_id``: its ``x-request-id``; ``retry_after``: seconds.
        * ``rate_limit_headers``: the other recorded headers (``retry-after``,
          ``x-ratelimit-*``, the utilisation) as a dict (a copy): not a scalar.

        Each is ``None`` when the attempt has no such fact.
        """
        last = self.attempts[-1]
        first, times, usage = last.first_token, last.token_times, last.usage
        headers = dict(last.headers) if last.headers is not None else {}
        request_id = headers.pop(_REQUEST_ID, None)
        return {
            "first_token": first,
            "ttft": _span(last.sent, first),
            "ttft_scheduled": _span(self.scheduled, first),
            "chunks": _chunks(first, times),
            "prompt_tokens": _tokens(usage, "prompt_tokens"),
            "completion_tokens": _tokens(usage, "completion_tokens"),
            "request_id": request_id,
            "retry_after": last.retry_after,
            "rate_limit_headers": headers or None,
        }


def _chunks(first: float | None, times: list[float] | None) -> int | None:
    """Content chunks of an attempt: the first token's and each later one's; ``None`` when
    it did not stream (no first token and no token list)."""
    if first is None and times is None:
        return None
    return (0 if first is None else 1) + len(times or ())


def _tokens(usage: dict[str, float] | None, key: str) -> int | float | None:
    """``usage[key]``, as an ``int`` when it is a whole number; ``None`` if absent."""
    value = None if usage is None else usage.get(key)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
