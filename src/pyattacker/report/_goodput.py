"""Goodput (``attack --llm --goodput``): the requests that met every per-request SLO.

As vLLM's serving benchmark defines it: a request is *good* when each of its figures named
in the SLOs is within its bound, and goodput is good requests per second. The SLOs::

    ttft<500ms,tpot<50ms,e2e<10s

* ``ttft``: the last attempt's first token minus the request's first send (sent clock,
  as the report's TTFT);
* ``tpot``: ``(end - first token) / (n - 1)``, ``n`` the answer's completion tokens (its
  usage, else its chunk count), as the report's TPOT;
* ``e2e``: end minus first send (sent clock).

A request is good only if it ended OK *and* has every named figure within bound: a failed
or throttled request, or one without the figure (an answer that did not stream has no TTFT;
one of fewer than two tokens no TPOT), is not good. Bounds compare as thresholds do
(:mod:`pyattacker.report._thresholds`): ``<`` fails a value equal to the bound, ``<=``
passes it.

:class:`GoodputCounter` is fed every :class:`~pyattacker.measure.RequestRecord` through the
attack's ``on_record`` hook; its :meth:`~GoodputCounter.summary` gives the share (good /
requests that ended, arrivals dropped before sending included: they have no record) and
the rate (good / the report's ``answer_span_s``).
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from pyattacker.errors import ConfigError
from pyattacker.measure import Outcome, RequestRecord
from pyattacker.report._thresholds import SECONDS_PER_UNIT

__all__ = ["SLO_FIGURES", "GoodputCounter", "Slo", "parse_slos"]

FLAG = "--goodput"
#: the per-request figures an SLO may bound, and what they are
SLO_FIGURES: dict[str, str] = {
    "ttft": "time to first token, sent clock",
    "tpot": "time per output token",
    "e2e": "end to end, sent clock",
}
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}
_SLO = re.compile(
    r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?P<op><=|>=|<|>)\s*(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"\s*(?P<unit>\S*)"
)
_HINT = "e.g. ttft<500ms,tpot<50ms,e2e<10s (units us, ms, s, m)"


@dataclass(frozen=True)
class Slo:
    """One per-request bound: ``figure op bound`` (``bound`` exact, in seconds)."""

    figure: str
    op: str
    bound: Fraction
    text: str

    def met(self, value: float | None) -> bool:
        """Whether ``value`` (seconds, or ``None`` when the request has no such figure)
        is within the bound."""
        return value is not None and _COMPARE[self.op](value, float(self.bound))


def parse_slos(text: str) -> tuple[Slo, ...]:
    """The SLOs of ``FIGURE OP DURATION[,...]``; ``ConfigError`` (field ``--goodput``)
    otherwise, also when a figure is named twice."""
    slos: list[Slo] = []
    for part in (p.strip() for p in text.split(",")):
        match = _SLO.fullmatch(part)
        if match is None:
            raise ConfigError(f"cannot read the SLO {part!r}", field=FLAG, hint=_HINT)
        name, op, number, unit = match["name"], match["op"], match["number"], match["unit"]
        if name not in SLO_FIGURES:
            known = ", ".join(SLO_FIGURES)
            raise ConfigError(f"no per-request figure {name!r}", field=FLAG, hint=f"one of {known}")
        if any(slo.figure == name for slo in slos):
            raise ConfigError(f"{name} is bounded twice", field=FLAG, hint="give each one once")
        scale = SECONDS_PER_UNIT.get(unit.lower() if unit.isascii() else unit)
        if scale is None:
            shown = f"unit {unit!r}" if unit else "no unit"
            raise ConfigError(f"{shown} in {part!r}", field=FLAG, hint=f"a duration, {_HINT}")
        bound = Fraction(Decimal(number)) * scale
        slos.append(Slo(name, op, bound, f"{name} {op} {number}{unit}"))
    return tuple(slos)


def figures_of(record: RequestRecord) -> dict[str, float | None]:
    """``ttft``, ``tpot`` and ``e2e`` of one request (seconds; ``None`` when it has none)."""
    last = record.last
    sent, end, first = record.sent, last.end, last.first_token
    e2e = None if sent is None or end is None else max(end - sent, 0.0)
    ttft = None if sent is None or first is None else max(first - sent, 0.0)
    tpot = None
    if first is not None and end is not None:
        n = _completion_tokens(last.usage, 1 + len(last.token_times or ()))
        tpot = max(end - first, 0.0) / (n - 1) if n >= 2 else None
    return {"ttft": ttft, "tpot": tpot, "e2e": e2e}


def _completion_tokens(usage: Mapping[str, float] | None, chunks: int) -> int:
    """The answer's completion tokens (its usage, as the report counts them), else its
    chunk count."""
    value = None if usage is None else usage.get("completion_tokens")
    if value is None or not isinstance(value, int | float) or not value >= 0:
        return chunks
    return round(value)


class GoodputCounter:
    """Counts requests and good requests as records arrive (see the module docstring).

    Not thread-safe; :meth:`add` is the ``on_record`` callback."""

    def __init__(self, slos: tuple[Slo, ...]) -> None:
        self.slos = slos
        self.requests = 0
        self.good = 0
        self.not_ok = 0
        self.missed: Counter[str] = Counter()  # OK requests that missed each SLO

    def __repr__(self) -> str:
        return f"<GoodputCounter good={self.good} requests={self.requests}>"

    def add(self, record: RequestRecord) -> None:
        self.requests += 1
        if record.outcome is not Outcome.OK:
            self.not_ok += 1
            return
        figures = figures_of(record)
        good = True
        for slo in self.slos:
            if not slo.met(figures[slo.figure]):
                self.missed[slo.text] += 1
                good = False
        self.good += good

    def merge(self, other: GoodputCounter) -> None:
        """Add ``other``'s counts (of the same SLOs): then equal to one counter's of both
        sets of records."""
        self.requests += other.requests
        self.good += other.good
        self.not_ok += other.not_ok
        self.missed.update(other.missed)

    # A tap of ``attack --workers`` (attack/_taps.py): each worker counts its own records
    # in a counter of the same SLOs, and the driver adds them into this one.

    def open(self, index: int) -> GoodputCounter:
        """An empty counter of the same SLOs, for worker ``index``."""
        return GoodputCounter(self.slos)

    def part(self, *, final: bool) -> GoodputCounter:
        """What a worker's counter hands back: itself (copied on its way to the driver)."""
        return self

    def gather(self, parts: Sequence[object | None], lost: Sequence[int]) -> None:
        """Add every worker's counter (a lost one's, as of its last snapshot)."""
        for part in parts:
            if isinstance(part, GoodputCounter):
                self.merge(part)

    def share(self, dropped: int = 0) -> Fraction | None:
        """Good requests / requests that ended, ``dropped`` included (arrivals dropped
        before sending: they have no record, and are not good); ``None`` before any."""
        requests = self.requests + dropped
        return Fraction(self.good, requests) if requests else None

    def rate(self, span_s: float) -> float | None:
        """Good requests per second over ``span_s``; ``None`` when it is 0."""
        return self.good / span_s if span_s > 0 else None

    def summary(self, span_s: float, dropped: int = 0) -> dict[str, Any]:
        """The report's ``goodput`` section (rate over ``span_s`` seconds; ``dropped``
        arrivals counted as requests that were not OK)."""
        share = self.share(dropped)
        return {
            "slos": [slo.text for slo in self.slos],
            "requests": self.requests + dropped,
            "good": self.good,
            "not_ok": self.not_ok + dropped,
            "missed": {slo.text: self.missed[slo.text] for slo in self.slos},
            "share": None if share is None else float(share),
            "rate_per_s": self.rate(span_s),
            "span_s": span_s,
        }


def goodput_lines(section: Mapping[str, Any]) -> list[str]:
    """The text report's goodput paragraph, from :meth:`GoodputCounter.summary`."""
    share, rate = section["share"], section["rate_per_s"]
    shown = "-" if share is None else f"{share * 100:.2f}%"
    per_s = "-" if rate is None else f"{rate:.3f}/s"
    missed = ", ".join(f"{text}: {n:,}" for text, n in section["missed"].items())
    return [
        f"Goodput ({', '.join(section['slos'])})",
        f"  {section['good']:,} of {section['requests']:,} requests good ({shown}), "
        f"{per_s} over {section['span_s']:.3f}s",
        f"  not OK: {section['not_ok']:,}; OK but missed {missed}",
    ]
