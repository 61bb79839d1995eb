"""OpenAI-compatible requests: where to send (:func:`endpoint_url`, for plain ``.../v1``
bases and Azure OpenAI deployments), how to authenticate (:func:`auth_headers`) and what
to send (:func:`build_request`). Pure functions; the answers are read in ``_parse``.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyattacker.errors import ConfigError
from pyattacker.http import URL
from pyattacker.llm._prompts import Prompt

__all__ = [
    "AZURE_API_VERSION",
    "Api",
    "LlmRequest",
    "api_of",
    "auth_headers",
    "build_request",
    "endpoint_url",
    "is_azure",
]

AZURE_API_VERSION = "2024-10-21"  # GA, and the first GA one to stream usage
_AZURE_HOSTS = (".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com")
_DEPLOYMENT = re.compile(r"[A-Za-z0-9._-]+", re.ASCII)
_RESERVED = ("model", "messages", "prompt", "stream")
# A prompt text with nothing to escape is spliced into the encoded body in place of this
# stand-in, instead of passing through json.dumps, whose escaping scan of a long prompt
# would hold the event loop, and every other request's timing with it.
_TEXT_SLOT = "\x00pyattacker-prompt-text\x00"
_TEXT_SLOT_JSON = json.dumps(_TEXT_SLOT)
_JSON_ESCAPED = (*map(chr, range(0x20)), '"', "\\")


class Api(enum.StrEnum):
    """Which OpenAI endpoint: ``chat`` (``chat/completions``) or ``completions``."""

    CHAT = "chat"
    COMPLETIONS = "completions"

    @property
    def path(self) -> str:
        return "chat/completions" if self is Api.CHAT else "completions"


def api_of(value: Api | str) -> Api:
    try:
        return Api(value)
    except ValueError:
        raise ConfigError(
            f"unknown API {value!r}", field="api", hint="use 'chat' or 'completions'"
        ) from None


# ----------------------------------------------------------------------------- requests


def is_azure(url: URL | str) -> bool:
    """Whether ``url`` is an Azure OpenAI endpoint (by its host or a deployment path),
    which authenticates with an ``api-key`` header instead of ``Authorization``."""
    parsed = url if isinstance(url, URL) else URL.parse(url)
    return parsed.host.endswith(_AZURE_HOSTS) or "/openai/deployments/" in parsed.target


def endpoint_url(
    base: URL | str,
    api: Api | str = Api.CHAT,
    *,
    azure_deployment: str | None = None,
    api_version: str | None = None,
) -> URL:
    """The URL to POST to, from a base URL.

    - a plain OpenAI-compatible base: ``http://host:8000/v1`` → ``.../v1/chat/completions``
      (the base is used as the ``openai`` SDK uses it: nothing is guessed, so a base
      without ``/v1`` stays without it);
    - a URL that already ends in the endpoint's path is used as it is;
    - Azure OpenAI: ``https://NAME.openai.azure.com`` with ``azure_deployment="D"`` →
      ``.../openai/deployments/D/chat/completions?api-version=V`` (``V`` is
      ``api_version``, default :data:`AZURE_API_VERSION`; an ``api-version`` already in the
      URL is kept). Azure's ``/openai/v1`` base is a plain base.

    Raises :class:`ConfigError` for a URL that is not absolute http(s), a deployment name
    that is not URL-safe, an Azure host without a deployment, or a URL that ends in the
    other API's path.
    """
    kind = api_of(api)
    url = base if isinstance(base, URL) else URL.parse(base, field="base_url")
    path, _, query = url.target.partition("?")
    path = path.rstrip("/")
    if path.endswith("/completions"):
        if not path.endswith(f"/{kind.path}") or (
            kind is Api.COMPLETIONS and path.endswith("/chat/completions")
        ):
            raise ConfigError(
                f"{url} is not a {kind.path} endpoint",
                field="base_url",
                hint="give the base URL (e.g. http://host:8000/v1) or the matching API",
            )
    elif azure_deployment is not None:
        if not isinstance(azure_deployment, str) or not _DEPLOYMENT.fullmatch(azure_deployment):
            raise ConfigError(
                f"not a deployment name: {azure_deployment!r}",
                field="azure_deployment",
                hint="letters, digits, '.', '_' and '-'",
            )
        if "/openai/deployments/" not in path:
            path = f"{path}/openai/deployments/{azure_deployment}"
        path = f"{path}/{kind.path}"
    elif url.host.endswith(_AZURE_HOSTS) and "/openai/v1" not in path:
        if "/openai/deployments/" not in path:
            raise ConfigError(
                f"{url} is an Azure OpenAI resource but names no deployment",
                field="azure_deployment",
                hint="pass the deployment name, or use the resource's /openai/v1 base URL",
            )
        path = f"{path}/{kind.path}"
    else:
        path = f"{path}/{kind.path}"
    if "/openai/deployments/" in path and "api-version=" not in query:
        version = api_version or AZURE_API_VERSION
        query = f"{query}&api-version={version}" if query else f"api-version={version}"
    return url.join(f"{path}?{query}" if query else path)


def auth_headers(key: str, *, azure: bool = False) -> tuple[tuple[str, str], ...]:
    """The header that carries ``key``: ``Authorization: Bearer KEY``, or ``api-key: KEY``
    for Azure OpenAI. (Pass ``"{key}"`` to get an attack plan's header template.)"""
    return (("api-key", key),) if azure else (("Authorization", f"Bearer {key}"),)


@dataclass(frozen=True, slots=True)
class LlmRequest:
    """One encoded request: its ``api``, whether it asks for a ``stream``, and the JSON
    ``body`` (not in the repr: it may be long)."""

    api: Api
    stream: bool
    body: bytes = field(repr=False)
    model: str | None = None
    max_tokens: int | None = None


def build_request(
    api: Api | str,
    model: str | None,
    prompt: Prompt | str | Sequence[Mapping[str, Any]],
    *,
    max_tokens: int | None = None,
    stream: bool = True,
    extra: Mapping[str, Any] | None = None,
) -> LlmRequest:
    """The request for ``prompt``: a :class:`Prompt`, a text, or a list of chat messages.

    The body has ``model`` (left out when ``None``, for Azure deployment URLs), ``messages``
    (chat; a text becomes one user message) or ``prompt`` (completions), ``max_tokens``
    (the prompt's own, else ``max_tokens``; left out when neither says), ``stream``, and
    with a stream ``stream_options: {"include_usage": true}`` so that the server reports
    its token counts in a last chunk. ``extra`` adds parameters (``temperature``,
    ``ignore_eos``, ...) and may replace ``max_tokens`` and ``stream_options``, but not
    ``model``, ``messages``, ``prompt`` or ``stream`` (:class:`ConfigError`).

    A value with no JSON form (NaN or an infinity, an object, a lone surrogate) is a
    :class:`ConfigError` naming its field (``extra.temperature``), never a body that says
    ``NaN``. Building is cheap even for a long prompt text: one that needs no escaping is
    copied into the body as it is.
    """
    kind = api_of(api)
    if not isinstance(prompt, Prompt):
        prompt = Prompt(text=prompt) if isinstance(prompt, str) else Prompt(messages=tuple(prompt))
    text = prompt.text
    spliced = text is not None and _needs_no_escaping(text)
    body: dict[str, Any] = {} if model is None else {"model": model}
    if kind is Api.CHAT:
        body["messages"] = (
            list(prompt.messages)
            if prompt.messages is not None
            else [{"role": "user", "content": _TEXT_SLOT if spliced else text}]
        )
    elif prompt.messages is not None:
        raise ConfigError(
            "chat messages cannot be sent to the completions API",
            field="prompt",
            hint="use the chat API, or prompts with 'prompt' text",
        )
    else:
        body["prompt"] = _TEXT_SLOT if spliced else text
    wanted = prompt.max_tokens if prompt.max_tokens is not None else max_tokens
    if wanted is not None:
        body["max_tokens"] = wanted
    body["stream"] = bool(stream)
    if stream:
        body["stream_options"] = {"include_usage": True}
    extra = extra or {}
    for name, value in extra.items():
        if name in _RESERVED:
            raise ConfigError(
                f"{name!r} cannot be an extra parameter",
                field=f"extra.{name}",
                hint="it is set from the model, the prompt and the stream option",
            )
        body[name] = value
    encoded = _encode(body, extra, text if spliced else None)
    return LlmRequest(kind, bool(stream), encoded, model, body.get("max_tokens"))


def _needs_no_escaping(text: str) -> bool:
    """Whether ``text``'s JSON form is just ``text`` in quotes (an ASCII text without
    quotes, backslashes or control characters, such as every synthetic prompt)."""
    return text.isascii() and not any(char in text for char in _JSON_ESCAPED)


def _encode(body: dict[str, Any], extra: Mapping[str, Any], text: str | None) -> bytes:
    """``body`` as compact UTF-8 JSON, with ``text`` (if given) in place of the stand-in.

    Raises :class:`ConfigError` naming the field that has no JSON form: NaN and the
    infinities included, which ``json`` would write as bare ``NaN`` that no JSON parser
    (and no server) accepts.
    """
    try:
        dumped = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        if text is None:
            return dumped.encode()
        if dumped.count(_TEXT_SLOT_JSON) == 1:
            before, _, after = dumped.partition(_TEXT_SLOT_JSON)
            return b"".join((before.encode(), b'"', text.encode(), b'"', after.encode()))
    except (TypeError, ValueError) as exc:  # UnicodeEncodeError (a lone surrogate) included
        raise _not_json(body, extra, exc) from None
    # A model or a parameter spelt like the stand-in: the text goes through json.dumps.
    return _encode(_with_text(body, text), extra, None)


def _with_text(body: dict[str, Any], text: str) -> dict[str, Any]:
    if "prompt" in body:
        return {**body, "prompt": text}
    return {**body, "messages": [{"role": "user", "content": text}]}


def _not_json(body: dict[str, Any], extra: Mapping[str, Any], error: Exception) -> ConfigError:
    """The error naming the first field of ``body`` that cannot be sent as JSON."""
    hint = "NaN, infinities, lone surrogates and Python objects have no JSON form"
    for name, value in body.items():
        try:
            json.dumps(value, ensure_ascii=False, allow_nan=False).encode()
        except (TypeError, ValueError) as exc:
            field = f"extra.{name}" if name in extra else ("prompt" if name == "messages" else name)
            return ConfigError(
                f"{name}={_short(value)} cannot be sent as JSON ({exc})", field=field, hint=hint
            )
    return ConfigError(f"the request cannot be sent as JSON ({error})", field="extra", hint=hint)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:59]}…"
