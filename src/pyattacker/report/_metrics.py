"""``/metrics`` of ``attack --serve``: an attack's counts in Prometheus text format 0.0.4.

:class:`AttackMetrics` is an ``on_record`` accumulator: it counts every finished request
the attack hands it, exactly as the final report does (by the request's last attempt, for
outcome, status and error class), so a scrape after the last record shows the report's
counts. It renders on request only (:meth:`AttackMetrics.exposition`): a record costs a few
dict increments and two bucket searches, never any text.

The metrics (every name starts ``pyattacker_``):

* ``requests_total{outcome}`` counter: finished requests by outcome (ok, failed, throttled,
  dropped, cancelled), as the report's ``total.outcomes``;
* ``attempts_total`` counter: attempts of the finished requests (``total.attempts``);
* ``responses_total{status}`` counter: requests by their last HTTP status
  (``total.status``);
* ``errors_total{class}`` counter: requests by their last error class
  (``total.error_classes``);
* ``latency_seconds{clock}`` histogram: answered requests' latency on the ``scheduled``
  clock (from when the load model meant the request to start) and the ``sent`` clock
  (service time); its ``_count`` is the report's ``latency_s.<clock>.count``;
* ``ttft_seconds`` histogram (LLM attacks only): time to first token, sent clock;
* ``in_flight`` gauge: requests in progress at the scrape (from the live progress).
* ``leases_active`` and ``lease_capacity`` gauges, by ``target``: the leases each target
  holds at the scrape and the most it may hold (from the live progress; 0 held at the end).

Buckets are fixed (:data:`BUCKETS`, 1 ms to 60 s): a histogram's buckets must not change
during a scrape series, and these cover an HTTP service and an LLM alike.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable, Sequence

from pyattacker.measure import RequestRecord

__all__ = ["BUCKETS", "AttackMetrics", "Histogram"]

#: upper bounds (seconds) of every histogram's buckets; ``+Inf`` is added on output
BUCKETS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip


class Histogram:
    """Observations counted into :data:`BUCKETS` (non-cumulative; cumulated on output)."""

    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)  # the last one is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        # bisect_left: a value equal to a bound belongs to that bucket ("le")
        self.counts[bisect.bisect_left(BUCKETS, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def merge(self, other: Histogram) -> None:
        """Add ``other``'s observations (bucket by bucket)."""
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        self.sum += other.sum

    def lines(self, name: str, labels: str) -> list[str]:
        """The ``_bucket``, ``_sum`` and ``_count`` samples; ``labels`` is ``k="v"`` or ""."""
        sep = "," if labels else ""
        out, running = [], 0
        for bound, n in zip((*BUCKETS, math.inf), self.counts, strict=True):
            running += n
            le = "+Inf" if bound == math.inf else repr(bound)
            out.append(f'{name}_bucket{{{labels}{sep}le="{le}"}} {running}')
        braces = f"{{{labels}}}" if labels else ""
        out += [f"{name}_sum{braces} {_number(self.sum)}", f"{name}_count{braces} {running}"]
        return out


