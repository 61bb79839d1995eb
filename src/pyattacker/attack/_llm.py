"""``LlmSpec``: what an LLM attack sends, and how a plan's targets become LLM endpoints.

An LLM attack is an ordinary attack (same engine, schedule, pool, retry policy and two
clocks) whose attempts are OpenAI-compatible requests sent by
:class:`~pyattacker.llm.LlmSender`: a prompt per request ordinal (a retry sends the same
prompt), streamed by default so that every content chunk is timed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pyattacker._checks import check_whole
from pyattacker.errors import ConfigError
from pyattacker.http import URL
from pyattacker.llm import (
    Api,
    PromptSource,
    auth_headers,
    build_request,
    endpoint_url,
    is_azure,
)

__all__ = ["LlmSpec"]


@dataclass(frozen=True)
class LlmSpec:
    """The LLM side of an :class:`~pyattacker.attack.AttackPlan`.

    - ``model``: the ``model`` field of every request (``None`` only for Azure deployment
      URLs, where the deployment names the model).
    - ``prompts``: a :class:`~pyattacker.llm.PromptSource` (``SyntheticPrompts`` for a
      ``--shape``, ``JsonlPrompts`` for a file); request ``n`` sends ``prompts.prompt(n)``.
    - ``max_tokens``: the output cap of a prompt that names none (JSONL lines may).
    - ``api``: ``"chat"`` (``chat/completions``) or ``"completions"``.
    - ``stream``: stream the answer (server-sent events): TTFT and ITL need it.
    - ``azure_deployment`` / ``api_version``: for Azure OpenAI resource URLs.
    - ``extra``: more request parameters (``temperature``, ``ignore_eos``...).
    """

    model: str | None
    prompts: PromptSource
    max_tokens: int | None = None
    api: Api = Api.CHAT
    stream: bool = True
    azure_deployment: str | None = None
    api_version: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.model is not None and (not isinstance(self.model, str) or not self.model.strip()):
            raise ConfigError("must be a non-empty model name", field="llm.model")
        if not callable(getattr(self.prompts, "prompt", None)):
            raise ConfigError(
                f"must be a prompt source, got {type(self.prompts).__name__}",
                field="llm.prompts",
                hint="SyntheticPrompts(context_tokens, max_tokens) or JsonlPrompts(path)",
            )
        if self.max_tokens is not None:
            check_whole(self.max_tokens, "llm.max_tokens", at_least=1)
        try:
            api = Api(self.api)
        except ValueError:
            raise ConfigError(
                f"unknown API {self.api!r}", field="llm.api", hint="use 'chat' or 'completions'"
            ) from None
        object.__setattr__(self, "api", api)
        object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)))
        try:  # the first request, built now: a bad parameter is refused before any traffic
            build_request(
                api,
                self.model,
                self.prompts.prompt(0),
                max_tokens=self.max_tokens,
                stream=self.stream,
                extra=self.extra,
            )
        except ConfigError as exc:
            raise ConfigError(exc.message, field=f"llm.{exc.field}", hint=exc.hint) from None

    def endpoints(self, targets: tuple[URL, ...]) -> tuple[URL, ...]:
        """The URL each target is POSTed at (a base ``.../v1`` gains the API's path)."""
        out = []
        for i, target in enumerate(targets):
            try:
                url = endpoint_url(
                    target,
                    self.api,
                    azure_deployment=self.azure_deployment,
                    api_version=self.api_version,
                )
            except ConfigError as exc:
                raise ConfigError(exc.message, field=f"targets[{i}]", hint=exc.hint) from None
            if self.model is None and "/openai/deployments/" not in url.target:
                raise ConfigError(
                    "no model given",
                    field="llm.model",
                    hint="pass --model NAME (only Azure deployment URLs may leave it out)",
                )
            out.append(url)
        return tuple(out)

    def key_header(self, targets: tuple[URL, ...]) -> tuple[str, str]:
        """The header template that carries each target's key: ``api-key`` for Azure
        OpenAI, ``Authorization: Bearer`` otherwise (one kind for the whole pool)."""
        kinds = {is_azure(url) for url in targets}
        if len(kinds) > 1:
            raise ConfigError(
                "Azure OpenAI and other endpoints are mixed, and they carry keys differently",
                field="targets",
                hint="attack one kind at a time, or give the key header with -H",
            )
        (name, value), *_ = auth_headers("{key}", azure=kinds.pop())
        return name, value
