"""Shards: a stable split of a run's pipelines (`--shard i/N`), children started by
`--shards N --jobs J` with their own stores, key limits divided, and `report`/`export`
of several stores merged into the same results as one process."""

from __future__ import annotations

import json
from hashlib import sha256
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.cli import run_cli
from pyattacker.errors import ConfigError
from pyattacker.pool import Pool, Resource
from pyattacker.run import Runner, Shard, divide_pools, pipeline, shard_of, shard_store_name, task
from pyattacker.store import STATE_RANK, MemoryStore, MergedStore, RowKind, SQLiteStore, results

CONFIG = """\
run: {store: eval.db, concurrency: 4}
pools:
  llm:
    resources:
      - {id: k1, capacity: 4, rpm: 60000}
      - {id: k2, capacity: 2, tpm: 90000}
pipeline:
  name: sharded
  tasks:
    - {use: simulate_llm, resource: llm, retry: {max_attempts: 3, base: 0.001},
       args: {prompt: "Q {input}", ttft_s: 0.001, itl_s: 0, tokens: 2}}
    - {use: flaky, retry: {max_attempts: 2, base: 0.001}}
source: {range: 30}
"""


@task
def double(x: int) -> int:
    return 2 * x


def test_a_pipeline_id_has_the_same_shard_in_every_process() -> None:
    # a SHA-256, not hash(): these literals hold on every machine and Python
    assert [shard_of(pid, 4) for pid in ("a", "b", "c", "d")] == [
        shard_of("a", 4), shard_of("b", 4), shard_of("c", 4), shard_of("d", 4)
    ]  # fmt: skip
    assert shard_of("0" * 64, 7) == int.from_bytes(sha256(b"0" * 64).digest()[:8], "big") % 7 + 1


@given(st.text(min_size=1, max_size=80), st.integers(min_value=1, max_value=1000))
def test_every_pipeline_falls_in_exactly_one_shard(pid: str, count: int) -> None:
    owners = [i for i in range(1, count + 1) if Shard(i, count).holds(pid)]
    assert owners == [shard_of(pid, count)]


def test_the_shards_of_a_map_partition_its_pipelines() -> None:
    template = pipeline("p", double)
    every = {s.prepare().pipeline_id for s in template.map(range(200))}
    parts = [
        {s.prepare().pipeline_id for s in template.map(range(200), shard=Shard(i, 3))}
        for i in (1, 2, 3)
    ]
    assert set().union(*parts) == every
    assert sum(len(p) for p in parts) == len(every)
    assert all(parts)  # 200 rows: no shard is empty


