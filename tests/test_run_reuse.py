"""Step reuse: editing one step reruns only what changed, and a resume says what it does."""

from __future__ import annotations

import hashlib
import io
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from pyattacker.errors import ConfigError, StoreError
from pyattacker.pool import TaskContext
from pyattacker.report._run import render_run_text, summarize
from pyattacker.run import Task, pipeline, task
from pyattacker.run._reuse import reusable_steps
from pyattacker.store import (
    AttemptRow,
    Batch,
    MemoryStore,
    PipelineRow,
    PipelineState,
    RowKind,
    RunRow,
    RunState,
    SQLiteStore,
)
from run_helpers import rows, run_virtually, runner

RAN: Counter[str] = Counter()
N = 6


@task
def load(x: int) -> int:
    RAN["load"] += 1
    return x


@task("classify")
async def classify(x: int, ctx: TaskContext) -> int:
    RAN["classify"] += 1  # the paid step
    await ctx.clock.sleep(1.0)
    return x * 10


def finalize_v(version: int) -> Task:
    @task("finalize", version=version)
    def finalize(x: int) -> str:
        RAN["finalize"] += 1
        return f"v{version}:{x}"

    return finalize


def chain(final: Task, middle: Task = classify) -> Any:
    return pipeline("triage", load, middle, final)


V1, V2 = chain(finalize_v(1)), chain(finalize_v(2))


@pytest.fixture(autouse=True)
def _clean() -> None:
    RAN.clear()


def outputs(store: Any) -> list[bytes]:
    found = [store.artifact(r["pipeline_id"], 2) for r in rows(store, RowKind.PIPELINES)]
    return sorted(a.data for a in found if a is not None)


@pytest.mark.parametrize("keyed", [False, True])
def test_editing_the_last_step_reruns_only_it_and_keeps_one_pipeline_per_row(
    keyed: bool,
) -> None:
    store = MemoryStore()
    key_of = (lambda x: f"row-{x}") if keyed else None
    run_virtually(runner(store), V1.map(range(N), key_of=key_of))
    RAN.clear()
    report = run_virtually(runner(store), V2.map(range(N), key_of=key_of), resume=True)
    assert RAN == {"finalize": N}  # load and classify ran 0 more times
    assert store.count_pipelines() == N
    assert report.by_state == {"succeeded": N}
    assert report.stats["steps"] == {"reused": 2 * N, "ran": N}
    assert outputs(store) == sorted(f'"v2:{x * 10}"'.encode() for x in range(N))
    history = rows(store, RowKind.TASK_HISTORY)
    assert sorted((h["seq"], h["name"], h["output_artifact"]) for h in history) == sorted(
        (2, "finalize", finalize_digest(1, x)) for x in range(N)
    )
    assert {h["superseded_by"] for h in history} == {report.run_id}
    assert sorted(h["output_data"] for h in history) == sorted(
        f'"v1:{x * 10}"'.encode() for x in range(N)
    )


def finalize_digest(version: int, x: int) -> str:
    from pyattacker.run._codecs import artifact_digest

    return artifact_digest("json", f'"v{version}:{x * 10}"'.encode())


def test_the_report_says_how_many_steps_each_run_reused_and_ran() -> None:
    store = MemoryStore()
    first = run_virtually(runner(store), V1.map(range(N)))
    second = run_virtually(runner(store), V2.map(range(N)), resume=True)
    summary = summarize(store)
    assert summary["steps"] == {
        first.run_id: {"reused": 0, "ran": 3 * N},
        second.run_id: {"reused": 2 * N, "ran": N},
    }
    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(render_run_text(summary))
    assert f"Steps of run {second.run_id}: {2 * N} reused from the store, {N} ran" in (
        out.getvalue()
    )


