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
    """
    kind = api_of(api)
    if not isinstance(prompt, Prompt):
        prompt = Prompt(text=prompt) if isinstance(prompt, str) else Prompt(messages=tuple(prompt))
    body: dict[str, Any] = {} if model is None else {"model": model}
    if kind is Api.CHAT:
        body["messages"] = (
            list(prompt.messages)
            if prompt.messages is not None
            else [{"role": "user", "content": prompt.text}]
        )
    elif prompt.messages is not None:
        raise ConfigError(
            "chat messages cannot be sent to the completions API",
            field="prompt",
            hint="use the chat API, or prompts with 'prompt' text",
        )
    else:
        body["prompt"] = prompt.text
    wanted = prompt.max_tokens if prompt.max_tokens is not None else max_tokens
    if wanted is not None:
        body["max_tokens"] = wanted
    body["stream"] = bool(stream)
    if stream:
        body["stream_options"] = {"include_usage": True}
    for name, value in (extra or {}).items():
        if name in _RESERVED:
            raise ConfigError(
                f"{name!r} cannot be an extra parameter",
                field=f"extra.{name}",
                hint="it is set from the model, the prompt and the stream option",
            )
        body[name] = value
    try:
        encoded = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"the request is not JSON-serialisable: {exc}", field="extra") from None
    return LlmRequest(kind, bool(stream), encoded, model, body.get("max_tokens"))
