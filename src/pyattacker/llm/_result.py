"""What one LLM request measured: :class:`LlmResult`, and the server's :class:`Usage`.

Timestamps are the HTTP client's clock seconds (only differences mean anything), taken
where the bytes arrived, never where we got round to parsing them:

- ``sent``: the request had been written; ``first_byte``: the response's first byte;
- ``first_token``: arrival of the first *content chunk*, the first streamed event that
  carries generated output (``delta.content``, reasoning text or tool-call arguments for
  chat, ``text`` for completions; the opening event with only ``role`` and empty content
  is not one);
- ``token_times``: arrival of every later content chunk, in order;
- ``end``: the last byte of the body.

One event may carry several tokens (servers batch under load, and so do proxies), and
several events that came in one socket read share that read's arrival time. ITL is
therefore measured *per content chunk*: ``itl`` holds the gaps between consecutive
content chunks, and a chunk of three tokens shows as one gap, not three. TPOT is the
token-weighted view: ``(end - first_token) / (completion_tokens - 1)``, using the
server's own token count.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from pyattacker.errors import retry_after_of

__all__ = ["LlmResult", "Usage"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts as the server reported them (``None``: it did not say)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None

    def as_dict(self) -> dict[str, float]:
        """The counts the server gave, by their OpenAI names (for ``Attempt.usage``)."""
        return {
            name: float(value)
            for name, value in (
                ("prompt_tokens", self.prompt_tokens),
                ("completion_tokens", self.completion_tokens),
                ("total_tokens", self.total_tokens),
            )
            if value is not None
        }


@dataclass(slots=True, repr=False)
class LlmResult:
    """The facts of one LLM request, filled in as the response arrives.

    Every field stays at its default until the request gets that far, so a failed
    request still tells how far it got. ``streamed`` says whether the body was an event
    stream: a whole-body response has no ``first_token`` and no ``token_times`` (TTFT
    cannot be seen through a body that arrives at once), and ``content_chunks`` is 0.
    ``headers`` holds the rate-limit and utilisation headers of the response
    (``retry-after``, ``retry-after-ms``, every ``x-ratelimit-*``,
    ``azure-openai-deployment-utilization``), names in lower case; ``request_id`` is
    its ``x-request-id``.
    """

    streamed: bool = True
    status: int | None = None
    sent: float | None = None
    first_byte: float | None = None
    first_token: float | None = None
    token_times: list[float] = field(default_factory=list)
    end: float | None = None
    content_chunks: int = 0
    usage: Usage | None = None
    finish_reason: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    request_id: str | None = None
    bytes_received: int = 0
    parts: list[str] = field(default_factory=list)
    connect: float | None = None  # the TCP connect of the connection it opened, if any
    tls: float | None = None  # and its TLS handshake (https)

    @property
    def text(self) -> str:
        """The generated content, joined (reasoning and tool-call text not included)."""
        return "".join(self.parts)

    @property
    def ttft(self) -> float | None:
        """Time to first token: ``first_token - sent``."""
        return _span(self.sent, self.first_token)

    @property
    def ttfb(self) -> float | None:
        """Time to first byte: ``first_byte - sent``."""
        return _span(self.sent, self.first_byte)

    @property
    def e2e(self) -> float | None:
        """End to end: ``end - sent``."""
        return _span(self.sent, self.end)

    @property
    def itl(self) -> list[float]:
        """Gaps between consecutive content chunks (``content_chunks - 1`` of them)."""
        if self.first_token is None:
            return []
        times = [self.first_token, *self.token_times]
        return [b - a for a, b in itertools.pairwise(times)]

    @property
    def tpot(self) -> float | None:
        """Time per output token after the first: ``(end - first_token) / (n - 1)``, ``n``
        the server's ``completion_tokens``, else (no usage reported) the content chunks
        counted (as the attack's figures do); ``None`` without a first token, an end, or
        ``n >= 2``."""
        tokens = self.usage.completion_tokens if self.usage is not None else None
        if tokens is None:
            tokens = self.content_chunks
        span = _span(self.first_token, self.end)
        if tokens is None or tokens < 2 or span is None:
            return None
        return span / (tokens - 1)

    @property
    def retry_after(self) -> float | None:
        """Seconds the server asked us to wait (``retry-after-ms``, then ``retry-after``)."""
        return retry_after_of(_WithHeaders(self.headers)) if self.headers else None

    def __repr__(self) -> str:
        mode = "stream" if self.streamed else "body"
        ttft, e2e = self.ttft, self.e2e
        figures = [
            f"chunks={self.content_chunks}",
            f"ttft={ttft:.6f}" if ttft is not None else "ttft=None",
            f"e2e={e2e:.6f}" if e2e is not None else "e2e=None",
            f"finish={self.finish_reason}",
        ]
        if self.usage is not None:
            figures.append(f"usage={self.usage.as_dict()}")
        return f"<LlmResult {self.status} {mode} {' '.join(figures)}>"


@dataclass(frozen=True, slots=True)
class _WithHeaders:
    headers: dict[str, str]


def _span(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else end - start