def test_a_resume_with_the_template_alone_reruns_the_edited_step_of_every_stored_pipeline() -> None:
    store = MemoryStore()
    run_virtually(runner(store), V1.map(range(N)))
    RAN.clear()
    report = run_virtually(runner(store), V2, resume=True)
    assert RAN == {"finalize": N}
    assert report.by_state == {"succeeded": N}
    assert store.count_pipelines() == N
    RAN.clear()
    again = run_virtually(runner(store), V2, resume=True)  # nothing changed since
    assert RAN == {}
    assert again.stats["steps"] == {"reused": 0, "ran": 0}


def test_editing_the_middle_step_reruns_it_and_every_step_after_it() -> None:
    @task("classify", version=2)
    async def classify_v2(x: int, ctx: TaskContext) -> int:
        RAN["classify"] += 1
        return x * 100

    store = MemoryStore()
    run_virtually(runner(store), V1.map(range(N)))
    RAN.clear()
    report = run_virtually(
        runner(store), chain(finalize_v(1), classify_v2).map(range(N)), resume=True
    )
    assert RAN == {"classify": N, "finalize": N}
    assert report.stats["steps"] == {"reused": N, "ran": 2 * N}
    assert outputs(store) == sorted(f'"v1:{x * 100}"'.encode() for x in range(N))
    assert Counter(h["name"] for h in rows(store, RowKind.TASK_HISTORY)) == {
        "classify": N,
        "finalize": N,
    }


def test_an_unchanged_step_after_a_changed_one_still_runs_because_its_input_changed() -> None:
    @task("classify", version=2)
    async def classify_same_output(x: int, ctx: TaskContext) -> int:
        RAN["classify"] += 1
        return x * 10  # same values: the next step's input digest is unchanged

    store = MemoryStore()
    run_virtually(runner(store), V1.map(range(N)))
    RAN.clear()
    edited = chain(finalize_v(1), classify_same_output)
    run_virtually(runner(store), edited.map(range(N)), resume=True)
    # Steps after the first changed one run again: reuse stops at the first difference.
    assert RAN == {"classify": N, "finalize": N}


def test_fresh_reruns_every_step_on_purpose_and_keeps_the_old_outputs() -> None:
    store = MemoryStore()
    run_virtually(runner(store), V1.map(range(N)))
    RAN.clear()
    report = virtual_run(runner(store), V1, fresh=True)
    assert RAN == {"load": N, "classify": N, "finalize": N}
    assert report.stats["steps"] == {"reused": 0, "ran": 3 * N}
    assert store.count_pipelines() == N
    assert len(rows(store, RowKind.TASK_HISTORY)) == 3 * N
    assert len(rows(store, RowKind.TASKS)) == 3 * N


def virtual_run(r: Any, specs: Any, **options: Any) -> Any:
    from run_helpers import virtual

    return virtual(lambda: r.run_async(specs, **options))


