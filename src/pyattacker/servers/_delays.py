"""Distributions of hold times for the echo server, parsed from one-line specs.

The forms (durations as :func:`pyattacker._units.parse_duration` reads them)::

    0 | none | fixed:0ms                        no delay at all
    fixed:20ms  (or just 20ms)                  always 20 ms
    uniform:min=10ms,max=30ms                   uniform on [min, max]
    lognormal:median=20ms,sigma=0.5             median * exp(sigma * Z), Z standard normal
    bimodal:fast=5ms,slow=100ms,p_slow=0.1[,sigma=0.1]
        a mixture of two lognormal modes with medians ``fast`` and ``slow`` and one
        shared ``sigma`` (default 0.1; 0 makes both modes fixed): with probability
        ``p_slow`` a draw comes from the slow mode.

Every :class:`Delay` is immutable, draws only from the ``random.Random`` it is given (so a
seed fixes the sequence), never returns a negative number, describes itself as canonical
spec text that parses back to an equal ``Delay``, and knows its exact quantile function
(the mixture's by bisection on its exact CDF, to 1e-12 relative). It is a value, not a
clock: the server decides when to start and stop holding.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import ClassVar

from pyattacker._units import parse_duration
from pyattacker.errors import ConfigError
from pyattacker.servers._ranges import MOST_HELD_S

__all__ = ["Delay"]

DELAY_FORMS = (
    "0 | fixed:20ms | uniform:min=10ms,max=30ms | lognormal:median=20ms,sigma=0.5 | "
    "bimodal:fast=5ms,slow=100ms,p_slow=0.1[,sigma=0.1]"
)
_NORMAL = NormalDist()


class Delay:
    """A distribution of hold times in seconds. Build one with :meth:`Delay.parse`."""

    kind: ClassVar[str] = ""

    @classmethod
    def parse(cls, spec: str, *, field: str = "delay") -> Delay:
        """The ``Delay`` a spec describes (forms in the module docstring).

        Raises ``ConfigError`` naming ``field``, with every form in the hint, for an
        unknown kind, a missing, unknown or repeated parameter, or a value out of range.
        """
        if not isinstance(spec, str):
            raise _bad(f"must be a delay spec, got {spec!r}", field)
        text = spec.strip()
        if text.lower() in ("0", "none"):
            return Fixed(0.0)
        kind, colon, rest = text.partition(":")
        if not colon:
            return Fixed(_duration(text, field))
        build = _BUILDERS.get(kind.strip().lower())
        if build is None:
            raise _bad(f"unknown delay kind {kind.strip()!r}", field)
        return build(rest.strip(), field)

    @property
    def is_zero(self) -> bool:
        """True when every draw is exactly 0: the server then answers without a timer."""
        return False

    def sample(self, rng: random.Random) -> float:
        """One draw in seconds, ``>= 0``, using only ``rng``."""
        raise NotImplementedError

    def quantile(self, q: float) -> float:
        """The smallest ``x`` with ``P(delay <= x) >= q``, for ``0 <= q <= 1``."""
        raise NotImplementedError

    def describe(self) -> str:
        """Canonical spec text; ``Delay.parse(d.describe()) == d``."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"Delay.parse({self.describe()!r})"


@dataclass(frozen=True, repr=False)
class Fixed(Delay):
    """Always ``seconds``; ``Fixed(0)`` is the zero delay (the server's fast path)."""

    seconds: float
    kind: ClassVar[str] = "fixed"

    @property
    def is_zero(self) -> bool:
        return self.seconds == 0

    def sample(self, rng: random.Random) -> float:
        return self.seconds

    def quantile(self, q: float) -> float:
        _check_q(q)
        return self.seconds

    def describe(self) -> str:
        return "0" if self.seconds == 0 else f"fixed:{spec_duration(self.seconds)}"


@dataclass(frozen=True, repr=False)
class Uniform(Delay):
    """Uniform on ``[low, high]``."""

    low: float
    high: float
    kind: ClassVar[str] = "uniform"

    def sample(self, rng: random.Random) -> float:
        return self.low + (self.high - self.low) * rng.random()

    def quantile(self, q: float) -> float:
        _check_q(q)
        return self.low + (self.high - self.low) * q

    def describe(self) -> str:
        return f"uniform:min={spec_duration(self.low)},max={spec_duration(self.high)}"


@dataclass(frozen=True, repr=False)
class LogNormal(Delay):
    """``median * exp(sigma * Z)``: right-skewed like real service times."""

    median: float
    sigma: float
    kind: ClassVar[str] = "lognormal"

    def sample(self, rng: random.Random) -> float:
        return self.median * math.exp(self.sigma * rng.gauss())

    def quantile(self, q: float) -> float:
        return self.median * _normal_factor(q, self.sigma)

    def describe(self) -> str:
        return f"lognormal:median={spec_duration(self.median)},sigma={self.sigma!r}"


