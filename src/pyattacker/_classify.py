"""Reading facts off foreign errors: HTTP status and Retry-After.

Private helpers of :mod:`pyattacker.errors`, which re-exports :func:`retry_after_of`. This
module imports nothing from pyattacker, so ``errors`` can import it at the top without a
cycle. Every function here is total: whatever object it is given (odd attributes,
properties that raise, mock responses), it returns a value or ``None`` and never raises an
``Exception``. (A property raising ``KeyboardInterrupt`` still propagates, on purpose:
swallowing Ctrl-C would be worse than failing to classify.)
"""

from __future__ import annotations

import datetime
import errno
import math
import re
import socket
from collections.abc import Iterable, Iterator
from email.utils import parsedate_to_datetime
from itertools import islice

__all__ = [
    "attribute",
    "http_status_of",
    "network_class_of",
    "retry_after_of",
    "status_class_of",
]

_STATUS_ATTRIBUTES = ("status", "status_code", "http_status")
_RESPONSE_STATUS_ATTRIBUTES = ("status_code", "status")
_STATUS_TEXT = re.compile(r"[1-5][0-9]{2}", re.ASCII)
# Delta-seconds: RFC 9110 allows only digits; a decimal fraction and a sign are accepted
# leniently (negative values clamp to 0). `float()` alone would also take "nan", "1e9",
# "1_0" and non-ASCII digits, which no server means.
_DELTA_SECONDS = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)", re.ASCII)
_MAX_HEADERS = 1000  # a headers object is not trusted to be finite

# Results are `ErrorClass` values spelled as strings: this module must not import
# `pyattacker.errors` (which imports it).
_TIMEOUT, _CONNECTION, _RATE_LIMIT, _UPSTREAM, _FATAL = (
    "timeout",
    "connection",
    "rate_limit",
    "upstream",
    "fatal",
)

# An `OSError` whose errno says the network path failed, for errors a library raised as a
# plain `OSError` (Python maps these errnos to `TimeoutError`/`ConnectionError` subclasses
# only when it builds the exception itself).
_ERRNO_CLASSES: dict[int, str] = {
    code: error_class
    for name, error_class in (
        ("ETIMEDOUT", _TIMEOUT),
        ("ECONNREFUSED", _CONNECTION),
        ("ECONNRESET", _CONNECTION),
        ("ECONNABORTED", _CONNECTION),
        ("EPIPE", _CONNECTION),
        ("ENETUNREACH", _CONNECTION),
        ("ENETDOWN", _CONNECTION),
        ("ENETRESET", _CONNECTION),
        ("EHOSTUNREACH", _CONNECTION),
        ("EHOSTDOWN", _CONNECTION),
    )
    if (code := getattr(errno, name, None)) is not None
}
_EAI_AGAIN: int | None = getattr(socket, "EAI_AGAIN", None)  # DNS: "temporary failure"

# 4xx statuses that mean "this exact request will fail again". Left out on purpose, so they
# fall through to the later rules: 409 (OpenAI-style SDKs retry it; on other APIs it means
# "already exists"), 408/425/429 (mapped elsewhere), and the rest of 4xx, whose meaning
# varies by server (412, 416, 421, 499, ...).
_FATAL_STATUSES = frozenset(
    {400, 401, 402, 403, 404, 405, 406, 410, 411, 413, 414, 415, 422, 431, 451}
)


def attribute(obj: object, name: str) -> object:
    """``getattr(obj, name, None)``, except that a property raising gives ``None`` too."""
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def http_status_of(exc: object) -> int | None:
    """The HTTP status an error carries, or ``None``.

    Looks at ``status``, ``status_code`` and ``http_status`` on the error, then at
    ``response.status_code`` and ``response.status``; the first value that is a status
    wins. A status is an ``int`` (not a ``bool``) or a string of three ASCII digits, in
    100..599; anything else (floats, mocks, ``"OK"``) is skipped, not guessed at.
    """
    response = attribute(exc, "response")
    candidates = [(exc, name) for name in _STATUS_ATTRIBUTES]
    candidates += [(response, name) for name in _RESPONSE_STATUS_ATTRIBUTES]
    for owner, name in candidates:
        if owner is None:
            continue
        status = _as_status(attribute(owner, name))
        if status is not None:
            return status
    return None


def status_class_of(status: int | None) -> str | None:
    """The error class name an HTTP status means, or ``None`` when it says nothing.

    408, 504 → ``timeout``; 425, 429 → ``rate_limit``; any other 5xx → ``upstream``;
    the 4xx in ``_FATAL_STATUSES`` → ``fatal``; everything else → ``None``.
    """
    if status in (408, 504):
        return _TIMEOUT
    if status in (425, 429):
        return _RATE_LIMIT
    if status is not None and 500 <= status <= 599:
        return _UPSTREAM
    return _FATAL if status in _FATAL_STATUSES else None


