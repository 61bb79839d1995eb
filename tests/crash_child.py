"""The child of the crash tests: runs (or resumes) N three-task pipelines on a SQLite store
and appends one line per task execution to a side-effect log, before the task returns.

    python crash_child.py STORE LOG N [STALE_S]

STALE_S (optional) is the store's ``stale_after_s``: how old a heartbeat must be before a
run counts as dead by the heartbeat rule. An error of ours ends it as the CLI would: its
message on stderr and its exit code (2 for a refused run).
"""

from __future__ import annotations

import os
import sys

from pyattacker.errors import PyAttackerError
from pyattacker.pool import Pool, Resource, TaskContext
from pyattacker.run import Runner, pipeline, task
from pyattacker.store import SQLiteStore

LOG: int = -1


def effect(ctx: TaskContext) -> None:
    os.write(LOG, f"{os.getpid()} {ctx.pipeline_id} {ctx.seq}\n".encode())


@task
async def a(x: int, ctx: TaskContext) -> int:
    effect(ctx)
    await ctx.clock.sleep(0.002)
    return x + 1


@task(resource="apis")
async def b(x: int, ctx: TaskContext) -> int:
    async with ctx.acquire() as lease:
        await ctx.clock.sleep(0.002)
        lease.report(ok=True)
    effect(ctx)
    return x * 2


@task
def c(x: int, ctx: TaskContext) -> int:
    effect(ctx)
    return x - 1


def main() -> int:
    global LOG
    path, log, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    LOG = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    pool = Pool("apis", [Resource.create("llm", id=f"api-{i}", capacity=8) for i in range(4)])
    try:
        store = SQLiteStore(path, **({"stale_after_s": float(sys.argv[4])} if sys.argv[4:] else {}))
        with Runner(store, pools=[pool], concurrency=32, handle_signals=False) as runner:
            report = runner.run(pipeline("crash", a, b, c).map(range(n)), resume=True)
    except PyAttackerError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    store.close()
    print(report.state.value, report.by_state, flush=True)
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
