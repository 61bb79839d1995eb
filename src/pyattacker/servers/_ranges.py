"""Every number our servers take from a request, and its sane range, checked here.

A header, a path or a query string is written by whoever connects: a number from it is
never trusted beyond what the server can honour. Each reader below returns the value or
raises :class:`~pyattacker.errors.ConfigError` naming the header or parameter (``field``),
which the server answers with a 400 quoting the message. The ranges:

==========================================  =============================================
``x-echo-delay``, ``/stall?seconds=``        a duration from 0 to :data:`MOST_HELD_S` (1 h)
``x-mock-ttft``, ``x-mock-itl``              the same
every duration of a ``--delay``, ``--ttft``   the same (checked by ``Delay.parse``)
or ``--itl`` spec
``x-echo-retry-after``                       whole or decimal seconds, at most 1 day
``x-mock-tokens``, ``x-mock-fault`` ``:K``   a whole number, at most the server's
                                             ``max_output_tokens``
``/stats?offset=``, ``limit=``               a whole number of at most 18 digits
``max_tokens`` (request body)                checked by the body's reader against
                                             ``max_output_tokens``
==========================================  =============================================

Longer holds are what ``x-mock-fault: hang`` (or a closed connection) says better; a
timer an hour away is the longest one a test or a benchmark waits for.
"""

from __future__ import annotations

from pyattacker._units import parse_duration
from pyattacker.errors import ConfigError

__all__ = ["MOST_HELD_S", "MOST_RETRY_AFTER_S", "request_seconds", "request_whole"]

#: The longest hold a request may ask for (seconds).
MOST_HELD_S = 3600.0
#: The largest ``Retry-After`` a request may ask the echo server to send (seconds).
MOST_RETRY_AFTER_S = 86_400.0
_MOST_DIGITS = 18  # below 2**63; int() of a longer string costs time for nothing


def request_seconds(text: str, field: str, *, most: float = MOST_HELD_S) -> float:
    """A duration from a request (``5ms``, ``0.25``), from 0 to ``most`` seconds."""
    seconds = parse_duration(text, field=field)
    if seconds > most:
        raise ConfigError(
            f"must be at most {most:g} s, got {text[:40]!r}",
            field=field,
            hint="x-mock-fault: hang waits forever" if field.startswith("x-mock") else None,
        )
    return seconds


def request_whole(
    text: str, field: str, *, at_least: int = 0, at_most: int | None = None, of: str = ""
) -> int:
    """A whole number from a request, ASCII digits only, from ``at_least`` to ``at_most``
    (``of`` says where that bound comes from, for the message)."""
    if not (text.isascii() and text.isdigit() and len(text) <= _MOST_DIGITS):
        raise ConfigError(f"must be a whole number >= {at_least}, got {text[:40]!r}", field=field)
    value = int(text)
    if value < at_least:
        raise ConfigError(f"must be a whole number >= {at_least}, got {text!r}", field=field)
    if at_most is not None and value > at_most:
        raise ConfigError(f"must be at most {at_most}{of}, got {text}", field=field)
    return value
