"""Codecs: how a task's output (an artifact) becomes bytes in the store, and comes back.

A :class:`CodecRegistry` tries codecs in order and the first whose ``handles(value)`` says
yes encodes it; the codec's ``name`` is stored beside the bytes so that decoding never has
to guess. User codecs (``register``) are tried first, in registration order, then the
built-ins:

- ``"bytes"``: ``bytes`` and ``bytearray``, stored as they are (both decode to ``bytes``);
- ``"dataclass"``: a dataclass instance, as canonical JSON of
  ``{"type": "module:QualName", "value": {field: ...}}``. Decoding imports the type and
  rebuilds it; nested dataclasses, enums, tuples, sets and lists/dicts of them come back
  through the field type hints. A field typed ``Any`` (or a base class) gets the plain JSON
  value back. The type must be importable by that name: a class defined inside a function
  is refused when encoding, and a type that cannot be imported any more is a
  :class:`CodecError` when decoding;
- ``"json"``: ``None``, ``bool``, ``int``, finite ``float``, ``str``, and lists, tuples and
  ``str``-keyed dicts of those, as *canonical* JSON (sorted keys, no spaces, UTF-8), so
  equal values give equal bytes and equal digests whatever the dict insertion order.
  Tuples come back as lists, and subclasses of the basic types (``StrEnum``, ``IntEnum``)
  as the basic type. Non-``str`` keys, NaN and infinities are refused rather than silently
  changed: a resumed run must see exactly what the first run saw.

Anything else is a :class:`~pyattacker.errors.CodecError` (fatal: the same value would
fail the same way again) that names the type and the fix. Bytes that do not decode are a
``CodecError`` too.

Not here: compression, large-blob offloading, and pickling (pickle bytes are neither
stable across versions nor safe to load from a shared store).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import importlib
import json
import math
import types
import typing
from collections.abc import MutableSet
from collections.abc import Set as AbstractSet
from typing import Any, Protocol, runtime_checkable

from pyattacker.errors import CodecError, ConfigError

__all__ = [
    "DEFAULT_CODECS",
    "Codec",
    "CodecRegistry",
    "artifact_digest",
    "canonical_json",
    "default_registry",
    "digest",
    "is_jsonable",
    "json_problem",
    "register_codec",
]

_FIX = (
    "return JSON-able data, a dataclass or bytes, "
    "or register a codec with pyattacker.register_codec"
)
#: Deeper than this is refused: it is either a mistake or a value that refers to itself.
_MAX_DEPTH = 200


@runtime_checkable
class Codec(Protocol):
    """Turns values of some kind into bytes and back.

    ``handles`` must be cheap and must not raise; ``decode(encode(v))`` must give a value
    equal to ``v`` (or one the next task treats the same); equal values should encode to
    equal bytes, since the bytes are content-addressed.
    """

    name: str

    def handles(self, value: Any) -> bool: ...

    def encode(self, value: Any) -> bytes: ...

    def decode(self, data: bytes) -> Any: ...


def digest(data: bytes) -> str:
    """The content address of ``data``: BLAKE2b with a 16-byte digest, as 32 hex digits.

    BLAKE2b is faster than SHA-256 in CPython and needs no extra package; 128 bits make an
    accidental collision among the artifacts of one store (billions at most) negligible.
    It is not meant to resist someone crafting collisions on purpose.
    """
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def artifact_digest(codec: str, data: bytes) -> str:
    """The content address of ``data`` as decoded by ``codec``.

    The codec name is part of the address because the same bytes can mean two values:
    ``b'"a"'`` stored by the ``bytes`` codec is not the string ``"a"`` stored by ``json``.
    """
    name = codec.encode("utf-8")
    return digest(len(name).to_bytes(4, "big") + name + data)


# One encoder for every call: `json.dumps` with options builds a new one each time.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def canonical_json(value: Any) -> bytes:
    """``value`` as canonical JSON bytes: sorted keys, no spaces, UTF-8, no NaN.

    Raises ``TypeError``/``ValueError`` like ``json.dumps`` for what JSON cannot hold; it
    does not refuse non-``str`` keys (use :func:`is_jsonable` first for that).
    """
    text = _CANONICAL.encode(value)
    # "surrogatepass": a lone surrogate in a str must round-trip, not crash the run.
    return text.encode("utf-8", "surrogatepass")


def is_jsonable(value: Any) -> bool:
    """Whether the ``json`` codec takes ``value`` as it is (see the module docstring)."""
    return _json_problem(value, "value", 0) is None


def json_problem(value: Any, where: str = "value") -> str | None:
    """What keeps ``value`` from being canonical JSON (``where[0]['k'] is a set``), if any."""
    return _json_problem(value, where, 0)


def _json_problem(value: Any, where: str, depth: int) -> str | None:
    """What keeps ``value`` from being canonical JSON, or ``None`` if nothing does."""
    found = _problem_at(value, depth)
    if found is None:
        return None
    path, reason = found
    return f"{where}{''.join(reversed(path))} {reason}"


def _problem_at(value: Any, depth: int) -> tuple[list[str], str] | None:
    """``(path from the problem up, in reverse; reason)``; paths are built only on failure,
    since most values have none."""
    if value is None or isinstance(value, bool | int | str):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else ([], f"is {value!r} (JSON has no NaN/inf)")
    if depth >= _MAX_DEPTH:
        return [], f"is nested deeper than {_MAX_DEPTH} levels (or contains itself)"
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _problem_at(item, depth + 1)
            if found is not None:
                found[0].append(f"[{index}]")
                return found
        return None
    if isinstance(value, dict):
        return _dict_problem(value, depth)
    return [], f"is a {_type_name(type(value))}"


def _dict_problem(value: dict[Any, Any], depth: int) -> tuple[list[str], str] | None:
    for key, item in value.items():
        if not isinstance(key, str):
            return [], f"has the {type(key).__name__} key {key!r} (JSON keys are strings)"
        found = _problem_at(item, depth + 1)
        if found is not None:
            found[0].append(f"[{key!r}]")
            return found
    return None


def _type_name(cls: type) -> str:
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )


def _loads(data: bytes, codec: str) -> Any:
    try:
        return json.loads(data.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CodecError(f"{len(data)} bytes are not {codec} JSON: {exc}") from exc


# ------------------------------------------------------------------------ built-in codecs


class _BytesCodec:
    name = "bytes"

    def handles(self, value: Any) -> bool:
        return isinstance(value, bytes | bytearray)

    def encode(self, value: Any) -> bytes:
        return bytes(value)

    def decode(self, data: bytes) -> Any:
        return bytes(data)


class _JsonCodec:
    name = "json"

    def handles(self, value: Any) -> bool:
        # Shallow on purpose: json is the last codec, so a deeper problem found by
        # `encode` is the most useful error anyway, and values are walked once, not twice.
        return value is None or isinstance(value, bool | int | float | str | list | tuple | dict)

    def encode(self, value: Any) -> bytes:
        problem = _json_problem(value, "value", 0)
        if problem is not None:
            raise CodecError(f"cannot store as JSON: {problem}", hint=_FIX)
        return canonical_json(value)

    def decode(self, data: bytes) -> Any:
        return _loads(data, "json")


class _DataclassCodec:
    name = "dataclass"

    def handles(self, value: Any) -> bool:
        return dataclasses.is_dataclass(value) and not isinstance(value, type)

    def encode(self, value: Any) -> bytes:
        ref = _type_ref(type(value))
        return canonical_json({"type": ref, "value": _to_plain(value, "value", 0)})

    def decode(self, data: bytes) -> Any:
        doc = _loads(data, "dataclass")
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
    if depth > _MAX_DEPTH:
        raise CodecError(f"{where} is nested deeper than {_MAX_DEPTH} levels", hint=_FIX)
    if isinstance(value, enum.Enum):
        return _to_plain(value.value, where, depth + 1)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CodecError(f"{where} is {value!r} (JSON has no NaN/inf)", hint=_FIX)
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
    raise CodecError(f"cannot store {where}: a {_type_name(type(value))}", hint=_FIX)


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


_BUILTINS: tuple[Codec, ...] = (_BytesCodec(), _DataclassCodec(), _JsonCodec())
_BUILTIN_NAMES = frozenset(codec.name for codec in _BUILTINS)


# ------------------------------------------------------------------------------ registry


class CodecRegistry:
    """The codecs a run encodes artifacts with: user codecs first, then the built-ins.

    ``encode`` gives ``(codec name, bytes)``; ``decode(name, data)`` reverses it. Neither
    raises anything but :class:`CodecError` for a value or bytes it cannot handle (a user
    codec's own exception is wrapped, with the original as ``__cause__``).
    """

    def __init__(self) -> None:
        self._user: dict[str, Codec] = {}

    def register(self, codec: Codec) -> Codec:
        """Add ``codec`` ahead of the built-ins (after earlier user codecs) and return it.

        Registering a name again replaces that codec in place. Raises ``ConfigError`` for a
        class instead of an instance, a missing method, an empty name or a built-in's name.
        """
        _check_codec(codec)
        self._user[codec.name] = codec
        return codec

    @property
    def codecs(self) -> tuple[Codec, ...]:
        """Every codec, in the order ``encode`` tries them."""
        return (*self._user.values(), *_BUILTINS)

    def stored(self, value: Any) -> tuple[str, bytes, Any]:
        """``(name, data, reread)``: ``encode(value)`` plus the value ``decode`` gives back,
        which is what a resumed run would hand the next task (a tuple comes back a list).
        The Runner hands the next task ``reread`` in every run, so that a run that was
        resumed and one that was not see the same values."""
        if not self._user and type(value) in _PLAIN:
            found = _plain_json(value)
            if found is not None:
                return "json", found[0], found[1]
        name, data = self.encode(value)
        return name, data, self.decode(name, data)

    def encode(self, value: Any) -> tuple[str, bytes]:
        """``(name, data)`` from the first codec that handles ``value``."""
        if not self._user and type(value) in _PLAIN:
            found = _plain_json(value)
            if found is not None:
                return "json", found[0]
        for codec in self.codecs:
            if _handles(codec, value):
                return codec.name, _encode_with(codec, value)
        raise CodecError(f"no codec can store a value of type {_type_name(type(value))}", hint=_FIX)

    def decode(self, name: str, data: bytes) -> Any:
        """The value ``data`` stands for, read by the codec called ``name``."""
        codec = self._by_name(name)
        try:
            return codec.decode(data)
        except CodecError:
            raise
        except Exception as exc:
            raise CodecError(
                f"the {name!r} codec could not decode {len(data)} bytes: {exc}"
            ) from exc

    def copy(self) -> CodecRegistry:
        """A registry with the same codecs; registering on either leaves the other alone."""
        twin = CodecRegistry()
        twin._user = dict(self._user)
        return twin

    def __contains__(self, name: object) -> bool:
        return name in self._user or name in _BUILTIN_NAMES

    def _by_name(self, name: str) -> Codec:
        found = self._user.get(name) or next((c for c in _BUILTINS if c.name == name), None)
        if found is None:
            raise CodecError(
                f"no codec named {name!r} is registered",
                hint="register the codec that stored it (pyattacker.register_codec), then resume",
            )
        return found

    def __repr__(self) -> str:
        return f"<CodecRegistry {[codec.name for codec in self.codecs]}>"


def _check_codec(codec: object) -> None:
    if isinstance(codec, type) or not isinstance(codec, Codec):
        raise ConfigError(
            f"{codec!r} is not a codec instance",
            field="codec",
            hint="pass an instance with name, handles(), encode() and decode()",
        )
    name = getattr(codec, "name", None)
    if not isinstance(name, str) or not name:
        raise ConfigError("a codec needs a non-empty str name", field="codec.name")
    if name in _BUILTIN_NAMES:
        raise ConfigError(
            f"{name!r} is the name of a built-in codec",
            field="codec.name",
            hint="pick another name: stored artifacts name the codec that decodes them",
        )


_PLAIN = frozenset({dict, list, str, int, float, bool, type(None)})


def _plain_json(value: Any) -> tuple[bytes, Any] | None:
    """The json codec's bytes for ``value`` (and the value they read back as) when that is
    equal to ``value``; else
    ``None``, and the careful path (which walks the value to name any problem) decides.

    The hot path of a run: JSON's C encoder and decoder plus one C-level comparison cost
    about half of the Python walk, and a value that reads back equal is one the walk
    accepts (non-``str`` keys, NaN and anything JSON cannot hold never read back equal).
    """
    try:
        text = _CANONICAL.encode(value)
        data = text.encode("utf-8")  # a lone surrogate fails here: the careful path takes it
        # A flat dict of plain scalars reads back as a copy of itself with its keys sorted
        # (str keys; exact types, no subclasses; NaN and infinity were refused by the
        # encoder): skip decoding it. The common case of a run: a row or a small result.
        if type(value) is dict and _flat(value):
            return data, dict(sorted(value.items()))  # key order as the JSON stores it
        back = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return None
    return (data, back) if back == value else None


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _flat(value: dict[Any, Any]) -> bool:
    scalars = _SCALARS
    return all(type(k) is str for k in value) and all(type(v) in scalars for v in value.values())


def _handles(codec: Codec, value: Any) -> bool:
    try:
        return bool(codec.handles(value))
    except Exception as exc:
        raise CodecError(f"codec {codec.name!r} failed in handles(): {exc}") from exc


def _encode_with(codec: Codec, value: Any) -> bytes:
    try:
        data = codec.encode(value)
    except CodecError:
        raise
    except Exception as exc:
        raise CodecError(f"codec {codec.name!r} could not encode: {exc}", hint=_FIX) from exc
    if not isinstance(data, bytes):
        raise CodecError(f"codec {codec.name!r} returned {type(data).__name__}, not bytes")
    return data


#: The process-wide registry: what a Runner uses unless it is given its own.
DEFAULT_CODECS = CodecRegistry()


def default_registry() -> CodecRegistry:
    """The process-wide registry (:data:`DEFAULT_CODECS`) itself, not a copy."""
    return DEFAULT_CODECS


def register_codec(codec: Codec) -> Codec:
    """Add ``codec`` to the process-wide registry; see :meth:`CodecRegistry.register`."""
    return DEFAULT_CODECS.register(codec)
