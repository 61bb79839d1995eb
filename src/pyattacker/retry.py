"""Retry policies: whether to try again after a failure, and after how long.

A :class:`Retrying` policy is a pure decider. :meth:`Retrying.decide` takes the failure,
the number of attempts used and the caller's ``random.Random``, and returns a
:class:`RetryDecision`. It never sleeps and reads no clock (except the wall clock for an
HTTP-date Retry-After when no ``now`` is given); the driver sleeps on its own ``Clock`` and
records the decision (every retry is a recorded decision with its reason
and delay).

The default policy makes exactly one attempt: ``Retrying()`` never retries anything, and
neither does the preset ``"none"``. Retries happen only when someone asks for them.
"""

from __future__ import annotations

import asyncio
import enum
import random
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal, get_args

from pyattacker._checks import check_number
from pyattacker.errors import (
    ConfigError,
    ErrorClass,
    FatalError,
    error_class_of,
    retry_after_of,
)

__all__ = [
    "JITTERS",
    "Jitter",
    "RetryDecision",
    "RetryReason",
    "Retrying",
    "backoff_ceiling",
    "jittered",
    "resolve_retry",
]

Jitter = Literal["full", "equal", "none"]
JITTERS: tuple[Jitter, ...] = get_args(Jitter)

# Never retried, whatever `on` says: a cancelled task, Ctrl-C, interpreter exit, a closed
# generator, and an error that promised "never retry this".
_NEVER_RETRIED_TYPES: tuple[type[BaseException], ...] = (
    asyncio.CancelledError,
    KeyboardInterrupt,
    SystemExit,
    GeneratorExit,
    FatalError,
)
_NEVER_RETRIED_CLASSES = frozenset({ErrorClass.CANCELLED, ErrorClass.FATAL})