@dataclass(frozen=True, repr=False)
class Bimodal(Delay):
    """Two lognormal modes (medians ``fast``, ``slow``; one ``sigma``); slow w.p. ``p_slow``."""

    fast: float
    slow: float
    p_slow: float
    sigma: float = 0.1
    kind: ClassVar[str] = "bimodal"

    def sample(self, rng: random.Random) -> float:
        # Two draws whatever the mode, so the n-th sample always uses the same rng calls.
        median = self.slow if rng.random() < self.p_slow else self.fast
        return median * math.exp(self.sigma * rng.gauss())

    def quantile(self, q: float) -> float:
        _check_q(q)
        if self.sigma == 0:
            # Two point masses: the fast one holds 1 - p_slow of the probability.
            return self.fast if q <= 1 - self.p_slow and self.p_slow < 1 else self.slow
        if q in (0.0, 1.0):
            return 0.0 if q == 0 else math.inf
        # The slow mode is the fast one stretched, so F_slow <= F <= F_fast everywhere: the
        # mixture's q-quantile lies between the two modes' q-quantiles.
        low, high = (
            self.fast * _normal_factor(q, self.sigma),
            self.slow * _normal_factor(q, self.sigma),
        )
        while high - low > 1e-12 * high:
            mid = (low + high) / 2
            low, high = (mid, high) if self.cdf(mid) < q else (low, mid)
        return high

    def cdf(self, x: float) -> float:
        """``P(delay <= x)`` (``sigma > 0``)."""
        if x <= 0:
            return 0.0
        fast = _NORMAL.cdf(math.log(x / self.fast) / self.sigma)
        slow = _NORMAL.cdf(math.log(x / self.slow) / self.sigma)
        return (1 - self.p_slow) * fast + self.p_slow * slow

    def describe(self) -> str:
        return (
            f"bimodal:fast={spec_duration(self.fast)},slow={spec_duration(self.slow)},"
            f"p_slow={self.p_slow!r},sigma={self.sigma!r}"
        )


def spec_duration(seconds: float) -> str:
    """Text that parses back to exactly ``seconds``: ``20ms``, ``1.5s``, ``250us``.

    Prefers ``s`` from 1 s up and ``ms`` below, unless another unit's text is much shorter
    (``0.0123456789s``, not ``12.345678900000001ms``); exponents only as a last resort.
    """
    order = ("s", "ms", "us") if seconds >= 1 else ("ms", "s", "us")
    scale = {"s": 1.0, "ms": 1e3, "us": 1e6}
    exact = [
        text
        for text in (_trim(repr(seconds * scale[unit])) + unit for unit in order)
        if "e" not in text and parse_duration(text, field="") == seconds
    ]
    if not exact:
        return f"{seconds!r}s"
    shortest = min(map(len, exact))
    return next(text for text in exact if len(text) <= shortest + 3)


def _trim(number: str) -> str:
    return number[:-2] if number.endswith(".0") else number


def _build_fixed(rest: str, field: str) -> Delay:
    return Fixed(_duration(rest, field))


def _build_uniform(rest: str, field: str) -> Delay:
    args = _params(rest, field, required=("min", "max"))
    low, high = _duration(args["min"], f"{field}.min"), _duration(args["max"], f"{field}.max")
    if high < low:
        raise _bad(f"max ({args['max']}) is below min ({args['min']})", f"{field}.max")
    return Uniform(low, high)


def _build_lognormal(rest: str, field: str) -> Delay:
    args = _params(rest, field, required=("median", "sigma"))
    median = _positive_duration(args["median"], f"{field}.median")
    return LogNormal(median, _number(args["sigma"], f"{field}.sigma", at_most=5.0))


def _build_bimodal(rest: str, field: str) -> Delay:
    args = _params(rest, field, required=("fast", "slow", "p_slow"), optional=("sigma",))
    fast = _positive_duration(args["fast"], f"{field}.fast")
    slow = _positive_duration(args["slow"], f"{field}.slow")
    if slow < fast:
        raise _bad(f"slow ({args['slow']}) is below fast ({args['fast']})", f"{field}.slow")
    p_slow = _number(args["p_slow"], f"{field}.p_slow", at_most=1.0)
    sigma = _number(args.get("sigma", "0.1"), f"{field}.sigma", at_most=5.0)
    return Bimodal(fast, slow, p_slow, sigma)


_BUILDERS: Mapping[str, Callable[[str, str], Delay]] = {
    "fixed": _build_fixed,
    "uniform": _build_uniform,
    "lognormal": _build_lognormal,
    "bimodal": _build_bimodal,
}


def _params(
    rest: str, field: str, *, required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> dict[str, str]:
    """``name=value`` pairs split on commas; every required name present, no stranger."""
    args: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        name, equals, value = (s.strip() for s in part.partition("="))
        name = name.lower()
        if not equals or name not in (*required, *optional) or name in args:
            wanted = ", ".join(f"{n}=" for n in (*required, *optional))
            raise _bad(f"bad parameter {part!r} (takes {wanted})", field)
        args[name] = value
    missing = [n for n in required if n not in args]
    if missing:
        raise _bad(f"missing {', '.join(missing)}", field)
    return args


def _duration(text: str, field: str) -> float:
    """A duration of the spec, at most :data:`MOST_HELD_S` (the longest hold a request may
    ask for: a spec may not ask the server for more)."""
    try:
        seconds = parse_duration(text, field=field)
    except ConfigError as exc:
        raise _bad(exc.message, field) from None
    if seconds > MOST_HELD_S:
        raise _bad(f"must be at most {MOST_HELD_S:g} s, got {text!r}", field)
    return seconds


def _positive_duration(text: str, field: str) -> float:
    seconds = _duration(text, field)
    if seconds <= 0:
        raise _bad(f"must be a duration > 0, got {text!r}", field)
    return seconds


def _number(text: str, field: str, *, at_most: float) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= at_most:
        raise _bad(f"must be a number from 0 to {at_most:g}, got {text!r}", field)
    return value


def _normal_factor(q: float, sigma: float) -> float:
    """``exp(sigma * z_q)``, the lognormal quantile of median 1."""
    _check_q(q)
    if sigma == 0:
        return 1.0
    if q in (0.0, 1.0):
        return 0.0 if q == 0 else math.inf
    return math.exp(sigma * _NORMAL.inv_cdf(q))


def _check_q(q: float) -> None:
    if not 0 <= q <= 1:
        raise ValueError(f"quantile q must be in [0, 1], got {q!r}")


def _bad(message: str, field: str) -> ConfigError:
    return ConfigError(message, field=field, hint=f"forms: {DELAY_FORMS}")
