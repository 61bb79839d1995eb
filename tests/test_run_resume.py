"""Resume, identity and the store's refusals: what survives a stop and what is refused."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from pyattacker.errors import ConfigError, StoreError
from pyattacker.pool import Pool, Resource, TaskContext
from pyattacker.run import pipeline, task
from pyattacker.store import Batch, MemoryStore, RowKind, RunState, SQLiteStore
from run_helpers import rows, run_virtually, runner

SIDE_EFFECTS: Counter[tuple[str, int]] = Counter()


@task
async def fetch(x: int, ctx: TaskContext) -> dict[str, int]:
    SIDE_EFFECTS["fetch", x] += 1
    await ctx.clock.sleep(1.0)
    return {"x": x, "doc": x * 10}


@task
async def judge(d: dict[str, int], ctx: TaskContext) -> dict[str, int]:
    SIDE_EFFECTS["judge", d["x"]] += 1
    await ctx.clock.sleep(5.0)
    return {**d, "score": d["doc"] + 1}


EVAL = pipeline("eval", fetch, judge)


@pytest.fixture(autouse=True)
def _clean() -> None:
    SIDE_EFFECTS.clear()


def test_a_non_resume_run_on_a_store_that_holds_pipelines_is_refused_untouched() -> None:
    store = MemoryStore()
    run_virtually(runner(store), EVAL.map(range(2)))
    before = list(store.rows(RowKind.PIPELINES))
    with pytest.raises(ConfigError) as exc:
        run_virtually(runner(store), EVAL.map(range(5)))
    assert exc.value.field == "resume"
    assert list(store.rows(RowKind.PIPELINES)) == before
    assert len(store.runs()) == 1


def test_resume_skips_succeeded_pipelines_and_continues_the_rest_from_their_checkpoint() -> None:
    store = MemoryStore()
    first = run_virtually(
        runner(store, concurrency=10, stop_after_s=3.0, grace_s=0.0), EVAL.map(range(10))
    )
    assert first.state is RunState.INTERRUPTED
    assert first.by_state == {"interrupted": 10}
    assert all(r["cursor"] == 1 for r in rows(store, RowKind.PIPELINES))
    report = run_virtually(runner(store, concurrency=10), EVAL.map(range(10)), resume=True)
    assert report.by_state == {"succeeded": 10}
    # fetch's checkpoints had committed: it never ran again.
    assert all(SIDE_EFFECTS["fetch", x] == 1 for x in range(10))
    assert all(SIDE_EFFECTS["judge", x] == 2 for x in range(10))
    assert [run.state for run in store.runs()] == [RunState.INTERRUPTED, RunState.SUCCEEDED]


def test_resume_needs_only_the_template_because_inputs_come_from_the_store() -> None:
    store = MemoryStore()
    run_virtually(runner(store, stop_after_s=3.0, grace_s=0.0), EVAL.map(range(4)))
    report = run_virtually(runner(store), EVAL, resume=True)
    assert report.by_state == {"succeeded": 4}
    outputs = sorted(
        store.artifact(r["pipeline_id"], 1).data  # type: ignore[union-attr]
        for r in rows(store, RowKind.PIPELINES)
    )
    assert outputs == sorted(
        f'{{"doc":{x * 10},"score":{x * 10 + 1},"x":{x}}}'.encode() for x in range(4)
    )


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        ("UPDATE tasks SET output_data = NULL", "missing"),
        ("UPDATE tasks SET output_codec = 'gone'", "does not decode"),
    ],
)
def test_an_unreadable_checkpoint_restarts_that_pipeline_from_its_seed_and_says_so(
    tmp_path: Path, damage: str, said: str
) -> None:
    path = tmp_path / "run.db"
    run_virtually(runner(str(path), stop_after_s=3.0, grace_s=0.0), EVAL.bind(7))
    with sqlite3.connect(path) as conn:  # the checkpoint of `fetch` is damaged
        conn.execute(damage)
    store = SQLiteStore(path)
    report = run_virtually(runner(store), EVAL, resume=True)
    assert report.by_state == {"succeeded": 1}
    assert SIDE_EFFECTS["fetch", 7] == 2
    (event,) = rows(store, RowKind.EVENTS, kind="pipeline.restarted")
    assert said in event["data"]["reason"]
    store.close()


def test_changing_a_task_keeps_the_pipelines_and_reruns_only_that_task() -> None:
    store = MemoryStore()
    run_virtually(runner(store), EVAL.map(range(3)))

    @task("judge")
    async def stricter(d: dict[str, int], ctx: TaskContext) -> dict[str, int]:
        return {**d, "score": 0}

    report = run_virtually(
        runner(store), pipeline("eval", fetch, stricter).map(range(3)), resume=True
    )
    assert report.by_state == {"succeeded": 3}
    assert all(SIDE_EFFECTS["fetch", x] == 1 for x in range(3))
    assert len(rows(store, RowKind.TASK_HISTORY, name="judge")) == 3  # the old outputs


def test_an_explicit_key_over_another_input_row_is_refused_and_the_row_kept() -> None:
    store = MemoryStore()
    run_virtually(runner(store), EVAL.map([1, 2], key_of=lambda x: f"item-{x}"))
    before = rows(store, RowKind.PIPELINES)
    with pytest.raises(ConfigError) as exc:
        run_virtually(
            runner(store),
            EVAL.map([1, 3], key_of=lambda x: "item-2" if x == 3 else f"item-{x}"),
            resume=True,
        )
    assert exc.value.field == "key"
    assert "item-2" in str(exc.value)
    assert rows(store, RowKind.PIPELINES) == before


def test_a_key_names_the_pipeline_across_code_changes_of_nothing_else() -> None:
    store = MemoryStore()
    run_virtually(runner(store), EVAL.bind(4, key="doc-4"))
    report = run_virtually(runner(store), EVAL.bind(4, key="doc-4"), resume=True)
    assert report.stats["pipelines"]["skipped"] == 1
    assert SIDE_EFFECTS["fetch", 4] == 1


# -- the store failing, secrets ----------------------------------------------------------


class FailingStore(MemoryStore):
    def __init__(self, fail_after: int) -> None:
        super().__init__()
        self.writes = 0
        self.fail_after = fail_after

    def write(self, batch: Batch) -> None:
        self.writes += 1
        if self.writes > self.fail_after:
            raise OSError("disk full")
        super().write(batch)


def test_a_store_that_cannot_record_stops_the_run_with_a_clear_error() -> None:
    store = FailingStore(fail_after=3)
    with pytest.raises(StoreError) as exc:
        run_virtually(runner(store, concurrency=2), EVAL.map(range(50)))
    assert "disk full" in str(exc.value)
    # What was committed before the failure is consistent: every succeeded task row's
    # artifact is there.
    for task_row in rows(store, RowKind.TASKS, state="succeeded"):
        artifact = store.artifact(task_row["pipeline_id"], task_row["seq"])
        assert artifact is not None
        assert artifact.digest == task_row["output_artifact"]


def test_no_secret_reaches_the_store_or_an_export(tmp_path: Path) -> None:
    secret = "sk-planted-0123456789"
    pool = Pool(
        "llm",
        [Resource.create("llm", id="k1", capacity=2, options={"api_key": secret, "url": "x"})],
    )

    @task(resource="llm")
    async def call(x: int, ctx: TaskContext) -> int:
        async with ctx.acquire() as lease:
            ctx.emit("call.made", headers={"authorization": f"Bearer {secret}"})
            lease.report(ok=True)
        return x

    path = tmp_path / "run.db"
    store = SQLiteStore(path)
    run_virtually(runner(store, pools=[pool]), pipeline("p", call).map(range(3)))
    store.close()
    assert secret.encode() not in path.read_bytes()
    for wal in tmp_path.glob("run.db*"):
        assert secret.encode() not in wal.read_bytes()
    from pyattacker.store import export_rows, open_store

    reader = open_store(path, read_only=True)
    for kind in RowKind:
        out = tmp_path / f"{kind.value}.jsonl"
        export_rows(reader, out, kind=kind, fmt="jsonl")
        assert secret not in out.read_text()
    reader.close()


def test_resources_are_recorded_masked_per_run() -> None:
    pool = Pool("llm", [Resource.create("llm", id="k1", options={"api_key": "sk-x"})])
    store = MemoryStore()
    run_virtually(runner(store, pools=[pool]), pipeline("p", fetch).bind(1))
    (resource,) = rows(store, RowKind.RESOURCES)
    assert resource["resource_id"] == "k1"
    assert resource["spec"]["options"]["api_key"] == "***"