@pytest.mark.parametrize("bad", ["5/4", "0/0", "1/0", "0/3", "x", "1/2/3", "-1/2", ""])
def test_a_bad_shard_is_refused_naming_the_flag(bad: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Shard.parse(bad)
    assert caught.value.field == "--shard"


def test_a_shard_store_is_named_predictably() -> None:
    assert shard_store_name("runs/eval.db", Shard(1, 4)) == "runs/eval.shard-1-of-4.db"
    assert shard_store_name("eval", Shard(2, 2)) == "eval.shard-2-of-2"


def test_shards_divide_capacity_and_rates_and_warn_when_capacity_rounds_to_zero() -> None:
    pool = Pool(
        "llm",
        [
            Resource.create("llm", id="big", capacity=9, rpm=600, tpm=9000, rpd=10),
            Resource.create("llm", id="small", capacity=2),
        ],
    )
    (divided,), warnings = divide_pools([pool], 4)
    big, small = divided.resources
    assert (big.capacity, big.rpm, big.tpm, big.rpd) == (2, 150.0, 2250.0, 2)
    assert small.capacity == 1
    assert len(warnings) == 1
    assert "'small'" in warnings[0]
    assert pool.resources[0].capacity == 9  # the given pool is left as it was


def _results(path: Path) -> list[dict[str, object]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:  # which key served it, and how fast, may differ; what it said may not
        for moving in ("resource", "e2e_s", "ttft_s"):
            row["output"]["simulate_llm"].pop(moving)
    keep = ("key", "pipeline_id", "state", "input", "output", "step", "error_class")
    return sorted(({k: r[k] for k in keep} for r in rows), key=lambda r: str(r["pipeline_id"]))


def test_shards_merge_to_the_same_results_as_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("eval.yaml").write_text(CONFIG)
    assert run_cli(["run", "-c", "eval.yaml", "--store", "one.db"]) == 0
    assert run_cli(["run", "-c", "eval.yaml", "--shards", "3", "--jobs", "2"]) == 0
    stores = [f"eval.shard-{i}-of-3.db" for i in (1, 2, 3)]
    assert all(Path(s).is_file() for s in stores)
    assert "30 pipelines: 30 succeeded" in capsys.readouterr().out  # the merged report
    assert run_cli(["export", "one.db", "one.jsonl", "--rows", "results"]) == 0
    assert run_cli(["export", *stores, "merged.jsonl", "--rows", "results"]) == 0
    assert _results(Path("merged.jsonl")) == _results(Path("one.jsonl"))
    assert run_cli(["report", *stores, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["pipelines"]["total"] == 30


def test_one_shard_runs_alone_and_resumes_into_its_own_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("eval.yaml").write_text(CONFIG)
    assert run_cli(["run", "-c", "eval.yaml", "--shard", "2/3"]) == 0
    assert [p.name for p in Path().glob("eval*.db")] == ["eval.shard-2-of-3.db"]
    assert run_cli(["run", "-c", "eval.yaml", "--shard", "2/3", "--resume"]) == 0
    assert not Path("eval.db").exists()


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (["--shard", "5/4"], "--shard"),
        (["--shard", "0/0"], "--shard"),
        (["--jobs", "2"], "--jobs"),
        (["--shard", "1/2", "--shards", "2"], "--shard"),
    ],
)
def test_bad_shard_flags_exit_2_naming_the_flag_and_create_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    field: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("eval.yaml").write_text(CONFIG)
    assert run_cli(["run", "-c", "eval.yaml", *flags]) == 2
    assert f"error: {field}:" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.yaml"]


def test_merged_stores_take_each_pipeline_from_the_store_where_it_ranks_highest() -> None:
    failing = {1}

    @task
    def sometimes(x: int) -> int:
        if x in failing:
            raise ValueError("not this time")
        return x

    template = pipeline("m", sometimes)
    first, second = MemoryStore(), MemoryStore()
    with Runner(first) as runner:
        runner.run(template.map([0, 1, 2]))
    failing.clear()
    with Runner(second) as runner:
        runner.run(template.map([1]))
    assert first.count_by_state() == {"succeeded": 2, "failed": 1}
    merged = MergedStore([second, first])  # the failed one is named later: it still loses
    states = {r["pipeline_id"]: r["state"] for r in merged.rows(RowKind.PIPELINES)}
    assert sorted(states.values()) == ["succeeded"] * 3
    assert merged.count_pipelines() == 3
    assert STATE_RANK["succeeded"] > STATE_RANK["failed"] > STATE_RANK["running"]
    assert len(list(merged.rows(RowKind.TASKS))) == 3  # the failed story is not counted


JOB = """
import os

from pyattacker import task


@task
def check(n: int) -> int:
    if os.environ.get("PYA_FAIL"):
        raise RuntimeError("not yet")
    return n
"""


def test_a_stopped_shard_resumes_as_the_same_shard_and_refuses_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("job.py").write_text(JOB)
    Path("rows.jsonl").write_text("".join(f"{n}\n" for n in range(40)))
    run = ["run", "job.py:check", "--store", "s.db", "--concurrency", "1"]
    monkeypatch.setenv("PYA_FAIL", "1")
    assert (
        run_cli([*run, "--input", "rows.jsonl", "--shard", "1/2", "--stop-after-failures", "1"])
        == 130
    )
    monkeypatch.delenv("PYA_FAIL")
    capsys.readouterr()
    for other in (["--shard", "2/2"], []):
        assert run_cli([*run, "--resume", *other]) == 2
        assert "error: --shard:" in capsys.readouterr().err
    assert run_cli([*run, "--resume", "--shard", "1/2"]) == 0
    with SQLiteStore("s.db", read_only=True) as store:
        ids = [r["pipeline_id"] for r in results(store)]
    mine = [s.prepare().pipeline_id for s in pipeline("check", check_task()).map(range(40))]
    assert sorted(ids) == sorted(p for p in mine if shard_of(p, 2) == 1)


def check_task() -> object:
    """The same task the job file defines (identity: its name and template's name)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("job_for_ids", "job.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.check
