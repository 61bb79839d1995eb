"""Threshold expressions (``attack --threshold``): a small grammar, parsed and judged purely.

An expression compares one figure of an attack with a bound::

    p95(latency) < 250ms        error_rate < 1%        rate >= 95/s
    p99.9(service_time) <= 2s   throttled_rate <= 5%   tokens_per_s >= 400/s
    mean(ttft) < 800ms          max(e2e) < 30s         goodput >= 90%

* A **distribution** (:data:`DISTRIBUTIONS`) is read through a statistic: ``pQ`` (the
  nearest-rank ``Q``-th percentile, ``0 <= Q <= 100``, the reports' definition), ``mean``,
  ``min`` or ``max``. Its bound is a duration: a number and one of ``us``/``µs``, ``ms``,
  ``s``, ``m``/``min``.
* A **share** (``error_rate``, ``throttled_rate``, ``goodput``) is bounded in ``%``.
* A **rate** (``rate``, ``tokens_per_s``, ``goodput_rate``) is bounded in ``/s``,
  ``/m``/``/min`` or ``/h``.

A unit is always required: a bare ``250`` could be milliseconds (k6) or seconds (our other
flags), and a gate that silently means the other one never fires.

Exactness, the contract the tests hold: the bound is the decimal the user wrote, kept as a
:class:`~fractions.Fraction` (``250ms`` is exactly 1/4 s, ``1%`` exactly 1/100). A measured
share is a ratio of counts, compared as a fraction, so 1 failure in 100 requests *equals*
``1%``. A measured duration or rate is a float: it is compared with the float nearest the
bound (``float(bound)``, correctly rounded), so a histogram that reports 0.1 s exactly
equals ``100ms``. Equal to the bound passes ``<=``/``>=`` and fails ``<``/``>``.

What this module is not: it reads no attack; :mod:`pyattacker.report._gate` measures the
figures and asks :func:`judge`.
"""

from __future__ import annotations

import enum
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from pyattacker.errors import ConfigError

__all__ = [
    "DISTRIBUTIONS",
    "RATES",
    "SECONDS_PER_UNIT",
    "SHARES",
    "Kind",
    "Threshold",
    "format_bound",
    "judge",
    "parse_threshold",
]

FLAG = "--threshold"


class Kind(enum.Enum):
    """What a figure is, and so which units its bound takes."""

    DURATION = "duration"
    SHARE = "share"
    RATE = "rate"


#: distributions a statistic reads (seconds): what each is, for docs and errors
DISTRIBUTIONS: dict[str, str] = {
    "latency": "end to end on the scheduled clock (from when the plan meant to send)",
    "service_time": "end to end on the sent clock (from when the request left)",
    "ttft": "LLM time to first token, sent clock",
    "ttft_scheduled": "LLM time to first token, scheduled clock",
    "itl": "LLM inter-token latency (per chunk)",
    "tpot": "LLM time per output token",
    "e2e": "LLM end to end of OK answers, sent clock",
    "e2e_scheduled": "LLM end to end of OK answers, scheduled clock",
}
#: shares of requests (bounded in %)
SHARES: dict[str, str] = {
    "error_rate": "requests that did not end OK (failed, throttled, dropped, cancelled)",
    "throttled_rate": "requests whose last attempt was throttled (429, rate-limit error)",
    "goodput": "requests that met every --goodput SLO",
    "flow_failure_rate": "--scenario flows that did not complete (failed at a step or in "
    "their own code, cancelled, dropped)",
}
#: rates per second
RATES: dict[str, str] = {
    "rate": "achieved rate: requests sent per second",
    "tokens_per_s": "LLM completion tokens per second",
    "goodput_rate": "requests per second that met every --goodput SLO",
}

_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}
_STATS = ("mean", "min", "max")
SECONDS_PER_UNIT = {
    "us": Fraction(1, 10**6),
    "µs": Fraction(1, 10**6),
    "μs": Fraction(1, 10**6),
    "ms": Fraction(1, 1000),
    "s": Fraction(1),
    "m": Fraction(60),
    "min": Fraction(60),
}
_PERIODS = {"s": Fraction(1), "m": Fraction(60), "min": Fraction(60), "h": Fraction(3600)}
_EXPR = re.compile(
    r"(?P<lhs>[A-Za-z_][A-Za-z0-9_.]*(?:\s*\(\s*[A-Za-z_][A-Za-z0-9_]*\s*\))?)\s*"
    r"(?P<op><=|>=|<|>)\s*(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(?P<unit>\S*)"
)
_STAT_CALL = re.compile(r"(?P<stat>[A-Za-z0-9_.]+)\s*\(\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*\)")
_PERCENTILE = re.compile(r"p(?P<q>[0-9]+(?:\.[0-9]+)?)")
_EXAMPLES = "e.g. 'p95(latency) < 250ms', 'error_rate < 1%', 'rate >= 95/s'"
_HINTS = {
    Kind.DURATION: "a duration with its unit, e.g. 250ms, 2s, 500us",
    Kind.SHARE: "a percentage, e.g. 1%, 99.5%",
    Kind.RATE: "a rate with its period, e.g. 95/s, 3000/m",
}


