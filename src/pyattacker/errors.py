"""Every error pyattacker raises, and the one function that classifies any error.

The tree (our mistakes on the left, the endpoint's on the right)::

    PyAttackerError                      exit 1 unless stated
    ├── ConfigError                      exit 2: bad input; names the field and the fix
    │   └── PoolNotFound                 a pool name nobody registered (also a ResourceError)
    ├── ResourceError                    something about pools, resources and leases
    │   ├── ResourceUnavailable          no lease could be handed out (pool, selector, reasons)
    │   │   ├── AcquireTimeout           ... within the caller's timeout (timeout_s)
    │   │   └── NoUsableResource         ... ever: every resource it may use is dead or revoked
    │   ├── PoolNotFound
    │   └── LeaseLeakError               a lease outlived its task (strict mode only)
    ├── RetryableError                   raise it to say "try again" (error class retryable)
    ├── FatalError                       raise it to say "never retry this" (error class fatal)
    │   └── CodecError                   a task's output has no codec to store it with
    ├── StoreError                       the durable record could not be read or written
    ├── IllegalTransition                a health event the state machine forbids
    ├── SimulationError                  the virtual-time loop could not go on
    │   ├── SimulationStalled            nothing runnable and no timer pending
    │   └── WallBudgetExceeded           real seconds ran out before the simulation finished
    └── HttpError                        one HTTP request failed (url, timing)
        ├── ConnectError                 connection: refused, reset, DNS, closed before a reply
        │   └── TlsError                 tls: a TLS failure (certificate not trusted, ...)
        ├── RedirectError                redirect: a 3xx not followed (or too many hops)
        ├── RequestTimeout               timeout, in ``phase`` connect | read | total
        ├── RemoteProtocolError          upstream: malformed response, closed mid-body
        │   └── ResponseTooLarge         protocol: a response past the client's limits
        └── HttpStatusError              a status >= 400 (status, headers, retry_after)

Every class carries the context that helps the reader (``pool``, ``resource``,
``selector``, ``attempt`` where they apply) and renders it in ``str()``.

Classification (:func:`error_class_of`) lives at the end of this module: one pure function
for every foreign error, so retry policies, reports and the store agree on what an error
*was*. :func:`retry_after_of` (what the server asked us to wait) is re-exported from the
private ``pyattacker._classify``, which also reads HTTP statuses for the classifier.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from pyattacker._classify import (
    attribute,
    http_status_of,
    network_class_of,
    retry_after_of,
    status_class_of,
)
from pyattacker._secrets import mask_url

__all__ = [
    "AcquireTimeout",
    "CodecError",
    "ConfigError",
    "ConnectError",
    "ErrorClass",
    "FatalError",
    "HttpError",
    "HttpStatusError",
    "IllegalTransition",
    "LeaseLeakError",
    "NoUsableResource",
    "PoolNotFound",
    "PyAttackerError",
    "RedirectError",
    "RemoteProtocolError",
    "RequestTimeout",
    "ResourceError",
    "ResourceUnavailable",
    "ResponseTooLarge",
    "RetryableError",
    "SimulationError",
    "SimulationStalled",
    "StoreError",
    "TlsError",
    "WallBudgetExceeded",
    "error_class_of",
    "retry_after_of",
]


class ErrorClass(enum.StrEnum):
    """What kind of failure an error was. The first five are retried by default."""

    RETRYABLE = "retryable"
    RATE_LIMIT = "rate_limit"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    UPSTREAM = "upstream"
    PROTOCOL = "protocol"
    INVALID = "invalid"
    FATAL = "fatal"
    CANCELLED = "cancelled"
    NO_USABLE_RESOURCE = "no_usable_resource"
    UNKNOWN = "unknown"
    TLS = "tls"
    REDIRECT = "redirect"

    @property
    def retried_by_default(self) -> bool:
        return self in _RETRIED_BY_DEFAULT


_RETRIED_BY_DEFAULT = frozenset(
    {
        ErrorClass.RETRYABLE,
        ErrorClass.RATE_LIMIT,
        ErrorClass.TIMEOUT,
        ErrorClass.CONNECTION,
        ErrorClass.UPSTREAM,
    }
)


class PyAttackerError(Exception):
    """Base of every error pyattacker raises on purpose.

    ``exit_code`` is what the CLI exits with when this error ends a command.
    """

    exit_code: ClassVar[int] = 1

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.context: dict[str, Any] = {k: v for k, v in context.items() if v is not None}

    def __str__(self) -> str:
        if not self.context:
            return self.message
        details = ", ".join(f"{k}={v!r}" for k, v in self.context.items())
        return f"{self.message} ({details})"


class ConfigError(PyAttackerError):
    """Bad input from the user: a value, a name, a shape. Nothing was changed.

    ``field`` names what was wrong (a dotted path where it helps) and ``hint`` the fix.
    """

    exit_code: ClassVar[int] = 2

    def __init__(
        self, message: str, *, field: str | None = None, hint: str | None = None, **context: Any
    ) -> None:
        super().__init__(message, **context)
        self.field = field
        self.hint = hint

    def __str__(self) -> str:
        text = f"{self.field}: {self.message}" if self.field else self.message
        if self.hint:
            text = f"{text} — {self.hint}"
        return text


class ResourceError(PyAttackerError):
    """Something about pools, resources or leases."""

    def __init__(
        self,
        message: str,
        *,
        pool: str | None = None,
        resource: str | None = None,
        selector: str | None = None,
        attempt: int | None = None,
        **context: Any,
    ) -> None:
        super().__init__(
            message, pool=pool, resource=resource, selector=selector, attempt=attempt, **context
        )
        self.pool = pool
        self.resource = resource
        self.selector = selector
        self.attempt = attempt


class ResourceUnavailable(ResourceError):
    """No lease could be handed out. ``reasons`` says why, per pool or resource."""

    def __init__(
        self,
        message: str,
        *,
        reasons: Mapping[str, str] | None = None,
        **context: Any,
    ) -> None:
        super().__init__(message, **context)
        self.reasons: dict[str, str] = dict(reasons or {})

    def __str__(self) -> str:
        text = super().__str__()
        if self.reasons:
            text += "; " + "; ".join(f"{k}: {v}" for k, v in self.reasons.items())
        return text


class AcquireTimeout(ResourceUnavailable):
    """No lease within the caller's ``timeout_s`` (measured on the pool's clock)."""

    def __init__(self, message: str, *, timeout_s: float | None = None, **context: Any) -> None:
        super().__init__(message, timeout_s=timeout_s, **context)
        self.timeout_s = timeout_s


class NoUsableResource(ResourceUnavailable):
    """Every resource a caller may use is DEAD or REVOKED and nothing can bring one back.

    Raised at once instead of waiting forever: no cooldown is armed, no lease on a dead
    one is still out (a success reported through it would revive it). ``reasons`` names
    each resource and its state. Classified ``no_usable_resource``, which no default retry
    policy retries (waiting cannot help; publishing a resource can).
    """

    error_class: ClassVar[str] = ErrorClass.NO_USABLE_RESOURCE


class PoolNotFound(ResourceError, ConfigError):
    """A pool name that is not registered: a configuration mistake, so exit code 2."""

    exit_code: ClassVar[int] = 2

    def __init__(self, name: str, *, known: Sequence[str] = ()) -> None:
        known_text = ", ".join(sorted(known)) or "none"
        ResourceError.__init__(self, f"no pool named {name!r}", pool=name)
        self.field = "pool"
        self.hint = f"known pools: {known_text}"
        self.known = tuple(known)

    def __str__(self) -> str:
        return ConfigError.__str__(self)


class LeaseLeakError(ResourceError):
    """A lease was still held when its task ended (raised only in strict mode)."""


class RetryableError(PyAttackerError):
    """Raise from a task to ask for a retry; classified ``retryable``."""

    error_class: ClassVar[str] = ErrorClass.RETRYABLE


class FatalError(PyAttackerError):
    """Raise from a task to forbid retries; classified ``fatal`` and never retried."""

    error_class: ClassVar[str] = ErrorClass.FATAL


class CodecError(FatalError):
    """A value no registered codec can encode (or stored bytes that no longer decode).

    Fatal: running the task again would produce the same value. ``field`` names where the
    value came from (``task "judge" output``) and ``hint`` the fix.
    """


class StoreError(PyAttackerError):
    """The durable record could not be read or written (disk full, locked, corrupt).

    A run that cannot record stops: going on would lose the facts it promised to keep.
    ``location`` names the store.
    """


class IllegalTransition(PyAttackerError):
    """A health event that the state machine does not allow from the current state."""


class SimulationError(PyAttackerError):
    """The virtual-time event loop could not go on; ``context`` carries the counts."""


class SimulationStalled(SimulationError):
    """Nothing is runnable and no timer is pending: the simulation can never progress."""


class WallBudgetExceeded(SimulationError):
    """The real-time budget ran out before the simulated work finished."""


class HttpError(PyAttackerError):
    """One HTTP request failed. Raised by :mod:`pyattacker.http`, which never retries.

    ``url`` is the request's URL and ``timing`` its :class:`pyattacker.http.Timing` as far
    as the request got (typed loosely here: this module sits below the HTTP client). The
    foreign error that caused it, if any, is ``__cause__``.
    """

    def __init__(
        self, message: str, *, url: object = None, timing: Any = None, **context: Any
    ) -> None:
        # Shown masked (``?key=***``): str() of our URL masks, and a plain string is
        # masked here, so no message, report or log line carries a key from a query.
        super().__init__(message, url=None if url is None else mask_url(str(url)), **context)
        self.url = url
        self.timing = timing


class ConnectError(HttpError):
    """No response could start: refused, reset, DNS failure, TLS handshake failure, or the
    server closed the connection before sending a byte of its response."""

    error_class: ClassVar[str] = ErrorClass.CONNECTION


class TlsError(ConnectError):
    """TLS failed: the server's certificate is not trusted (or not for this host), the
    server refused our client certificate, or the two sides share no protocol. Not
    retried by default: trying again meets the same certificate."""

    error_class: ClassVar[str] = ErrorClass.TLS


class RedirectError(HttpError):
    """A 3xx answer with a ``Location`` that was not followed (``--follow-redirects``
    is 0, or its hops ran out): ``status`` and ``location`` say where it pointed."""

    error_class: ClassVar[str] = ErrorClass.REDIRECT

    def __init__(self, message: str, *, status: int, location: str, **context: Any) -> None:
        super().__init__(message, status=status, **context)
        self.status = status
        self.location = location


class RequestTimeout(HttpError):
    """A timeout of the request ran out; ``phase`` says which.

    ``"connect"``: waiting for a pooled connection or opening one; ``"read"``: no byte for
    ``Timeouts.read`` seconds while a response was due; ``"total"``: the whole request.
    """

    error_class: ClassVar[str] = ErrorClass.TIMEOUT

    def __init__(
        self, message: str, *, phase: str, timeout_s: float | None = None, **context: Any
    ) -> None:
        super().__init__(message, phase=phase, timeout_s=timeout_s, **context)
        self.phase = phase
        self.timeout_s = timeout_s


class RemoteProtocolError(HttpError):
    """The server broke HTTP/1.1: a malformed response, or the connection closed mid-body."""

    error_class: ClassVar[str] = ErrorClass.UPSTREAM


class ResponseTooLarge(RemoteProtocolError):
    """A response broke one of the client's size limits (``what``: ``"head"``), ``limit``
    bytes; the connection was closed. Error class ``protocol``, not retried by default:
    the same server answers the same way again."""

    error_class: ClassVar[str] = ErrorClass.PROTOCOL

    def __init__(self, message: str, *, what: str, limit: int, **context: Any) -> None:
        super().__init__(message, what=what, limit=limit, **context)
        self.what = what
        self.limit = limit


class HttpStatusError(HttpError):
    """A response with status >= 400, raised by ``Response.raise_for_status()``.

    Classified by its ``status`` (rule 7 of :func:`error_class_of`: 429 is ``rate_limit``,
    5xx ``upstream``, ...). ``retry_after`` is what the server asked us to wait, in seconds
    (``Retry-After-Ms`` before ``Retry-After``), or ``None``.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        headers: Any = None,
        retry_after: float | None = None,
        **context: Any,
    ) -> None:
        super().__init__(message, status=status, retry_after=retry_after, **context)
        self.status = status
        self.headers = headers
        self.retry_after = retry_after


