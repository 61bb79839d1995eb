"""The ``Store`` contract, checked on both stores through one parametrized fixture."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyattacker import store as store_module
from pyattacker.errors import ConfigError, StoreError
from pyattacker.store import (
    ROW_KINDS,
    Batch,
    MemoryStore,
    PipelineState,
    RowKind,
    RunState,
    SQLiteStore,
    Store,
    Superseded,
    TaskState,
    open_store,
)
from pyattacker.store._lifecycle import DEFAULT_STALE_AFTER_S, this_host
from store_helpers import (
    POISONS,
    _add,
    artifact,
    attempt,
    checkpoint,
    dead_pid,
    event,
    live_run,
    pipeline,
    resource,
    run,
    snapshot,
    task,
)

# -- fixtures ---------------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened: Store = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "s.db")
    yield opened
    opened.close()


@pytest.fixture
def begun(store: Store) -> Store:
    """A store with run ``r1`` begun (owned by this process)."""
    store.begin_run(live_run("r1"), resume=False)
    return store


# -- the public surface -----------------------------------------------------------------


def test_store_exports_exactly_the_public_names() -> None:
    assert len(store_module.__all__) == len(set(store_module.__all__))
    assert set(store_module.__all__) == {
        "ARTIFACT_BACKENDS",
        "MergedStore",
        "SPILL_AT",
        "STATE_RANK",
        "check_backend",
        "EXPORT_FORMATS",
        "EXPORT_KINDS",
        "OK_DECISION",
        "ROW_KINDS",
        "SCHEMA_VERSION",
        "ArtifactRow",
        "AttemptRow",
        "Batch",
        "EventRow",
        "MemoryStore",
        "PipelineRow",
        "PipelineState",
        "ResourceRow",
        "RowKind",
        "RunRow",
        "RunState",
        "SQLiteStore",
        "Store",
        "Superseded",
        "TaskRow",
        "TaskState",
        "export_rows",
        "format_for",
        "open_store",
        "results",
        "user_version",
    }


def test_both_stores_satisfy_the_protocol(store: Store) -> None:
    assert isinstance(store, Store)


def test_open_store_picks_the_store_for_the_location(tmp_path: Path) -> None:
    memory = open_store(":memory:")
    assert isinstance(memory, MemoryStore)
    assert open_store(memory) is memory
    on_disk = open_store(tmp_path / "run.db")
    assert isinstance(on_disk, SQLiteStore)
    assert on_disk.location == str(tmp_path / "run.db")
    on_disk.close()
    reader = open_store(str(tmp_path / "run.db"), read_only=True)
    assert reader.read_only
    reader.close()


# -- begin_run --------------------------------------------------------------------------


def test_begin_run_on_an_empty_store_records_the_run_and_takes_over_nothing(store: Store) -> None:
    assert store.begin_run(live_run("r1", config={"workers": 4}), resume=False) == []
    assert store.runs() == [live_run("r1", config={"workers": 4})]


def test_a_runs_input_record_is_kept_as_given_and_is_none_when_absent(store: Store) -> None:
    record = {"source": "file", "path": "/data/items.jsonl", "rows_read": 3, "exhausted": False}
    store.begin_run(live_run("r1", input=record), resume=False)
    store.end_run("r1", RunState.FAILED, ended_at=1001.0, stop_reason=None)
    store.begin_run(live_run("r2", started_at=1002.0), resume=False)
    assert [r.input for r in store.runs()] == [record, None]


def test_a_fresh_run_is_refused_on_a_store_holding_pipelines_and_writes_nothing(
    begun: Store,
) -> None:
    begun.write(Batch(pipelines=[pipeline("p1")]))
    begun.end_run("r1", RunState.SUCCEEDED, ended_at=1100.0, stop_reason=None)
    before = snapshot(begun)
    with pytest.raises(ConfigError) as refused:
        begun.begin_run(run("r2", started_at=2000.0), resume=False)
    assert refused.value.field == "resume"
    assert "--resume" in str(refused.value.hint)
    assert snapshot(begun) == before


def test_a_run_is_refused_while_another_is_live_and_nothing_is_written(begun: Store) -> None:
    before = snapshot(begun)
    with pytest.raises(ConfigError) as refused:
        begun.begin_run(run("r2", started_at=1010.0), resume=True)
    assert refused.value.field == "resume"
    assert "'r1' is still live" in refused.value.message
    assert snapshot(begun) == before


def test_a_run_on_another_host_with_a_fresh_heartbeat_counts_as_live(store: Store) -> None:
    store.begin_run(run("r1", pid=dead_pid(), host="elsewhere", heartbeat_at=1000.0), resume=False)
    with pytest.raises(ConfigError, match="still live"):
        store.begin_run(run("r2", started_at=1000.0 + DEFAULT_STALE_AFTER_S), resume=True)


def test_a_run_whose_owner_still_holds_the_store_is_never_taken_over_however_old_its_heartbeat(
    begun: Store,
) -> None:
    before = snapshot(begun)
    much_later = 1000.0 + 100 * DEFAULT_STALE_AFTER_S
    with pytest.raises(ConfigError, match="'r1' is still live") as refused:
        begun.begin_run(run("r2", started_at=much_later), resume=True)
    assert refused.value.field == "resume"
    assert snapshot(begun) == before


def test_a_run_of_another_host_whose_heartbeat_went_stale_is_taken_over(store: Store) -> None:
    store.begin_run(run("r1", pid=os.getpid(), host="elsewhere", heartbeat_at=1000.0), resume=False)
    later = 1000.0 + DEFAULT_STALE_AFTER_S + 1
    taken = store.begin_run(run("r2", started_at=later), resume=True)
    assert [(r.run_id, r.state) for r in taken] == [("r1", RunState.CRASHED)]
    assert "no heartbeat on elsewhere for 31 s" in str(taken[0].stop_reason)


def test_a_heartbeat_or_end_of_a_run_taken_over_is_refused_and_the_takeover_stays(
    store: Store,
) -> None:
    elsewhere = run("r1", pid=os.getpid(), host="elsewhere", heartbeat_at=1000.0)
    store.begin_run(elsewhere, resume=False)
    store.begin_run(run("r2", started_at=1000.0 + DEFAULT_STALE_AFTER_S + 1), resume=True)
    before = snapshot(store)
    with pytest.raises(StoreError, match="no longer running but crashed"):
        store.write(Batch(heartbeat=("r1", 2000.0)))
    with pytest.raises(StoreError, match="another process took it over"):
        store.end_run("r1", RunState.SUCCEEDED, ended_at=2000.0, stop_reason=None)
    assert snapshot(store) == before


def test_a_resume_takes_over_a_dead_run_and_interrupts_its_unfinished_pipelines(
    store: Store,
) -> None:
    dead = run("r1", pid=dead_pid(), host=this_host(), heartbeat_at=1005.0)
    store.begin_run(dead, resume=False)
    states = [PipelineState.RUNNING, PipelineState.PENDING, PipelineState.SUCCEEDED]
    states += [PipelineState.FAILED]
    store.write(Batch(pipelines=[pipeline(f"p{i}", state=s) for i, s in enumerate(states)]))
    store.write(Batch(pipelines=[pipeline("other", state=PipelineState.RUNNING, run_id="r0")]))

    taken = store.begin_run(run("r2", started_at=1010.0), resume=True)

    crashed = dataclasses.replace(dead, state=RunState.CRASHED, ended_at=1005.0)
    why = f"owner died (process {dead.pid} gone; last heartbeat 5 s ago); taken over by run r2"
    crashed = dataclasses.replace(crashed, stop_reason=why)
    assert taken == [crashed]
    assert store.runs() == [crashed, run("r2", started_at=1010.0)]
    assert store.count_by_state() == {"failed": 1, "interrupted": 2, "running": 1, "succeeded": 1}
    assert store.pipeline("other") == pipeline("other", state=PipelineState.RUNNING, run_id="r0")


def test_a_fresh_run_on_a_store_without_pipelines_also_takes_over_a_dead_run(store: Store) -> None:
    store.begin_run(run("r1", pid=dead_pid(), host=this_host()), resume=False)
    taken = store.begin_run(run("r2", started_at=1001.0), resume=False)
    assert [(r.run_id, r.state) for r in taken] == [("r1", RunState.CRASHED)]


def test_a_run_id_already_recorded_is_refused(begun: Store) -> None:
    begun.end_run("r1", RunState.SUCCEEDED, ended_at=1100.0, stop_reason=None)
    with pytest.raises(ConfigError) as refused:
        begun.begin_run(run("r1", started_at=2000.0), resume=True)
    assert refused.value.field == "run_id"


# -- end_run ----------------------------------------------------------------------------


def test_end_run_records_the_state_the_end_and_the_reason(begun: Store) -> None:
    begun.end_run("r1", RunState.INTERRUPTED, ended_at=1100.0, stop_reason="signal SIGINT")
    [ended] = begun.runs()
    assert (ended.state, ended.ended_at, ended.stop_reason) == (
        RunState.INTERRUPTED,
        1100.0,
        "signal SIGINT",
    )


def test_ending_an_unknown_run_raises_store_error(begun: Store) -> None:
    with pytest.raises(StoreError, match="no run 'r9'"):
        begun.end_run("r9", RunState.SUCCEEDED, ended_at=1100.0, stop_reason=None)


# -- write ------------------------------------------------------------------------------


@pytest.mark.parametrize("poison", POISONS.values(), ids=list(POISONS))
def test_write_is_all_or_nothing(begun: Store, poison: Batch) -> None:
    begun.write(checkpoint("p1", 0))
    before = snapshot(begun)
    batch = checkpoint("p2", 0)
    _add(batch, poison)
    batch.events.insert(0, event("before.poison"))
    batch.resources.append(resource())
    batch.heartbeat = ("r1", 1500.0)
    with pytest.raises(StoreError):
        begun.write(batch)
    assert snapshot(begun) == before


@pytest.mark.parametrize("kind", ["tasks", "attempts"])
def test_a_task_or_attempt_of_a_pipeline_not_recorded_is_refused(begun: Store, kind: str) -> None:
    orphan = Batch(tasks=[task("p9")]) if kind == "tasks" else Batch(attempts=[attempt("p9")])
    before = snapshot(begun)
    with pytest.raises(StoreError, match="names a pipeline that is not recorded"):
        begun.write(orphan)
    assert snapshot(begun) == before
    orphan.pipelines.append(pipeline("p9"))  # the same batch may bring the pipeline along
    begun.write(orphan)
    assert len(list(begun.rows(RowKind(kind), pipeline_id="p9"))) == 1


def test_an_artifact_is_kept_per_pipeline_and_seq_and_a_rerun_replaces_it(begun: Store) -> None:
    begun.write(Batch(pipelines=[pipeline("p1")], artifacts=[artifact("d1", b"first")]))
    begun.write(Batch(artifacts=[artifact("d2", b"again", created_at=9.0)]))
    begun.write(Batch(artifacts=[artifact("d1", b"seed", seq=-1)]))
    assert begun.artifact("p1", 0) == artifact("d2", b"again", created_at=9.0)
    assert begun.artifact("p1", -1) == artifact("d1", b"seed", seq=-1)
    assert [a["data"] for a in begun.rows(RowKind.ARTIFACTS)] == [b"again", b"seed"]


def test_pipeline_and_task_rows_are_replaced_whole_and_keep_their_place(begun: Store) -> None:
    begun.write(Batch(pipelines=[pipeline("p1"), pipeline("p2")], tasks=[task("p1"), task("p2")]))
    failed = task("p1", state=TaskState.FAILED, error="boom", output_artifact=None)
    moved = pipeline("p1", state=PipelineState.FAILED, cursor=0, error="boom")
    begun.write(Batch(pipelines=[moved], tasks=[failed]))
    assert begun.pipeline("p1") == moved
    assert [p["pipeline_id"] for p in begun.rows(RowKind.PIPELINES)] == ["p1", "p2"]
    assert [t["error"] for t in begun.rows(RowKind.TASKS)] == ["boom", None]


def test_attempts_events_and_resources_are_appended(begun: Store) -> None:
    begun.write(Batch(pipelines=[pipeline("p1")]))
    begun.write(Batch(attempts=[attempt(number=1)], events=[event("a")], resources=[resource()]))
    begun.write(Batch(attempts=[attempt(number=1)], events=[event("b")], resources=[resource()]))
    assert [a["attempt"] for a in begun.rows(RowKind.ATTEMPTS)] == [1, 1]
    assert [e["kind"] for e in begun.rows(RowKind.EVENTS)] == ["a", "b"]
    assert len(list(begun.rows(RowKind.RESOURCES))) == 2


def test_a_heartbeat_sets_the_runs_heartbeat_time(begun: Store) -> None:
    begun.write(Batch(heartbeat=("r1", 1234.5)))
    assert begun.runs()[0].heartbeat_at == 1234.5


def test_a_nan_in_a_nullable_column_is_kept_as_none_like_sqlite_does(begun: Store) -> None:
    begun.write(Batch(heartbeat=("r1", math.nan)))
    assert begun.runs()[0].heartbeat_at is None


# -- what the Runner reads --------------------------------------------------------------


def test_unfinished_yields_pipelines_not_succeeded_of_the_chains_in_ordinal_order(
    begun: Store,
) -> None:
    rows = [
        pipeline("late", ordinal=5, state=PipelineState.RUNNING),
        pipeline("done", ordinal=1, state=PipelineState.SUCCEEDED),
        pipeline("other-chain", ordinal=0, chain_digest="chain-2"),
        pipeline("first", ordinal=2, state=PipelineState.FAILED),
        pipeline("tie", ordinal=5, state=PipelineState.INTERRUPTED),
    ]
    begun.write(Batch(pipelines=rows))
    found = [p.pipeline_id for p in begun.unfinished(["chain-1"])]
    assert found == ["first", "late", "tie"]
    both = [p.pipeline_id for p in begun.unfinished({"chain-1", "chain-2"})]
    assert both == ["other-chain", "first", "late", "tie"]
    assert list(begun.unfinished([])) == []


def test_stale_yields_a_templates_unfinished_or_edited_pipelines_and_all_when_fresh(
    begun: Store,
) -> None:
    rows = [
        pipeline("done", state=PipelineState.SUCCEEDED),
        pipeline("edited", state=PipelineState.SUCCEEDED, chain_digest="chain-0"),
        pipeline("failed", state=PipelineState.FAILED),
        pipeline("other", template="translate", state=PipelineState.FAILED),
    ]
    begun.write(Batch(pipelines=rows))
    assert [p.pipeline_id for p in begun.stale("summarise", "chain-1")] == ["edited", "failed"]
    every = [p.pipeline_id for p in begun.stale("summarise", None)]
    assert every == ["done", "edited", "failed"]
    assert begun.templates() == ["summarise", "translate"]


def test_superseded_task_rows_move_to_the_history_in_the_batch_that_says_so(
    begun: Store,
) -> None:
    begun.write(Batch(pipelines=[pipeline(cursor=3)], tasks=[task(seq=s) for s in range(3)]))
    move = Superseded(pipeline_id="p1", from_seq=1, run_id="r2", at=2000.0)
    begun.write(Batch(superseded=[move], tasks=[task(seq=1, run_id="r2", attempts=2)]))
    assert [(t["seq"], t["run_id"]) for t in begun.rows(RowKind.TASKS)] == [(0, "r1"), (1, "r2")]
    history = list(begun.rows(RowKind.TASK_HISTORY, pipeline_id="p1"))
    assert [(h["seq"], h["run_id"], h["superseded_by"]) for h in history] == [
        (1, "r1", "r2"),
        (2, "r1", "r2"),
    ]
    assert history[0]["output_artifact"] == "out-p1-1"
    assert history[0]["output_data"] is None  # these task rows carried no output


def test_last_attempts_is_the_highest_number_recorded_anywhere_per_step(begun: Store) -> None:
    begun.write(Batch(pipelines=[pipeline(cursor=1), pipeline("p2")], tasks=[task(attempts=2)]))
    begun.write(Batch(attempts=[attempt(seq=0, number=1), attempt(seq=1, number=3)]))
    begun.write(Batch(superseded=[Superseded(pipeline_id="p1", from_seq=0, run_id="r2", at=1.0)]))
    begun.write(Batch(attempts=[attempt("p2", seq=0, number=1)]))
    assert begun.last_attempts(["p1", "p2", "unknown"]) == {"p1": {0: 2, 1: 3}, "p2": {0: 1}}
    assert begun.last_attempts([]) == {}


def test_pipeline_and_artifact_lookups_return_rows_or_none(begun: Store) -> None:
    begun.write(checkpoint("p1", 0))
    assert begun.pipeline("p1") == pipeline("p1", state=PipelineState.RUNNING, cursor=1)
    assert begun.pipeline("nope") is None
    assert begun.artifact("p1", 0) == artifact("out-p1-0")
    assert begun.artifact("p1", 1) is None
    assert begun.artifact("nope", 0) is None


def test_a_successful_attempt_carried_by_its_task_row_is_one_of_the_attempts(
    begun: Store,
) -> None:
    carried = task(
        "p1", 1, attempts=2, resources=["llm/k1"], attempt_started_at=1010.0,
        attempt_ended_at=1011.5, attempt_duration_s=1.5, usage={"tokens": 12},
    )  # fmt: skip
    failed = attempt("p1", 1, 1, outcome="failed", decision={"retry": True, "reason": "retryable"})
    begun.write(Batch(pipelines=[pipeline("p1")], tasks=[carried], attempts=[failed]))
    rows = list(begun.rows(RowKind.ATTEMPTS, pipeline_id="p1"))
    assert [(a["attempt"], a["outcome"]) for a in rows] == [(1, "failed"), (2, "ok")]
    assert rows[1] == {
        "run_id": "r1", "pipeline_id": "p1", "seq": 1, "task": "task-1", "attempt": 2,
        "outcome": "ok", "started_at": 1010.0, "ended_at": 1011.5, "duration_s": 1.5,
        "decision": {"retry": False, "reason": "ok"}, "resources": ["llm/k1"],
        "error_class": None, "error": None, "traceback": None, "usage": {"tokens": 12},
    }  # fmt: skip
    assert len(list(begun.rows(RowKind.ATTEMPTS))) == 2


def test_an_output_carried_by_its_task_row_is_an_artifact_like_any_other(begun: Store) -> None:
    carried = task("p1", 0, output_codec="json", output_data=b"[1]", output_artifact="d-out")
    seed = artifact("d-seed", b'{"q":1}', seq=-1)
    begun.write(Batch(pipelines=[pipeline("p1")], tasks=[carried], artifacts=[seed]))
    expected = artifact("d-out", b"[1]", created_at=1002.0)
    assert begun.artifact("p1", 0) == expected
    assert begun.artifact("p1", -1) == seed
    of_p1 = list(begun.rows(RowKind.ARTIFACTS, pipeline_id="p1"))
    assert [(a["seq"], a["digest"], a["size"]) for a in of_p1] == [
        (-1, "d-seed", 7),
        (0, "d-out", 3),
    ]
    assert [a["digest"] for a in begun.rows(RowKind.ARTIFACTS)] == ["d-seed", "d-out"]
    [task_row] = begun.rows(RowKind.TASKS)
    assert "output_data" not in task_row
    assert task_row["output_codec"] == "json"


def test_pipelines_are_counted_in_all_and_by_state(begun: Store) -> None:
    assert (begun.count_pipelines(), begun.count_by_state()) == (0, {})
    begun.write(Batch(pipelines=[pipeline("a"), pipeline("b"), pipeline("c", state="failed")]))
    assert begun.count_pipelines() == 3
    assert begun.count_by_state() == {"failed": 1, "pending": 2}


# -- what readers read ------------------------------------------------------------------


def test_rows_are_plain_dicts_with_json_decoded_and_enums_as_strings(begun: Store) -> None:
    begun.write(checkpoint("p1", 0))
    [task_row] = begun.rows(RowKind.TASKS)
    assert type(task_row["state"]) is str
    expected = {**dataclasses.asdict(task("p1", 0)), "state": "succeeded"}
    del expected["output_data"]  # the content is an artifact's, not the task row's
    assert task_row == expected
    [attempt_row] = begun.rows(RowKind.ATTEMPTS)
    assert attempt_row["decision"] == {"retry": False, "reason": "ok"}
    assert attempt_row["resources"] == ["openai/key-1"]
    [artifact_row] = begun.rows(RowKind.ARTIFACTS)
    assert artifact_row == {**dataclasses.asdict(artifact("out-p1-0")), "size": 14}
    [run_row] = begun.rows(RowKind.RUNS)
    assert (run_row["state"], run_row["config"]) == ("running", {})


def test_rows_of_one_pipeline(begun: Store) -> None:
    begun.write(checkpoint("p1", 0))
    begun.write(checkpoint("p2", 0))
    begun.write(checkpoint("p1", 1))
    begun.write(Batch(events=[event(pipeline_id="p1", seq=1), event(), event(pipeline_id="p2")]))

    def of_p1(kind: RowKind) -> list[dict[str, Any]]:
        return list(begun.rows(kind, pipeline_id="p1"))

    assert [p["pipeline_id"] for p in of_p1(RowKind.PIPELINES)] == ["p1"]
    assert [(t["pipeline_id"], t["seq"]) for t in of_p1(RowKind.TASKS)] == [("p1", 0), ("p1", 1)]
    assert [(a["pipeline_id"], a["seq"]) for a in of_p1(RowKind.ATTEMPTS)] == [("p1", 0), ("p1", 1)]
    assert [e["seq"] for e in of_p1(RowKind.EVENTS)] == [1]
    assert [a["digest"] for a in of_p1(RowKind.ARTIFACTS)] == ["out-p1-0", "out-p1-1"]
    assert list(begun.rows(RowKind.TASKS, pipeline_id="nope")) == []


@pytest.mark.parametrize("kind", [RowKind.RUNS, RowKind.RESOURCES])
def test_runs_and_resources_cannot_be_narrowed_to_a_pipeline(store: Store, kind: RowKind) -> None:
    with pytest.raises(ConfigError) as refused:
        store.rows(kind, pipeline_id="p1")
    assert refused.value.field == "pipeline_id"


def test_an_unknown_kind_is_refused_naming_the_valid_ones(store: Store) -> None:
    with pytest.raises(ConfigError) as refused:
        store.rows("pipelinez")
    assert refused.value.field == "kind"
    assert all(kind in str(refused.value.hint) for kind in ROW_KINDS)


def test_runs_are_listed_oldest_first(store: Store) -> None:
    store.begin_run(run("r1", state=RunState.SUCCEEDED), resume=False)
    store.begin_run(run("r2", started_at=2000.0), resume=True)
    assert [r.run_id for r in store.runs()] == ["r1", "r2"]


# -- closing and read-only --------------------------------------------------------------


def test_a_closed_store_raises_store_error_and_closing_again_is_harmless(store: Store) -> None:
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.count_pipelines()
    with pytest.raises(StoreError, match="closed"):
        store.rows(RowKind.RUNS)


def test_a_read_only_memory_store_refuses_every_write() -> None:
    reader = MemoryStore(read_only=True)
    with pytest.raises(StoreError, match="read-only"):
        reader.begin_run(run(), resume=False)
    with pytest.raises(StoreError, match="read-only"):
        reader.write(checkpoint())
    with pytest.raises(StoreError, match="read-only"):
        reader.end_run("r1", RunState.FAILED, ended_at=1.0, stop_reason=None)
    assert snapshot(reader) == snapshot(MemoryStore())