class AttackMetrics:
    """Counts of one attack's finished requests (see the module docstring).

    ``llm`` adds the TTFT histogram. Not thread-safe: the attack's loop calls :meth:`add`,
    and the server on the same loop calls :meth:`exposition`.
    """

    def __init__(self, *, llm: bool = False) -> None:
        self.llm = llm
        self.requests: Counter[str] = Counter()
        self.attempts = 0
        self.status: Counter[int] = Counter()
        self.errors: Counter[str] = Counter()
        self.latency = {"scheduled": Histogram(), "sent": Histogram()}
        self.ttft = Histogram()

    def __repr__(self) -> str:
        return f"<AttackMetrics requests={sum(self.requests.values())} attempts={self.attempts}>"

    def add(self, record: RequestRecord) -> None:
        """Count one finished request (the attack's ``on_record``)."""
        last = record.attempts[-1]
        self.requests[str(last.outcome)] += 1
        self.attempts += len(record.attempts)
        if last.status is not None:
            self.status[last.status] += 1
        if last.error_class is not None:
            self.errors[str(last.error_class)] += 1
        latency = record.latency
        if latency is None:
            return
        service = record.service_time
        self.latency["scheduled"].observe(max(latency, 0.0))
        if service is not None:
            self.latency["sent"].observe(max(service, 0.0))
        if self.llm and last.first_token is not None and last.sent is not None:
            self.ttft.observe(max(last.first_token - last.sent, 0.0))

    def merge(self, other: AttackMetrics) -> None:
        """Add ``other``'s counts (another worker's, of the same attack): then equal to one
        accumulator's of both sets of records."""
        self.requests.update(other.requests)
        self.attempts += other.attempts
        self.status.update(other.status)
        self.errors.update(other.errors)
        for clock, histogram in self.latency.items():
            histogram.merge(other.latency[clock])
        self.ttft.merge(other.ttft)

    # A tap of ``attack --workers --serve`` (attack/_taps.py): each worker counts its own
    # records, and the driver adds them up (at every snapshot for the live page).

    def open(self, index: int) -> AttackMetrics:
        """An empty accumulator of the same kind, for worker ``index``."""
        return AttackMetrics(llm=self.llm)

    def part(self, *, final: bool) -> AttackMetrics:
        """What a worker's accumulator hands back: itself (copied on its way)."""
        return self

    def gather(self, parts: Sequence[object | None], lost: Sequence[int]) -> None:
        """Add every worker's counts (a lost one's, as of its last snapshot)."""
        for part in parts:
            if isinstance(part, AttackMetrics):
                self.merge(part)

    def exposition(
        self,
        *,
        in_flight: int | None = None,
        leases: Sequence[tuple[str, int, int]] = (),
    ) -> str:
        """The metrics as Prometheus text exposition format 0.0.4 (ends with a newline);
        ``leases`` is each target's ``(id, held, most)`` (see :class:`Progress`)."""
        p = "pyattacker_"
        lines = _family(
            f"{p}requests_total", "counter", "Finished requests by outcome.",
            _labelled("outcome", self.requests.items()),
        )  # fmt: skip
        lines += _family(
            f"{p}attempts_total", "counter", "Attempts of the finished requests.",
            [("", self.attempts)],
        )  # fmt: skip
        lines += _family(
            f"{p}responses_total", "counter", "Finished requests by their last HTTP status.",
            _labelled("status", ((str(s), n) for s, n in sorted(self.status.items()))),
        )  # fmt: skip
        lines += _family(
            f"{p}errors_total", "counter", "Finished requests by their last error class.",
            _labelled("class", self.errors.items()),
        )  # fmt: skip
        lines += [
            f"# HELP {p}latency_seconds Latency of answered requests, on the scheduled "
            "clock (from the planned start) and the sent clock (service time).",
            f"# TYPE {p}latency_seconds histogram",
        ]
        for clock, histogram in self.latency.items():
            lines += histogram.lines(f"{p}latency_seconds", f'clock="{clock}"')
        if self.llm:
            lines += [
                f"# HELP {p}ttft_seconds Time to first token (sent clock).",
                f"# TYPE {p}ttft_seconds histogram",
                *self.ttft.lines(f"{p}ttft_seconds", ""),
            ]
        if in_flight is not None:
            lines += _family(f"{p}in_flight", "gauge", "Requests in progress.", [("", in_flight)])
        if leases:
            lines += _family(
                f"{p}leases_active", "gauge", "Leases each target holds now.",
                _labelled("target", ((t, held) for t, held, _ in leases)),
            )  # fmt: skip
            lines += _family(
                f"{p}lease_capacity", "gauge", "The most leases each target may hold.",
                _labelled("target", ((t, most) for t, _, most in leases)),
            )  # fmt: skip
        return "\n".join(lines) + "\n"


def _labelled(label: str, items: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
    return [(f'{label}="{_escape(str(value))}"', n) for value, n in sorted(items)]


def _family(name: str, kind: str, help_: str, samples: Sequence[tuple[str, int]]) -> list[str]:
    """One metric family: HELP, TYPE, and each ``(labels, value)`` sample."""
    lines = [f"# HELP {name} {help_}", f"# TYPE {name} {kind}"]
    lines += [f"{name}{{{labels}}} {n}" if labels else f"{name} {n}" for labels, n in samples]
    return lines


def _escape(value: str) -> str:
    """A label value as the format wants it: backslash, quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return repr(float(value))
