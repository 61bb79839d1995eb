"""Pacing: keep a key under its requests/tokens per minute and requests per day.

A resource that declares ``rpm``, ``tpm`` or ``rpd`` gets a ``Pacer``; resources of one
``quota_group`` share one (a key's quota is the key's, whichever resource spends it). The
pool asks the pacer one question before each lease, ``ready_at``: the first instant a
lease may go; a resource is not usable before it, and the pool's cooldown notifier wakes
its waiters exactly then (no polling).

**The formula** (a token bucket in its "virtual scheduling" form, GCRA). For a limit of
``L`` units per period ``P`` (60 s for ``rpm`` and ``tpm``), one unit is worth
``T = P / L`` seconds of the limit, and a bucket remembers ``tat``, the time at which
everything granted so far has been paid for::

    tau = (burst - 1) * T * size      how far ahead of the schedule a caller may run
    ready(now)  iff  now >= tat - tau
    grant at now, cost c:  tat = max(tat, now) + c * T

``size`` is 1 request for ``rpm``; for ``tpm`` it is the resource's ``tokens_per_call``
(0 when undeclared: tokens never burst). This is exactly a bucket of ``burst`` calls
refilled at ``L / P``, written with times instead of a level, so that "not before" is
an exact instant and never a rounding crumb away from it. **The burst rule:** in any
window of ``W`` seconds at most ``burst + W / T`` requests are granted (``burst + rpm`` in
a minute); with the default ``burst=1`` that is ``rpm`` in any half-open minute, which a
provider counting a rolling minute accepts. Tokens are charged at the lease with the
caller's estimate (``acquire(tokens=...)``, else ``tokens_per_call``, else 0) and corrected
when the answer's usage is reported: ``tat += (actual - estimate) * T``, a refund moving it
back. A day's cap (``rpd``) is a rolling window: at most ``rpd`` leases in any 86,400 s,
the next one not before the oldest of them plus a day.

**Headers.** When a response carries ``x-ratelimit-remaining-requests``/``-tokens`` and
``x-ratelimit-reset-requests``/``-tokens`` (OpenAI's ``"6m0s"``, ``"20ms"``; plain seconds
too), the server's count wins whenever it is tighter: fewer remaining than a call needs rests
the key until they are back (``rest_for``: with ``x-ratelimit-limit-*`` stated, a steady
refill is assumed, else the whole ``reset``); otherwise the bucket is moved so that at most
``remaining`` more units go now. A ``Retry-After`` is the pool's "not before"
(``resource.throttled``), not the pacer's.

Everything here is synchronous and takes ``now`` as an argument: ``decide`` is the pure
decider ("lease now" is ``None``, else the "not before" instant).
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyattacker._usage import tokens_of

if TYPE_CHECKING:  # both import this module
    from pyattacker.pool._resource import Resource
    from pyattacker.pool._slot import Slot

__all__ = [
    "DAY_S",
    "Gcra",
    "Limits",
    "Pacer",
    "Pacers",
    "decide",
    "parse_duration",
    "rate_limit_headers",
    "rest_for",
    "settle",
    "tokens_of",
]

DAY_S = 86_400.0
_MINUTE_S = 60.0
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(h|ms|us|µs|ns|m|s)", re.ASCII)
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


@dataclass(frozen=True, slots=True)
class Limits:
    """What one key may take: per minute (``rpm``, ``tpm``), per day (``rpd``), and the
    burst (calls that may go back to back after a quiet spell; 1 = none)."""

    rpm: float | None = None
    tpm: float | None = None
    rpd: int | None = None
    burst: int = 1
    tokens_per_call: float | None = None

    def describe(self) -> dict[str, Any]:
        return {
            "rpm": self.rpm,
            "tpm": self.tpm,
            "rpd": self.rpd,
            "burst": self.burst,
            "tokens_per_call": self.tokens_per_call,
        }


class Gcra:
    """One bucket: ``interval`` seconds per unit, ``tau`` seconds of allowed lead."""

    __slots__ = ("interval", "tat", "tau")

    def __init__(self, interval: float, tau: float) -> None:
        self.interval = interval
        self.tau = tau
        self.tat = -math.inf

    def ready_at(self) -> float:
        return self.tat - self.tau

    def charge(self, now: float, units: float) -> None:
        self.tat = max(self.tat, now) + units * self.interval

    def correct(self, units: float) -> None:
        """Pay for ``units`` more (or get them back, when negative) after the fact."""
        if self.tat != -math.inf:
            self.tat += units * self.interval

    def at_most(self, remaining: float, size: float, now: float) -> None:
        """Let no more than ``remaining`` units (in calls of ``size``) go from ``now``."""
        tat = now + self.tau - max(0.0, remaining - size) * self.interval
        self.tat = max(self.tat, tat)


def decide(ready_at: float, now: float) -> float | None:
    """The pure decider: ``None`` means "lease now", a number "not before that instant"."""
    return None if now >= ready_at else ready_at


class Pacer:
    """The live pacing state of one key (a resource, or a quota group's shared bucket)."""

    __slots__ = (
        "_day",
        "held_until",
        "limits",
        "paced",
        "paced_s",
        "ready_at",
        "requests",
        "tokens",
        "tokens_charged",
    )

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        burst = limits.burst
        self.requests: Gcra | None = None
        self.tokens: Gcra | None = None
        if limits.rpm is not None:
            interval = _MINUTE_S / limits.rpm
            self.requests = Gcra(interval, (burst - 1) * interval)
        if limits.tpm is not None:
            interval = _MINUTE_S / limits.tpm
            size = limits.tokens_per_call or 0.0
            self.tokens = Gcra(interval, (burst - 1) * interval * size)
        self._day: deque[float] | None = deque() if limits.rpd is not None else None
        self.held_until = -math.inf  # a server said "0 remaining" until then
        self.ready_at = -math.inf
        self.paced = 0  # times a lease left the key resting
        self.paced_s = 0.0  # seconds the key rested, in all
        self.tokens_charged = 0.0

    def decide(self, now: float) -> float | None:
        """``None``: a lease may go now; else the instant before which none may."""
        return decide(self.ready_at, now)

    def charge(self, now: float, tokens: float) -> None:
        """A lease was granted at ``now``, estimated to spend ``tokens``."""
        if self.requests is not None:
            self.requests.charge(now, 1.0)
        if self.tokens is not None:
            self.tokens.charge(now, tokens)
        self.tokens_charged += tokens
        day = self._day
        if day is not None:
            while day and day[0] <= now - DAY_S:
                day.popleft()
            day.append(now)
        self._update(now)

    def correct(self, now: float, tokens: float) -> None:
        """The answer said the call spent ``tokens`` more than charged (less, if negative)."""
        if tokens and self.tokens is not None:
            self.tokens.correct(tokens)
        self.tokens_charged += tokens
        self._update(now)

    def observe(self, now: float, seen: Mapping[str, float]) -> None:
        """Follow what the server said (``remaining_requests``, ``reset_requests``, …)."""
        for unit, bucket, size in (
            ("requests", self.requests, 1.0),
            ("tokens", self.tokens, self.limits.tokens_per_call or 0.0),
        ):
            remaining = seen.get(f"remaining_{unit}")
            if remaining is None:
                continue
            rest = rest_for(seen, unit, max(1.0, size))
            if rest is not None:
                self.held_until = max(self.held_until, now + rest)
            elif bucket is not None:
                bucket.at_most(remaining, size, now)
        self._update(now)

    def _update(self, now: float) -> None:
        """Recompute ``ready_at`` and account the rest it starts or stretches."""
        ready = self.held_until
        for bucket in (self.requests, self.tokens):
            if bucket is not None:
                ready = max(ready, bucket.ready_at())
        day = self._day
        rpd = self.limits.rpd
        if day is not None and rpd is not None and len(day) >= rpd:
            ready = max(ready, day[-rpd] + DAY_S)
        before = self.ready_at
        if ready > now:
            start = max(now, before)
            if before <= now:
                self.paced += 1
            self.paced_s += ready - start
        elif before > now:  # a refund ended the rest early
            self.paced_s -= before - now
        self.ready_at = ready

    def describe(self, now: float) -> dict[str, Any]:
        """Limits and totals, JSON-ready (``paced_until`` None when not resting)."""
        return {
            **self.limits.describe(),
            "paced": self.paced,
            "paced_s": self.paced_s,
            "paced_until": self.ready_at if self.ready_at > now else None,
            "tokens_charged": self.tokens_charged,
        }


class Pacers:
    """A pool's pacers: one per quota group (shared by its members), else one per resource.

    A member of a group that declares no limits of its own is paced by the group's; two
    members declaring different limits are a ``ConfigError``: one key has one quota.
    A pacer outlives its resources: a revoked resource republished with the same limits
    keeps its pace (new limits start a new one).
    """

    __slots__ = ("_by_key",)

    def __init__(self) -> None:
        self._by_key: dict[str, tuple[Limits, Pacer]] = {}

    def attach(self, slots: Iterable[Slot], pool: str) -> None:
        """Give every slot (``.resource``, ``.pacer``) of the pool its pacer, or None."""
        slots = list(slots)
        for slot in slots:
            limits = slot.resource.limits
            if limits is not None:
                slot.pacer = self._pacer(slot.resource, limits, pool)
        for slot in slots:
            group = slot.resource.quota_group
            if slot.pacer is None and group is not None and f"group:{group}" in self._by_key:
                slot.pacer = self._by_key[f"group:{group}"][1]

    def check(self, resource: Resource, pool: str) -> None:
        """``ConfigError`` if ``resource`` declares limits its quota group is already paced
        to otherwise; changes nothing."""
        limits = resource.limits
        if limits is not None:
            self._conflict(resource, limits, pool)

    def _key(self, resource: Resource) -> str:
        group = resource.quota_group
        return f"group:{group}" if group is not None else f"resource:{resource.id}"

    def _pacer(self, resource: Resource, limits: Limits, pool: str) -> Pacer:
        key = self._key(resource)
        found = self._by_key.get(key)
        if found is not None and found[0] == limits:
            return found[1]
        self._conflict(resource, limits, pool)
        pacer = Pacer(limits)  # new, or a republished resource's new limits
        self._by_key[key] = (limits, pacer)
        return pacer

    def _conflict(self, resource: Resource, limits: Limits, pool: str) -> None:
        from pyattacker.errors import ConfigError  # errors imports nothing of the pool

        group = resource.quota_group
        found = self._by_key.get(self._key(resource)) if group is not None else None
        if found is not None and found[0] != limits:
            raise ConfigError(
                f"declares {limits.describe()} but quota group {group!r} is paced to "
                f"{found[0].describe()}",
                field=f"{pool}.resources.{resource.id}.rpm",
                hint="resources sharing one key's quota declare the same limits (or none)",
            )

    def all(self) -> list[Pacer]:
        return [pacer for _, pacer in self._by_key.values()]


def settle(
    pacer: Pacer, now: float, *, usage: Mapping[str, Any] | None, headers: object, estimate: float
) -> None:
    """Correct a lease's ``estimate`` with the tokens its ``usage`` reports, and follow the
    rate-limit ``headers`` of its answer (either may be None)."""
    spent = tokens_of(usage)
    if spent is not None:
        pacer.correct(now, spent - estimate)
    if headers is not None:
        seen = rate_limit_headers(headers)
        if seen:
            pacer.observe(now, seen)


def rest_for(seen: Mapping[str, float], unit: str, need: float) -> float | None:
    """How long to rest when the server has fewer than ``need`` ``unit`` left, else None.

    With the limit stated (``x-ratelimit-limit-*``) the bucket is taken to refill steadily,
    as OpenAI's and Azure's do, from ``remaining`` to ``limit`` in ``reset`` seconds: the
    rest is until ``need`` are back, ``reset * (need - remaining) / (limit - remaining)``.
    Without it, the whole ``reset``. None too when ``reset`` is missing."""
    remaining, reset = seen.get(f"remaining_{unit}"), seen.get(f"reset_{unit}")
    if remaining is None or reset is None or remaining >= need:
        return None
    limit = seen.get(f"limit_{unit}")
    if limit is not None and limit > remaining:
        return min(reset, reset * (need - remaining) / (limit - remaining))
    return reset


def rate_limit_headers(headers: object) -> dict[str, float]:
    """``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` of ``headers`` (a mapping,
    or pairs) as ``{"remaining_requests": 3.0, "reset_requests": 0.5, ...}``; anything
    unreadable is left out."""
    found: dict[str, float] = {}
    for name, value in _pairs(headers):
        lowered = name.lower()
        if not lowered.startswith("x-ratelimit-"):
            continue
        kind, _, unit = lowered[len("x-ratelimit-") :].partition("-")
        if unit not in ("requests", "tokens") or kind not in ("limit", "remaining", "reset"):
            continue
        number = parse_duration(value) if kind == "reset" else _number(value)
        if number is not None:
            found[f"{kind}_{unit}"] = number
    return found


def parse_duration(value: object) -> float | None:
    """Seconds from ``"1s"``, ``"6m0s"``, ``"20ms"``, ``"1h2m3.5s"`` or plain ``"0.5"``;
    None for anything else (negative or not finite included)."""
    text = str(value).strip()
    plain = _number(text)
    if plain is not None:
        return plain
    total, at = 0.0, 0
    for match in _DURATION_PART.finditer(text):
        if match.start() != at:
            return None
        total += float(match.group(1)) * _UNIT_S[match.group(2)]
        at = match.end()
    return total if at == len(text) and at > 0 else None


def _number(value: object) -> float | None:
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _pairs(headers: object) -> Iterable[tuple[str, object]]:
    if headers is None:
        return ()
    items = getattr(headers, "items", None)
    if callable(items):
        return [(str(k), v) for k, v in items()]
    if isinstance(headers, Iterable):
        return [(str(p[0]), p[1]) for p in headers if isinstance(p, tuple) and len(p) == 2]
    return ()
