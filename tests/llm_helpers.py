"""Canned OpenAI-like servers on 127.0.0.1 for the LLM client's tests.

A canned server answers every request on a connection with the same bytes, written in
the pieces given (each piece its own write, so pieces may arrive in separate reads), and
records the requests it read. The bytes are built here: OpenAI-style SSE chunks, a
chunked response split at awkward places, a stream cut short, HTML, 429 and 401 answers.
Built on ``http_helpers.Server``; the misbehaviour is the point, which is why these are
hand-written and not the mock LLM server.

``streamed_attempt`` builds the :class:`Attempt` of a streamed answer for the tests of
the measurements and reports.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from http_helpers import Peer, Server
from pyattacker.http import URL, HttpClient, Response, Timeouts, Timing
from pyattacker.measure import Attempt, Outcome

KEY = "sk-test-very-secret-0123456789"

USAGE = {"prompt_tokens": 7, "completion_tokens": 4, "total_tokens": 11}
TOKENS = ["Hello", " there", ",", " friend"]


def chat_events(
    tokens: Sequence[str] = TOKENS,
    *,
    usage: dict[str, int] | None = USAGE,
    finish: str = "stop",
    done: bool = True,
) -> list[str]:
    """The ``data:`` payloads of an OpenAI chat stream: a role chunk with empty content,
    one chunk per token, a finish chunk, a usage chunk (``choices: []``), ``[DONE]``."""
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m"}

    def chunk(delta: dict[str, Any], reason: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": reason}
        return json.dumps({**base, "choices": [choice], "usage": None})

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": token}) for token in tokens]
    events.append(chunk({}, finish))
    if usage is not None:
        events.append(json.dumps({**base, "choices": [], "usage": usage}))
    if done:
        events.append("[DONE]")
    return events


def completion_events(
    tokens: Sequence[str] = TOKENS, *, usage: dict[str, int] = USAGE
) -> list[str]:
    """The payloads of a ``completions`` stream (``choices[0].text``)."""
    base = {"id": "cmpl-1", "object": "text_completion", "model": "m"}
    events = [
        json.dumps({**base, "choices": [{"index": 0, "text": t, "finish_reason": None}]})
        for t in tokens
    ]
    events.append(
        json.dumps({**base, "choices": [{"index": 0, "text": "", "finish_reason": "length"}]})
    )
    events.append(json.dumps({**base, "choices": [], "usage": usage}))
    events.append("[DONE]")
    return events


def sse(events: Sequence[str], newline: str = "\n") -> bytes:
    """``data: X`` + blank line for each payload."""
    return "".join(f"data: {e}{newline}{newline}" for e in events).encode()


def head(
    status: int = 200, headers: Sequence[tuple[str, str]] = (), *, chunked: bool = True
) -> bytes:
    """A status line and headers (``Transfer-Encoding: chunked`` unless told otherwise)."""
    lines = [f"HTTP/1.1 {status} X"]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunked(body: bytes, sizes: Sequence[int] = (1, 3, 7, 2, 11, 5)) -> list[bytes]:
    """``body`` in HTTP chunked encoding, one write per HTTP chunk, HTTP chunks of the
    given sizes in turn (so SSE lines and events are split at awkward bytes), then the
    terminating zero chunk."""
    pieces, i, k = [], 0, 0
    while i < len(body):
        part = body[i : i + sizes[k % len(sizes)]]
        pieces.append(b"%x\r\n%s\r\n" % (len(part), part))
        i, k = i + len(part), k + 1
    pieces.append(b"0\r\n\r\n")
    return pieces


def whole(status: int, body: bytes, headers: Sequence[tuple[str, str]] = ()) -> bytes:
    """A response with a Content-Length body."""
    extra = [("Content-Length", str(len(body))), *headers]
    return head(status, extra, chunked=False) + body


def stream_response(
    events: Sequence[str],
    headers: Sequence[tuple[str, str]] = (("Content-Type", "text/event-stream"),),
    sizes: Sequence[int] = (1, 3, 7, 2, 11, 5),
) -> list[bytes]:
    """A 200 event stream in chunked encoding, split at awkward places."""
    return [head(200, headers), *chunked(sse(events), sizes)]


class Canned:
    """A handler writing ``pieces`` in answer to each request, then keeping the
    connection (``close_after`` closes it after the last piece instead)."""

    def __init__(self, pieces: Sequence[bytes] | bytes, *, close_after: bool = False) -> None:
        self.pieces = [pieces] if isinstance(pieces, bytes) else list(pieces)
        self.close_after = close_after

    async def __call__(self, peer: Peer) -> None:
        while await peer.read_request() is not None:
            for piece in self.pieces:
                await peer.send(piece)
                await asyncio.sleep(0)  # let each write go out on its own
            if self.close_after:
                peer.close()
                return


def canned(pieces: Sequence[bytes] | bytes, *, close_after: bool = False) -> Server:
    """``async with canned(...) as server``: a :class:`Canned` server on ``server.url``."""
    return Server(Canned(pieces, close_after=close_after))


def body_of(server: Server, index: int = -1) -> dict[str, Any]:
    """The JSON body of request ``index`` the server read."""
    return json.loads(server.requests[index].body)  # type: ignore[no-any-return]


class RecordingHttp(HttpClient):
    """An :class:`HttpClient` that keeps the :class:`Timing` of every streamed exchange,
    so a test can compare the LLM client's timestamps with the arrival times the HTTP
    layer took (``timing.chunk_times``)."""

    def __init__(self) -> None:
        super().__init__()
        self.timings: list[Timing] = []

    def stream(
        self,
        method: str,
        url: URL | str,
        *,
        headers: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
        body: bytes | None = None,
        timeouts: Timeouts | None = None,
        timing: Timing | None = None,
    ) -> AbstractAsyncContextManager[Response]:
        timing = timing if timing is not None else Timing(0.0)
        self.timings.append(timing)
        return super().stream(
            method, url, headers=headers, body=body, timeouts=timeouts, timing=timing
        )


def streamed_attempt(
    request: int = 0,
    attempt: int = 1,
    *,
    at: float = 100.0,
    sent: float = 0.125,
    first: float = 0.625,
    chunks: Iterable[float] = (0.75, 1.0, 1.5),
    end: float = 1.625,
    usage: dict[str, float] | None = None,
    outcome: Outcome = Outcome.OK,
    headers: dict[str, str] | None = None,
) -> Attempt:
    """A streamed attempt scheduled at ``at``; every other time is an offset from ``at``."""
    return Attempt(
        request,
        attempt,
        scheduled=at,
        sent=at + sent,
        first_byte=at + sent + 0.0625,
        first_token=at + first,
        token_times=[at + t for t in chunks],
        end=at + end,
        outcome=outcome,
        status=200 if outcome is Outcome.OK else None,
        usage=usage,
        headers=headers,
    )