# --------------------------------------------------------------------------- classification

# Cancellation comes before everything, even an explicit `error_class` attribute: nothing
# may turn a cancelled task or a Ctrl-C into something a retry policy would retry.
_CANCELLATION: tuple[type[BaseException], ...] = (
    asyncio.CancelledError,
    KeyboardInterrupt,
    SystemExit,
    GeneratorExit,
)

# Our own errors that say what they are by their type.
_OWN_TYPES: tuple[tuple[type[BaseException], ErrorClass], ...] = (
    (AcquireTimeout, ErrorClass.TIMEOUT),  # waited too long, like any other timeout
    (ConfigError, ErrorClass.INVALID),  # bad input: the same input fails the same way
    (IllegalTransition, ErrorClass.INVALID),  # a bug in the caller
    (LeaseLeakError, ErrorClass.INVALID),  # a bug in the caller
    (SimulationError, ErrorClass.FATAL),  # the loop itself cannot go on
)

# Mistakes in the code or the request: trying again cannot help.
_PROGRAMMING_ERRORS: tuple[type[BaseException], ...] = (
    TypeError,
    ValueError,
    LookupError,
    AttributeError,
    NameError,
    NotImplementedError,
    AssertionError,
    ArithmeticError,
    ImportError,
)

_MAX_CAUSES = 8  # how far down `__cause__` the classifier looks


