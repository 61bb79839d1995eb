"""A request's time limits, ``Timeouts``: checked when made, so a bad one is a
``ConfigError`` that names its field (not compiled with the load path, whose types are
checked as ``TypeError``s: see "The compiled load path" in ``docs/architecture.md``)."""

from __future__ import annotations

from dataclasses import dataclass

from pyattacker._checks import check_number

__all__ = ["Timeouts"]


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Limits of one request, in seconds of the client's ``Clock``; ``None`` is no limit.

    - ``connect``: waiting for a pooled connection (the pool is full) plus opening a new
      one (TCP and TLS handshakes).
    - ``read``: the longest gap without a byte while a response is due: from the request
      being sent to the first byte, and between any two bytes after it. Time a streaming
      consumer spends not reading (the client stopped reading for it) does not count.
    - ``total``: the whole request, from ``request()`` being called to the last body byte.

    Raises :class:`~pyattacker.errors.ConfigError` (field ``timeouts.<name>``) for a value
    that is not a positive finite number or ``None``.
    """

    connect: float | None = 10.0
    read: float | None = 30.0
    total: float | None = None

    def __post_init__(self) -> None:
        for name in ("connect", "read", "total"):
            value = getattr(self, name)
            if value is not None:
                hint = "seconds, or None for no limit"
                checked = check_number(value, f"timeouts.{name}", above=0.0, hint=hint)
                object.__setattr__(self, name, checked)
