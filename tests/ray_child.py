"""The child of the Ray kill test: runs (or resumes) N three-step pipelines whose middle
step runs on the Ray cluster ``RAY_ADDRESS`` names, on a SQLite store.

    python ray_child.py STORE LOG N

The Ray step appends ``JOB VALUE`` to LOG (the Ray job is this driver) before it returns.
"""

from __future__ import annotations

import sys

from pyattacker.run import Runner, Task, pipeline, task
from pyattacker.store import SQLiteStore


@task
def parse(x: int) -> int:
    return x * 3


def make_crunch(log: str, rounds: int) -> Task:
    def crunch(x: int) -> int:
        import ray  # on the worker: which driver (Ray job) asked

        total = x
        for i in range(rounds):  # fixed CPU-bound work
            total = (total * 31 + i) % 1_000_003
        with open(log, "a") as out:
            out.write(f"{ray.get_runtime_context().get_job_id()} {x}\n")
        return total

    return task(crunch, executor="ray")


@task
def finish(x: int) -> str:
    return f"<{x}>"


def main() -> int:
    path, log, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = SQLiteStore(path)
    template = pipeline("ray-kill", parse, make_crunch(log, 20_000), finish)
    with Runner(store, concurrency=2, handle_signals=False) as runner:
        report = runner.run(template.map(range(n)), resume=True)
    store.close()
    print(report.state.value, report.by_state, flush=True)
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