class RetryReason(enum.StrEnum):
    """Why a decision came out the way it did, in the order the checks run."""

    ATTEMPTS_EXHAUSTED = "attempts_exhausted"  # attempts_used >= max_attempts
    POLICY_DECLINED = "policy_declined"  # this policy does not retry this error
    TOTAL_BUDGET = "total_budget"  # waiting would overrun max_total_s
    RETRYABLE = "retryable"  # try again after delay_s


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryDecision:
    """One retry decision: a fact to record, whatever it says.

    ``attempt`` is the attempt that just failed (1-based), ``delay_s`` the seconds to wait
    before the next one (``0.0`` when ``retry`` is false), ``retry_after`` what the server
    asked for (``None`` if it said nothing), recorded even when the policy does not retry.
    """

    retry: bool
    reason: RetryReason
    delay_s: float
    error_class: ErrorClass
    max_attempts: int
    attempt: int
    retry_after: float | None

    def to_dict(self) -> dict[str, Any]:
        """The decision as JSON-ready plain values (enums become their string values)."""
        return {
            "retry": self.retry,
            "reason": self.reason.value,
            "delay_s": self.delay_s,
            "error_class": self.error_class.value,
            "max_attempts": self.max_attempts,
            "attempt": self.attempt,
            "retry_after": self.retry_after,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Retrying:
    """A retry policy: which failures to retry, how often, and how long to wait.

    Which errors are retried (classes from :func:`pyattacker.errors.error_class_of`):

    - never ``cancelled`` or ``fatal`` errors, nor ``asyncio.CancelledError``,
      ``KeyboardInterrupt``, ``SystemExit``, ``GeneratorExit`` or :class:`FatalError`
      instances, whatever ``on`` says;
    - errors that are instances of a type in ``on``, or whose class is named in ``on``;
    - with ``retry_classified`` (default), the classes retried by default: retryable,
      rate_limit, timeout, connection, upstream;
    - with ``retry_unknown``, errors classified ``unknown``.

    Backoff: the delay before retry number ``k`` (``k = 1`` after the first failed
    attempt) is ``d = min(cap, base * factor ** (k - 1))``, then jittered:

    - ``"full"``: ``uniform(0, d)``
    - ``"equal"``: ``d / 2 + uniform(0, d / 2)``
    - ``"none"``: ``d``

    A server's Retry-After (:func:`pyattacker.errors.retry_after_of`) replaces the
    computed delay and is *not* capped by ``cap``: the server knows when it will take
    the request again, and retrying earlier only earns another refusal. Bound it with
    ``max_total_s``: no retry is scheduled whose wait would end after ``max_total_s``
    seconds from the first attempt.

    Invalid values raise :class:`~pyattacker.errors.ConfigError` naming the field
    (``retry.<name>``), whether the policy comes from code or from a spec.
    """

    max_attempts: int = 1
    on: tuple[type[BaseException] | str, ...] = ()
    retry_classified: bool = True
    retry_unknown: bool = False
    base: float = 0.5
    factor: float = 2.0
    cap: float = 30.0
    jitter: Jitter = "full"
    max_total_s: float | None = None

    def __post_init__(self) -> None:
        _validate(self)

    @classmethod
    def from_spec(cls, spec: Retrying | Mapping[str, Any] | str | None) -> Retrying:
        """A policy from a spec: see :func:`resolve_retry`."""
        return resolve_retry(spec)

    def decide(
        self,
        exc: BaseException,
        *,
        attempts_used: int,
        rng: random.Random,
        elapsed: float = 0.0,
        now: float | None = None,
    ) -> RetryDecision:
        """Whether to try again after ``exc`` ended attempt number ``attempts_used``.

        Checks, first failing one wins: ``attempts_exhausted`` (``attempts_used >=
        max_attempts``), ``policy_declined`` (this policy does not retry this error),
        ``total_budget`` (``elapsed + delay > max_total_s``; ``elapsed`` is the seconds
        since the first attempt started), else ``retryable``.

        ``rng`` is the only randomness and is consumed (one ``random()`` call) only when
        a jittered backoff delay is computed: not for jitter ``"none"``, not when the
        server sent a Retry-After, not when an earlier check already said no. So the
        same ``rng`` state gives the same decision. ``now`` (epoch seconds) is passed to
        :func:`~pyattacker.errors.retry_after_of` for HTTP-date Retry-After values.

        Raises ``ValueError`` if ``attempts_used`` is not an int >= 1 (a caller bug).
        """
        if isinstance(attempts_used, bool) or not isinstance(attempts_used, int):
            raise ValueError(f"attempts_used must be an int >= 1, not {attempts_used!r}")
        if attempts_used < 1:
            raise ValueError(f"attempts_used must be an int >= 1, not {attempts_used!r}")
        error_class = error_class_of(exc)
        retry_after = retry_after_of(exc, now=now)

        def decision(reason: RetryReason, delay_s: float = 0.0) -> RetryDecision:
            return RetryDecision(
                retry=reason is RetryReason.RETRYABLE,
                reason=reason,
                delay_s=delay_s,
                error_class=error_class,
                max_attempts=self.max_attempts,
                attempt=attempts_used,
                retry_after=retry_after,
            )

        if attempts_used >= self.max_attempts:
            return decision(RetryReason.ATTEMPTS_EXHAUSTED)
        if not self._retries(exc, error_class):
            return decision(RetryReason.POLICY_DECLINED)
        delay = retry_after if retry_after is not None else self._delay(attempts_used, rng)
        if self.max_total_s is not None and elapsed + delay > self.max_total_s:
            return decision(RetryReason.TOTAL_BUDGET)
        return decision(RetryReason.RETRYABLE, delay)

    def delays(self, n: int, rng: random.Random) -> list[float]:
        """The first ``n`` backoff delays (retries 1..n), ignoring attempts and budget.

        ``Retrying(jitter="none").delays(4, rng) == [0.5, 1.0, 2.0, 4.0]``.
        """
        return [self._delay(k, rng) for k in range(1, n + 1)]

    def _retries(self, exc: BaseException, error_class: ErrorClass) -> bool:
        if error_class in _NEVER_RETRIED_CLASSES or isinstance(exc, _NEVER_RETRIED_TYPES):
            return False
        if error_class in self.on:
            return True
        if any(isinstance(exc, kind) for kind in self.on if isinstance(kind, type)):
            return True
        if self.retry_classified and error_class.retried_by_default:
            return True
        return self.retry_unknown and error_class is ErrorClass.UNKNOWN

    def _delay(self, k: int, rng: random.Random) -> float:
        ceiling = backoff_ceiling(k, base=self.base, factor=self.factor, cap=self.cap)
        return jittered(ceiling, self.jitter, rng)

    def __repr__(self) -> str:
        changed = [
            f"{f.name}={_show(getattr(self, f.name))}"
            for f in fields(self)
            if getattr(self, f.name) != f.default
        ]
        return f"Retrying({', '.join(changed)})"


def backoff_ceiling(k: int, *, base: float, factor: float, cap: float) -> float:
    """The un-jittered wait before try ``k + 1``: ``min(cap, base * factor ** (k - 1))``."""
    try:
        return min(cap, base * factor ** (k - 1))
    except OverflowError:
        return cap


def jittered(ceiling: float, jitter: Jitter, rng: random.Random) -> float:
    """``full``: ``ceiling * u``; ``equal``: ``ceiling / 2 + ceiling / 2 * u``; ``none``:
    ``ceiling``; ``u = rng.random()`` drawn once, and only when there is something to jitter.

    Shared by ``Retrying`` and the ``backoff`` acquire algorithm.
    """
    if jitter == "none" or ceiling == 0:
        return ceiling
    u = rng.random()
    if jitter == "full":
        return ceiling * u
    return ceiling / 2 + ceiling / 2 * u


def resolve_retry(spec: Retrying | Mapping[str, Any] | str | None) -> Retrying:
    """The policy a spec stands for.

    - ``None`` → ``Retrying()``: one attempt, no retries;
    - a :class:`Retrying` → itself;
    - a mapping of :class:`Retrying`'s keyword names (``on`` may be a list of class
      names, as read from a file);
    - a preset name: ``"none"`` (``max_attempts=1``) or ``"exponential"``
      (``max_attempts=5, base=0.5, factor=2.0, cap=30.0, jitter="full"``: waits of up
      to 0.5, 1, 2 and 4 seconds between five attempts).

    Raises :class:`~pyattacker.errors.ConfigError` for an unknown name or key, or a bad
    value; ``field`` says which (``retry`` or ``retry.<key>``).
    """
    if spec is None:
        return Retrying()
    if isinstance(spec, Retrying):
        return spec
    if isinstance(spec, str):
        preset = _PRESETS.get(spec)
        if preset is None:
            raise ConfigError(
                f"unknown retry policy {spec!r}",
                field="retry",
                hint=f"use one of {', '.join(map(repr, _PRESETS))} or a mapping of settings",
            )
        return preset
    if isinstance(spec, Mapping):
        unknown = [key for key in spec if key not in _FIELD_NAMES]
        if unknown:
            raise ConfigError(
                f"unknown retry setting {unknown[0]!r}",
                field=f"retry.{unknown[0]}",
                hint=f"known settings: {', '.join(_FIELD_NAMES)}",
            )
        return Retrying(**spec)
    raise ConfigError(
        f"a retry policy is a name, a mapping or a Retrying, not {type(spec).__name__}",
        field="retry",
        hint=f"use one of {', '.join(map(repr, _PRESETS))} or a mapping of settings",
    )


def _show(value: object) -> str:
    if isinstance(value, type):
        return value.__qualname__
    if isinstance(value, tuple):
        inner = ", ".join(_show(item) for item in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, ErrorClass):
        return repr(value.value)
    return repr(value)


# ----------------------------------------------------------------------------- validation


def _validate(policy: Retrying) -> None:
    """Check every field and normalise ``on`` and the numbers, or raise ConfigError."""
    max_attempts = policy.max_attempts
    if (
        isinstance(max_attempts, bool)
        or not isinstance(max_attempts, int)
        or not 1 <= max_attempts <= MAX_ATTEMPTS
    ):
        raise _bad("max_attempts", max_attempts, "an int from 1 (no retries) to 1,000,000")
    object.__setattr__(policy, "on", _normalised_on(policy.on))
    for name in ("retry_classified", "retry_unknown"):
        if not isinstance(getattr(policy, name), bool):
            raise _bad(name, getattr(policy, name), "true or false")
    for name, minimum in (("base", 0.0), ("factor", 1.0), ("cap", 0.0)):
        object.__setattr__(policy, name, _number(name, getattr(policy, name), minimum))
    if policy.cap < policy.base:
        raise _bad("cap", policy.cap, f"a number >= base ({policy.base}); raise cap or lower base")
    if policy.jitter not in JITTERS:
        raise _bad("jitter", policy.jitter, f"one of {', '.join(map(repr, JITTERS))}")
    if policy.max_total_s is not None:
        object.__setattr__(policy, "max_total_s", _number("max_total_s", policy.max_total_s, 0.0))


_NUMBER_HINTS = {
    "base": "seconds before the first retry, e.g. 0.5",
    "factor": "growth per retry, e.g. 2.0",
    "cap": "the longest wait between attempts, in seconds",
    "max_total_s": "seconds for all attempts together, or None for no budget",
}


# Sane ranges (any real policy is far inside them): a wait, and the whole budget, of at
# most a week; at most a million attempts.
MAX_ATTEMPTS = 1_000_000
_MAX_SECONDS = 7 * 86_400.0


def _number(name: str, value: object, minimum: float) -> float:
    return check_number(
        value,
        f"retry.{name}",
        at_least=minimum,
        at_most=_MAX_SECONDS if name != "factor" else 1_000.0,
        hint=_NUMBER_HINTS.get(name),
    )


def _normalised_on(on: object) -> tuple[type[BaseException] | str, ...]:
    """``on`` as a tuple of exception types and :class:`ErrorClass` members."""
    items = (on,) if isinstance(on, str | type) else on
    if not isinstance(items, tuple | list | set | frozenset):
        raise _bad("on", on, "a list of exception types or error class names")
    return tuple(_on_item(item) for item in items)


def _on_item(item: object) -> type[BaseException] | str:
    if isinstance(item, type) and issubclass(item, BaseException):
        return item
    if isinstance(item, str) and item in _ON_CLASS_NAMES:
        return ErrorClass(item)
    if isinstance(item, str) and item in _NEVER_RETRIED_CLASSES:
        raise _bad("on", item, "not 'cancelled' or 'fatal': those are never retried")
    names = ", ".join(sorted(_ON_CLASS_NAMES))
    raise _bad("on", item, f"an exception type or one of the error classes {names}")


def _bad(name: str, value: object, expected: str) -> ConfigError:
    return ConfigError(f"bad value {value!r}", field=f"retry.{name}", hint=f"expected {expected}")


_ON_CLASS_NAMES = frozenset(c.value for c in ErrorClass) - _NEVER_RETRIED_CLASSES
_FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Retrying))
_PRESETS: dict[str, Retrying] = {
    "none": Retrying(max_attempts=1),
    "exponential": Retrying(max_attempts=5, base=0.5, factor=2.0, cap=30.0, jitter="full"),
}