def error_class_of(exc: object) -> ErrorClass:
    """What kind of failure ``exc`` was. Pure, total and never raises.

    Ordered rules, the first that matches wins:

    1. cancellation — ``asyncio.CancelledError``, ``KeyboardInterrupt``, ``SystemExit``,
       ``GeneratorExit`` → ``cancelled`` (first, so no attribute can make it retryable);
    2. :class:`FatalError` → ``fatal`` (its type is a promise: never retried);
    3. an ``error_class`` attribute (on the instance or its class) holding a valid class
       name → that class; any other value is ignored;
    4. :class:`RetryableError` → ``retryable`` (reached only if rule 3 was overridden
       with garbage);
    5. our own types: :class:`AcquireTimeout` → ``timeout``; :class:`ConfigError`,
       :class:`IllegalTransition`, :class:`LeaseLeakError` → ``invalid``;
       :class:`SimulationError` → ``fatal``;
    6. ``TimeoutError`` (``asyncio.TimeoutError`` and ``socket.timeout`` are the same
       class) → ``timeout``; ``ConnectionError`` and its subclasses → ``connection``; a
       plain ``OSError`` with a network errno (``ETIMEDOUT`` → ``timeout``;
       ``ECONNREFUSED``, ``ECONNRESET``, ``ECONNABORTED``, ``EPIPE``, ``ENET*``,
       ``EHOST*`` → ``connection``); ``socket.gaierror`` ``EAI_AGAIN`` → ``connection``;
    7. an HTTP status (see ``_classify.http_status_of``): 408, 504 → ``timeout``;
       425, 429 → ``rate_limit``; other 5xx → ``upstream``; 400, 401, 402, 403, 404,
       405, 406, 410, 411, 413, 414, 415, 422, 431, 451 → ``fatal``; others fall through;
    8. programming errors (``TypeError``, ``ValueError``, ``LookupError``,
       ``AttributeError``, ``NameError``, ``NotImplementedError``, ``AssertionError``,
       ``ArithmeticError``, ``ImportError``) → ``invalid``;
    9. the explicit cause (``raise ... from err``), classified by these same rules, so a
       vendor error wrapping a ``ConnectionError`` is a connection error (at most 8
       levels; cycles are cut);
    10. otherwise ``unknown``.

    A rule that raises while inspecting ``exc`` (a property that raises, a mock) counts as
    "no match". Not handled: exception groups (``unknown`` unless a rule matches the group
    itself) and ``__context__`` (an implicit context is an accident, not a statement).
    """
    seen: set[int] = set()
    current: object = exc
    while current is not None and id(current) not in seen and len(seen) < _MAX_CAUSES:
        seen.add(id(current))
        found = _first_rule_match(current)
        if found is not None:
            return found
        cause = attribute(current, "__cause__")
        current = cause if isinstance(cause, BaseException) else None
    return ErrorClass.UNKNOWN