def test_a_resume_after_an_edit_retries_the_failed_pipelines_from_their_checkpoint() -> None:
    down = {"on": True}

    @task("classify")
    async def flaky(x: int, ctx: TaskContext) -> int:
        RAN["classify"] += 1
        if down["on"] and x % 2:
            raise RuntimeError("the endpoint fell over")
        return x * 10

    store = MemoryStore()
    first = run_virtually(runner(store), chain(finalize_v(1), flaky).map(range(N)))
    assert first.by_state == {"failed": N // 2, "succeeded": N // 2}
    down["on"] = False
    RAN.clear()
    report = run_virtually(runner(store), chain(finalize_v(2), flaky), resume=True)
    assert report.by_state == {"succeeded": N}
    # failed: classify and finalize again; succeeded: only the edited finalize
    assert RAN == {"classify": N // 2, "finalize": N}
    assert "load" not in RAN


def test_a_key_over_another_input_row_is_still_refused_and_an_edit_is_not() -> None:
    store = MemoryStore()
    run_virtually(runner(store), V1.bind(1, key="k"))
    with pytest.raises(ConfigError) as exc:
        run_virtually(runner(store), V1.bind(2, key="k"), resume=True)
    assert exc.value.field == "key"
    assert "different input row" in str(exc.value)
    RAN.clear()
    report = run_virtually(runner(store), V2.bind(1, key="k"), resume=True)
    assert report.by_state == {"succeeded": 1}
    assert RAN == {"finalize": 1}


def test_removing_the_last_step_reuses_the_others_and_moves_it_to_history() -> None:
    store = MemoryStore()
    run_virtually(runner(store), V1.map(range(2)))
    RAN.clear()
    report = run_virtually(runner(store), pipeline("triage", load, classify), resume=True)
    assert RAN == {}
    assert report.by_state == {"succeeded": 2}
    assert {r["ntasks"] for r in rows(store, RowKind.PIPELINES)} == {2}
    assert [h["name"] for h in rows(store, RowKind.TASK_HISTORY)] == ["finalize"] * 2


# -- another pipeline on the store ------------------------------------------------------


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_store_of_another_template_is_refused_untouched_unless_asked_to_add_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.db"
    with SQLiteStore(path) as store:
        run_virtually(runner(store), V1.map(range(3)))
    before = {p.name: _digest(p) for p in tmp_path.iterdir()}
    other = pipeline("summarize", load)
    for specs in (other.map(range(3)), other):
        with SQLiteStore(path) as store, pytest.raises(ConfigError) as exc:
            run_virtually(runner(store), specs, resume=True)
        assert exc.value.field == "add_pipeline"
        assert "'triage'" in str(exc.value)
        assert "'summarize'" in str(exc.value)
        assert {p.name: _digest(p) for p in tmp_path.iterdir()} == before
    with SQLiteStore(path) as store:
        report = virtual_run(runner(store), other.map(range(3)), resume=True, add_pipeline=True)
        assert report.by_state == {"succeeded": 6}
        assert store.templates() == ["summarize", "triage"]


def test_a_lazy_input_of_another_template_is_refused_when_admission_meets_it() -> None:
    store = MemoryStore()
    run_virtually(runner(store), V1.map(range(2)))
    specs = (pipeline("summarize", load).bind(i) for i in range(2))
    with pytest.raises(ConfigError) as exc:
        run_virtually(runner(store), specs, resume=True)
    assert exc.value.field == "add_pipeline"
    assert store.count_pipelines() == 2


# -- attempt numbers --------------------------------------------------------------------


def test_a_step_cut_by_a_kill_continues_its_attempt_numbers_on_resume() -> None:
    store = MemoryStore()
    spec = V1.bind(5).prepare()
    dead = RunRow(run_id="dead", state=RunState.RUNNING, started_at=0.0, heartbeat_at=0.0,
                  pid=_dead_pid(), host=os.uname().nodename)  # fmt: skip
    store.begin_run(dead, resume=False)
    pipeline_row = PipelineRow(
        pipeline_id=spec.pipeline_id, template="triage", chain_digest=V1.chain_digest,
        seed_digest=spec.seed_digest, seed_artifact=spec.seed_digest, repeat=0, key=None,
        state=PipelineState.RUNNING, cursor=0, ntasks=3, run_id="dead", ordinal=1,
        created_at=0.0, updated_at=0.0,
    )  # fmt: skip
    failed = AttemptRow(
        run_id="dead", pipeline_id=spec.pipeline_id, seq=0, task="load", attempt=1,
        outcome="failed", started_at=0.0, ended_at=0.1, duration_s=0.1,
        decision={"retry": True, "reason": "retryable"},
    )  # fmt: skip
    from pyattacker.store import ArtifactRow

    seed = ArtifactRow(pipeline_id=spec.pipeline_id, seq=-1, digest=spec.seed_digest,
                       codec=spec.seed_codec, data=spec.seed_bytes, created_at=0.0)  # fmt: skip
    store.write(Batch(pipelines=[pipeline_row], artifacts=[seed], attempts=[failed]))
    report = run_virtually(runner(store), V1, resume=True)
    assert report.by_state == {"succeeded": 1}
    numbers = [(a["seq"], a["attempt"], a["outcome"]) for a in store.rows(RowKind.ATTEMPTS)]
    assert sorted(numbers) == [(0, 1, "failed"), (0, 2, "ok"), (1, 1, "ok"), (2, 1, "ok")]


def _dead_pid() -> int:
    import subprocess
    import sys

    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    return int(child.stdout)


# -- the pure decision --------------------------------------------------------------------


def _row(seq: int, fingerprint: str, given_input: str, output: str) -> dict[str, Any]:
    return {"seq": seq, "state": "succeeded", "task_digest": fingerprint,
            "input_artifact": given_input, "output_artifact": output}  # fmt: skip


@given(
    n=st.integers(1, 5),
    changed=st.sets(st.integers(0, 4)),
    cursor=st.integers(0, 5),
)
def test_reuse_stops_at_the_first_changed_step_and_never_passes_the_cursor(
    n: int, changed: set[int], cursor: int
) -> None:
    tasks = [_step(f"s{i}", 1) for i in range(n)]
    stored = [
        _row(i, tasks[i].fingerprint if i not in changed else "old", f"d{i - 1}", f"d{i}")
        for i in range(n)
    ]
    reused = reusable_steps(tasks, stored, "d-1", limit=cursor)
    expected = min([cursor, n, *(i for i in changed if i < n)])
    assert reused == expected


def test_a_step_whose_recorded_input_differs_is_not_reused() -> None:
    tasks = [_step("a", 1), _step("b", 1)]
    stored = [_row(0, tasks[0].fingerprint, "seed", "x"), _row(1, tasks[1].fingerprint, "y", "z")]
    assert reusable_steps(tasks, stored, "seed", limit=2) == 1
    assert reusable_steps(tasks, stored, "another seed", limit=2) == 0


def _step(name: str, version: int) -> Task:
    return task(lambda x: x, name=name, version=version)


KILLED_MODULE = """
import sys
from pathlib import Path

from pyattacker.errors import RetryableError
from pyattacker.retry import Retrying
from pyattacker.run import Runner, pipeline, task


@task("call", retry=Retrying(max_attempts=3, base=600.0, cap=600.0, jitter="none"))
def call(x: int) -> int:
    if Path(__file__).with_name("down").exists():
        raise RetryableError("the endpoint is down")
    return x + 1


calls = pipeline("calls", call)

if __name__ == "__main__":
    with Runner(sys.argv[1], write_behind=False, handle_signals=False) as runner:
        runner.run(calls.bind(1))  # parks 600 s after its first attempt: killed there
"""


def test_a_step_rerun_after_a_real_sigkill_is_its_next_attempt(tmp_path: Path) -> None:
    import importlib.util
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "killed.py").write_text(KILLED_MODULE)
    (tmp_path / "down").write_text("")
    path = tmp_path / "run.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen([sys.executable, str(tmp_path / "killed.py"), str(path)], env=env)
    try:
        deadline = time.monotonic() + 30  # real I/O: wait for the child's first attempt
        while not _has_attempt(path) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert _has_attempt(path)
    (tmp_path / "down").unlink()
    spec = importlib.util.spec_from_file_location("killed_for_test", tmp_path / "killed.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with SQLiteStore(path) as store:
        report = run_virtually(runner(store), module.calls, resume=True)
        assert report.by_state == {"succeeded": 1}
        numbers = [(a["attempt"], a["outcome"]) for a in store.rows(RowKind.ATTEMPTS)]
    assert numbers == [(1, "failed"), (2, "ok")]


def _has_attempt(path: Path) -> bool:
    try:
        with SQLiteStore(path, read_only=True) as store:
            return any(True for _ in store.rows(RowKind.ATTEMPTS))
    except (ConfigError, StoreError):
        return False  # not created (or not migrated) yet
