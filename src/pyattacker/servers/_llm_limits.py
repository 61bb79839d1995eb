"""The mock LLM server's rate limits: requests and tokens per minute, as OpenAI states them.

Two plain token buckets, each full at start and refilled continuously (``limit / 60`` per
second, up to ``limit``): RPM spends 1 per request, TPM spends the request's *token cost*,
``prompt_tokens + (max_tokens if the request sets it, else the completion length it will
generate)``, charged in full when it is admitted and never refunded (what OpenAI and Azure
do with ``max_tokens``: they reserve it). A request is admitted only if both buckets can
pay; a refused request pays nothing. One that costs more than the whole TPM limit can never
be admitted and is refused as too large, with no ``wait`` (no ``Retry-After``: waiting
cannot help, as OpenAI's "Request too large" says).

Why not the world's :class:`~pyattacker.world.RateLimitProfile`: that bucket spends one
token per request and tightens after every refusal (a provider punishing pressure), while
an OpenAI-compatible endpoint needs a second, token-weighted bucket and must report each
bucket's limit, remaining amount and time to full in ``x-ratelimit-*`` headers, which the
world model does not expose. The arithmetic is a few lines; it lives here, pure.
"""

from __future__ import annotations

import math
from typing import NamedTuple

__all__ = ["Bucket", "Limiter", "Refusal", "go_duration"]


class Bucket:
    """``limit`` per minute, full at start, refilled at ``limit / 60`` per second."""

    __slots__ = ("level", "limit", "rate", "stamp")

    def __init__(self, limit: int, now: float) -> None:
        self.limit = limit
        self.rate = limit / 60.0
        self.level = float(limit)
        self.stamp = now

    def refill(self, now: float) -> None:
        if now > self.stamp:
            self.level = min(self.limit, self.level + (now - self.stamp) * self.rate)
            self.stamp = now

    def wait(self, cost: float) -> float:
        """Seconds until ``cost`` can be paid (0 now; ``inf`` if it exceeds the limit)."""
        if cost <= self.level:
            return 0.0
        if cost > self.limit:
            return math.inf
        return (cost - self.level) / self.rate

    def remaining(self) -> int:
        return math.floor(self.level)

    def reset_s(self) -> float:
        """Seconds until the bucket is full again."""
        return (self.limit - self.level) / self.rate

    def __repr__(self) -> str:
        return f"<Bucket {self.level:.1f}/{self.limit}>"


class Refusal(NamedTuple):
    """Why a request is refused (429): ``kind`` names the limit, ``wait`` is Retry-After
    (``None``: the request can never be admitted)."""

    kind: str  # "requests", "tokens" or "capacity"
    wait: float | None
    message: str


class Limiter:
    """The RPM and TPM buckets of one server (either may be absent)."""

    __slots__ = ("requests", "tokens")

    def __init__(self, rpm: int | None, tpm: int | None, now: float) -> None:
        self.requests = Bucket(rpm, now) if rpm else None
        self.tokens = Bucket(tpm, now) if tpm else None

    def admit(self, now: float, cost: int) -> Refusal | None:
        """Pay 1 request and ``cost`` tokens at ``now``, or say why not (paying nothing)."""
        requests, tokens = self.requests, self.tokens
        if requests is not None:
            requests.refill(now)
            wait = requests.wait(1.0)
            if wait > 0:
                return Refusal("requests", wait, _message("requests", requests, 1, wait))
        if tokens is not None:
            tokens.refill(now)
            wait = tokens.wait(cost)
            if wait == math.inf:
                text = (
                    f"Request too large: limit {tokens.limit} tokens per min, "
                    f"requested {cost}. Send fewer prompt tokens or a smaller max_tokens."
                )
                return Refusal("tokens", None, text)
            if wait > 0:
                return Refusal("tokens", wait, _message("tokens", tokens, cost, wait))
            tokens.level -= cost
        if requests is not None:
            requests.level -= 1.0
        return None

    def headers(self, now: float) -> list[tuple[bytes, bytes]]:
        """``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` as of ``now``."""
        headers = []
        for kind, bucket in ((b"requests", self.requests), (b"tokens", self.tokens)):
            if bucket is not None:
                bucket.refill(now)
                headers.append((b"x-ratelimit-limit-" + kind, b"%d" % bucket.limit))
                headers.append((b"x-ratelimit-remaining-" + kind, b"%d" % bucket.remaining()))
                reset = go_duration(bucket.reset_s()).encode()
                headers.append((b"x-ratelimit-reset-" + kind, reset))
        return headers

    def fill(self, now: float) -> None:
        """Both buckets full again (``/reset``)."""
        for bucket in (self.requests, self.tokens):
            if bucket is not None:
                bucket.level, bucket.stamp = float(bucket.limit), now


def _message(kind: str, bucket: Bucket, cost: float, wait: float) -> str:
    return (
        f"Rate limit reached for {kind} per min (RPM/TPM): limit {bucket.limit}, "
        f"used {bucket.limit - bucket.remaining()}, requested {cost:g}. "
        f"Please try again in {go_duration(wait)}."
    )


def go_duration(seconds: float) -> str:
    """A duration as OpenAI's headers write it: ``17ms``, ``1.5s``, ``6m0s`` (rounded up)."""
    if seconds <= 0:
        return "0s"
    if seconds < 1:
        return f"{math.ceil(seconds * 1000)}ms"
    millis = math.ceil(seconds * 1000)
    minutes, millis = divmod(millis, 60_000)
    text = f"{millis / 1000:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{minutes}m{text}" if minutes else text