def _first_rule_match(exc: object) -> ErrorClass | None:
    for rule in _RULES:
        try:
            found = rule(exc)
        except Exception:
            continue
        if found is not None:
            return found
    return None


def _cancelled(exc: object) -> ErrorClass | None:
    return ErrorClass.CANCELLED if isinstance(exc, _CANCELLATION) else None


def _fatal_error(exc: object) -> ErrorClass | None:
    return ErrorClass.FATAL if isinstance(exc, FatalError) else None


def _declared(exc: object) -> ErrorClass | None:
    value = attribute(exc, "error_class")
    if isinstance(value, str) and value in ErrorClass.__members__.values():
        return ErrorClass(value)
    return None


def _retryable_error(exc: object) -> ErrorClass | None:
    return ErrorClass.RETRYABLE if isinstance(exc, RetryableError) else None


def _own_type(exc: object) -> ErrorClass | None:
    return next((cls for kind, cls in _OWN_TYPES if isinstance(exc, kind)), None)


def _network(exc: object) -> ErrorClass | None:
    return _named(network_class_of(exc))


def _http_status(exc: object) -> ErrorClass | None:
    return _named(status_class_of(http_status_of(exc)))


def _programming_error(exc: object) -> ErrorClass | None:
    return ErrorClass.INVALID if isinstance(exc, _PROGRAMMING_ERRORS) else None


def _named(name: str | None) -> ErrorClass | None:
    return None if name is None else ErrorClass(name)


_RULES: tuple[Callable[[object], ErrorClass | None], ...] = (
    _cancelled,
    _fatal_error,
    _declared,
    _retryable_error,
    _own_type,
    _network,
    _http_status,
    _programming_error,
)
