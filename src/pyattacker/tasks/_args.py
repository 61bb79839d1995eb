"""Checks of a built-in task's arguments, each ``ConfigError`` naming the argument, and the
shape every built-in task's output shares."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyattacker._checks import check_number
from pyattacker.errors import ConfigError
from pyattacker.pool import Resource

__all__ = ["flag", "mapping", "optional_text", "result_of", "seconds", "setting", "text"]


def text(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"must be a non-empty string, got {value!r}", field=field)
    return value


def optional_text(value: object, field: str) -> str | None:
    return None if value is None else text(value, field)


def flag(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"must be true or false, got {value!r}", field=field)
    return value


def seconds(value: object, field: str) -> float:
    return check_number(value, field, at_least=0, hint="seconds")


def mapping(value: object, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ConfigError(f"must be a mapping of names to values, got {value!r}", field=field)
    return dict(value)


def setting(resource: Resource, name: str) -> Any:
    """A resource's setting: from its ``secrets`` first (where API keys belong), then its
    options; ``None`` when neither has it."""
    options = resource.options
    secrets = options.get("secrets")
    if isinstance(secrets, Mapping) and name in secrets:
        return secrets[name]
    return options.get(name)


def result_of(value: Any, output: str, result: Any, *, carry: bool) -> Any:
    """What a built-in task returns: the input row's fields (``carry``; a value that is not
    a mapping is kept as ``input``) with ``result`` under ``output``."""
    if not carry:
        return result
    if isinstance(value, Mapping):
        return {**value, output: result}
    return {"input": value, output: result}
