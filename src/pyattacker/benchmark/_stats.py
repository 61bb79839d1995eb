"""Pure statistics for the benchmark report: aggregates over seeds, Student's t, paired
differences.

Stdlib only, no I/O, no state. The report decides *what* to compare; this module only
computes. ``t_quantile`` is exact to about 1e-9 (closed forms for one and two degrees of
freedom, the regularized incomplete beta function inverted by safeguarded Newton steps up to
``_SERIES_DF``, the Cornish-Fisher series beyond it), so a confidence interval printed next
to three seeds is the interval, not an approximation of it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

__all__ = [
    "Aggregate",
    "PairedDifference",
    "aggregate",
    "on_shared_keys",
    "paired_difference",
    "t_quantile",
]

K = TypeVar("K", bound=Hashable)
N = TypeVar("N", bound=Hashable)

#: above this many degrees of freedom the Cornish-Fisher series (Abramowitz & Stegun 26.7.5,
#: four correction terms) is exact to double precision for any quantile a report asks for,
#: and the continued fraction would need thousands of terms.
_SERIES_DF = 100_000
_MAX_TERMS = 20_000
_EPS = 1e-16
_TINY = 1e-300


@dataclass(frozen=True, slots=True)
class Aggregate:
    """One metric of one algorithm over its seeds.

    ``stdev`` is the sample standard deviation (n - 1 in the denominator), ``None`` with a
    single value: one seed has no spread, and printing 0 would claim one.
    """

    n: int
    mean: float
    min: float
    max: float
    stdev: float | None
    values: tuple[float, ...]

    def interval(self, confidence: float = 0.95) -> tuple[float, float] | None:
        """The ``confidence`` interval of the mean (Student's t over the seeds' values:
        ``mean ± t · stdev / √n``); ``None`` with a single value, which has no spread."""
        if self.stdev is None:
            return None
        half = t_quantile(0.5 + confidence / 2, self.n - 1) * self.stdev / math.sqrt(self.n)
        return self.mean - half, self.mean + half


def aggregate(values: Iterable[float]) -> Aggregate:
    """Mean, range and sample stdev of ``values``.

    Raises ``ValueError`` when there is no value or one is not finite: a NaN mean would
    poison every comparison made with it, so the caller decides what an undefined run means.
    """
    data = tuple(float(v) for v in values)
    if not data:
        raise ValueError("aggregate() needs at least one value")
    if not all(math.isfinite(v) for v in data):
        raise ValueError(f"aggregate() needs finite values, got {data!r}")
    stdev = statistics.stdev(data) if len(data) >= 2 else None
    return Aggregate(len(data), statistics.fmean(data), min(data), max(data), stdev, data)


def on_shared_keys(
    samples: Mapping[N, Mapping[K, float]], keys: Iterable[K]
) -> dict[N, dict[K, float]]:
    """Each sample restricted to those of ``keys`` (in that order) that *every* sample has.

    Means taken over the result are over the same keys, so they can be compared: a sample
    missing a key (a seed it has no value for) drops that key for all. A key no sample has
    is dropped too; with no key shared, every sample comes back empty.
    """
    shared = [key for key in keys if all(key in sample for sample in samples.values())]
    return {name: {key: sample[key] for key in shared} for name, sample in samples.items()}


# -- Student's t ------------------------------------------------------------------------------


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t distribution with ``df`` degrees of freedom.

    ``t_quantile(0.975, 2) == 4.30265...``; symmetric, ``t_quantile(1 - p, df) ==
    -t_quantile(p, df)``. Raises ``ValueError`` unless ``0 < p < 1`` and ``df`` is a whole
    number of at least 1.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be strictly between 0 and 1, got {p!r}")
    if isinstance(df, bool) or not isinstance(df, int) or df < 1:
        raise ValueError(f"df must be a whole number >= 1, got {df!r}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -_upper_quantile(p, df)
    return _upper_quantile(1.0 - p, df)


def _upper_quantile(q: float, df: int) -> float:
    """The ``t >= 0`` whose upper tail probability is ``q`` (``0 < q < 0.5``)."""
    if df == 1:
        return 1.0 / math.tan(math.pi * q)  # Cauchy
    if df == 2:
        return (1.0 - 2.0 * q) / math.sqrt(2.0 * q * (1.0 - q))
    if df > _SERIES_DF:
        return _cornish_fisher(q, df)
    return _solve_tail(q, df)


def _cornish_fisher(q: float, df: int) -> float:
    """t from the normal quantile plus four terms in 1/df (Abramowitz & Stegun 26.7.5)."""
    z = -statistics.NormalDist().inv_cdf(q)
    g1 = (z**3 + z) / 4.0
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96.0
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384.0
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160.0
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def _solve_tail(q: float, df: int) -> float:
    """Newton's method on ``P(T > t) = q``, kept inside a shrinking bracket.

    The tail is decreasing in ``t`` and its derivative is minus the density, so a step that
    would leave the bracket is replaced by bisection: convergence is quadratic near the root
    and guaranteed away from it.
    """
    low, high = 0.0, 1.0
    while _excess(high, q, df) > 0.0:
        low, high = high, high * 2.0
    t = (low + high) / 2.0
    for _ in range(400):
        excess = _excess(t, q, df)
        if excess == 0.0:
            return t
        low, high = (t, high) if excess > 0.0 else (low, t)
        density = _density(t, df)
        proposal = t + excess / density if density > 0.0 else high
        if not low < proposal < high:
            proposal = (low + high) / 2.0
        if abs(proposal - t) <= 4.0 * _EPS * proposal:
            return proposal
        t = proposal
    raise ArithmeticError(f"t quantile did not converge (q={q!r}, df={df})")


def _excess(t: float, q: float, df: int) -> float:
    """``P(T > t) - q`` for ``t >= 0``, from whichever side keeps its digits.

    ``P(T > t) = I_x(df/2, 1/2) / 2`` with ``x = df / (df + t²)``. Near the median that is
    ``1/2`` minus a small central mass and would cancel, so there the central mass
    ``P(0 < T < t) = I_y(1/2, df/2) / 2`` (``y = 1 - x``) is compared with ``1/2 - q``,
    which is exact for ``q >= 1/4``.
    """
    t2 = t * t
    x, y = df / (df + t2), t2 / (df + t2)
    if q < 0.25:
        return 0.5 * _betainc(df / 2.0, 0.5, x, y) - q
    return (0.5 - q) - 0.5 * _betainc(0.5, df / 2.0, y, x)


def _density(t: float, df: int) -> float:
    """Student's t density, in logs so large ``df`` does not overflow the gamma functions."""
    log_norm = math.lgamma((df + 1) / 2.0) - math.lgamma(df / 2.0) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - (df + 1) / 2.0 * math.log1p(t * t / df))


