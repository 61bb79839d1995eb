"""The client a lease hands out: built once per resource, with a vendor SDK's retries off.

A resource's ``factory`` builds its client on the first lease (no factory: the lease hands
out the resource itself). The official ``openai`` and ``anthropic`` SDK clients retry 429s,
5xx answers and broken connections twice by default, inside one call: hidden work that no
retry policy counts, no record shows and no server count matches. So a client whose class
comes from one of those packages and whose ``max_retries`` is above 0 is replaced, before
any lease hands it out, by ``client.with_options(max_retries=0)``; the pool records that as
a ``resource.retries_off`` event. A client that cannot be given zero retries (no
``with_options``, or one that fails) is refused with a ``ConfigError``: better no call than
calls nobody records. Only the class's module is looked at; no SDK is imported here.
"""

from __future__ import annotations

from typing import Any

from pyattacker._secrets import scrub, secret_values
from pyattacker.errors import ConfigError
from pyattacker.pool._resource import Resource

__all__ = ["SDK_PACKAGES", "build_client", "without_retries"]

#: Packages whose clients retry unless told not to.
SDK_PACKAGES = frozenset({"openai", "anthropic"})


def build_client(resource: Resource) -> tuple[object | None, str | None, dict[str, Any] | None]:
    """``(client, None, retries_off)`` or ``(None, error, None)`` when the factory failed.

    ``retries_off`` describes a vendor client whose retries were turned off (``client``,
    ``max_retries`` it had), else None. Raises ``ConfigError`` for a vendor client whose
    retries cannot be turned off."""
    factory = resource.factory
    if factory is None:
        return resource, None, None
    try:
        client = factory(resource)
    except Exception as exc:
        secrets = secret_values(resource.options) | secret_values(resource.meta)
        return None, scrub(f"{type(exc).__name__}: {exc}", secrets), None
    if client is None:
        return None, "factory returned None", None
    quiet, retries_off = without_retries(client, resource.id)
    return quiet, None, retries_off


def without_retries(client: object, where: str) -> tuple[object, dict[str, Any] | None]:
    """``client``, or its zero-retry copy and what was changed when it is a vendor's."""
    if not _from_sdk(client):
        return client, None
    retries = getattr(client, "max_retries", 0)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries <= 0:
        return client, None
    name = type(client).__name__
    try:
        quiet = client.with_options(max_retries=0)  # type: ignore[attr-defined]
    except Exception as exc:
        raise ConfigError(
            f"this {name} retries on its own (max_retries={retries}) and could not be given "
            f"max_retries=0 ({type(exc).__name__})",
            field=f"resources.{where}.factory",
            hint="build the client with max_retries=0: retries belong to the retry policy",
        ) from None
    if getattr(quiet, "max_retries", None) != 0:
        raise ConfigError(
            f"this {name} still retries after with_options(max_retries=0)",
            field=f"resources.{where}.factory",
            hint="build the client with max_retries=0: retries belong to the retry policy",
        )
    return quiet, {"client": name, "max_retries": retries}


def _from_sdk(client: object) -> bool:
    return any(cls.__module__.partition(".")[0] in SDK_PACKAGES for cls in type(client).__mro__)
