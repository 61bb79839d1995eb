"""Encoding a request head: checked header bytes, the defaults encoded once per client.

The head is built by one ``bytes.join`` per request. Everything that does not change per
request (the default headers, the URL's target and ``Host``) is encoded ahead of time, so a
request without extra headers costs a dictionary lookup and one join.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from pyattacker._version import __version__
from pyattacker.errors import ConfigError
from pyattacker.http._url import URL

__all__ = ["HeadersInput", "RequestEncoder", "check_request"]

HeadersInput = Mapping[str, str] | Sequence[tuple[str, str]]

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+", re.ASCII)
_BAD_VALUE = re.compile(r"[\r\n\x00]")
# Headers the client owns: it frames the body itself (Content-Length from `body`) and does
# not send chunked request bodies. A caller's own value could desynchronise the connection.
_OWNED = frozenset({"content-length", "transfer-encoding"})
# Methods whose requests carry a body by convention: without one, say so (RFC 9110 §8.6).
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_LARGE_BODY = 64 * 1024  # above this, the body is written beside the head, not copied into it
_MEMO_ENTRIES = 64  # encodings remembered (see RequestEncoder.encode)
_MEMO_BODY = 4 * 1024  # the largest body an encoding is remembered with


_Encoded = tuple[bytes, bytes | None, bool]


class RequestEncoder:
    """Turns ``(method, url, headers, body)`` into the bytes to write, or a ``ConfigError``.

    ``defaults`` are sent on every request (a caller's header of the same name replaces
    the default for that request). Header names must be HTTP tokens and values must be
    Latin-1 without CR, LF or NUL; ``Content-Length`` and ``Transfer-Encoding`` are the
    client's own and refused. The encoder keeps no per-request state; it remembers the
    last encoding per URL and headers objects when headers and body cannot change (a
    tuple of string pairs or ``None``; ``bytes`` of at most 4 KiB or ``None``), and gives
    it again for the same objects.
    """

    __slots__ = ("_default_blob", "_default_names", "_defaults", "_memo", "_methods")

    def __init__(self, defaults: HeadersInput | None = None) -> None:
        merged = {"user-agent": _line("User-Agent", f"pyattacker/{__version__}", "headers")}
        for name, value in _pairs(defaults, "headers"):
            line = _line(name, value, "headers")
            if name.lower() in _OWNED or name.lower() == "host":
                raise ConfigError(
                    f"header {name!r} cannot be a default",
                    field=f"headers.{name}",
                    hint="the client sets it per request from the URL and the body",
                )
            merged[name.lower()] = line
        self._default_names = list(merged)
        self._defaults = list(merged.values())
        self._default_blob = b"".join(self._defaults)
        self._methods: dict[str, bytes] = {}
        # The last encoding per (URL, headers) object pair, for unchangeable headers and a
        # small body: a load test sends the same request again and again, and encoding
        # it anew each time is wasted work. At most _MEMO_ENTRIES of at most ~2 x
        # _MEMO_BODY each: the memo keeps what it holds alive, so never a large body.
        self._memo: dict[tuple[int, int], tuple[str, URL, object, object, _Encoded]] = {}

    def encode(
        self, method: str, url: URL, headers: HeadersInput | None, body: bytes | None
    ) -> tuple[bytes, bytes | None, bool]:
        """``(head, separate_body, keep_alive)`` for one request.

        ``head`` includes the body when it is small (one write, one packet);
        ``separate_body`` is the body when it is too large to copy, else ``None``.
        ``keep_alive`` is false when the caller asked for ``Connection: close``.
        """
        key = (id(url), id(headers))
        memo = self._memo.get(key)
        if (
            memo is not None
            and memo[0] == method
            and memo[1] is url
            and memo[2] is headers
            and memo[3] is body
        ):
            return memo[4]
        encoded = self._encode(method, url, headers, body)
        if cacheable(headers, body):
            if len(self._memo) >= _MEMO_ENTRIES:
                self._memo.clear()
            self._memo[key] = (method, url, headers, body, encoded)
        return encoded

    def _encode(
        self, method: str, url: URL, headers: HeadersInput | None, body: bytes | None
    ) -> _Encoded:
        verb = self._methods.get(method) or self._method(method)
        host = url._host_header
        defaults = self._default_blob
        extra = b""
        keep_alive = True
        if headers:
            extra, host, defaults, keep_alive = self._extra(headers, host)
        if body is None:
            length = b"Content-Length: 0\r\n" if method in _BODY_METHODS else b""
        else:
            length = b"Content-Length: %d\r\n" % len(body)
        parts = [verb, b" ", url._target_bytes, b" HTTP/1.1\r\nHost: ", host, b"\r\n"]
        parts += (defaults, extra, length, b"\r\n")
        if body is not None and len(body) <= _LARGE_BODY:
            parts.append(body)
            body = None
        return b"".join(parts), body, keep_alive

    def _method(self, method: str) -> bytes:
        if not isinstance(method, str) or not _TOKEN.fullmatch(method):
            raise ConfigError(
                f"not an HTTP method: {method!r}", field="method", hint="e.g. GET or POST"
            )
        encoded = method.encode("ascii")
        if len(self._methods) < 64:  # a caller inventing methods cannot grow this forever
            self._methods[method] = encoded
        return encoded

    def _extra(self, headers: HeadersInput, host: bytes) -> tuple[bytes, bytes, bytes, bool]:
        """The caller's header lines, the Host to send, the defaults left, keep-alive."""
        lines: list[bytes] = []
        replaced: set[str] = set()
        keep_alive = True
        for name, value in _pairs(headers, "headers"):
            line = _line(name, value, "headers")
            lower = name.lower()
            if lower in _OWNED:
                raise ConfigError(
                    f"header {name!r} is set by the client",
                    field=f"headers.{name}",
                    hint="pass the body; its length is sent for you",
                )
            if lower == "host":
                host = line[len(name) + 2 : -2]
                continue
            if lower == "connection" and "close" in value.lower().replace(" ", "").split(","):
                keep_alive = False
            replaced.add(lower)
            lines.append(line)
        defaults = self._default_blob
        if replaced.intersection(self._default_names):
            kept = zip(self._default_names, self._defaults, strict=True)
            defaults = b"".join(line for lower, line in kept if lower not in replaced)
        return b"".join(lines), host, defaults, keep_alive


