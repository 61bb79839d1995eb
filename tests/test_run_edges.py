"""The Runner at its edges: outside cancellation, secrets in errors, text SQLite refuses,
bad input found late, exceptions that are not Exceptions, and Ctrl-C in a notebook."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from pyattacker.errors import ConfigError, RetryableError, StoreError
from pyattacker.pool import Pool, Resource, TaskContext
from pyattacker.retry import Retrying
from pyattacker.run import Runner, fanout, pipeline, task
from pyattacker.store import MemoryStore, RowKind, RunState, SQLiteStore, export_rows
from run_helpers import rows, run_virtually, runner, virtual

SECRET = "sk-planted-abcdef0123456789"


def _keyed_pool() -> Pool:
    options = {"api_key": SECRET, "headers": {"authorization": f"Bearer {SECRET}"}}
    return Pool("llm", [Resource.create("llm", id="k1", capacity=4, options=options)])


def test_cancelling_the_run_from_outside_interrupts_it_within_the_grace_period() -> None:
    @task
    async def slow(x: int, ctx: TaskContext) -> int:
        await ctx.clock.sleep(50.0)
        return x

    store = MemoryStore()
    the_runner = runner(store, concurrency=2, admission=4, grace_s=1.0)

    async def main() -> float:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(the_runner.run_async(pipeline("p", slow).map(range(40))), 3.5)
        return asyncio.get_running_loop().time()

    assert virtual(main) == pytest.approx(3.5)
    (run,) = store.runs()
    assert run.state is RunState.INTERRUPTED
    assert store.count_by_state() == {"interrupted": 4}


def test_a_stop_is_not_followed_by_one_more_admission() -> None:
    @task
    async def slow(x: int, ctx: TaskContext) -> int:
        await ctx.clock.sleep(2.0)
        return x

    report = run_virtually(
        runner(concurrency=1, admission=1, stop_after_s=1.0, grace_s=10.0),
        pipeline("p", slow).map(range(5)),
    )
    assert report.stats["pipelines"]["admitted"] == 1
    assert report.by_state == {"succeeded": 1}


def test_a_retry_that_fails_after_the_stop_is_not_waited_for() -> None:
    @task(retry=Retrying(max_attempts=3, base=100.0, cap=100.0, jitter="none"))
    async def fails_late(x: int, ctx: TaskContext) -> int:
        await ctx.clock.sleep(1.0)
        raise RetryableError("later")

    async def main() -> float:
        the_runner = runner(stop_after_s=0.5, grace_s=1000.0)
        await the_runner.run_async(pipeline("p", fails_late).bind(1))
        return asyncio.get_running_loop().time()

    assert virtual(main) == pytest.approx(1.0)


def test_a_key_quoted_in_an_error_message_never_reaches_the_store(tmp_path: Path) -> None:
    @task(resource="llm")
    async def call(x: int, ctx: TaskContext) -> dict[str, Any]:
        async with ctx.acquire():
            if x == 0:
                raise PermissionError(f"Incorrect API key provided: {SECRET}")
            ctx.emit("call.made", url=f"https://api.example/v1?api-key={SECRET}")
            return {"echo": f"Bearer {SECRET}"}

    path = tmp_path / "run.db"
    report = run_virtually(
        runner(str(path), pools=[_keyed_pool()]), pipeline("p", call).map(range(2))
    )
    assert report.by_state == {"failed": 1, "succeeded": 1}
    assert SECRET not in str(report.failures)
    assert "Incorrect API key provided: ***" in report.failures[0]["error"]
    reader = SQLiteStore(path, read_only=True)
    for kind in RowKind:
        out = tmp_path / f"{kind.value}.jsonl"
        export_rows(reader, out, kind=kind, fmt="jsonl")
        assert SECRET not in out.read_text(), kind
    reader.close()
    for file in tmp_path.glob("run.db*"):
        assert SECRET.encode() not in file.read_bytes(), file.name


def test_a_fanout_branch_error_quoting_a_key_is_stored_without_it() -> None:
    @task
    async def leaky(x: int, ctx: TaskContext) -> int:
        raise RuntimeError(f"token {SECRET} refused")

    @task
    async def fine(x: int, ctx: TaskContext) -> int:
        return x

    store = MemoryStore()
    both = fanout(leaky, fine, on_error="collect")
    report = run_virtually(runner(store, pools=[_keyed_pool()]), pipeline("p", both).bind(1))
    assert report.by_state == {"succeeded": 1}
    (artifact,) = [a for a in store.rows(RowKind.ARTIFACTS) if a["seq"] == 0]
    assert SECRET.encode() not in artifact["data"]


def test_an_error_message_with_a_lone_surrogate_is_stored_escaped(tmp_path: Path) -> None:
    @task
    async def parse(x: int, ctx: TaskContext) -> int:
        if x == 1:
            raise ValueError("cannot parse " + b"caf\xff".decode("utf-8", "surrogateescape"))
        return x

    path = tmp_path / "run.db"
    report = run_virtually(runner(str(path)), pipeline("p", parse).map(range(3)))
    assert report.by_state == {"failed": 1, "succeeded": 2}
    reader = SQLiteStore(path, read_only=True)
    (failed,) = [t for t in reader.rows(RowKind.TASKS) if t["state"] == "failed"]
    assert failed["error"] == "ValueError: cannot parse caf\\udcff"
    reader.close()


def test_a_store_that_fails_still_records_the_run_as_ended() -> None:
    class Failing(MemoryStore):
        writes = 0

        def write(self, batch: Any) -> None:
            Failing.writes += 1
            if Failing.writes > 2:
                raise OSError("disk full")
            super().write(batch)

    store = Failing()
    with pytest.raises(StoreError):
        run_virtually(runner(store), pipeline("p", _ident).map(range(200)))
    (run,) = store.runs()
    assert run.state is RunState.INTERRUPTED
    assert run.stop_reason is not None
    assert "disk full" in run.stop_reason


@task
def _ident(x: int) -> int:
    return x


def test_a_task_naming_an_unknown_pool_is_refused_before_anything_runs() -> None:
    @task(resource="lllm")
    async def typo(x: int, ctx: TaskContext) -> int:
        return x

    store = MemoryStore()
    with pytest.raises(ConfigError) as exc:
        run_virtually(runner(store, pools=[_keyed_pool()]), pipeline("p", typo).map(range(3)))
    assert exc.value.field == "resource"
    assert "'lllm'" in str(exc.value)
    assert "llm" in (exc.value.hint or "")
    assert store.count_pipelines() == 0


def test_a_fanout_branch_naming_an_unknown_pool_is_refused_too() -> None:
    @task(resource="nope")
    async def branch(x: int, ctx: TaskContext) -> int:
        return x

    with pytest.raises(ConfigError) as exc:
        run_virtually(runner(), pipeline("p", fanout(branch, _ident)).bind(1))
    assert exc.value.field == "resource"


def test_an_input_row_no_codec_can_store_is_bad_input_naming_the_seed() -> None:
    store = MemoryStore()
    with pytest.raises(ConfigError) as exc:
        run_virtually(runner(store), pipeline("p", _ident).map([1, 2, {3}]))
    assert exc.value.field == "seed"
    assert exc.value.exit_code == 2
    assert store.runs()[0].state is RunState.INTERRUPTED


def test_a_generator_that_raises_leaves_the_run_recorded_as_interrupted() -> None:
    def boom() -> Any:
        yield 1
        raise OSError("gone")

    store = MemoryStore()
    with pytest.raises(ConfigError):
        run_virtually(runner(store), pipeline("p", _ident).map(boom()))
    (run,) = store.runs()
    assert run.state is RunState.INTERRUPTED
    assert run.stop_reason == "the input failed after 1 pipelines"


def test_a_base_exception_from_a_task_fails_its_pipeline_and_leaves_no_pending_row() -> None:
    class Abort(BaseException):
        pass

    @task
    async def aborts(x: int, ctx: TaskContext) -> int:
        if x == 0:
            raise Abort("no")
        return x

    store = MemoryStore()
    report = run_virtually(runner(store), pipeline("p", aborts).map(range(4)))
    assert report.by_state == {"failed": 1, "succeeded": 3}
    (attempt,) = rows(store, RowKind.ATTEMPTS, outcome="failed")
    assert attempt["error"] == "Abort: no"


def test_a_task_calling_sys_exit_stops_the_run_gracefully() -> None:
    @task
    async def quits(x: int, ctx: TaskContext) -> int:
        if x == 2:
            raise SystemExit(3)
        return x

    report = run_virtually(runner(concurrency=1, grace_s=0.0), pipeline("p", quits).map(range(9)))
    assert report.state is RunState.INTERRUPTED
    assert report.stop_reason == "SystemExit raised by task 'quits'"
    assert report.by_state["failed"] == 1


def test_the_next_task_gets_the_value_as_stored_so_a_resume_changes_nothing() -> None:
    seen: list[Any] = []

    @task
    def pair(x: int) -> tuple[int, int]:
        return (x, x)

    @task
    def look(p: Any) -> int:
        seen.append(p)
        return 0

    run_virtually(runner(), pipeline("p", pair, look).bind(1))
    assert seen == [[1, 1]]


def test_emit_accepts_any_keyword_including_seq_and_pipeline_id() -> None:
    @task
    async def chatty(x: int, ctx: TaskContext) -> int:
        ctx.emit("note.made", seq=5, pipeline_id="mine", kind="k")
        return x

    store = MemoryStore()
    run_virtually(runner(store), pipeline("p", chatty).bind(1))
    (event,) = rows(store, RowKind.EVENTS, kind="note.made")
    assert event["data"] == {"seq": 5, "pipeline_id": "mine", "kind": "k"}
    assert event["seq"] == 0


def test_a_leaked_lease_is_recorded_against_its_pipeline_and_task() -> None:
    @task(resource="llm")
    async def forgets(x: int, ctx: TaskContext) -> int:
        await ctx.acquire_lease()
        return x

    store = MemoryStore()
    run_virtually(runner(store, pools=[_keyed_pool()]), pipeline("p", forgets).bind(1))
    (event,) = rows(store, RowKind.EVENTS, kind="lease.leaked")
    assert event["pipeline_id"] == rows(store, RowKind.PIPELINES)[0]["pipeline_id"]
    assert (event["seq"], event["data"]) == (0, {"pool": "llm", "resource": "k1"})


def test_exporting_over_the_store_itself_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "run.db"
    run_virtually(runner(str(path)), pipeline("p", _ident).bind(1))
    reader = SQLiteStore(path, read_only=True)
    for target in (path, Path(f"{path}-wal")):
        with pytest.raises(ConfigError) as exc:
            export_rows(reader, target, kind="runs", fmt="jsonl")
        assert exc.value.field == "out"
    reader.close()
    assert SQLiteStore(path, read_only=True).count_pipelines() == 1


def test_ctrl_c_in_a_notebook_stops_the_run_gracefully() -> None:
    @task
    async def slow(x: int, ctx: TaskContext) -> int:
        await ctx.clock.sleep(0.2)
        return x

    async def notebook_cell() -> Any:
        with Runner(concurrency=2, handle_signals=False, grace_s=5.0) as r:
            return r.run(pipeline("p", slow).map(range(60)))

    # A notebook's loop runs in the main thread with Python's own SIGINT handling (unlike
    # asyncio.run, which turns SIGINT into cancelling its main task).
    loop = asyncio.new_event_loop()
    timer = threading.Timer(0.6, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        report = loop.run_until_complete(notebook_cell())
    finally:
        timer.cancel()
        loop.close()
    assert report.state is RunState.INTERRUPTED
    assert report.stop_reason == "KeyboardInterrupt"
    assert 0 < report.by_state.get("succeeded", 0) < 60


# -- faults of ours, write-through, cancellation at every await ------------------------


def test_a_framework_error_in_one_pipeline_is_recorded_and_the_run_goes_on() -> None:
    from pyattacker.run import CodecRegistry

    class Broken(CodecRegistry):
        """A fault outside any task: storing the output of pipeline 2 blows up."""

        def stored(self, value: Any) -> tuple[str, bytes, Any]:
            if value == 2:
                raise RuntimeError("bug in the machinery")
            return super().stored(value)

    store = MemoryStore()
    report = run_virtually(runner(store, codecs=Broken()), pipeline("p", _ident).map(range(4)))
    assert report.by_state == {"failed": 1, "succeeded": 3}
    (event,) = rows(store, RowKind.EVENTS, kind="run.framework_error")
    assert event["data"]["error"] == "RuntimeError: bug in the machinery"
    assert "Traceback" in event["data"]["traceback"]


def test_without_write_behind_a_failed_attempt_is_stored_before_the_retry_runs() -> None:
    seen: list[int] = []

    @task(retry=Retrying(max_attempts=2, base=1.0, jitter="none"))
    async def flaky(x: int, ctx: TaskContext) -> int:
        if ctx.attempt == 1:
            raise RetryableError("once")
        assert isinstance(ctx.store, MemoryStore)
        seen.append(len(list(ctx.store.rows(RowKind.ATTEMPTS))))
        return x

    run_virtually(runner(write_behind=False), pipeline("p", flaky).bind(1))
    assert seen == [1]


def test_with_write_behind_history_waits_for_a_batch() -> None:
    seen: list[int] = []

    @task(retry=Retrying(max_attempts=2, base=0.1, jitter="none"))
    async def flaky(x: int, ctx: TaskContext) -> int:
        if ctx.attempt == 1:
            raise RetryableError("once")
        assert isinstance(ctx.store, MemoryStore)
        seen.append(len(list(ctx.store.rows(RowKind.ATTEMPTS))))
        return x

    run_virtually(runner(heartbeat_s=60.0), pipeline("p", flaky).bind(1))
    assert seen == [0]


@pytest.mark.parametrize("stop_at", [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5])
def test_cancelling_at_any_await_leaves_no_lease_held_and_no_half_written_row(
    stop_at: float,
) -> None:
    """Every await of a task — waiting for a lease, inside it, after it, in the retry
    backoff, waiting for a commit — is hit by one of these stop instants (grace 0: cancel
    at once)."""
    pool = Pool("llm", [Resource.create("llm", id="k1", capacity=1)])

    @task(resource="llm", retry=Retrying(max_attempts=3, base=0.5, cap=0.5, jitter="none"))
    async def leases(x: int, ctx: TaskContext) -> int:
        async with ctx.acquire() as lease:
            await ctx.clock.sleep(0.5)
            if x == 1 and ctx.attempt == 1:
                raise RetryableError("again")
            lease.report(ok=True)
        await ctx.clock.sleep(0.5)
        return x + 1

    @task
    async def after(x: int, ctx: TaskContext) -> int:
        await ctx.clock.sleep(0.25)
        return x

    store = MemoryStore()
    the_runner = runner(store, pools=[pool], concurrency=2, grace_s=0.0, stop_after_s=stop_at)
    report = run_virtually(the_runner, pipeline("p", leases, after).map(range(3)))
    assert pool.active == 0
    assert sum(report.by_state.values()) == report.stats["pipelines"]["admitted"]
    for row in rows(store, RowKind.PIPELINES):
        done = list(store.rows(RowKind.TASKS, pipeline_id=row["pipeline_id"]))
        succeeded = [t["seq"] for t in done if t["state"] == "succeeded"]
        assert succeeded == list(range(row["cursor"]))  # the cursor never runs ahead
        for seq in succeeded:
            stored = store.artifact(row["pipeline_id"], seq)
            assert stored is not None
            assert stored.digest == done[seq]["output_artifact"]
        assert row["state"] in {"succeeded", "interrupted"}
    for attempt in store.rows(RowKind.ATTEMPTS):
        assert attempt["outcome"] in {"ok", "failed", "cancelled"}


# -- second review: what a resume, a restart and a mid-run publish must keep -------------


class _Opaque:
    """A value only a registered codec can store (to make a checkpoint unreadable later)."""

    def __init__(self, n: int) -> None:
        self.n = n


class _OpaqueCodec:
    name = "opaque"

    def handles(self, value: Any) -> bool:
        return isinstance(value, _Opaque)

    def encode(self, value: Any) -> bytes:
        return str(value.n).encode()

    def decode(self, data: bytes) -> Any:
        return _Opaque(int(data))


def test_a_restart_from_the_seed_keeps_the_successful_attempts_of_earlier_runs() -> None:
    from pyattacker.run import CodecRegistry

    @task
    def make(x: int) -> Any:
        return _Opaque(x)

    @task(retry=Retrying(max_attempts=1))
    def use(o: Any) -> int:
        if not use_ok:
            raise RuntimeError("not yet")
        return 1

    codecs = CodecRegistry()
    codecs.register(_OpaqueCodec())
    store = MemoryStore()
    use_ok = False
    run_virtually(runner(store, codecs=codecs), pipeline("p", make, use).bind(5))
    assert [a["outcome"] for a in store.rows(RowKind.ATTEMPTS)] == ["failed", "ok"]
    # Run 2 lacks the codec: task 0's output does not decode, so the pipeline restarts from
    # its seed, and the rerun of `make` replaces the task row that carried run 1's success
    # (and, lacking the codec, fails to store its own output).
    use_ok = True
    report = run_virtually(runner(store), pipeline("p", make, use), resume=True)
    assert report.by_state == {"failed": 1}
    outcomes = [(a["seq"], a["outcome"]) for a in store.rows(RowKind.ATTEMPTS, pipeline_id=None)]
    assert outcomes.count((0, "ok")) == 2  # run 1's success of task 0 is still there
    runs = {a["run_id"] for a in store.rows(RowKind.ATTEMPTS) if a["seq"] == 0}
    assert len(runs) == 2


def test_the_attempts_of_one_pipeline_come_in_the_order_they_ran_across_runs() -> None:
    @task(retry=Retrying(max_attempts=2, base=1.0, jitter="none"))
    async def flaky(x: int, ctx: TaskContext) -> int:
        if not healthy:
            raise RetryableError("down")
        return x

    store = MemoryStore()
    healthy = False
    run_virtually(runner(store), pipeline("p", flaky).bind(1))
    healthy = True
    virtual(lambda: asyncio.sleep(0))  # later: a run on a fresh loop
    run_virtually(runner(store), pipeline("p", flaky), resume=True)
    (pid,) = [r["pipeline_id"] for r in store.rows(RowKind.PIPELINES)]
    order = [(a["attempt"], a["outcome"]) for a in store.rows(RowKind.ATTEMPTS, pipeline_id=pid)]
    # the resumed run's attempt continues the numbering: it is the step's third
    assert order == [(1, "failed"), (2, "failed"), (3, "ok")]


def test_a_dict_output_reaches_the_next_task_with_its_keys_as_stored() -> None:
    seen: list[list[str]] = []

    @task
    def row(x: int) -> dict[str, int]:
        return {"zeta": 1, "alpha": 2}

    @task
    def keys(d: dict[str, int]) -> int:
        seen.append(list(d))
        return 0

    run_virtually(runner(), pipeline("p", row, keys).bind(1))
    assert seen == [["alpha", "zeta"]]  # what a resumed run reads back from the JSON


def test_a_key_that_is_not_text_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    path = tmp_path / "run.db"
    bad = "caf" + b"\xff".decode("utf-8", "surrogateescape")
    specs = [pipeline("p", _ident).bind(i, key=f"k{i}") for i in range(3)]
    with pytest.raises(ConfigError) as exc:
        run_virtually(runner(str(path)), [*specs, pipeline("p", _ident).bind(9, key=bad)])
    assert exc.value.field == "key"


def test_the_secret_of_a_resource_published_mid_run_is_scrubbed_too() -> None:
    pool = _keyed_pool()
    late_key = "sk-late-zyxwvu9876543210"

    @task(resource="llm")
    async def publishes(x: int, ctx: TaskContext) -> int:
        if x == 0:
            pool.publish(Resource.create("llm", id="k2", options={"api_key": late_key}))
            return x
        raise PermissionError(f"Incorrect API key provided: {late_key}")

    store = MemoryStore()
    the_runner = runner(store, pools=[pool], concurrency=1)
    report = run_virtually(the_runner, pipeline("p", publishes).map(range(2)))
    assert report.by_state == {"failed": 1, "succeeded": 1}
    everything = str([list(store.rows(kind)) for kind in RowKind]) + str(report.failures)
    assert late_key not in everything
    assert {r["resource_id"] for r in store.rows(RowKind.RESOURCES)} == {"k1", "k2"}


def test_a_nested_fanout_branch_naming_an_unknown_pool_is_refused() -> None:
    @task(resource="typo")
    async def deep(x: int, ctx: TaskContext) -> int:
        return x

    @task
    def other(x: int) -> int:
        return x

    inner = fanout(deep, other, name="inner")
    with pytest.raises(ConfigError) as exc:
        run_virtually(runner(), pipeline("p", fanout(inner, _ident)).bind(1))
    assert exc.value.field == "resource"
