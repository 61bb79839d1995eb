"""Reading OpenAI-compatible answers: one streamed chunk (:func:`parse_event`), a whole
body (:func:`parse_body`), a status >= 400 (:func:`status_error`, with the server's own
message), and the rate-limit headers (:func:`recorded_headers`). :func:`absorb_event` and
:func:`absorb_body` fold what was read into an :class:`~pyattacker.llm.LlmResult`.

Pure functions, and total: whatever bytes arrive, the result is a value or one of our
errors (:class:`LlmResponseError`, :class:`LlmStatusError`) with a one-line message,
never a ``KeyError`` or a ``TypeError`` from a surprising shape.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from pyattacker._classify import status_class_of
from pyattacker.http import Headers
from pyattacker.llm._errors import LlmErrorKind, LlmResponseError, LlmStatusError, snippet
from pyattacker.llm._openai import Api
from pyattacker.llm._result import LlmResult, Usage
from pyattacker.llm._sse import SseEvent

__all__ = [
    "Delta",
    "absorb_body",
    "absorb_event",
    "parse_body",
    "parse_event",
    "recorded_headers",
    "status_error",
]

_RECORDED = frozenset({"retry-after", "retry-after-ms", "azure-openai-deployment-utilization"})
_NO_SECRETS: frozenset[str] = frozenset()
_decode = json.JSONDecoder().decode  # json.loads minus its argument checks, per event


class Delta(NamedTuple):
    """What one chunk (or a whole body) said."""

    output: bool  # it carries generated output (a content chunk)
    text: str  # the content of choice 0
    finish_reason: str | None
    usage: Usage | None


_EMPTY = Delta(False, "", None, None)


def parse_event(api: Api, event: SseEvent, secrets: frozenset[str] = _NO_SECRETS) -> Delta:
    """Read one streamed chunk; :class:`LlmResponseError` if it is not one.

    A chunk without ``choices`` but with ``usage`` is the final usage chunk; an empty
    ``choices`` list (Azure's content-filter preamble) says nothing. An ``error`` object,
    or an event of type ``error``, raises ``error_event``.
    """
    try:
        obj = _decode(event.data)
    except (ValueError, RecursionError):  # a hostile server's JSON can nest past the stack
        if event.type == "error":
            raise _error_event(event.data, secrets) from None
        raise LlmResponseError(
            f"an event's data is not JSON: {snippet(event.data, set(secrets))}",
            kind=LlmErrorKind.BROKEN_STREAM,
        ) from None
    if type(obj) is not dict:
        raise LlmResponseError(
            f"an event's data is JSON but not an object: {snippet(event.data, set(secrets))}",
            kind=LlmErrorKind.BROKEN_STREAM,
        )
    if obj.get("error") or event.type == "error":
        raise _error_event(obj.get("error", obj), secrets)
    choices = obj.get("choices")
    usage = _usage(obj.get("usage"))
    if choices is None:
        if usage is None:
            raise LlmResponseError(
                f"an event has neither choices nor usage: {snippet(event.data, set(secrets))}",
                kind=LlmErrorKind.NOT_OPENAI,
            )
        return Delta(False, "", None, usage)
    if not isinstance(choices, list):
        raise LlmResponseError("an event's choices are not a list", kind=LlmErrorKind.NOT_OPENAI)
    if not choices:
        return _EMPTY if usage is None else Delta(False, "", None, usage)
    return _choices(api, choices, usage, "delta")


def parse_body(api: Api, body: bytes, secrets: frozenset[str] = _NO_SECRETS) -> Delta:
    """Read a whole (not streamed) response body; :class:`LlmResponseError` unless it is
    an OpenAI-style completion object with at least one choice."""
    if not body.strip():
        raise LlmResponseError("the body is empty", kind=LlmErrorKind.NOT_JSON)
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):  # nested past the stack: not an answer either
        start = snippet(body.decode("utf-8", errors="replace"), set(secrets))
        raise LlmResponseError(
            f"the body is not JSON; it starts {start}", kind=LlmErrorKind.NOT_JSON
        ) from None
    if type(obj) is not dict:
        raise LlmResponseError(
            f"the body is JSON but not an object ({type(obj).__name__})",
            kind=LlmErrorKind.NOT_OPENAI,
        )
    if obj.get("error"):
        raise _error_event(obj["error"], secrets)
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices:
        keys = ", ".join(sorted(map(str, obj))[:8]) or "none"
        raise LlmResponseError(
            f"the body has no choices, so it is not an OpenAI-compatible completion "
            f"(keys: {snippet(keys, set(secrets))})",
            kind=LlmErrorKind.NOT_OPENAI,
        )
    return _choices(api, choices, _usage(obj.get("usage")), "message")


def _choices(api: Api, choices: list[Any], usage: Usage | None, part: str) -> Delta:
    output, text, finish = False, "", None
    for choice in choices:
        if type(choice) is not dict:
            raise LlmResponseError("a choice is not an object", kind=LlmErrorKind.NOT_OPENAI)
        if api is Api.CHAT:
            piece, more = _chat_output(choice.get(part))
        else:
            value = choice.get("text")
            piece, more = (value, bool(value)) if isinstance(value, str) else ("", False)
        output = output or more
        if piece and not text and choice.get("index", 0) == 0:
            text = piece
        reason = choice.get("finish_reason")
        if finish is None and isinstance(reason, str):
            finish = reason
    return Delta(output, text, finish, usage)


def _chat_output(delta: object) -> tuple[str, bool]:
    """``(content, carries output)`` of a chat delta or message: output is non-empty
    content (a string, or a list of parts of which one has non-empty ``text``), reasoning
    text (``reasoning_content``, ``reasoning``) or tool-call arguments."""
    if type(delta) is not dict:
        return "", False
    content = delta.get("content")
    if isinstance(content, str) and content:
        return content, True
    if isinstance(content, list):
        text = "".join(
            part["text"]
            for part in content
            if type(part) is dict and isinstance(part.get("text"), str)
        )
        if text:
            return text, True
    for name in ("reasoning_content", "reasoning"):
        value = delta.get(name)
        if isinstance(value, str) and value:
            return "", True
    calls = delta.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            function = call.get("function") if type(call) is dict else None
            arguments = function.get("arguments") if type(function) is dict else None
            if isinstance(arguments, str) and arguments:
                return "", True
    return "", False


def _usage(value: object) -> Usage | None:
    if type(value) is not dict:
        return None
    counts = [
        _count(value.get(name)) for name in ("prompt_tokens", "completion_tokens", "total_tokens")
    ]
    if counts == [None, None, None]:
        return None
    return Usage(*counts)


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value < 0 or value != value or (isinstance(value, float) and not value.is_integer()):
        return None
    return int(value)


def _error_event(error: object, secrets: frozenset[str]) -> LlmResponseError:
    """The error a 2xx response reported in its body or stream."""
    message, _, code = _error_fields(error)
    status = _status_code(code)
    text = f"the server reported an error: {snippet(message or str(error), set(secrets))}"
    if code is not None:
        text += f" (code {snippet(str(code), set(secrets))})"
    return LlmResponseError(
        text, kind=LlmErrorKind.ERROR_EVENT, error_class=status_class_of(status)
    )


def _error_fields(error: object) -> tuple[str | None, str | None, object]:
    """``(message, type, code)`` of an OpenAI-style error object, a string, or a dict
    with ``message``/``detail`` (FastAPI)."""
    if isinstance(error, str):
        return error, None, None
    if type(error) is not dict:
        return None, None, None
    if type(error.get("error")) is dict:
        return _error_fields(error["error"])
    message = error.get("message", error.get("detail"))
    kind = error.get("type")
    return (
        message if isinstance(message, str) else None,
        kind if isinstance(kind, str) else None,
        error.get("code"),
    )


def _status_code(code: object) -> int | None:
    if isinstance(code, bool):
        return None
    if isinstance(code, str) and code.isascii() and code.isdigit():
        code = int(code)
    return code if isinstance(code, int) and 400 <= code <= 599 else None


# ------------------------------------------------------------------------ status errors

_STATUS_KINDS = {
    401: LlmErrorKind.AUTH,
    403: LlmErrorKind.AUTH,
    408: LlmErrorKind.TIMEOUT,
    504: LlmErrorKind.TIMEOUT,
    425: LlmErrorKind.RATE_LIMIT,
    429: LlmErrorKind.RATE_LIMIT,
    400: LlmErrorKind.BAD_REQUEST,
    413: LlmErrorKind.BAD_REQUEST,
    422: LlmErrorKind.BAD_REQUEST,
}
_LABELS = {
    LlmErrorKind.AUTH: "authentication failed (check the API key and the header it is sent in)",
    LlmErrorKind.UNKNOWN_MODEL: "unknown model or deployment",
    LlmErrorKind.NOT_FOUND: "not found (check the URL: an OpenAI-compatible base ends in /v1)",
    LlmErrorKind.BAD_REQUEST: "the request was refused",
    LlmErrorKind.RATE_LIMIT: "rate limited",
    LlmErrorKind.TIMEOUT: "timed out upstream",
    LlmErrorKind.UPSTREAM: "server error",
}
_MODEL_CODES = frozenset({"model_not_found", "deploymentnotfound", "notfound"})


def status_error(
    status: int,
    body: bytes,
    *,
    reason: str = "",
    headers: Headers | None = None,
    retry_after: float | None = None,
    secrets: frozenset[str] = _NO_SECRETS,
    url: object = None,
    timing: Any = None,
) -> LlmStatusError:
    """The error for a response with ``status >= 400`` and its (possibly empty) body.

    The message is one line: the status, what it means here, and the server's own
    message when the body has one (scrubbed of ``secrets``, cut short).
    """
    try:
        parsed: object = json.loads(body) if body.strip() else None
    except (ValueError, RecursionError):
        parsed = None
    message, error_type, code = _error_fields(parsed)
    if message is None and parsed is None and body.strip():
        message = body.decode("utf-8", errors="replace")
    code_text = None if code is None else str(code)
    kind = _status_kind(status, code_text, message)
    label = _LABELS.get(kind, reason or "error")
    if kind is LlmErrorKind.AUTH and status == 403:
        label = "access denied (the key lacks access to this model or deployment)"
    if kind is LlmErrorKind.RATE_LIMIT and retry_after is not None:
        label = f"rate limited, retry after {retry_after:g} s"
    text = f"HTTP {status}: {label}"
    if message:
        text += f"; the server says {snippet(message, set(secrets))}"
    return LlmStatusError(
        text,
        status=status,
        kind=kind,
        error_type=error_type,
        error_code=code_text,
        headers=headers,
        retry_after=retry_after,
        url=url,
        timing=timing,
    )


def _status_kind(status: int, code: str | None, message: str | None) -> LlmErrorKind:
    if status == 404:
        said = f"{code or ''} {message or ''}".lower()
        if (code or "").lower() in _MODEL_CODES or "model" in said or "deployment" in said:
            return LlmErrorKind.UNKNOWN_MODEL
        return LlmErrorKind.NOT_FOUND
    kind = _STATUS_KINDS.get(status)
    if kind is not None:
        return kind
    return LlmErrorKind.UPSTREAM if status >= 500 else LlmErrorKind.STATUS


# ------------------------------------------------------------------ folding into results


def recorded_headers(headers: Headers) -> dict[str, str]:
    """The rate-limit and utilisation headers worth keeping (lower-case names; the
    first value of a repeated name)."""
    kept: dict[str, str] = {}
    for name, value in headers.items():
        lower = name.lower()
        if lower in _RECORDED or lower.startswith("x-ratelimit-"):
            kept.setdefault(lower, value)
    return kept


def absorb_event(
    api: Api, result: LlmResult, event: SseEvent, secrets: frozenset[str] = _NO_SECRETS
) -> None:
    """Fold one streamed event into ``result`` (``[DONE]`` is the caller's business)."""
    delta = parse_event(api, event, secrets)
    if delta.output:
        result.content_chunks += 1
        if result.first_token is None:
            result.first_token = event.at
        else:
            result.token_times.append(event.at)
    if delta.text:
        result.parts.append(delta.text)
    if delta.finish_reason is not None:
        result.finish_reason = delta.finish_reason
    if delta.usage is not None:
        result.usage = delta.usage


def absorb_body(
    api: Api, result: LlmResult, body: bytes, secrets: frozenset[str] = _NO_SECRETS
) -> None:
    """Fold a whole response body into ``result``."""
    delta = parse_body(api, body, secrets)
    if delta.text:
        result.parts.append(delta.text)
    result.finish_reason = delta.finish_reason
    result.usage = delta.usage
