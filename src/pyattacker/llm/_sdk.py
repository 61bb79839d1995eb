"""The official ``openai`` SDK, with its own retries off.

The SDK retries 408, 409, 429 and 5xx answers and connection errors twice by default,
with backoff, inside one call. Behind a pyattacker retry policy those retries are hidden
work: they are not counted as attempts, their waits land in the measured latency, and
``--retry none`` stops meaning one attempt. So the factories here build clients with
``max_retries=0`` and refuse another value, and :func:`check_no_hidden_retries` warns
about a client built elsewhere that still retries. The Runner calls it for every
``openai`` client a resource hands to a task, with that task's policy
(``pyattacker.run._vendor``).

``openai`` is an optional dependency (``pip install 'pyattacker[openai]'``), imported only
when a factory is called.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from pyattacker.errors import ConfigError
from pyattacker.retry import Retrying, resolve_retry

if TYPE_CHECKING:
    from openai import AsyncAzureOpenAI, AsyncOpenAI

__all__ = [
    "HiddenRetriesWarning",
    "azure_openai_client",
    "check_no_hidden_retries",
    "openai_client",
]

_INSTALL = "pip install 'pyattacker[openai]'"
_RETRIES_HINT = (
    "leave max_retries out: retries belong to the retry policy (Retrying), which counts "
    "and records every attempt"
)


class HiddenRetriesWarning(UserWarning):
    """A vendor client would retry on its own, out of sight of the retry policy."""


def openai_client(base_url: str, api_key: str, **options: Any) -> AsyncOpenAI:
    """``openai.AsyncOpenAI(base_url=..., api_key=..., max_retries=0, **options)``.

    Raises :class:`ConfigError` when ``openai`` is not installed (naming the extra to
    install) or when ``options`` ask for ``max_retries`` other than 0.
    """
    openai = _import_openai()
    _refuse_retries(options)
    client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0, **options)
    return cast("AsyncOpenAI", client)


def azure_openai_client(
    azure_endpoint: str, api_key: str, *, api_version: str, **options: Any
) -> AsyncAzureOpenAI:
    """``openai.AsyncAzureOpenAI(...)`` with ``max_retries=0``; same errors as
    :func:`openai_client`. Pass ``azure_deployment=`` among ``options`` to pin one."""
    openai = _import_openai()
    _refuse_retries(options)
    client = openai.AsyncAzureOpenAI(
        azure_endpoint=azure_endpoint,
        api_key=api_key,
        api_version=api_version,
        max_retries=0,
        **options,
    )
    return cast("AsyncAzureOpenAI", client)


def check_no_hidden_retries(
    client: object,
    retrying: Retrying | Mapping[str, Any] | str | None = None,
    *,
    where: str | None = None,
) -> bool:
    """Warn (:class:`HiddenRetriesWarning`) if ``client`` retries on its own; return
    whether it is clean.

    A client is judged by its ``max_retries`` attribute (the ``openai`` SDK's; anything
    without one is taken as not retrying). Its retries are hidden whatever the policy
    says, so any value above 0 is reported; the message is sharper when the policy
    allows one attempt only, where every SDK retry breaks ``--retry none``. ``retrying``
    is a policy or a spec for :func:`~pyattacker.retry.resolve_retry` (default: none);
    ``where``, if given, says which client it is (``"resource 'llm/key-1' of task 'ask'"``).
    The message names the setting to change and never the client's key.
    """
    retries = getattr(client, "max_retries", 0)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries <= 0:
        return True
    policy = resolve_retry(retrying)
    if policy.max_attempts == 1:
        said = "while the retry policy says none (max_attempts=1)"
        effect = "a throttled request is silently retried"
    else:
        said = f"on top of the retry policy's own (max_attempts={policy.max_attempts})"
        effect = "attempts are undercounted"
    which = f" ({where})" if where else ""
    warnings.warn(
        f"this {type(client).__name__}{which} retries on its own (max_retries={retries}) {said}: "
        f"{effect}, and the waits inflate TTFT and end-to-end latency. Build it with "
        f"max_retries=0 (pyattacker.llm.openai_client does), or "
        f"client.with_options(max_retries=0).",
        HiddenRetriesWarning,
        stacklevel=2,
    )
    return False


def _import_openai() -> Any:
    try:
        import openai
    except ImportError:
        raise ConfigError(
            "the openai package is not installed", field="openai", hint=_INSTALL
        ) from None
    return openai


def _refuse_retries(options: dict[str, Any]) -> None:
    if "max_retries" in options:
        if options["max_retries"] == 0 and not isinstance(options["max_retries"], bool):
            del options["max_retries"]
            return
        raise ConfigError(
            f"max_retries={options['max_retries']!r} would hide retries from the policy",
            field="max_retries",
            hint=_RETRIES_HINT,
        )