def network_class_of(exc: object) -> str | None:
    """``timeout`` or ``connection`` for a failure of the network path, else ``None``.

    ``TimeoutError`` (also ``asyncio.TimeoutError`` and ``socket.timeout``) → ``timeout``;
    ``ConnectionError`` and subclasses → ``connection``; ``socket.gaierror`` with
    ``EAI_AGAIN`` → ``connection``; any other ``OSError`` by its errno (``_ERRNO_CLASSES``).
    """
    if isinstance(exc, TimeoutError):
        return _TIMEOUT
    if isinstance(exc, ConnectionError):
        return _CONNECTION
    if isinstance(exc, socket.gaierror):
        return _CONNECTION if exc.errno == _EAI_AGAIN else None
    if isinstance(exc, OSError) and isinstance(exc.errno, int):
        return _ERRNO_CLASSES.get(exc.errno)
    return None


def _as_status(value: object) -> int | None:
    try:
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            status = int(value)
        elif isinstance(value, str) and _STATUS_TEXT.fullmatch(value.strip()):
            status = int(value.strip())
        else:
            return None
        return status if 100 <= status <= 599 else None
    except Exception:
        return None


def retry_after_of(exc: object, *, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait before trying again, or ``None``.

    Sources, first usable one wins:

    1. a ``retry_after`` attribute on the error: seconds as a number, a ``timedelta``, or
       a string read like the header;
    2. headers in ``exc.headers``, then in ``exc.response.headers`` (a mapping, anything
       with ``items()`` such as ``email.message.Message``, or an iterable of name/value
       pairs; names compared case-insensitively, ``bytes`` decoded as Latin-1). In each,
       ``Retry-After-Ms`` (milliseconds, sent by OpenAI and Azure, and preferred by their
       SDKs) before ``Retry-After``.

    A header value is delta-seconds (``"120"``, leniently ``"1.5"``) or an HTTP-date,
    turned into seconds after ``now`` (epoch seconds; default: the current wall-clock
    time). The result is clamped to ``>= 0`` (a date in the past means "now").
    NaN, infinities and unparsable values give ``None``; this function never raises.
    """
    for source in (_from_attribute, _from_headers):
        try:
            seconds = source(exc, now)
        except Exception:
            seconds = None
        if seconds is not None:
            return seconds
    return None


def _from_attribute(exc: object, now: float | None) -> float | None:
    return _seconds(attribute(exc, "retry_after"), now)


def _from_headers(exc: object, now: float | None) -> float | None:
    for headers in (attribute(exc, "headers"), attribute(attribute(exc, "response"), "headers")):
        if headers is None:
            continue
        try:
            found = _retry_after_headers(headers)
        except Exception:
            continue
        milliseconds = _seconds(found.get("retry-after-ms"), now)
        if milliseconds is not None:
            return milliseconds / 1000.0
        seconds = _seconds(found.get("retry-after"), now)
        if seconds is not None:
            return seconds
    return None


def _retry_after_headers(headers: object) -> dict[str, object]:
    """The first ``retry-after`` and ``retry-after-ms`` values, keyed by lower-case name."""
    found: dict[str, object] = {}
    for name, value in _pairs(headers):
        key = _text(name)
        if key is None:
            continue
        key = key.strip().lower()
        if key in ("retry-after", "retry-after-ms"):
            found.setdefault(key, value)
    return found


def _pairs(headers: object) -> Iterator[tuple[object, object]]:
    items = attribute(headers, "items")
    pairs = items() if callable(items) else headers
    if isinstance(pairs, str | bytes) or not isinstance(pairs, Iterable):
        return
    for pair in islice(pairs, _MAX_HEADERS):
        if isinstance(pair, tuple | list) and len(pair) == 2:
            yield pair[0], pair[1]


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return str.__str__(value) if isinstance(value, str) else None


def _seconds(value: object, now: float | None) -> float | None:
    """One Retry-After value in seconds (see :func:`retry_after_of`), or ``None``."""
    try:
        if value is None or isinstance(value, bool):
            return None
        if isinstance(value, int | float):
            return _clamped(float(value))
        if isinstance(value, datetime.timedelta):
            return _clamped(value.total_seconds())
        text = _text(value)
        if text is None:
            return None
        text = text.strip()
        if _DELTA_SECONDS.fullmatch(text):
            return _clamped(float(text))
        return _clamped(_http_date(text) - (_wall_now() if now is None else now))
    except Exception:
        return None


def _http_date(text: str) -> float:
    moment = parsedate_to_datetime(text)  # raises ValueError/TypeError on garbage
    if moment.tzinfo is None:  # "-0000" means "UTC, source unknown" (RFC 5322)
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def _clamped(seconds: float) -> float | None:
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _wall_now() -> float:
    # An HTTP-date is wall-clock time, so it must be compared with wall-clock time, not
    # with the Clock seam's monotonic seconds. `time.time()` is banned (TID251) to keep
    # monotonic decisions on the Clock; this is the one wall-clock reading and callers
    # that need determinism pass `now`.
    return datetime.datetime.now(datetime.UTC).timestamp()
