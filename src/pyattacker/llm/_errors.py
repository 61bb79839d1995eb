"""How an LLM request fails: the two error types of :mod:`pyattacker.llm`, and key scrubbing.

Both sit in the :class:`~pyattacker.errors.HttpError` tree, so the one classifier
(:func:`~pyattacker.errors.error_class_of`) and every retry policy read them without
knowing about LLMs::

    HttpError
    ├── RemoteProtocolError                   upstream
    │   └── LlmResponseError                  the endpoint answered, but not as OpenAI does
    │       └── SseError                      ... its event stream is malformed or cut
    └── HttpStatusError                       by status: 429 rate_limit, 5xx upstream, ...
        └── LlmStatusError                    ... with the server's own message and a kind

``kind`` (an :class:`LlmErrorKind`) says in one word what went wrong, for reports; the
error *class* (what a retry policy sees) comes from the classifier as for any error.

Messages quote what the server said (an error message, the start of a body), so every
message is scrubbed of the request's secret header values before it is built: a server
that echoes the key it was given does not get it into a report, an event or a log line.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

from pyattacker._secrets import is_secret_key, mask_url, scrub
from pyattacker.errors import HttpStatusError, RemoteProtocolError

__all__ = [
    "LlmErrorKind",
    "LlmResponseError",
    "LlmStatusError",
    "SseError",
    "secrets_of",
    "snippet",
]

_SNIPPET = 120  # characters of a server's text quoted in a message


class LlmErrorKind(enum.StrEnum):
    """What went wrong with an LLM request, in one word (reports group by it)."""

    # the endpoint answered 2xx, but not as an OpenAI-compatible API does
    NOT_JSON = "not_json"  # the body is not JSON (an HTML page, plain text)
    NOT_OPENAI = "not_openai"  # JSON, but no ``choices`` (or a wrong shape)
    NOT_EVENT_STREAM = "not_event_stream"  # a stream was asked for, another body came
    BROKEN_STREAM = "broken_stream"  # the event stream is malformed
    STREAM_CUT = "stream_cut"  # the stream ended before ``[DONE]``
    ERROR_EVENT = "error_event"  # the server reported an error inside a 2xx response
    # the endpoint answered with a status >= 400
    AUTH = "auth"  # 401, 403: the key is wrong or lacks access
    UNKNOWN_MODEL = "unknown_model"  # 404 naming the model or deployment
    NOT_FOUND = "not_found"  # any other 404: most likely a wrong URL
    BAD_REQUEST = "bad_request"  # 400, 413, 422: the request itself is refused
    RATE_LIMIT = "rate_limit"  # 429 (and 425)
    TIMEOUT = "timeout"  # 408, 504
    UPSTREAM = "upstream"  # any other 5xx
    STATUS = "status"  # any other status >= 400


class LlmResponseError(RemoteProtocolError):
    """The endpoint answered, but not as an OpenAI-compatible endpoint does.

    Classified ``upstream`` (the endpoint's fault, worth another try by default), unless
    ``error_class`` says otherwise: an error event carrying an HTTP-like code (``429``
    inside a stream) is classified as that status would be. ``kind`` says what was wrong.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: LlmErrorKind,
        error_class: str | None = None,
        **context: Any,
    ) -> None:
        super().__init__(message, kind=str(kind), **context)
        self.kind = kind
        if error_class is not None:
            # An instance attribute shadows the class's `upstream`; the classifier reads
            # it first (rule 3). Set this way because the base declares it a ClassVar.
            object.__setattr__(self, "error_class", error_class)

    def locate(self, url: object, timing: Any) -> LlmResponseError:
        """Attach the request's URL and timing (pure parsers raise without them)."""
        self.url, self.timing = url, timing
        if url is not None:
            self.context["url"] = mask_url(str(url))
        return self


class SseError(LlmResponseError):
    """A malformed event stream (``broken_stream``) or one that ends mid-event
    (``stream_cut``). ``line`` is the 1-based line of the stream, when known."""

    def __init__(
        self,
        message: str,
        *,
        kind: LlmErrorKind = LlmErrorKind.BROKEN_STREAM,
        line: int | None = None,
        **context: Any,
    ) -> None:
        super().__init__(message, kind=kind, line=line, **context)
        self.line = line


class LlmStatusError(HttpStatusError):
    """A status >= 400 from an LLM endpoint, with the server's own message.

    Classified by ``status`` like any :class:`~pyattacker.errors.HttpStatusError` (429
    ``rate_limit``, 401/403/404 ``fatal``, 5xx ``upstream``, ...). ``kind`` names the
    case for reports; ``error_type`` and ``error_code`` are the server's, when it sent
    an OpenAI-style ``{"error": {...}}`` body.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        kind: LlmErrorKind,
        error_type: str | None = None,
        error_code: str | None = None,
        **context: Any,
    ) -> None:
        super().__init__(message, status=status, kind=str(kind), **context)
        self.kind = kind
        self.error_type = error_type
        self.error_code = error_code


def secrets_of(headers: Iterable[tuple[str, str]]) -> set[str]:
    """The values of secret-looking headers (``Authorization``, ``api-key``, ...), and the
    credential after a scheme word (``Bearer sk-...`` gives ``sk-...`` too)."""
    found: set[str] = set()
    for name, value in headers:
        if is_secret_key(name) and isinstance(value, str) and value.strip():
            found.add(value.strip())
            _, _, credential = value.strip().partition(" ")
            if credential.strip():
                found.add(credential.strip())
    return found


def snippet(text: str, secrets: set[str], limit: int = _SNIPPET) -> str:
    """``text`` on one line, scrubbed of ``secrets``, cut to ``limit`` characters, quoted."""
    flat = " ".join(scrub(text, secrets).split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return repr(flat)
