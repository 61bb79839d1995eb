"""``selftest scale``: the highest open-model rate this process keeps cleanly.

One echo server (1 ms fixed delay) serves every level; each level is a fresh attack from
this process (or from ``--workers`` worker processes, :mod:`._setup`) at a rising
constant rate, its connections opened before its first arrival (the level measures the
generator's steady state, not connecting). A level is clean by
:func:`~pyattacker.selftest.level_problems`; the climb stops at the first level that is
not. Each level also says the generator's CPU per request (every process's). The
generator and the server share the machine, so the figure is a lower bound for a
generator on its own host.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pyattacker.attack import AttackPlan, OpenModel
from pyattacker.errors import ConfigError
from pyattacker.measure import Outcome
from pyattacker.selftest._neighbours import OthersCpu
from pyattacker.selftest._rule import level_problems
from pyattacker.selftest._setup import ONE_PROCESS, Setup, check_setup
from pyattacker.servers import EchoServerProcess

__all__ = ["LEVELS", "Level", "ScaleCheck", "check_scale_settings", "run_scale"]

#: The default rates climbed (requests per second).
LEVELS: tuple[float, ...] = (500, 1_000, 2_000, 5_000, 10_000, 20_000, 40_000)
_DELAY = "fixed:1ms"
_CONNECTIONS = 256  # the plan's default; all opened before each level


@dataclass(frozen=True)
class Level:
    """What one level measured (requests/s, seconds); ``problems`` judges it."""

    rate: float
    achieved_rate: float
    requests: int
    server_count: int
    dropped: int
    not_ok: int
    lag_p99: float
    latency_p99: float
    problems: list[str]
    #: the generator's CPU seconds per request scheduled (every process's); None: unknown
    cpu_per_request: float | None = None

    @property
    def clean(self) -> bool:
        return not self.problems


@dataclass
class ScaleCheck:
    """The levels climbed; ``passed`` when the first level (the floor) was clean."""

    hold: float
    delay: str
    levels: list[Level] = field(default_factory=list)
    workers: int = 1
    server_processes: int = 1
    #: CPUs other processes kept busy (on average) during the climb; None: unknown
    others_cpus: float | None = None

    @property
    def highest_clean(self) -> float:
        """The highest clean rate, 0 when none was."""
        return max((level.rate for level in self.levels if level.clean), default=0.0)

    @property
    def passed(self) -> bool:
        return bool(self.levels) and self.levels[0].clean

    @property
    def every_level_clean(self) -> bool:
        """Every level tried was clean: the climb found no ceiling, only a floor under it."""
        return bool(self.levels) and all(level.clean for level in self.levels)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for row, level in zip(data["levels"], self.levels, strict=True):
            row["clean"] = level.clean
        data.update(
            highest_clean=self.highest_clean,
            every_level_clean=self.every_level_clean,
            passed=self.passed,
        )
        return data


def check_scale_settings(levels: Sequence[float], hold: float) -> None:
    """``ConfigError`` naming the flag when the levels or hold cannot make a check."""
    bad = [rate for rate in levels if not 0 < rate <= 1_000_000]
    if not levels or bad:
        named = f"has {bad[0]:,.10g}/s" if bad else "is empty"
        raise ConfigError(
            f"--levels {named}: each level must be a rate above 0 and at most 1,000,000/s",
            field="--levels",
            hint="rising rates separated by commas, e.g. --levels 500,1000,2000",
        )
    if not 0 < hold <= 60:
        raise ConfigError(
            f"--hold must be above 0 and at most 60 s, not {hold:g} s",
            field="--hold",
            hint="a second or two per level, e.g. --hold 1s",
        )


def run_scale(
    levels: Sequence[float] = LEVELS, *, hold: float = 1.0, setup: Setup = ONE_PROCESS
) -> ScaleCheck:
    """Climb ``levels`` (requests/s, in rising order) for ``hold`` seconds each against
    one fresh echo server, up to and including the first level that is not clean; each
    level attacks as ``setup`` says (this process, or workers; the server's processes).

    Raises ``ConfigError`` for bad settings and ``PyAttackerError`` when the server
    process cannot start. Blocks; not inside a loop.
    """
    check_scale_settings(levels, hold)
    check_setup(setup)
    check = ScaleCheck(hold=hold, delay=_DELAY, workers=setup.workers,
                       server_processes=setup.server_processes)  # fmt: skip
    with EchoServerProcess(delay=_DELAY, processes=setup.server_processes) as server:
        others = OthersCpu([server.pid])
        for rate in sorted(levels):
            level = _level(server, rate, hold, setup)
            check.levels.append(level)
            if not level.clean:
                break
        check.others_cpus = others.cpus()
    return check


def _level(server: EchoServerProcess, rate: float, hold: float, setup: Setup) -> Level:
    server.reset()
    plan = AttackPlan.build(
        [server.url + "/"], OpenModel(rate=rate), duration=hold, preconnect=_CONNECTIONS
    )
    result = setup.attack(plan)
    total = result.total
    not_ok = total.requests - total.by_outcome.get(Outcome.OK.value, 0)
    lag_p99 = total.dispatch_delay.percentile(99) if total.dispatch_delay.count else 0.0
    latency_p99 = total.latency.percentile(99) if total.latency.count else 0.0
    problems = level_problems(
        rate=rate,
        achieved_rate=result.achieved_rate,
        requests=total.requests,
        dropped=result.dropped,
        not_ok=not_ok,
        lag_p99=lag_p99,
    )
    server_count = int(server.stats()["count"])
    if server_count != total.requests - result.dropped:
        problems.append(
            f"we sent {total.requests - result.dropped}, the server counted {server_count}"
        )
    return Level(
        rate=rate,
        achieved_rate=result.achieved_rate,
        requests=total.requests,
        server_count=server_count,
        dropped=result.dropped,
        not_ok=not_ok,
        lag_p99=lag_p99,
        latency_p99=latency_p99,
        problems=problems,
        cpu_per_request=result.cpu_dict()["per_request_s"],
    )
