"""``URL``: an absolute http(s) URL, parsed and checked once, reused for every request.

Parsing is strict on purpose: a load test that sends to the wrong place is worse than one
that refuses to start, so anything we would have to guess about (no scheme, another scheme,
no host, a bad port, whitespace or control characters, credentials in the URL) is a
:class:`~pyattacker.errors.ConfigError` naming the field and the fix. The fragment is
dropped (it is never sent). The bytes a request line needs (``target`` and the ``Host``
header) are encoded here once, not on every request.

``str(url)`` is how a URL is shown (reports, samples, error messages): the value of every
secret-looking query parameter (``?key=``, ``api-key=``, ``token=``, ``sig=``, ...) is
``***`` there (see ``pyattacker._secrets.mask_url``); the request line carries it whole.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

from pyattacker._secrets import MASK, mask_url
from pyattacker.errors import ConfigError

__all__ = ["URL"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
# Whitespace, controls and DEL can never appear in a URL we send; non-ASCII must be
# percent-encoded by the caller (we do not guess an encoding for them).
_FORBIDDEN = re.compile(r"[\x00-\x20\x7f-\U0010ffff]")
_HOST_NAME = re.compile(r"[A-Za-z0-9._~%!$&'()*+,;=-]+", re.ASCII)
_EXAMPLE = "e.g. http://127.0.0.1:8080/path?q=1"


@dataclass(frozen=True, slots=True)
class URL:
    """An absolute ``http``/``https`` URL: ``scheme``, ``host``, ``port`` and ``target``.

    ``host`` is lower-case and unbracketed (``::1`` for ``http://[::1]/``); ``port`` is
    explicit (80/443 when the URL had none); ``target`` is what the request line carries:
    the path (``/`` when empty) plus ``?query`` when there was one. Build one with
    :meth:`parse`; the constructor checks nothing. ``str()`` masks secret query values.
    """

    scheme: str
    host: str
    port: int
    target: str
    # Request-line bytes, computed once per URL (not per request).
    _target_bytes: bytes = field(init=False, repr=False, compare=False)
    _host_header: bytes = field(init=False, repr=False, compare=False)
    _shown: str = field(init=False, repr=False, compare=False)  # str(): secrets masked

    def __post_init__(self) -> None:
        object.__setattr__(self, "_target_bytes", self.target.encode("ascii"))
        object.__setattr__(self, "_host_header", self.authority.encode("ascii"))
        shown = mask_url(f"{self.scheme}://{self.authority}{self.target}")
        object.__setattr__(self, "_shown", shown)

    def __repr__(self) -> str:
        return f"URL({self._shown!r})"

    @classmethod
    def parse(cls, text: str, *, field: str = "url") -> URL:
        """Parse ``text`` or raise :class:`ConfigError` (``field`` names it in the message).

        Accepts ``http://`` and ``https://`` URLs with a host, an optional port in
        1..65535, a path and a query. Refuses everything else, with a hint.
        """
        if not isinstance(text, str):
            raise ConfigError(f"must be a URL string, got {text!r}", field=field, hint=_EXAMPLE)
        if _FORBIDDEN.search(text):
            raise ConfigError(
                f"{mask_url(text)!r} contains whitespace, a control or a non-ASCII character",
                field=field,
                hint="percent-encode it (e.g. %20 for a space)",
            )
        try:
            parts = urlsplit(text)
            port = parts.port
        except ValueError as exc:
            raise ConfigError(
                f"{mask_url(text)!r} is not a usable URL: {exc}", field=field, hint=_EXAMPLE
            ) from exc
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS:
            got = f"scheme {parts.scheme!r}" if parts.scheme else "no scheme"
            raise ConfigError(
                f"{mask_url(text)!r} has {got}",
                field=field,
                hint=f"use http:// or https://, {_EXAMPLE}",
            )
        if parts.username is not None or parts.password is not None:
            raise ConfigError(
                "the URL carries credentials (not repeated here)",
                field=field,
                hint="send them in a header (e.g. Authorization), not in the URL",
            )
        host = _checked_host(parts.hostname, text, field)
        if port == 0:
            raise ConfigError(
                f"{mask_url(text)!r} has port 0", field=field, hint="a port in 1..65535"
            )
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        if not target.startswith("/"):
            raise ConfigError(
                f"{mask_url(text)!r} has no path after its host", field=field, hint=_EXAMPLE
            )
        return cls(scheme, host, port if port is not None else _DEFAULT_PORTS[scheme], target)

    @property
    def origin(self) -> tuple[str, str, int]:
        """``(scheme, host, port)``: what a connection pool is keyed by."""
        return (self.scheme, self.host, self.port)

    @property
    def authority(self) -> str:
        """``host[:port]`` as the ``Host`` header carries it (port only when not default)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        if self.port == _DEFAULT_PORTS.get(self.scheme):
            return host
        return f"{host}:{self.port}"

    def join(self, target: str) -> URL:
        """The same origin with another ``target`` (``/path`` with an optional ``?query``).

        Raises :class:`ConfigError` (field ``target``) unless ``target`` starts with ``/``
        and has no whitespace or control characters. Not a relative-reference resolver.
        """
        if not isinstance(target, str) or not target.startswith("/") or _FORBIDDEN.search(target):
            raise ConfigError(
                f"must be a path starting with '/' and without spaces, got {mask_url(target)!r}",
                field="target",
                hint="e.g. /v1/chat/completions?x=1",
            )
        return URL(self.scheme, self.host, self.port, target.split("#", 1)[0])

    def fill(self, placeholder: str, value: str) -> URL:
        """This URL with every ``placeholder`` in its target replaced by ``value``,
        percent-encoded (a key put into the query: ``?key={key}``). Its ``str()`` shows
        ``***`` where ``value`` went, whatever the parameter's name."""
        filled = self.target.replace(placeholder, quote(value, safe=""))
        url = URL(self.scheme, self.host, self.port, filled)
        object.__setattr__(url, "_shown", self._shown.replace(placeholder, MASK))
        return url

    def __str__(self) -> str:
        return self._shown


def _checked_host(host: str | None, text: str, field: str) -> str:
    if not host:
        raise ConfigError(f"{mask_url(text)!r} has no host", field=field, hint=_EXAMPLE)
    if ":" in host:  # urlsplit already checked the brackets; check the address itself
        try:
            ipaddress.IPv6Address(host.split("%", 1)[0])
        except ValueError as exc:
            raise ConfigError(
                f"{mask_url(text)!r} has a bad IPv6 host",
                field=field,
                hint="e.g. http://[::1]:8080/",
            ) from exc
        return host
    if not _HOST_NAME.fullmatch(host):
        raise ConfigError(f"{mask_url(text)!r} has a bad host {host!r}", field=field, hint=_EXAMPLE)
    return host
