"""``LlmClient``: one OpenAI-compatible request over our HTTP client, timed per chunk.

The thin async shell around the pure parts: it sends the encoded request, hands each body
chunk (with its arrival time) to the SSE parser and each event to ``_parse``, and turns
whatever went wrong into one of our errors. It never retries (the HTTP client below does
not either), so one call is exactly one request on the wire.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyattacker.errors import ConfigError, HttpError, RemoteProtocolError, ResponseTooLarge
from pyattacker.http import URL, HttpClient, Response, Timeouts, Timing
from pyattacker.http._limits import size_text
from pyattacker.llm._errors import LlmErrorKind, LlmResponseError, secrets_of, snippet
from pyattacker.llm._openai import Api, LlmRequest
from pyattacker.llm._parse import (
    absorb_body,
    absorb_event,
    parse_body,
    recorded_headers,
    status_error,
)
from pyattacker.llm._result import LlmResult
from pyattacker.llm._sse import SseParser

__all__ = ["LlmClient"]

HeaderPairs = Mapping[str, str] | Sequence[tuple[str, str]]


class LlmClient:
    """Sends one OpenAI-compatible request per :meth:`send` through an :class:`HttpClient`.

    It holds no key and no default headers: the caller passes the headers of each request
    (the key among them, see :func:`~pyattacker.llm.auth_headers`), so one client serves
    every key of a pool. Error messages are scrubbed of those headers' secret values.
    """

    __slots__ = ("http",)

    def __init__(self, http: HttpClient) -> None:
        if not isinstance(http, HttpClient):
            raise ConfigError(f"must be an HttpClient, got {type(http).__name__}", field="http")
        self.http = http

    async def send(
        self,
        url: URL | str,
        request: LlmRequest,
        *,
        headers: HeaderPairs | None = None,
        timeouts: Timeouts | None = None,
        result: LlmResult | None = None,
    ) -> LlmResult:
        """Perform ``request`` once against ``url`` and return what it measured.

        ``result``, if given, is filled in as the response arrives, so a caller that keeps
        it still has the timestamps of a request that failed or was cancelled midway.

        Raises, after filling in what it could:

        - :class:`~pyattacker.llm.LlmStatusError` for a status >= 400;
        - :class:`~pyattacker.llm.LlmResponseError` for a 2xx answer that is not an
          OpenAI-compatible one (see :class:`~pyattacker.llm.LlmErrorKind`), including a
          stream that ends before ``[DONE]``;
        - the HTTP client's errors (``ConnectError``, ``RequestTimeout``) as they are;
        - :class:`~pyattacker.errors.ConfigError` for a bad URL or header, before sending.
        """
        result = result if result is not None else LlmResult()
        result.streamed = request.stream
        pairs = _with_content_headers(headers, request.stream)
        secrets = frozenset(secrets_of(pairs))
        try:
            if request.stream:
                await self._stream(url, request, pairs, timeouts, result, secrets)
            else:
                await self._whole(url, request, pairs, timeouts, result, secrets)
        except HttpError as exc:
            _copy_timing(exc.timing, result)
            raise
        return result

    async def _whole(
        self,
        url: URL | str,
        request: LlmRequest,
        headers: list[tuple[str, str]],
        timeouts: Timeouts | None,
        result: LlmResult,
        secrets: frozenset[str],
    ) -> None:
        timing = Timing(0.0)  # ours, so a cancelled request still tells when it was sent
        try:
            response = await self.http.request(
                "POST", url, headers=headers, body=request.body, timeouts=timeouts, timing=timing
            )
        finally:
            _copy_timing(timing, result)
        _take_head(response, result)
        result.bytes_received = response.body_size
        if response.status >= 400:
            raise _status_error(response, response.body, secrets)
        if response.body_size > len(response.body):  # the client kept only a prefix
            kept = len(response.body)
            raise ResponseTooLarge(
                f"response body over {size_text(kept)} (too long to parse)",
                what="body",
                limit=kept,
                url=response.url,
                timing=timing,
            )
        try:
            absorb_body(request.api, result, response.body, secrets)
        except LlmResponseError as exc:
            raise exc.locate(response.url, timing) from None

    async def _stream(
        self,
        url: URL | str,
        request: LlmRequest,
        headers: list[tuple[str, str]],
        timeouts: Timeouts | None,
        result: LlmResult,
        secrets: frozenset[str],
    ) -> None:
        timing = Timing(0.0)  # ours, so a request cancelled before its head still has `sent`
        stream = self.http.stream(
            "POST", url, headers=headers, body=request.body, timeouts=timeouts, timing=timing
        )
        try:
            async with stream as response:
                _take_head(response, result)
                if response.status >= 400:
                    body = await _read_quietly(response, result)
                    raise _status_error(response, body, secrets)
                content_type = response.headers.get("content-type")
                if content_type is not None and not _is_event_stream(content_type):
                    body = await _read_quietly(response, result)
                    raise _not_a_stream(request.api, response, content_type, body, secrets)
                await _read_events(request.api, response, result, secrets)
        finally:
            _copy_timing(timing, result)


async def _read_events(
    api: Api, response: Response, result: LlmResult, secrets: frozenset[str]
) -> None:
    """Parse the event stream into ``result`` until the body ends; it must reach [DONE]."""
    parser = SseParser()
    timing = response.timing

    def on_chunk(chunk: bytes, at: float) -> None:  # in the connection's callback
        result.bytes_received += len(chunk)
        for event in parser.feed(chunk, at):
            if not event.done:
                absorb_event(api, result, event, secrets)

    try:
        await response.consume(on_chunk)
        parser.close()
    except LlmResponseError as exc:
        raise exc.locate(response.url, timing) from None
    except RemoteProtocolError as exc:
        raise LlmResponseError(
            f"the stream broke off after {_chunks(result)}, before [DONE]: {exc.message}",
            kind=LlmErrorKind.STREAM_CUT,
            url=response.url,
            timing=timing,
        ) from exc
    finally:
        result.end = timing.end
    if not parser.done:
        raise LlmResponseError(
            f"the stream ended after {_chunks(result)} without [DONE]",
            kind=LlmErrorKind.STREAM_CUT,
            url=response.url,
            timing=timing,
        )


def _chunks(result: LlmResult) -> str:
    n = result.content_chunks
    return f"{n} content chunk{'' if n == 1 else 's'}"


def _take_head(response: Response, result: LlmResult) -> None:
    """What the status line and the headers tell: status, times, rate-limit headers."""
    result.status = response.status
    _copy_timing(response.timing, result)
    headers = response.headers
    result.headers = recorded_headers(headers)
    result.request_id = headers.get("x-request-id")


def _copy_timing(timing: Timing | None, result: LlmResult) -> None:
    if isinstance(timing, Timing):
        result.sent = timing.sent
        result.first_byte = timing.first_byte
        result.end = timing.end
        if timing.connect_start is not None:  # it opened a connection: the setup's times
            result.connect, result.tls = timing.connect, timing.tls


async def _read_quietly(response: Response, result: LlmResult) -> bytes:
    """The rest of the body; what arrived if it breaks off (the status is the answer)."""
    try:
        body = await response.read()
    except HttpError:
        body = b""
    result.bytes_received = len(body)
    result.end = response.timing.end
    return body


def _status_error(response: Response, body: bytes, secrets: frozenset[str]) -> HttpError:
    return status_error(
        response.status,
        body,
        reason=response.reason,
        headers=response.headers,
        retry_after=response.retry_after,
        secrets=secrets,
        url=response.url,
        timing=response.timing,
    )


def _is_event_stream(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == "text/event-stream"


def _not_a_stream(
    api: Api, response: Response, content_type: str, body: bytes, secrets: frozenset[str]
) -> LlmResponseError:
    """A stream was asked for and another body came: say what it was."""
    what = f"expected an event stream, got {snippet(content_type, set(secrets), 60)}"
    try:
        parse_body(api, body, secrets)
    except LlmResponseError as exc:
        if exc.kind is LlmErrorKind.ERROR_EVENT:
            return exc.locate(response.url, response.timing)
        message = f"{what}; {exc.message}"
    else:
        message = f"{what} with a whole completion: does the server support stream=true?"
    return LlmResponseError(
        message, kind=LlmErrorKind.NOT_EVENT_STREAM, url=response.url, timing=response.timing
    )


def _with_content_headers(headers: HeaderPairs | None, stream: bool) -> list[tuple[str, str]]:
    """The caller's headers plus ``Content-Type`` and ``Accept`` unless it set them."""
    if headers is None:
        pairs: list[tuple[str, str]] = []
    elif isinstance(headers, Mapping):
        pairs = list(headers.items())
    else:
        pairs = [(name, value) for name, value in headers]
    names = {name.lower() for name, _ in pairs if isinstance(name, str)}
    if "content-type" not in names:
        pairs.append(("Content-Type", "application/json"))
    if "accept" not in names:
        pairs.append(("Accept", "text/event-stream" if stream else "application/json"))
    return pairs
