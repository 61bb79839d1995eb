"""Quick variant of ``benchmarks/llm_accuracy.py``: our TTFT and end-to-end percentiles
against the mock LLM server's ground truth, the server in its own process, within the
issue's bound of max(1 % of truth, 0.5 ms) at a load the generator handles easily
(about ten streams at once)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from pyattacker.attack import AttackPlan, AttackResult, LlmSpec, OpenModel, run_attack
from pyattacker.llm import SyntheticPrompts
from pyattacker.servers import LlmServerProcess

pytestmark = pytest.mark.slow

QUANTILES = (("p50", 50.0), ("p95", 95.0), ("p99", 99.0))


def within_goal(ours: float, truth: float) -> bool:
    return abs(ours - truth) <= max(0.01 * truth, 0.0005)


@pytest.fixture
def cpus() -> Iterator[tuple[int, int] | None]:
    """Two CPUs, server and generator one each, as the benchmark runs them: sharing one,
    each would wait for the other to be scheduled (~1 ms), which is the machine's noise,
    not our measurement's. This process's affinity is restored afterwards."""
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2:
        yield None
        return
    os.sched_setaffinity(0, {mine[1]})
    try:
        yield mine[0], mine[1]
    finally:
        os.sched_setaffinity(0, set(mine))


# "At a load the generator handles cleanly" (issue 6): our own loop ran on time, i.e. the
# lag probe's p99 stayed at the level of uvloop's timer noise (~1.1 ms measured here). A
# run on a machine busy enough to delay our reads is run again, at most ATTEMPTS times.
CLEAN_LAG_P99_S = 0.002
ATTEMPTS = 3


def measure(prefix: list[str]) -> tuple[AttackResult, dict[str, Any]]:
    with LlmServerProcess(
        models="m",
        ttft="lognormal:median=60ms,sigma=0.5",
        itl="fixed:5ms",
        output_tokens=20,
        command_prefix=prefix,
    ) as server:
        spec = LlmSpec("m", SyntheticPrompts(context_tokens=50, max_tokens=20))
        plan = AttackPlan.build([server.url + "/v1"], OpenModel(rate=50), duration=4.0, llm=spec)
        result = run_attack(plan, stop_on_signals=False)
        return result, server.stats()


def test_ttft_and_end_to_end_percentiles_match_the_servers_ground_truth(
    cpus: tuple[int, int] | None,
) -> None:
    prefix = [] if cpus is None else ["taskset", "-c", str(cpus[0])]
    lags = []
    for _ in range(ATTEMPTS):
        result, truth = measure(prefix)
        assert result.loop_lag is not None
        lags.append(result.loop_lag.percentile(99))
        if lags[-1] <= CLEAN_LAG_P99_S:
            break
    else:
        pytest.fail(f"the machine was too busy to judge: our loop lag p99 per run {lags} s")
    total = result.total
    assert total.by_outcome == {"ok": 200}
    assert truth["requests"] == truth["outcomes"]["ok"] == 200
    assert total.completion_tokens == truth["completion_tokens"] == 200 * 20
    misses = {}
    for ours, figure in ((total.ttft, "ttft"), (total.e2e, "e2e")):
        for key, q in QUANTILES:
            pair = (ours.percentile(q), truth[figure][key])
            if not within_goal(*pair):
                misses[f"{figure} {key}"] = pair
    assert not misses, f"sent clock (ours, truth) outside max(1 %, 0.5 ms): {misses}"
