"""The ``dataclass`` codec: a dataclass instance as canonical JSON of its type and fields,
rebuilt through the field type hints (nested dataclasses, enums, tuples, sets, lists and
dicts of them) when read back. See ``pyattacker.run._codecs`` for where it sits.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import math
import types
import typing
from collections.abc import MutableSet
from collections.abc import Set as AbstractSet
from typing import Any

from pyattacker.errors import CodecError
from pyattacker.run._json import FIX, MAX_DEPTH, canonical_json, loads, type_name

__all__ = ["DataclassCodec"]


class DataclassCodec:
    name = "dataclass"

    def handles(self, value: Any) -> bool:
        return dataclasses.is_dataclass(value) and not isinstance(value, type)

    def encode(self, value: Any) -> bytes:
        ref = _type_ref(type(value))
        return canonical_json({"type": ref, "value": _to_plain(value, "value", 0)})

    def decode(self, data: bytes) -> Any:
        doc = loads(data, "dataclass")
        if not (isinstance(doc, dict) and set(doc) == {"type", "value"}):
            raise CodecError("not a dataclass artifact (no 'type' and 'value')")
        return _rebuild(_import_type(doc["type"]), doc["value"])


#: Types already checked to be importable by their reference.
_REFS: dict[type, str] = {}


def _type_ref(cls: type) -> str:
    """``module:QualName`` for ``cls``, after checking that importing it gives ``cls`` back."""
    ref = _REFS.get(cls)
    if ref is None:
        ref = f"{cls.__module__}:{cls.__qualname__}"
        found = None if "<locals>" in cls.__qualname__ else _resolve_ref(ref)
        if found is not cls:
            raise CodecError(
                f"dataclass {cls.__qualname__} cannot be imported as {ref}, so a resumed run "
                "could not rebuild it",
                hint="define the dataclass at module level, or register a codec for it",
            )
        _REFS[cls] = ref
    return ref


def _resolve_ref(ref: str) -> Any:
    module_name, _, qualname = ref.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            found = getattr(found, part)
    except Exception:
        return None
    return found


def _import_type(ref: Any) -> type:
    found = _resolve_ref(ref) if isinstance(ref, str) and ":" in ref else None
    if not (isinstance(found, type) and dataclasses.is_dataclass(found)):
        raise CodecError(
            f"the dataclass {ref!r} cannot be imported any more",
            hint="restore the class under that module and name (or resume with the old code)",
        )
    return found


def _to_plain(value: Any, where: str, depth: int) -> Any:
    """``value`` as JSON-ready data; dataclasses become dicts of their ``init`` fields."""
    if depth > MAX_DEPTH:
        raise CodecError(f"{where} is nested deeper than {MAX_DEPTH} levels", hint=FIX)
    if isinstance(value, enum.Enum):
        return _to_plain(value.value, where, depth + 1)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CodecError(f"{where} is {value!r} (JSON has no NaN/inf)", hint=FIX)
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        _type_hints(type(value))  # refuse now a type whose hints could never be resolved
        fields = (f for f in dataclasses.fields(value) if f.init)
        return {
            f.name: _to_plain(getattr(value, f.name), f"{where}.{f.name}", depth + 1)
            for f in fields
        }
    if isinstance(value, list | tuple):
        return [_to_plain(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, set | frozenset):
        # Sorted so that equal sets give equal bytes whatever the hash seed.
        items = [_to_plain(v, f"{where}[...]", depth + 1) for v in value]
        return sorted(items, key=canonical_json)
    if isinstance(value, dict):
        return _dict_to_plain(value, where, depth)
    raise CodecError(f"cannot store {where}: a {type_name(type(value))}", hint=FIX)


def _dict_to_plain(value: dict[Any, Any], where: str, depth: int) -> dict[str, Any]:
    plain: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise CodecError(
                f"{where} has the {type(key).__name__} key {key!r} (JSON keys are strings)",
                hint="use str keys, or register a codec for this type",
            )
        plain[key] = _to_plain(item, f"{where}[{key!r}]", depth + 1)
    return plain


# ---------------------------------------------------------- rebuilding through type hints

#: Resolved field type hints per dataclass (resolving them is slow, and they never change).
_HINTS: dict[type, dict[str, Any]] = {}


def _type_hints(cls: type) -> dict[str, Any]:
    """The resolved field hints of dataclass ``cls``; ``CodecError`` if they cannot be."""
    hints = _HINTS.get(cls)
    if hints is None:
        try:
            hints = typing.get_type_hints(cls)
        except Exception as exc:
            raise CodecError(
                f"the type hints of dataclass {cls.__qualname__} cannot be resolved: {exc}",
                hint="make every annotation importable from the class's module",
            ) from exc
        _HINTS[cls] = hints
    return hints


def _rebuild(cls: type, value: Any) -> Any:
    """An instance of dataclass ``cls`` from the plain dict ``_to_plain`` made of one."""
    if not isinstance(value, dict):
        raise CodecError(f"cannot rebuild {cls.__qualname__} from a {type(value).__name__}")
    hints = _type_hints(cls)
    kwargs = {name: _from_plain(hints.get(name, Any), item) for name, item in value.items()}
    try:
        return cls(**kwargs)
    except Exception as exc:
        raise CodecError(
            f"cannot rebuild {cls.__qualname__} from its stored fields: {exc}",
            hint="the class changed since the value was stored; resume with the old code",
        ) from exc


def _from_plain(hint: Any, value: Any) -> Any:
    """``value`` (plain JSON data) turned back into what ``hint`` describes, where it can."""
    if value is None or hint is Any:
        return value
    if isinstance(hint, type):
        return _from_plain_class(hint, value)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        return _from_union(args, value)
    if isinstance(origin, type):
        return _from_generic(origin, args, value)
    return value  # Literal, TypeVar, NewType...: the JSON value is the best we know


def _from_plain_class(cls: type, value: Any) -> Any:
    if dataclasses.is_dataclass(cls) and isinstance(value, dict):
        return _rebuild(cls, value)
    if issubclass(cls, enum.Enum):
        try:
            return cls(value)
        except ValueError as exc:
            raise CodecError(f"{value!r} is no longer a {cls.__qualname__}") from exc
    if not isinstance(value, list):
        return value
    if issubclass(cls, tuple):
        return cls(*value) if hasattr(cls, "_fields") else cls(value)  # a NamedTuple, or not
    if issubclass(cls, AbstractSet):
        return _SETS.get(cls, cls)(value)
    return value


#: Concrete types for the abstract set hints.
_SETS: dict[type, Any] = {AbstractSet: frozenset, MutableSet: set}


def _from_generic(origin: type, args: tuple[Any, ...], value: Any) -> Any:
    if isinstance(value, dict) and len(args) == 2:
        return {key: _from_plain(args[1], item) for key, item in value.items()}
    if not isinstance(value, list):
        return value
    if issubclass(origin, tuple):
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_from_plain(args[0], item) for item in value)
        if len(args) == len(value):
            return tuple(_from_plain(a, item) for a, item in zip(args, value, strict=True))
        return tuple(value)
    items = [_from_plain(args[0] if args else Any, item) for item in value]
    if issubclass(origin, AbstractSet):
        return set(items) if issubclass(origin, MutableSet) else frozenset(items)
    return items


def _from_union(args: tuple[Any, ...], value: Any) -> Any:
    """The first member of the union that ``value`` fits, rebuilt as that member."""
    for arg in args:
        if _fits(arg, value):
            return _from_plain(arg, value)
    return value


def _fits(hint: Any, value: Any) -> bool:
    if hint is Any:
        return True
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        names = {f.name for f in dataclasses.fields(hint) if f.init}
        return isinstance(value, dict) and set(value) <= names
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return any(member.value == value for member in hint)
    cls = typing.get_origin(hint) or hint
    if not isinstance(cls, type):
        return True
    if issubclass(cls, tuple | AbstractSet | list):
        return isinstance(value, list)
    if cls is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, cls)