def cacheable(headers: HeadersInput | None, body: bytes | None) -> bool:
    """Whether a request's encoding may be remembered and given again for the same
    ``headers`` and ``body`` objects: neither can change (headers ``None`` or a tuple of
    string pairs, body ``None`` or ``bytes``), and the body is small enough to keep."""
    small = body is None or (type(body) is bytes and len(body) <= _MEMO_BODY)
    return small and _immutable(headers)


def _immutable(headers: HeadersInput | None) -> bool:
    """Whether ``headers`` can never change: ``None``, or a tuple of ``(str, str)`` tuples."""
    return headers is None or (
        type(headers) is tuple
        and all(type(pair) is tuple and all(type(x) is str for x in pair) for pair in headers)
    )


def _pairs(headers: HeadersInput | None, field: str) -> list[tuple[str, str]]:
    if headers is None:
        return []
    if isinstance(headers, Mapping):
        return list(headers.items())
    pairs = list(headers)
    for pair in pairs:
        if not (isinstance(pair, tuple | list) and len(pair) == 2):
            raise ConfigError(
                f"not a (name, value) pair: {pair!r}",
                field=field,
                hint="a mapping or a list of (name, value) pairs",
            )
    return [(pair[0], pair[1]) for pair in pairs]


def _line(name: str, value: object, field: str) -> bytes:
    """``b"Name: value\\r\\n"``, or a ``ConfigError`` naming the header."""
    encoded = _value(name, value, field)  # checks the name too, before it is encoded
    return b"%s: %s\r\n" % (name.encode("ascii"), encoded)


def _value(name: object, value: object, field: str) -> bytes:
    """The encoded value of one header, checked; ``ConfigError`` naming the header."""
    if not isinstance(name, str) or not _TOKEN.fullmatch(name):
        raise ConfigError(
            f"not a valid header name: {name!r}",
            field=field,
            hint="letters, digits and !#$%&'*+-.^_`|~ only",
        )
    if not isinstance(value, str):
        raise ConfigError(f"header value must be a string, got {value!r}", field=f"{field}.{name}")
    if _BAD_VALUE.search(value):
        raise ConfigError(
            f"header {name!r} contains CR, LF or NUL",
            field=f"{field}.{name}",
            hint="header values are one line",
        )
    try:
        return value.strip(" \t").encode("latin-1")
    except UnicodeEncodeError as exc:
        raise ConfigError(
            f"header {name!r} has characters outside Latin-1",
            field=f"{field}.{name}",
            hint="percent-encode or base64 them",
        ) from exc


def check_request(
    method: str, url: URL, *, headers: HeadersInput | None = None, body: bytes | None = None
) -> None:
    """Raise the :class:`~pyattacker.errors.ConfigError` the client would raise for this
    request (bad method, header name or value, a header the client owns), sending nothing.

    For callers that must refuse bad input before any traffic (``AttackPlan``).
    """
    RequestEncoder().encode(method, url, headers, body)
