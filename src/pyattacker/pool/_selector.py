"""``Selector``: which resources of a pool a caller will accept.

A selector matches on ``id``, ``kind``, ``tags`` (all of them must be present), any number of
field paths, and an optional predicate ``where(resource) -> bool``. A field path is a dotted
name (``region`` or ``limits.rpm``) looked up in ``options`` and then in ``meta``; a leading
``options.`` or ``meta.`` picks one explicitly. Keyword arguments use ``__`` for the dots
(``limits__rpm=600``), or pass a dict with dotted keys.

A path that no resource of the pool has at all is a typo, not a filter: ``Pool`` rejects it
with a ``ConfigError`` naming the path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pyattacker.errors import ConfigError
from pyattacker.pool._resource import Resource

__all__ = ["ANY", "Selector"]

_MISSING = object()


def _lookup(resource: Resource, path: str) -> Any:
    head, _, rest = path.partition(".")
    if head in ("options", "meta") and rest:
        roots: tuple[Mapping[str, Any], ...] = (getattr(resource, head),)
        path = rest
    else:
        roots = (resource.options, resource.meta)
    for root in roots:
        value: Any = root
        for part in path.split("."):
            if not isinstance(value, Mapping) or part not in value:
                value = _MISSING
                break
            value = value[part]
        if value is not _MISSING:
            return value
    return _MISSING


@dataclass(frozen=True, slots=True)
class Selector:
    id: str | None = None
    kind: str | None = None
    tags: frozenset[str] = frozenset()
    fields: tuple[tuple[str, Any], ...] = ()
    where: Callable[[Resource], bool] | None = None

    @classmethod
    def build(cls, where: Callable[[Resource], bool] | None = None, **selector: Any) -> Selector:
        """From ``acquire(...)``'s keyword arguments; unknown shapes raise ``ConfigError``."""
        if not selector and where is None:
            return ANY
        rid = selector.pop("id", None)
        kind = selector.pop("kind", None)
        tags = selector.pop("tags", ())
        if isinstance(tags, str):
            tags = (tags,)
        if not isinstance(tags, Iterable):
            raise ConfigError("must be a string or a list of strings", field="selector.tags")
        if where is not None and not callable(where):
            raise ConfigError("must be a callable(resource) -> bool", field="where")
        fields = tuple(sorted((k.replace("__", "."), v) for k, v in selector.items()))
        if rid is None and kind is None and not tags and not fields and where is None:
            return ANY
        return cls(rid, kind, frozenset(tags), fields, where)

    def matches(self, resource: Resource) -> bool:
        if self is ANY:
            return True
        if self.id is not None and resource.id != self.id:
            return False
        if self.kind is not None and resource.kind != self.kind:
            return False
        if self.tags and not self.tags <= resource.tags:
            return False
        for path, wanted in self.fields:
            if _lookup(resource, path) != wanted:
                return False
        return self.where is None or bool(self.where(resource))

    def unknown_paths(self, resources: Iterable[Resource]) -> list[str]:
        """The field paths that not one of ``resources`` has (typos, in practice)."""
        resources = list(resources)
        return [
            path for path, _ in self.fields if all(_lookup(r, path) is _MISSING for r in resources)
        ]

    def describe(self) -> str:
        if self is ANY:
            return "any"
        parts = []
        if self.id is not None:
            parts.append(f"id={self.id}")
        if self.kind is not None:
            parts.append(f"kind={self.kind}")
        if self.tags:
            parts.append(f"tags={','.join(sorted(self.tags))}")
        parts.extend(f"{path}={value!r}" for path, value in self.fields)
        if self.where is not None:
            parts.append(f"where={getattr(self.where, '__name__', 'predicate')}")
        return " ".join(parts)


ANY = Selector()
