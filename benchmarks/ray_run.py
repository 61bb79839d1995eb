"""Ray's costs and gains for a run's CPU-bound step and a bench sweep (issue 22).

    PYTHONPATH=src python benchmarks/ray_run.py [--items 24] [--rounds 200000] [--repeat 3]

Prints, on one local Ray of 2 CPUs (``ray.init(num_cpus=2)``):

- Ray's start-up: seconds for ``ray.init`` (a local cluster) and for the first task;
- per-task overhead: a trivial body (``x + 1``) through the Runner, local and on Ray, in
  milliseconds per attempt (the difference is what one Ray attempt costs);
- the speed-up of a three-step pipeline whose middle step is a pure-Python loop of
  ``--rounds`` iterations: the whole run's wall time in one process (``executor="local"``)
  against the same run with the middle step on Ray (2 CPUs);
- ``bench`` (5 algorithms x 2 seeds of ``bursty_provider``) in one process and on Ray.

Each figure is measured ``--repeat`` times and printed as a range: the machine is shared.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import ray

from pyattacker.benchmark import get_scenario, run_benchmark
from pyattacker.run import Runner, pipeline, task


def crunch_of(rounds: int) -> Callable[[int], int]:
    def crunch(x: int) -> int:
        total = x
        for i in range(rounds):
            total = (total * 31 + i) % 1_000_003
        return total

    return crunch


def _plus_one(x: int) -> int:
    return x + 1


@task
def parse(x: int) -> int:
    return x * 3


@task
def finish(x: int) -> str:
    return f"<{x}>"


def _run_s(body: Callable[[int], int], executor: str, items: int) -> float:
    steps = pipeline(f"p-{executor}", parse, task(body, executor=executor), finish)
    started = time.perf_counter()
    with Runner(":memory:", concurrency=8, handle_signals=False) as runner:
        report = runner.run(steps.map(range(items)))
    assert report.by_state == {"succeeded": items}, report.by_state
    return time.perf_counter() - started


def _span(values: list[float], scale: float = 1.0, fmt: str = ".2f") -> str:
    low, high = min(values) * scale, max(values) * scale
    return f"{low:{fmt}}-{high:{fmt}}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    started = time.perf_counter()
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    init_s = time.perf_counter() - started
    started = time.perf_counter()
    ray.get(ray.remote(_plus_one).remote(1))
    first_s = time.perf_counter() - started
    print(f"ray.init (local, 2 CPUs): {init_s:.1f} s; first task: {first_s:.2f} s")
    overhead: dict[str, list[float]] = {"local": [], "ray": []}
    speed: dict[str, list[float]] = {"local": [], "ray": []}
    bench: dict[str, list[float]] = {"local": [], "ray": []}
    crunch = crunch_of(args.rounds)
    scenario = get_scenario("bursty_provider")
    for _ in range(args.repeat):
        for executor in ("local", "ray"):
            overhead[executor].append(_run_s(_plus_one, executor, 200) / 200)
            speed[executor].append(_run_s(crunch, executor, args.items))
            kind: dict[str, Any] = {"ray": True} if executor == "ray" else {"jobs_parallel": 1}
            t0 = time.perf_counter()
            run_benchmark(scenario, seeds=2, **kind)
            bench[executor].append(time.perf_counter() - t0)
    print(
        f"per attempt, trivial body: local {_span(overhead['local'], 1e3, '.3f')} ms, "
        f"ray {_span(overhead['ray'], 1e3, '.3f')} ms"
    )
    ratios = [a / b for a, b in zip(speed["local"], speed["ray"], strict=True)]
    print(
        f"{args.items} pipelines, middle step {args.rounds:,} rounds: one process "
        f"{_span(speed['local'])} s, on Ray (2 CPUs) {_span(speed['ray'])} s; "
        f"speed-up {_span(ratios)}x"
    )
    ratios = [a / b for a, b in zip(bench["local"], bench["ray"], strict=True)]
    print(
        f"bench bursty_provider, 2 seeds: one process {_span(bench['local'])} s, on Ray "
        f"{_span(bench['ray'])} s; speed-up {_span(ratios)}x"
    )
    ray.shutdown()


if __name__ == "__main__":
    main()
