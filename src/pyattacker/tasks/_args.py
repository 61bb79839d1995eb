"""Checks of a built-in task's arguments, each ``ConfigError`` naming the argument, and the
shape every built-in task's output shares."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pyattacker._checks import check_number
from pyattacker.errors import ConfigError
from pyattacker.pool import Resource

__all__ = [
    "RowShape",
    "flag",
    "mapping",
    "optional_text",
    "result_of",
    "seconds",
    "setting",
    "shape_of",
    "shaped",
    "text",
]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class RowShape:
    """What a built-in task does to the row: the top-level fields its templates ``reads``,
    the field it ``adds`` (its output) and whether the row's fields go on (``keeps``).
    A config check reads it to find a template field that no row will have."""

    reads: frozenset[str] = frozenset()
    adds: str | None = None
    keeps: bool = True


def shaped(
    fn: F,
    templates: Iterable[Any] = (),
    adds: str | None = None,
    keeps: bool = True,
    *,
    given: Iterable[str] = (),
) -> F:
    """``fn`` with its :class:`RowShape` attached (``templates``: ``Template``s; ``given``:
    fields the task fills in itself)."""
    reads = frozenset(f.split(".")[0] for t in templates for f in t.fields)
    reads -= {"input", *given}
    fn.__pyattacker_shape__ = RowShape(reads, adds if keeps else None, keeps)  # type: ignore[attr-defined]
    return fn


def shape_of(fn: object) -> RowShape | None:
    """The shape a built-in task declared; None for any other function."""
    found = getattr(fn, "__pyattacker_shape__", None)
    return found if isinstance(found, RowShape) else None


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
