"""``LlmSender``: the attack engine's :class:`~pyattacker.attack.Sender` for LLM endpoints.

One attempt is one :meth:`LlmClient.send`; the engine decides when, where and whether to
retry. The request body of attempt ``k`` of request ``n`` is built from prompt ``n`` of
the prompt source, so a retry sends exactly what the first attempt sent. The 64 most
recently used bodies are kept (64 MiB of them at most, and always the latest), so a retry
sends the bytes its first attempt sent without building them again on the event loop that
is timing other responses.

This module sits below :mod:`pyattacker.attack` and does not import it: the target is
typed by what the sender reads from it (a ``url`` and its ``headers``), which the attack
plan's ``Target`` provides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pyattacker.http import URL, Timeouts
from pyattacker.llm._client import LlmClient
from pyattacker.llm._openai import Api, LlmRequest, api_of, build_request
from pyattacker.llm._prompts import JsonlPrompts, PromptSource
from pyattacker.llm._result import LlmResult
from pyattacker.measure import Attempt

__all__ = ["LlmSender", "fill_attempt"]

_CACHED_BODIES = 64  # covers the retries of requests that were sent a moment ago
_CACHED_BYTES = 64 * 1024 * 1024  # bounds memory at long contexts (64 bodies of 128k: 45 MB)


class Endpoint(Protocol):
    """What the sender reads from a target: where to send and the headers (key included)."""

    @property
    def url(self) -> URL: ...

    @property
    def headers(self) -> Sequence[tuple[str, str]]: ...


class LlmSender:
    """One OpenAI-compatible request per attempt, through a shared :class:`LlmClient`.

    - ``prompts``: the prompt of request ordinal ``n`` is ``prompts.prompt(n)``.
    - ``model``: sent in every body (``None`` leaves it out, for Azure deployment URLs).
    - ``api``: ``chat`` or ``completions``; ``stream``: server-sent events (TTFT and ITL
      need them) or a whole body.
    - ``max_tokens``: used when a prompt carries none; ``extra``: more body parameters
      (see :func:`~pyattacker.llm.build_request`); ``timeouts``: per request.

    Every option is checked by building the first request now: a mistake is a
    :class:`~pyattacker.errors.ConfigError` before any traffic.
    """

    __slots__ = (
        "_recent", "_recent_bytes", "api", "client", "extra", "max_tokens", "model", "prompts",
        "stream", "timeouts",
    )  # fmt: skip

    def __init__(
        self,
        client: LlmClient,
        prompts: PromptSource,
        *,
        model: str | None,
        api: Api | str = Api.CHAT,
        stream: bool = True,
        max_tokens: int | None = None,
        extra: Mapping[str, Any] | None = None,
        timeouts: Timeouts | None = None,
    ) -> None:
        self.client = client
        self.prompts = prompts
        self.model = model
        self.api = api_of(api)
        self.stream = stream
        self.max_tokens = max_tokens
        self.extra = dict(extra or {})
        self.timeouts = timeouts
        self._recent: dict[int, LlmRequest] = {}  # by ordinal, least recently used first
        self._recent_bytes = 0
        if isinstance(prompts, JsonlPrompts) and self.api is Api.COMPLETIONS:
            for n in range(len(prompts)):
                self._build(n)  # names the first chat line the completions API cannot send
        self.request(0)

    def request(self, n: int) -> LlmRequest:
        """The encoded request of request ordinal ``n`` (the same for every attempt):
        built from ``prompts.prompt(n)``, or the one built for an earlier attempt if it is
        among the most recently used."""
        recent = self._recent
        request = recent.pop(n, None)
        if request is None:
            request = self._build(n)
            self._recent_bytes += len(request.body)
        recent[n] = request
        while len(recent) > 1 and (
            len(recent) > _CACHED_BODIES or self._recent_bytes > _CACHED_BYTES
        ):
            oldest = next(iter(recent))
            self._recent_bytes -= len(recent.pop(oldest).body)
        return request

    def _build(self, n: int) -> LlmRequest:
        return build_request(
            self.api,
            self.model,
            self.prompts.prompt(n),
            max_tokens=self.max_tokens,
            stream=self.stream,
            extra=self.extra,
        )

    async def send(self, target: Endpoint, attempt: Attempt) -> None:
        """Perform ``attempt`` against ``target.url`` with ``target.headers``; fill the
        attempt (see :func:`fill_attempt`) even when it fails; raise if it failed."""
        request = self.request(attempt.request)
        attempt.bytes_sent = len(request.body)
        result = LlmResult(streamed=request.stream)
        try:
            await self.client.send(
                target.url, request, headers=target.headers, timeouts=self.timeouts, result=result
            )
        finally:
            fill_attempt(result, attempt)

    def __repr__(self) -> str:
        mode = "stream" if self.stream else "whole body"
        return f"<LlmSender {self.api} {mode} model={self.model!r} prompts={self.prompts!r}>"


def fill_attempt(result: LlmResult, attempt: Attempt) -> None:
    """Copy what ``result`` measured into ``attempt``: ``sent``, ``first_byte``,
    ``first_token``, ``token_times`` (``None`` for a whole-body response), ``end``,
    ``status``, ``usage`` (the server's counts as floats), ``retry_after``,
    ``bytes_received``, ``connect`` and ``tls`` (a new connection's setup) and
    ``headers`` (the rate-limit ones and ``x-request-id``; ``None`` if none came)."""
    attempt.sent = result.sent
    attempt.first_byte = result.first_byte
    attempt.first_token = result.first_token
    attempt.token_times = result.token_times if result.streamed else None
    attempt.end = result.end
    if result.status is not None:
        attempt.status = result.status
    attempt.usage = result.usage.as_dict() if result.usage is not None else None
    attempt.retry_after = result.retry_after
    attempt.bytes_received = result.bytes_received
    attempt.connect, attempt.tls = result.connect, result.tls
    headers = dict(result.headers)
    if result.request_id is not None:  # matches the attempt to the server's own logs
        headers["x-request-id"] = result.request_id
    attempt.headers = headers or None
