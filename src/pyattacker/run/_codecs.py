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

import json
from typing import Any, Protocol, runtime_checkable

from pyattacker import _plugins
from pyattacker.errors import CodecError, ConfigError
from pyattacker.run._dataclass_codec import DataclassCodec
from pyattacker.run._json import (
    CANONICAL,
    FIX,
    artifact_digest,
    canonical_json,
    digest,
    is_jsonable,
    json_problem,
    loads,
    type_name,
)

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
        problem = json_problem(value, "value")
        if problem is not None:
            raise CodecError(f"cannot store as JSON: {problem}", hint=FIX)
        return canonical_json(value)

    def decode(self, data: bytes) -> Any:
        return loads(data, "json")


_BUILTINS: tuple[Codec, ...] = (_BytesCodec(), DataclassCodec(), _JsonCodec())
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
        raise CodecError(f"no codec can store a value of type {type_name(type(value))}", hint=FIX)

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
        if found is None and name.startswith("@null:"):
            raise CodecError(
                "this output was not kept (the run's artifacts: null keeps its digest and "
                "size only)",
                hint="run the pipeline again (--fresh), with --artifacts inline or file",
            )
        if found is None:
            found = self._plugin(name)
        if found is None:
            raise CodecError(
                f"no codec named {name!r} is registered",
                hint="register the codec that stored it (pyattacker.register_codec), then resume",
            )
        return found

    def _plugin(self, name: str) -> Codec | None:
        """The codec an installed plugin declares as ``name`` (entry point group
        ``pyattacker.codecs``: an instance, or a callable making one), registered here."""
        try:
            found = _plugins.load("pyattacker.codecs", name, field="codec")
        except ConfigError as exc:
            raise CodecError(exc.message, hint=exc.hint) from exc
        if found is None:
            return None
        codec = found() if isinstance(found, type) or not isinstance(found, Codec) else found
        return self.register(codec)

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
    much less than the Python walk, and a value that reads back equal is one the walk
    accepts (non-``str`` keys, NaN and anything JSON cannot hold never read back equal).
    """
    try:
        text = CANONICAL.encode(value)
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
        raise CodecError(f"codec {codec.name!r} could not encode: {exc}", hint=FIX) from exc
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