def _betainc(a: float, b: float, x: float, y: float) -> float:
    """The regularized incomplete beta ``I_x(a, b)``, with ``y = 1 - x`` given separately.

    Passing ``y`` keeps the digits of a point near 1. The continued fraction converges fast
    below ``(a + 1) / (a + b + 2)``; above it the symmetry ``I_x(a, b) = 1 - I_y(b, a)``
    swaps the roles so it is always evaluated where it converges.
    """
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    log_beta = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    front = math.exp(a * math.log(x) + b * math.log(y) - log_beta)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, y) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of ``I_x(a, b)``, evaluated by the modified Lentz method.

    Terms: ``d(2m) = m (b - m) x / ((a + 2m - 1)(a + 2m))`` and
    ``d(2m + 1) = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1))``.
    """
    c, d = 1.0, _nonzero(1.0 - (a + b) * x / (a + 1.0))
    d = 1.0 / d
    result = d
    for m in range(1, _MAX_TERMS):
        even = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        for term in (even, odd):
            d = 1.0 / _nonzero(1.0 + term * d)
            c = _nonzero(1.0 + term / c)
            result *= c * d
        if abs(c * d - 1.0) < _EPS:
            return result
    raise ArithmeticError(f"incomplete beta did not converge (a={a!r}, b={b!r}, x={x!r})")


def _nonzero(value: float) -> float:
    """Lentz's guard: a zero denominator is nudged to a tiny one instead of dividing by 0."""
    return value if abs(value) > _TINY else _TINY


# -- paired differences ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PairedDifference:
    """``d_i = challenger_i - leader_i`` over the seeds both ran, and its confidence interval.

    ``ci_low``/``ci_high`` are ``mean ± t((1 + confidence) / 2, n - 1) * se`` with
    ``se = stdev / sqrt(n)``; ``stdev``, ``se`` and both bounds are ``None`` with a single
    shared seed, where there is no spread to estimate. ``df`` is ``n - 1``.
    """

    n: int
    mean: float
    stdev: float | None
    se: float | None
    df: int
    ci_low: float | None
    ci_high: float | None
    confidence: float


def paired_difference(
    challenger: Mapping[K, float], leader: Mapping[K, float], confidence: float = 0.95
) -> PairedDifference:
    """The paired difference of two per-seed mappings (seed -> value), on shared seeds only.

    Pairing is the point: both algorithms saw the same seed's weather, so the noise they
    share cancels in ``d`` and what is left is the difference between them. Raises
    ``ValueError`` when the two share no seed or ``confidence`` is not in ``(0, 1)``.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
    diffs = [challenger[seed] - leader[seed] for seed in challenger if seed in leader]
    if not diffs:
        raise ValueError("the two algorithms share no seed: there is nothing to pair")
    n, mean = len(diffs), statistics.fmean(diffs)
    if n < 2:
        return PairedDifference(n, mean, None, None, 0, None, None, confidence)
    stdev = statistics.stdev(diffs)
    se = stdev / math.sqrt(n)
    half = t_quantile((1.0 + confidence) / 2.0, n - 1) * se
    return PairedDifference(n, mean, stdev, se, n - 1, mean - half, mean + half, confidence)
