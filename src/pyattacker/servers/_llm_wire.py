"""What the mock LLM server reads and writes: OpenAI's request and response shapes, as bytes.

Pure functions and constants, no I/O. :func:`parse_ask` turns a request body into an
:class:`Ask` (or raises :class:`BadRequest` with OpenAI's wording); the builders return the
exact bytes of response heads, JSON bodies and server-sent events.

The prompt-token rule lives here and nowhere else (:func:`count_words`): a prompt costs one
token per whitespace-separated word (Python's ``str.split()``) over every message's text
(chat: string contents and ``text`` parts of list contents) or over the prompt string(s)
(completions; a prompt given as token ids counts one token per id). A client that sends a
synthetic prompt of exactly N words is billed exactly N prompt tokens.

The completion text is made of :data:`VOCABULARY` words, each with a leading space and none
needing JSON escapes, so that one token is one word: ``text.split()`` of a completion has
exactly ``completion_tokens`` items, and a token can be spliced into a precomputed event
without encoding it.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any, NamedTuple

__all__ = [
    "VOCABULARY",
    "Ask",
    "BadRequest",
    "Events",
    "chunk",
    "completion_body",
    "count_words",
    "error_body",
    "head",
    "models_body",
    "parse_ask",
    "text_of",
]

CHAT, COMPLETIONS = "chat", "completions"

#: Words the completions are made of: one word is one token (leading space, JSON-safe).
_WORDS = (
    "the quick brown fox jumps over a lazy dog while seven wise owls count every star above "
    "quiet hills and rivers that run past old mills toward distant blue seas where tall ships "
    "carry bright lanterns through fog under silver moons so sailors sing long songs about "
    "home bread fire rain gold stone wind"
)
VOCABULARY: tuple[bytes, ...] = tuple(b" " + word.encode() for word in _WORDS.split())
_LAST_CHUNK = b"0\r\n\r\n"


class BadRequest(Exception):
    """A request OpenAI would answer 400: ``message``, the offending ``param``, a ``code``."""

    def __init__(self, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code


class Ask(NamedTuple):
    """What one completion request asks for, validated."""

    kind: str  # CHAT or COMPLETIONS
    model: str
    stream: bool
    include_usage: bool
    max_tokens: int | None  # max_completion_tokens, else max_tokens, else None
    prompt_tokens: int


def parse_ask(
    kind: str, body: bytes, deployment: str | None = None, *, max_output: int | None = None
) -> Ask:
    """The :class:`Ask` of a ``chat/completions`` or ``completions`` body.

    ``deployment`` (an Azure path's deployment name) is the model, whatever the body says.
    Raises :class:`BadRequest` for a body that is not a JSON object (nested too deeply
    included), a missing or mistyped field, ``n`` other than 1, or a ``max_tokens`` (or
    ``max_completion_tokens``) above ``max_output``, the most a completion may have.
    """
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise BadRequest(
            "We could not parse the JSON body of your request. (HINT: This likely means you "
            "aren't using your HTTP library correctly.)"
        ) from None
    except RecursionError:  # thousands of nested [ or {: the parser gives up, so do we
        raise BadRequest("the request body is nested too deeply to parse") from None
    if not isinstance(data, dict):
        raise BadRequest("the request body must be a JSON object")
    model = deployment if deployment is not None else data.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("you must provide a model parameter", "model")
    stream = _optional(data, "stream", bool) or False
    options = _optional(data, "stream_options", dict)
    if options is not None and not stream:
        raise BadRequest("stream_options is only allowed when stream is true", "stream_options")
    include_usage = bool(options and options.get("include_usage") is True)
    n = _optional(data, "n", int)
    if n is not None and n != 1:
        raise BadRequest("this mock server generates one choice: n must be 1", "n")
    max_tokens = _max_tokens(data, max_output)
    if kind == CHAT:
        prompt_tokens = _chat_prompt_tokens(data.get("messages"))
    else:
        prompt_tokens = _completion_prompt_tokens(data.get("prompt"))
    return Ask(kind, model, stream, include_usage, max_tokens, prompt_tokens)


def count_words(text: str) -> int:
    """Prompt tokens of ``text``: its whitespace-separated words (``len(text.split())``)."""
    return len(text.split())


def _optional(data: dict[str, Any], name: str, kind: type) -> Any:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise BadRequest(f"{value!r} is not of type '{_TYPE_NAMES[kind]}' - '{name}'", name)
    return value


_TYPE_NAMES = {bool: "boolean", dict: "object", int: "integer", list: "array", str: "string"}


def _max_tokens(data: dict[str, Any], most: int | None) -> int | None:
    for name in ("max_completion_tokens", "max_tokens"):
        value = _optional(data, name, int)
        if value is not None:
            if value < 1:
                raise BadRequest(f"{name} must be at least 1, got {value}", name)
            if most is not None and value > most:
                raise BadRequest(
                    f"{name} is too large: {value}. This model supports at most {most} "
                    f"completion tokens, whereas you provided {value}.",
                    name,
                    "invalid_value",
                )
            return int(value)
    return None


def _chat_prompt_tokens(messages: object) -> int:
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty array of message objects", "messages")
    total = 0
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest(f"messages[{index}] must be an object with a role", "messages")
        content = message.get("content")
        if isinstance(content, str):
            total += count_words(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    total += count_words(part["text"])
        elif content is not None:
            raise BadRequest(
                f"messages[{index}].content must be a string or an array of parts", "messages"
            )
    return total


def _completion_prompt_tokens(prompt: object) -> int:
    if isinstance(prompt, str):
        return count_words(prompt)
    if isinstance(prompt, list) and prompt:
        if all(isinstance(p, str) for p in prompt):
            return sum(count_words(p) for p in prompt)
        if all(isinstance(p, int) and not isinstance(p, bool) for p in prompt):
            return len(prompt)  # one prompt as token ids
        if all(isinstance(p, list) and all(isinstance(i, int) for i in p) for p in prompt):
            return sum(len(p) for p in prompt)
    raise BadRequest(
        "prompt must be a string, an array of strings or an array of token ids", "prompt"
    )


# -- response heads and framing --------------------------------------------------------------


def head(
    status: int,
    headers: list[tuple[bytes, bytes]],
    *,
    content_type: bytes,
    length: int | None,
    keep_alive: bool,
    chunked: bool = True,
) -> bytes:
    """An HTTP/1.1 response head. ``length=None`` is a stream: chunked transfer encoding,
    or with ``chunked=False`` (an HTTP/1.0 client) a body that ends when the connection
    closes (``Connection: close`` whatever ``keep_alive`` says)."""
    lines = [b"HTTP/1.1 %d %s" % (status, _phrase(status)), b"Content-Type: " + content_type]
    if length is None:
        if chunked:
            lines.append(b"Transfer-Encoding: chunked")
        else:
            keep_alive = False
        lines.append(b"Cache-Control: no-cache")
    else:
        lines.append(b"Content-Length: %d" % length)
    lines.append(b"Connection: keep-alive" if keep_alive else b"Connection: close")
    lines.extend(name + b": " + value for name, value in headers)
    return b"\r\n".join(lines) + b"\r\n\r\n"


def chunk(data: bytes) -> bytes:
    """``data`` as one chunk of a chunked body."""
    return b"%x\r\n%b\r\n" % (len(data), data)


def _phrase(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b"Status"


def error_body(message: str, kind: str, code: str | None = None, param: str | None = None) -> bytes:
    """OpenAI's error object: ``{"error": {"message", "type", "param", "code"}}``."""
    error = {"message": message, "type": kind, "param": param, "code": code}
    return json.dumps({"error": error}, separators=(",", ":")).encode()


def models_body(models: tuple[str, ...], created: int) -> bytes:
    """``GET /v1/models``: one model object per configured model."""
    data = [_model_object(model, created) for model in models]
    return json.dumps({"object": "list", "data": data}, separators=(",", ":")).encode()


def model_body(model: str, created: int) -> bytes:
    """``GET /v1/models/{model}``."""
    return json.dumps(_model_object(model, created), separators=(",", ":")).encode()


def _model_object(model: str, created: int) -> dict[str, Any]:
    return {"id": model, "object": "model", "created": created, "owned_by": "pyattacker"}


def completion_body(
    ask: Ask, completion_id: str, created: int, text: str, finish: str, completion_tokens: int
) -> bytes:
    """The one JSON body of a non-streamed completion (``chat.completion`` or
    ``text_completion``), usage included."""
    usage = _usage(ask.prompt_tokens, completion_tokens)
    choice: dict[str, Any]
    if ask.kind == CHAT:
        message = {"role": "assistant", "content": text, "refusal": None}
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
        obj = "chat.completion"
    else:
        choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": finish}
        obj = "text_completion"
    body = {
        "id": completion_id,
        "object": obj,
        "created": created,
        "model": ask.model,
        "system_fingerprint": None,
        "choices": [choice],
        "usage": usage,
    }
    return json.dumps(body, separators=(",", ":")).encode()


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


class Events:
    """The server-sent events of one streamed completion, as HTTP chunks (or, with
    ``chunked=False``, for an HTTP/1.0 client, as bare bytes of a body the close ends).

    Content events are spliced from a precomputed prefix (which holds the id, the creation
    time and the model) and a per-word tail, once per word a stream uses: writing a token
    costs a list lookup.
    With ``include_usage`` every chunk carries ``"usage":null`` and a last chunk with
    ``"choices":[]`` and the usage comes before ``[DONE]``, as OpenAI sends them.
    """

    __slots__ = (
        "_chunked",
        "_envelope",
        "_made",
        "_prefix",
        "_prefix_size",
        "_tails",
        "ask",
        "completion_id",
    )

    def __init__(self, ask: Ask, completion_id: str, created: int, *, chunked: bool = True) -> None:
        self.ask = ask
        self.completion_id = completion_id
        self._chunked = chunked
        obj = "chat.completion.chunk" if ask.kind == CHAT else "text_completion"
        fingerprint = ',"system_fingerprint":null' if ask.kind == CHAT else ""
        self._envelope = (
            f'{{"id":{json.dumps(completion_id)},"object":"{obj}","created":{created},'
            f'"model":{json.dumps(ask.model)}{fingerprint},"choices":'
        ).encode()
        if ask.kind == CHAT:
            self._prefix = b"data: " + self._envelope + b'[{"index":0,"delta":{"content":"'
            suffix = b'"},"logprobs":null,"finish_reason":null}]'
        else:
            self._prefix = b"data: " + self._envelope + b'[{"text":"'
            suffix = b'","index":0,"logprobs":null,"finish_reason":null}]'
        suffix += (b',"usage":null' if ask.include_usage else b"") + b"}\n\n"
        self._tails = _tails(suffix + b"\r\n" if chunked else suffix)
        self._prefix_size = len(self._prefix)
        self._made: list[bytes | None] = [None] * len(VOCABULARY)  # each word's chunk, once built

    def token(self, word: int) -> bytes:
        """The chunk of one content event carrying ``VOCABULARY[word]``."""
        made = self._made[word]
        if made is None:
            tail = self._tails[word]
            if self._chunked:
                size = b"%x\r\n" % (self._prefix_size + len(tail) - 2)
                made = self._made[word] = size + self._prefix + tail
            else:
                made = self._made[word] = self._prefix + tail
        return made

    def first(self) -> bytes:
        """The chunk(s) sent with the head: the ``role`` event for chat, nothing else."""
        if self.ask.kind != CHAT:
            return b""
        choice = b'[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
        return self._event(choice + b'"finish_reason":null}]')

    def last(self, finish: str, completion_tokens: int) -> bytes:
        """The finish event, the usage event when asked for, ``[DONE]`` and the last chunk."""
        if self.ask.kind == CHAT:
            choice = b'[{"index":0,"delta":{},"logprobs":null,"finish_reason":"%b"}]'
        else:
            choice = b'[{"text":"","index":0,"logprobs":null,"finish_reason":"%b"}]'
        events = self._event(choice % finish.encode())
        if self.ask.include_usage:
            usage = json.dumps(
                _usage(self.ask.prompt_tokens, completion_tokens), separators=(",", ":")
            )
            events += self._frame(
                b"data: " + self._envelope + b'[],"usage":' + usage.encode() + b"}\n\n"
            )
        events += self._frame(b"data: [DONE]\n\n")
        return events + _LAST_CHUNK if self._chunked else events

    def broken(self) -> bytes:
        """A ``data:`` event whose JSON is cut short: what a broken proxy might pass on."""
        return self._frame(b"data: " + self._envelope + b'[{"index":0,"delta":{"content":"\n\n')

    def _event(self, choices: bytes) -> bytes:
        usage = b',"usage":null' if self.ask.include_usage else b""
        return self._frame(b"data: " + self._envelope + choices + usage + b"}\n\n")

    def _frame(self, data: bytes) -> bytes:
        return chunk(data) if self._chunked else data


_TAILS: dict[bytes, tuple[bytes, ...]] = {}


def _tails(suffix: bytes) -> tuple[bytes, ...]:
    """Each word followed by ``suffix`` (shared by every stream with that suffix)."""
    tails = _TAILS.get(suffix)
    if tails is None:
        tails = _TAILS[suffix] = tuple(word + suffix for word in VOCABULARY)
    return tails


def text_of(start: int, count: int) -> str:
    """The completion text of ``count`` words starting at word ``start`` of the vocabulary."""
    size = len(VOCABULARY)
    return b"".join(VOCABULARY[(start + i) % size] for i in range(count)).decode()