@dataclass(frozen=True)
class Threshold:
    """One parsed expression. ``stat`` is ``"p95"``, ``"mean"``, ``"min"`` or ``"max"`` for
    a distribution and ``None`` otherwise; ``quantile`` is the percentile's ``Q`` (``None``
    for the other statistics); ``bound`` is exact, in seconds, a fraction of 1, or per
    second. ``text`` is the expression in canonical spelling (``p95(latency) < 250ms``)."""

    metric: str
    stat: str | None
    quantile: float | None
    op: str
    bound: Fraction
    unit: str
    text: str

    @property
    def kind(self) -> Kind:
        return _kind_of(self.metric)

    @property
    def figure(self) -> str:
        """The left-hand side: ``p95(latency)``, ``error_rate``."""
        return self.metric if self.stat is None else f"{self.stat}({self.metric})"


def parse_threshold(text: str) -> Threshold:
    """The :class:`Threshold` ``text`` spells; ``ConfigError`` (field ``--threshold``)
    saying what was expected otherwise. Spaces around the parts are optional."""
    match = _EXPR.fullmatch(text.strip())
    if match is None:
        raise _error(f"cannot read {text!r}", f"write FIGURE OP BOUND, {_EXAMPLES}")
    metric, stat, quantile = _figure(match["lhs"])
    kind = _kind_of(metric)
    number, unit = match["number"], match["unit"]
    bound = _bound(kind, number, unit, text)
    op = match["op"]
    figure = metric if stat is None else f"{stat}({metric})"
    return Threshold(metric, stat, quantile, op, bound, unit, f"{figure} {op} {number}{unit}")


def judge(threshold: Threshold, value: float | Fraction | None) -> bool | None:
    """Whether ``value`` satisfies ``threshold``; ``None`` when there is nothing to judge
    (no value: an empty distribution, no requests). A :class:`Fraction` is compared
    exactly; a float with ``float(threshold.bound)`` (see the module docstring)."""
    if value is None:
        return None
    bound: float | Fraction = (
        threshold.bound if isinstance(value, Fraction) else float(threshold.bound)
    )
    return _OPERATORS[threshold.op](value, bound)


def format_bound(kind: Kind, value: float | Fraction | None) -> str:
    """A measured figure in the unit its bound uses: ``231.4ms``, ``0.95%``, ``98.2/s``."""
    if value is None:
        return "-"
    number = float(value)
    if kind is Kind.DURATION:
        return f"{number * 1000:.3f}ms" if number < 10 else f"{number:.3f}s"
    if kind is Kind.SHARE:
        return f"{number * 100:.3f}%"
    return f"{number:.3f}/s"


def _figure(lhs: str) -> tuple[str, str | None, float | None]:
    call = _STAT_CALL.fullmatch(lhs)
    if call is None:
        name = lhs.strip()
        if name in DISTRIBUTIONS:
            raise _error(
                f"{name!r} is a distribution: read it through a statistic",
                f"write p95({name}), mean({name}), min({name}) or max({name})",
            )
        _kind_of(name)  # raises for an unknown name
        return name, None, None
    stat, name = call["stat"], call["name"]
    if name not in DISTRIBUTIONS:
        known = ", ".join(DISTRIBUTIONS)
        raise _error(f"no distribution named {name!r}", f"one of {known}")
    if stat in _STATS:
        return name, stat, None
    percentile = _PERCENTILE.fullmatch(stat)
    quantile = None if percentile is None else float(percentile["q"])
    if quantile is None or not 0.0 <= quantile <= 100.0:
        raise _error(
            f"{stat!r} is not a statistic",
            "pQ with 0 <= Q <= 100 (p50, p95, p99.9), mean, min or max",
        )
    return name, f"p{quantile:g}", quantile


def _kind_of(name: str) -> Kind:
    if name in DISTRIBUTIONS:
        return Kind.DURATION
    if name in SHARES:
        return Kind.SHARE
    if name in RATES:
        return Kind.RATE
    known = ", ".join([*DISTRIBUTIONS, *SHARES, *RATES])
    raise _error(f"no figure named {name!r}", f"one of {known}")


def _bound(kind: Kind, number: str, unit: str, text: str) -> Fraction:
    try:
        value = Fraction(Decimal(number))
    except (InvalidOperation, ValueError):  # pragma: no cover - the pattern admits decimals
        raise _error(f"cannot read the number in {text!r}", _HINTS[kind]) from None
    scale = _scale(kind, unit)
    if scale is None:
        shown = f"unit {unit!r}" if unit else "no unit"
        raise _error(f"{shown} in {text!r}", f"expected {_HINTS[kind]}")
    return value * scale


def _scale(kind: Kind, unit: str) -> Fraction | None:
    if kind is Kind.DURATION:
        return SECONDS_PER_UNIT.get(unit.lower() if unit.isascii() else unit)
    if kind is Kind.SHARE:
        return Fraction(1, 100) if unit == "%" else None
    period = unit.lower()[1:] if unit.startswith("/") else None
    per = None if period is None else _PERIODS.get(period)
    return None if per is None else 1 / per


def _error(message: str, hint: str) -> ConfigError:
    return ConfigError(message, field=FLAG, hint=hint)
