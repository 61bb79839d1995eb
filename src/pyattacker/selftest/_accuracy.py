"""``selftest accuracy``: our percentiles on both clocks against the echo server's truth.

The echo server runs in its own process with a known delay; this process attacks it at a
constant rate through the public API (:func:`pyattacker.attack.run_attack`; with
``--workers``, :func:`~pyattacker.attack.run_workers`, see :mod:`._setup`), then reads
the server's exact hold times of that run (``/stats``, reset first) and judges each of our
percentiles under :data:`GOAL`. The truth leaves out loopback and both event loops'
wake-ups, so the comparison is conservative: all of that counts against us.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pyattacker.attack import AttackPlan, OpenModel
from pyattacker.errors import ConfigError
from pyattacker.measure import Histogram, Outcome
from pyattacker.selftest._neighbours import OthersCpu
from pyattacker.selftest._rule import GOAL
from pyattacker.selftest._setup import ONE_PROCESS, Setup, check_setup
from pyattacker.servers import Delay, EchoServerProcess

__all__ = ["QUANTILES", "AccuracyCheck", "Figure", "check_accuracy_settings", "run_accuracy"]

#: (key in the server's /stats, percentile) compared on each clock.
QUANTILES: tuple[tuple[str, float], ...] = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0))
# Enough open connections that no request of a short run waits for a connect: the server's
# truth leaves out connecting, so a request that connects would be judged unfairly.
_PRECONNECT = 16


@dataclass(frozen=True)
class Figure:
    """One percentile on one clock against the truth (seconds)."""

    clock: str  # "scheduled" or "sent"
    quantile: str
    ours: float
    truth: float
    tolerance: float
    passed: bool

    @property
    def error(self) -> float:
        """``ours - truth``: positive when we read high."""
        return self.ours - self.truth


@dataclass
class AccuracyCheck:
    """What ``selftest accuracy`` measured; ``passed`` when every figure and count holds."""

    rate: float
    duration: float
    delay: str
    rule: str
    requests: int
    server_count: int
    dropped: int
    not_ok: int
    figures: list[Figure] = field(default_factory=list)
    #: CPUs other processes kept busy (on average) during the attack; None: unknown
    others_cpus: float | None = None
    workers: int = 1
    server_processes: int = 1

    def problems(self) -> list[str]:
        """Why the check failed (empty when it passed)."""
        found = [
            f"{f.clock} {f.quantile} off by {f.error * 1e3:+.3f} ms (allowed "
            f"{f.tolerance * 1e3:.3f} ms)"
            for f in self.figures
            if not f.passed
        ]
        if self.requests != self.server_count:
            found.append(f"we counted {self.requests} requests, the server {self.server_count}")
        if self.dropped:
            found.append(f"{self.dropped} dropped")
        if self.not_ok - self.dropped:
            found.append(f"{self.not_ok - self.dropped} requests not OK")
        if not self.figures:
            found.append("no request was measured")
        return found

    @property
    def passed(self) -> bool:
        return not self.problems()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for row, figure in zip(data["figures"], self.figures, strict=True):
            row["error"] = figure.error
        data["passed"] = self.passed
        data["problems"] = self.problems()
        return data


def check_accuracy_settings(rate: float, duration: float, delay: str) -> None:
    """``ConfigError`` naming the flag when a setting cannot make a check."""
    if not rate > 0 or rate > 10_000:
        raise ConfigError(
            f"--rate must be above 0 and at most 10,000/s, not {rate:g}",
            field="--rate",
            hint="a few hundred per second is plenty, e.g. --rate 200",
        )
    if not 0 < duration <= 600:
        raise ConfigError(
            f"--duration must be above 0 and at most 10m, not {duration:g} s",
            field="--duration",
            hint="a few seconds is plenty, e.g. --duration 3s",
        )
    Delay.parse(delay, field="--delay")


def run_accuracy(
    *,
    rate: float = 200.0,
    duration: float = 3.0,
    delay: str = "fixed:20ms",
    setup: Setup = ONE_PROCESS,
) -> AccuracyCheck:
    """Attack a fresh echo server (``delay``) at ``rate`` for ``duration`` seconds as
    ``setup`` says and judge our p50/p90/p99 on both clocks against its truth.

    Raises ``ConfigError`` for bad settings (see :func:`check_accuracy_settings`) and
    ``PyAttackerError`` when the server process cannot start. Blocks; not inside a loop.
    """
    check_accuracy_settings(rate, duration, delay)
    check_setup(setup)
    with EchoServerProcess(delay=delay, processes=setup.server_processes) as server:
        plan = AttackPlan.build(
            [server.url + "/"],
            OpenModel(rate=rate),
            duration=duration,
            preconnect=max(_PRECONNECT, setup.workers),  # divided among the workers
        )
        server.reset()
        others = OthersCpu([server.pid])
        result = setup.attack(plan)
        others_cpus = others.cpus()
        truth = server.stats()
    total = result.total
    check = AccuracyCheck(
        rate=rate,
        duration=duration,
        delay=delay,
        rule=GOAL.describe(),
        requests=total.requests,
        server_count=int(truth["count"]),
        dropped=result.dropped,
        not_ok=total.requests - total.by_outcome.get(Outcome.OK.value, 0),
        others_cpus=others_cpus,
        workers=setup.workers,
        server_processes=setup.server_processes,
    )
    if truth["count"] and total.latency.count:
        for clock, histogram in (("scheduled", total.latency), ("sent", total.service_time)):
            check.figures.extend(_figures(clock, histogram, truth))
    return check


def _figures(clock: str, histogram: Histogram, truth: dict[str, Any]) -> list[Figure]:
    figures = []
    for key, q in QUANTILES:
        ours, exact = histogram.percentile(q), float(truth[key])
        figures.append(
            Figure(clock, key, ours, exact, GOAL.tolerance(exact), GOAL.passes(ours, exact))
        )
    return figures
