"""The one boundary where foreign errors become ours.

Sockets, TLS and the parser raise ``OSError``, ``ssl.SSLError`` and httptools'
``HttpParserError``; callers of :mod:`pyattacker.http` see only the
:class:`~pyattacker.errors.HttpError` tree, with the original as ``__cause__``. What an
error means depends on how far the request got (its :class:`Stage`), so that is the second
input of the mapping: a reset before any response byte is a connection failure the request
may never have reached the server through, the same reset mid-body is the server breaking
its response.
"""

from __future__ import annotations

import enum
import ssl
from collections.abc import Iterator
from contextlib import contextmanager

from httptools import HttpParserError, HttpParserUpgrade

from pyattacker.errors import (
    ConnectError,
    HttpError,
    RemoteProtocolError,
    RequestTimeout,
    TlsError,
)
from pyattacker.http._types import Timing
from pyattacker.http._url import URL

__all__ = ["FOREIGN", "Stage", "mapped", "translate"]

# What the mapping knows how to read. Anything else is a bug and propagates unchanged.
FOREIGN: tuple[type[BaseException], ...] = (OSError, HttpParserError, HttpParserUpgrade)


class Stage(enum.Enum):
    """How far a request had got when it failed."""

    CONNECT = "connect"  # opening the connection (TCP, TLS)
    AWAITING = "awaiting"  # sent (or sending), not one byte of response yet
    RESPONSE = "response"  # part of the response has arrived


def translate(
    exc: BaseException | None,
    *,
    url: URL,
    timing: Timing,
    stage: Stage,
    reused: bool = False,
    address: str | None = None,
) -> BaseException:
    """Our error for ``exc`` (``None``: the peer closed cleanly), or ``exc`` itself.

    - parser errors and an unexpected protocol upgrade → :class:`RemoteProtocolError`;
    - at ``CONNECT``: a kernel connect timeout → :class:`RequestTimeout` (``connect``);
      DNS failures and other ``OSError`` → :class:`ConnectError`;
    - at any stage, a TLS failure (``ssl.SSLError``) → :class:`TlsError`;
    - at ``AWAITING``: a close or an ``OSError`` → :class:`ConnectError` (no response
      byte came; ``reused`` says the connection was a pooled keep-alive one);
    - at ``RESPONSE``: a close or an ``OSError`` → :class:`RemoteProtocolError`.

    Anything not in :data:`FOREIGN` is returned unchanged (a bug should surface as
    itself). The caller raises the result ``from exc``. ``address``: where the connection
    went instead of the URL's host (a :class:`~pyattacker.http.Resolve`), named in the
    message.
    """
    where = f"{url.host}:{url.port}" if address is None else f"{url.host}:{url.port} (at {address})"
    if isinstance(exc, HttpParserUpgrade):
        return RemoteProtocolError(
            "server switched protocols (upgrade) unasked", url=url, timing=timing
        )
    if isinstance(exc, HttpParserError):
        return RemoteProtocolError(f"malformed response: {exc}", url=url, timing=timing)
    if exc is not None and not isinstance(exc, OSError):
        return exc
    if isinstance(exc, ssl.SSLError | ssl.CertificateError):
        # At any stage: with TLS 1.3 a server that refuses our client certificate says so
        # after the handshake, on the first read.
        return _tls_error(exc, where, url, timing)
    if stage is Stage.CONNECT:
        return _connect_error(exc, where, url, timing)
    how = "closed the connection" if exc is None else f"broke the connection ({_describe(exc)})"
    if stage is Stage.AWAITING:
        pooled = (
            " (a pooled keep-alive connection; the request was not sent again)" if reused else ""
        )
        if not reused and exc is None and url.scheme == "https":
            pooled = " (over TLS, as a server that wants a client certificate does: --cert FILE)"
        return ConnectError(
            f"{where} {how} before any response byte{pooled}", url=url, timing=timing
        )
    return RemoteProtocolError(
        f"{where} {how} in the middle of the response", url=url, timing=timing
    )


def _connect_error(exc: OSError | None, where: str, url: URL, timing: Timing) -> HttpError:
    if isinstance(exc, TimeoutError):
        return RequestTimeout(
            f"connecting to {where} timed out in the kernel",
            phase="connect",
            url=url,
            timing=timing,
        )
    what = "closed" if exc is None else _describe(exc)
    return ConnectError(f"cannot connect to {where}: {what}", url=url, timing=timing)


def _tls_error(exc: OSError, where: str, url: URL, timing: Timing) -> TlsError:
    reason = getattr(exc, "reason", None) or ""
    if isinstance(exc, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY" in reason:
        hint = " (trust its CA with --cacert FILE, or skip the check with --insecure)"
    elif "CERTIFICATE_REQUIRED" in reason or "certificate required" in str(exc):
        hint = " (the server wants a client certificate: --cert FILE --cert-key FILE)"
    else:
        hint = ""
    return TlsError(f"TLS with {where} failed: {_describe(exc)}{hint}", url=url, timing=timing)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


@contextmanager
def mapped(*, url: URL, timing: Timing, stage: Stage, address: str | None = None) -> Iterator[None]:
    """Raise :func:`translate`'s error for any :data:`FOREIGN` exception in the block."""
    try:
        yield
    except FOREIGN as exc:
        raise translate(exc, url=url, timing=timing, stage=stage, address=address) from exc
