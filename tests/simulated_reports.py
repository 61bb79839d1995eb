"""Attack reports made by the real engine on virtual time against a simulated server.

``pyattacker compare`` judges a difference against the noise *within* each run. Two real
loopback attacks on a busy machine also differ by the load the machine happened to carry
during each (noise *between* runs, which no single report can see), so tests that need a
known answer make their reports here: the same engine, plan and report code, a server whose
hold times are drawn from a seeded lognormal, and no real clock for a neighbour to disturb.
"""

from __future__ import annotations

import random
from pathlib import Path

from pyattacker.attack import AttackPlan, OpenModel, Target, attack
from pyattacker.clock import LoopClock
from pyattacker.measure import Attempt
from pyattacker.report import attack_json
from pyattacker.testing import run_virtual


class LognormalServer:
    """Holds each request ``median * lognormal(0, sigma)`` seconds, then answers 200."""

    def __init__(self, median_s: float, seed: int, sigma: float = 0.3) -> None:
        self.median_s, self.sigma, self.rng = median_s, sigma, random.Random(seed)

    async def send(self, target: Target, attempt: Attempt) -> None:
        clock = LoopClock()
        attempt.sent = clock.now()
        await clock.sleep(self.median_s * self.rng.lognormvariate(0.0, self.sigma))
        attempt.first_byte = attempt.end = clock.now()
        attempt.status = 200


def simulated_attack_report(median_s: float, seed: int, path: Path) -> Path:
    """The JSON report of 600 requests at 200/s (windows of 100 ms) against a
    :class:`LognormalServer`, written to ``path``."""
    plan = AttackPlan.build(
        ["http://127.0.0.1:9/"], OpenModel(rate=200), requests=600, window=0.1, seed=seed
    )
    result = run_virtual(attack(plan, sender=LognormalServer(median_s, seed)))
    path.write_text(attack_json(result))
    return path
