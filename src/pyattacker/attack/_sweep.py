"""Sweeps: one attack per load level, run one after another (``attack --sweep``).

Three kinds (:meth:`SweepSpec.parse`):

- ``auto`` (``--sweep`` alone), as GuideLLM sweeps: a *synchronous* level (one client,
  one request at a time: the endpoint's unloaded latency), a *throughput* level (a closed
  model of ``max_concurrency`` clients: the most it answers), then ``levels`` open-model
  rates evenly spaced strictly between the two levels' OK answers per second
  (:func:`ok_rate`; so the rates between are only known once the first two have run);
- ``concurrency=1,8,32``: a closed model at each concurrency;
- ``rate=1/s,5/s``: an open model at each rate (``--arrival`` applies).

A list's values run in increasing order, each once (a repeated value is refused).

Each level is a whole attack of the plan (same targets, prompts, duration or requests,
warmup, retry policy), run by :func:`run_attack`: same engine, same two clocks, same
counting. A level the user interrupts (Ctrl-C) ends the sweep: the levels done, and the
interrupted one marked so, are what the sweep reports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pyattacker._units import parse_rate
from pyattacker.attack._load import ClosedModel, LoadModel, OpenModel
from pyattacker.attack._plan import AttackPlan
from pyattacker.attack._result import AttackResult
from pyattacker.errors import ConfigError

__all__ = [
    "DEFAULT_LEVELS",
    "DEFAULT_MAX_CONCURRENCY",
    "SweepLevel",
    "SweepResult",
    "SweepSpec",
    "rates_between",
    "sweep",
]

DEFAULT_LEVELS = 5
DEFAULT_MAX_CONCURRENCY = 64
MAX_LEVELS = 100
MAX_CONCURRENCY = 100_000

SweepKind = Literal["auto", "concurrency", "rate"]
LevelKind = Literal["synchronous", "throughput", "rate", "concurrency"]


@dataclass(frozen=True, slots=True)
class SweepLevel:
    """One level of a sweep: its ``kind``, its ``load`` model, and its name in reports."""

    kind: LevelKind
    load: LoadModel

    @property
    def name(self) -> str:
        load = self.load
        if isinstance(load, OpenModel):
            return f"rate {load.rate:.4g}/s"
        if self.kind == "concurrency":
            return f"concurrency {load.clients}"
        return f"{self.kind} ({load.clients} client{'s' if load.clients > 1 else ''})"

    @property
    def offered_rate(self) -> float | None:
        """Arrivals per second the level offered (open model), else ``None``."""
        return self.load.rate if isinstance(self.load, OpenModel) else None

    @property
    def concurrency(self) -> int | None:
        return self.load.clients if isinstance(self.load, ClosedModel) else None


@dataclass(frozen=True, slots=True)
class SweepSpec:
    """What to sweep: ``kind``, and the ``values`` (rates or concurrencies) of a list
    sweep, or the number of rate ``levels`` and the throughput level's
    ``max_concurrency`` of an ``auto`` one. ``arrival`` spaces the open-model levels."""

    kind: SweepKind
    values: tuple[float, ...] = ()
    levels: int = DEFAULT_LEVELS
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    arrival: Literal["constant", "poisson"] = "constant"

    @classmethod
    def parse(
        cls,
        text: str,
        *,
        levels: int = DEFAULT_LEVELS,
        max_concurrency: int | None = None,
        arrival: Literal["constant", "poisson"] = "constant",
        field: str = "--sweep",
    ) -> SweepSpec:
        """``"auto"``, ``"concurrency=1,8,32"`` or ``"rate=1/s,5/s"``; ``ConfigError``
        naming ``field`` otherwise."""
        if not 1 <= levels <= MAX_LEVELS:
            raise ConfigError(f"must be 1 to {MAX_LEVELS}, got {levels}", field="--sweep-levels")
        kind, sep, values = text.strip().partition("=")
        if kind == "auto" and not sep:
            most = DEFAULT_MAX_CONCURRENCY if max_concurrency is None else max_concurrency
            _check_throughput_clients(most)
            return cls("auto", levels=levels, max_concurrency=most, arrival=arrival)
        if kind not in ("concurrency", "rate") or not sep:
            raise ConfigError(
                f"cannot read {text!r}",
                field=field,
                hint="--sweep alone (synchronous, throughput and rates between), "
                "--sweep concurrency=1,8,32 or --sweep rate=1/s,5/s",
            )
        if max_concurrency is not None:
            raise ConfigError(
                "sets the throughput level of --sweep alone",
                field="--clients",
                hint="a list sweep names each level's load itself",
            )
        parsed = _values(kind, values, field)
        return cls(kind, values=parsed, arrival=arrival)  # type: ignore[arg-type]

    def first_levels(self) -> list[SweepLevel]:
        """The levels known before any has run (all of them, but for ``auto``'s rates)."""
        if self.kind == "auto":
            return [
                SweepLevel("synchronous", ClosedModel(1)),
                SweepLevel("throughput", ClosedModel(self.max_concurrency)),
            ]
        if self.kind == "concurrency":
            return [SweepLevel("concurrency", ClosedModel(int(v))) for v in self.values]
        return [SweepLevel("rate", OpenModel(rate=v, arrival=self.arrival)) for v in self.values]

    def planned(self) -> int:
        """How many levels the sweep runs."""
        return 2 + self.levels if self.kind == "auto" else len(self.values)


def _check_throughput_clients(clients: int) -> None:
    if clients > MAX_CONCURRENCY:
        raise ConfigError(f"must be 2 to {MAX_CONCURRENCY:,}, got {clients:,}", field="--clients")
    if clients < 2:
        raise ConfigError(
            f"{clients} client makes the throughput level the synchronous one",
            field="--clients",
            hint="give --clients 2 or more (default 64)",
        )


def _values(kind: str, values: str, field: str) -> tuple[float, ...]:
    """A list sweep's values, in increasing order; a ``ConfigError`` for a repeated one."""
    parsed = [_value(kind, v.strip(), f"{field}[{i}]") for i, v in enumerate(values.split(","))]
    if len(parsed) > MAX_LEVELS:
        raise ConfigError(f"at most {MAX_LEVELS} levels", field=field)
    repeated = sorted({v for v in parsed if parsed.count(v) > 1})
    if repeated:
        raise ConfigError(
            f"{kind} {repeated[0]:g} is given twice", field=field, hint="list each level once"
        )
    return tuple(sorted(parsed))


def _value(kind: str, text: str, field: str) -> float:
    if kind == "rate":
        rate = parse_rate(text, field=field)
        try:
            OpenModel(rate=rate)  # the bounds of any open model's rate
        except ConfigError as exc:
            raise ConfigError(exc.message, field=field, hint=exc.hint) from None
        return rate
    if not text.isdigit():
        raise ConfigError(f"{text!r} is not a whole number of clients", field=field,
                          hint="e.g. concurrency=1,8,32")  # fmt: skip
    if not 1 <= int(text) <= MAX_CONCURRENCY:
        raise ConfigError(f"must be 1 to {MAX_CONCURRENCY:,} clients, got {int(text):,}",
                          field=field, hint="e.g. concurrency=1,8,32")  # fmt: skip
    return float(int(text))


def rates_between(low: float, high: float, n: int) -> list[float]:
    """``n`` rates evenly spaced strictly between ``low`` and ``high`` (either order):
    ``low + (high - low) * i / (n + 1)`` for ``i`` in ``1..n``, ascending. Rates that
    are not > 0 are left out (a level that answered nothing gives no span to fill)."""
    low, high = min(low, high), max(low, high)
    rates = [low + (high - low) * i / (n + 1) for i in range(1, n + 1)]
    return [r for r in rates if r > 0]


def ok_rate(result: AttackResult) -> float:
    """OK answers per second of the whole run (``answer_span_s``: the start to the last
    answer). The first two levels of ``auto`` are closed models, which send only as
    answers come back, so the last answers' tail is part of their pace: over the sending
    span alone, the requests still in flight when sending stopped (one per client) would
    add ``clients / duration`` to what the endpoint answered."""
    span = result.answer_span_s
    return result.total.by_outcome.get("ok", 0) / span if span > 0 else 0.0


@dataclass
class SweepResult:
    """The levels run, in the order they ran, each with its result; ``interrupted`` when
    Ctrl-C (or a caller) stopped one (that level is the last, and its figures cover what
    ran). :meth:`ordered` is the order reports use: by offered load."""

    spec: SweepSpec
    runs: list[tuple[SweepLevel, AttackResult]] = field(default_factory=list)
    interrupted: bool = False

    def ordered(self) -> list[tuple[SweepLevel, AttackResult]]:
        """Synchronous first, the rates ascending, throughput last (``auto``); a list
        sweep in the order given."""
        if self.spec.kind != "auto":
            return list(self.runs)
        rank = {"synchronous": 0, "rate": 1, "throughput": 2}

        def key(run: tuple[SweepLevel, AttackResult]) -> tuple[int, float]:
            return rank[run[0].kind], run[0].offered_rate or 0.0

        return sorted(self.runs, key=key)


def sweep(
    spec: SweepSpec,
    plan_for: Callable[[LoadModel], AttackPlan],
    run: Callable[[AttackPlan], AttackResult],
    *,
    on_level: Callable[[int, SweepLevel], None] | None = None,
) -> SweepResult:
    """Run every level of ``spec``: ``plan_for(load)`` makes each level's plan and
    ``run(plan)`` runs it (:func:`run_attack`, or a simulated run in tests);
    ``on_level(i, level)`` hears of each level as it starts. Stops after a level whose
    result is :attr:`AttackResult.interrupted`, or at a ``KeyboardInterrupt`` raised
    between levels (that level is then not in the result)."""
    result = SweepResult(spec)
    pending = spec.first_levels()
    while pending:
        level = pending.pop(0)
        if on_level is not None:
            on_level(len(result.runs), level)
        try:
            outcome = run(plan_for(level.load))
        except KeyboardInterrupt:  # Ctrl-C between levels, before a level's handlers
            result.interrupted = True
            break
        result.runs.append((level, outcome))
        if outcome.interrupted:
            result.interrupted = True
            break
        if spec.kind == "auto" and level.kind == "throughput":
            pending += _rate_levels(spec, result.runs)
    return result


def _rate_levels(
    spec: SweepSpec, runs: Sequence[tuple[SweepLevel, AttackResult]]
) -> list[SweepLevel]:
    (_, synchronous), (_, throughput) = runs[0], runs[1]
    rates = rates_between(ok_rate(synchronous), ok_rate(throughput), spec.levels)
    return [SweepLevel("rate", OpenModel(rate=r, arrival=spec.arrival)) for r in rates]
