"""The sane range of every number an attack takes: one table, checked in one place.

:class:`~pyattacker.attack.AttackPlan` and its load models check each number with
:func:`check` against :data:`LIMITS`; the CLI renames a field to the flag that set it with
:data:`FLAGS` (``max_in_flight`` -> ``--max-in-flight``), so a message names what the user
typed. The ceilings are far above any real attack and far below what breaks arithmetic:

- ``rate`` <= 10,000,000 requests/s: one Python process sends tens of thousands a second
  (``benchmarks/scale.py``) and a C generator on a large machine a few million; ten
  million is beyond any machine for one process. It also keeps ``rate * duration``
  (at most 6e12 arrivals) far below 2**53, where arrival ``k`` stops being exact in a float.
- ``duration``, stage durations <= 7 days; timeouts, ``think_time`` <= 1 day; windows from
  1 ms to 1 day and at most :data:`MAX_WINDOWS` of them in a run (each window is memory
  and a report row).
- ``requests`` <= 1e12, ``max_in_flight`` <= 10,000,000, ``connections`` and ``clients``
  <= 100,000 (file descriptors: a process rarely gets more than a million).
- ``seed`` from 0 to 2**63 - 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyattacker._checks import check_number, check_whole
from pyattacker.errors import ConfigError

__all__ = ["FLAGS", "LIMITS", "MAX_RATE", "MAX_WINDOWS", "Limit", "check", "flag_of"]

MAX_RATE = 10_000_000.0
MAX_WINDOWS = 1_000_000
_WEEK, _DAY = 7 * 86_400.0, 86_400.0


@dataclass(frozen=True, slots=True)
class Limit:
    """``low`` (exclusive when ``open_low``) to ``high`` inclusive; ``whole``: an int."""

    low: float
    high: float
    whole: bool = False
    open_low: bool = False
    hint: str | None = None


LIMITS: dict[str, Limit] = {
    "rate": Limit(0, MAX_RATE, open_low=True, hint="at most 10,000,000/s, beyond any machine"),
    "stages.rate": Limit(0, MAX_RATE, hint="requests/s, e.g. 10s:500/s"),
    "stages.duration": Limit(0, _WEEK, open_low=True, hint="e.g. 10s:500/s"),
    "duration": Limit(0, _WEEK, open_low=True, hint="e.g. 30s"),
    "requests": Limit(1, 10**12, whole=True),
    "connections": Limit(1, 100_000, whole=True),
    "preconnect": Limit(0, 100_000, whole=True),
    "max_in_flight": Limit(1, 10_000_000, whole=True),
    "clients": Limit(1, 100_000, whole=True),
    "think_time": Limit(0, _DAY, hint="e.g. 1s"),
    "window": Limit(0.001, _DAY, hint="e.g. 1s"),
    "late_after": Limit(0, 3600.0),
    "seed": Limit(0, 2**63 - 1, whole=True),
    "timeouts.total": Limit(0, _DAY, open_low=True, hint="e.g. 30s"),
    "timeouts.connect": Limit(0, _DAY, open_low=True, hint="e.g. 10s"),
    "timeouts.read": Limit(0, _DAY, open_low=True, hint="e.g. 30s"),
    "follow_redirects": Limit(0, 100, whole=True, hint="hops to follow, e.g. 5"),
}

#: the CLI flag that sets each field of the table (and of a plan's other errors)
FLAGS: dict[str, str] = {
    "rate": "--rate",
    "stages": "--stages",
    "stages.rate": "--stages",
    "stages.duration": "--stages",
    "duration": "--duration",
    "requests": "--requests",
    "connections": "--connections",
    "preconnect": "--preconnect",
    "max_in_flight": "--max-in-flight",
    "clients": "--clients",
    "think_time": "--think",
    "window": "--window",
    "late_after": "late_after",  # no flag: the library's own
    "seed": "--seed",
    "timeouts.total": "--timeout",
    "timeouts.connect": "--connect-timeout",
    "timeouts.read": "--timeout",
    "arrival": "--arrival",
    "method": "--method",
    "body": "--body",
    "keys": "--key",
    "targets": "URL",
    "algorithm": "--algorithm",
    "retry": "--retry",
    "headers": "--header",
    "warmup": "--warmup",
    "follow_redirects": "--follow-redirects",
    "tls": "--cacert",
}


def flag_of(field: str | None) -> str | None:
    """The flag that sets ``field`` (``max_in_flight`` -> ``--max-in-flight``, ``keys[2]`` ->
    ``--key[2]``, ``retry.base`` -> ``--retry (base)``), or ``field`` itself if none does."""
    if field is None:
        return None
    base, bracket, index = field.partition("[")
    if base in FLAGS:
        flag = FLAGS[base]
        return f"{flag}[{index}" if bracket and flag.startswith("-") else flag
    head, _, rest = base.partition(".")
    return f"{FLAGS[head]} ({rest})" if head in FLAGS and rest else field


def check(field: str, value: object) -> float:
    """``value`` if it is within ``LIMITS[field]`` (an int for whole fields), else a
    ``ConfigError`` naming ``field`` and the range."""
    limit = LIMITS[field]
    if limit.whole:
        number = check_whole(value, field, at_least=int(limit.low), hint=limit.hint)
        if number > limit.high:
            raise ConfigError(
                f"must be a whole number from {int(limit.low):,} to {int(limit.high):,}, "
                f"got {value!r}",
                field=field,
                hint=limit.hint,
            )
        return number
    if limit.open_low:
        return check_number(value, field, above=limit.low, at_most=limit.high, hint=limit.hint)
    return check_number(value, field, at_least=limit.low, at_most=limit.high, hint=limit.hint)
