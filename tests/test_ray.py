"""Ray paths on one local Ray cluster of 2 CPUs (started once for the module): ``bench
--ray``'s report equals the local one, and a run's ``executor="ray"`` steps give the local
outputs, fail and retry by the task's policy, and lose nothing when the driver is killed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyattacker._ray import check_address
from pyattacker.benchmark import get_scenario, run_benchmark
from pyattacker.cli import run_cli
from pyattacker.clock import wall_time
from pyattacker.retry import Retrying
from pyattacker.run import Runner, pipeline, task
from pyattacker.store import RowKind, SQLiteStore, results

ray = pytest.importorskip("ray")

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.xdist_group("ray")]

CHILD = Path(__file__).with_name("ray_child.py")


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Iterator[str]:
    """One local Ray of 2 CPUs for the module; its address, for child drivers. (The task
    bodies below travel by value: the workers never import this module.)"""
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def test_the_ray_address_check_accepts_a_running_ray_head(cluster: str) -> None:
    check_address(cluster, "--ray")  # its GCS answers the HTTP/2 greeting as gRPC does


def test_a_driver_without_the_clusters_token_is_refused_at_once_naming_ray_auth_mode(
    cluster: str, tmp_path: Path
) -> None:
    """Ray 2.60 turns token authentication on for a cluster it starts (this module's too):
    a driver whose RAY_AUTH_MODE is not 'token' is refused, which Ray's ray.init retries
    for 20 s, then reports as a cluster it cannot reach (and `run` did for every item)."""
    if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
        pytest.skip("this Ray cluster runs without token authentication")
    (tmp_path / "r.yaml").write_text(
        "run: {store: r.db}\n"
        "pipeline: {name: r, tasks: [{use: echo, executor: ray}]}\n"
        "source: {range: 3}\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
    env |= {"RAY_ADDRESS": cluster, "PYATTACKER_PURE": "1"}
    out = subprocess.run([sys.executable, "-m", "pyattacker", "run", "-c", "r.yaml"],
                         cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert f"RAY_AUTH_MODE: the Ray cluster at {cluster} (RAY_ADDRESS)" in out.stderr
    assert "export RAY_AUTH_MODE=token" in out.stderr
    assert "gcs_client" not in out.stderr  # Ray's own log line of the same refusal
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "r.db").exists()


def _without_wall_time(value: Any) -> Any:
    """The report with every ``wall_s`` (what the runs cost here, not what they found) out."""
    if isinstance(value, dict):
        return {k: _without_wall_time(v) for k, v in value.items() if k != "wall_s"}
    if isinstance(value, list):
        return [_without_wall_time(v) for v in value]
    return value


def test_bench_on_ray_reports_exactly_what_the_local_sweep_reports() -> None:
    scenario = get_scenario("bursty_provider").with_overrides(jobs=60, concurrency=4)
    seen: list[str] = []
    on_ray = run_benchmark(
        scenario,
        ["wait", "immediate"],
        seeds=2,
        ray=True,
        on_result=lambda r: seen.append(r.algorithm),
    )
    local = run_benchmark(scenario, ["wait", "immediate"], seeds=2, jobs_parallel=1)
    assert sorted(seen) == ["immediate", "immediate", "wait", "wait"]  # progress per run
    ours = json.dumps(_without_wall_time(on_ray.to_dict()), sort_keys=True)
    theirs = json.dumps(_without_wall_time(local.to_dict()), sort_keys=True)
    assert ours == theirs


def test_bench_ray_command_writes_the_local_commands_json_and_shows_each_run_finish(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small = ["--algorithms", "wait,immediate", "--seeds", "2", "--jobs", "40"]
    small += ["--concurrency", "4", "--horizon", "30"]
    reports = []
    for name, where in [("ray", ["--ray"]), ("local", ["--jobs-parallel", "1"])]:
        path = tmp_path / f"{name}.json"
        assert run_cli(["bench", *small, *where, "--json", str(path)]) == 0
        reports.append(_without_wall_time(json.loads(path.read_text())))
    err = capsys.readouterr().err
    assert "4 run(s) of 40 jobs on Ray" in err
    assert "bench [4/4]" in err  # progress, one line per finished task
    assert json.dumps(reports[0], sort_keys=True) == json.dumps(reports[1], sort_keys=True)


@task
def parse(x: int) -> int:
    return x * 3


@task
def finish(x: int) -> str:
    return f"<{x}>"


def crunch(x: int) -> int:
    total = x
    for i in range(20_000):  # fixed CPU-bound work
        total = (total * 31 + i) % 1_000_003
    return total


def _outputs(runner_store: Any) -> dict[Any, Any]:
    return {row["input"]: (row["state"], row["output"]) for row in results(runner_store)}


def meet(row: dict[str, Any]) -> int:
    """Say it started, then compute until the other body has started too. On Ray's 2 CPUs
    the two run at once; run one after the other (as one process's steps are: one GIL), the
    first would compute here until the deadline ends it as a failure."""
    folder, index = Path(row["folder"]), int(row["index"])
    (folder / f"started-{index}").write_text(str(os.getpid()))
    deadline, total = time.monotonic() + 60, index
    while not (folder / f"started-{1 - index}").exists():
        total = (total * 31 + 7) % 1_000_003  # CPU-bound while it waits
        if time.monotonic() > deadline:
            raise TimeoutError("the other body never ran alongside this one")
    return os.getpid()


def test_two_cpu_bound_ray_steps_run_at_once_in_two_processes(tmp_path: Path) -> None:
    # What makes Ray worth it for a run: its CPU-bound steps compute in parallel, which the
    # driver's one process cannot (benchmarks/ray_run.py measures what that gains).
    store = SQLiteStore(tmp_path / "r.db")
    steps = pipeline("p", task(meet, executor="ray"))
    rows = [{"folder": str(tmp_path), "index": i} for i in range(2)]
    with Runner(store, concurrency=2, handle_signals=False) as runner:
        report = runner.run(steps.map(rows))
    assert report.by_state == {"succeeded": 2}, report.failures[0]["error"]
    pids = {row["output"] for row in results(store)}
    store.close()
    assert len(pids) == 2
    assert os.getpid() not in pids


def test_a_ray_step_gives_the_outputs_of_the_same_step_run_locally(tmp_path: Path) -> None:
    outputs = []
    for executor in ("ray", "local"):
        store = SQLiteStore(tmp_path / f"{executor}.db")
        steps = pipeline("p", parse, task(crunch, executor=executor), finish)
        with Runner(store, concurrency=4, handle_signals=False) as runner:
            report = runner.run(steps.map(range(12)))
        assert report.by_state == {"succeeded": 12}, report.failures[0]["error"]
        outputs.append(_outputs(store))
        store.close()
    assert outputs[0] == outputs[1]
    # Where a body runs is not what it computes: the identity (so the checkpoints) is one.
    assert task(crunch, executor="ray").fingerprint == task(crunch).fingerprint
    assert outputs[0][5] == ("succeeded", f"<{crunch(15)}>")


def test_a_config_files_shell_step_runs_on_ray_with_the_local_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    outputs = []
    for executor in ("ray", "local"):
        (tmp_path / f"{executor}.yaml").write_text(
            f"run: {{store: {executor}.db}}\n"
            "pipeline:\n  name: sh\n  tasks:\n"
            f"    - {{use: shell, executor: {executor}, "
            "args: {command: 'echo $(({input} * 7)) $PPID', carry: false}}\n"
            "source: {range: 3}\n"
        )
        assert run_cli(["run", "-c", f"{executor}.yaml", "--json"]) == 0
        store = SQLiteStore(tmp_path / f"{executor}.db")
        outputs.append(_outputs(store))
        store.close()
    ray_out, local_out = outputs
    for n in range(3):
        assert ray_out[n][0] == local_out[n][0] == "succeeded"
        assert (
            ray_out[n][1]["stdout"].split()[0] == local_out[n][1]["stdout"].split()[0] == str(7 * n)
        )
    # The command's parent is a Ray worker's process on Ray, this process locally.
    assert {local_out[n][1]["stdout"].split()[-1] for n in range(3)} == {str(os.getpid())}
    assert str(os.getpid()) not in {ray_out[n][1]["stdout"].split()[-1] for n in range(3)}


DIES_ONCE = """
import os
from pathlib import Path

def dies_once(x):
    mark = Path(MARKS) / str(x)
    if not mark.exists():
        mark.touch()
        os._exit(1)  # the Ray worker dies: Ray's driver hears of it from the raylet
    return x * 10
"""


def test_run_on_ray_keeps_stdout_for_the_report_and_rays_notes_off_it(
    cluster: str, tmp_path: Path
) -> None:
    (tmp_path / "marks").mkdir()
    (tmp_path / "dies.py").write_text(f"MARKS = {str(tmp_path / 'marks')!r}\n{DIES_ONCE}")
    (tmp_path / "d.yaml").write_text(
        "run: {store: d.db}\n"
        "pipeline:\n  name: d\n  tasks:\n"
        "    - {use: 'dies.py:dies_once', executor: ray, "
        "retry: {max_attempts: 2, base: 0.01, retry_unknown: true}}\n"
        "source: {range: 2}\n"
    )
    env = {**os.environ, "RAY_ADDRESS": cluster, "PYATTACKER_PURE": "1"}
    out = subprocess.run([sys.executable, "-m", "pyattacker", "run", "-c", "d.yaml"],
                         cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("pyattacker run report")  # the report, and nothing above it
    assert "\x1b" not in out.stdout
    assert "raylet" not in out.stdout
    assert "(raylet) A worker died" in out.stderr  # Ray's word on the crash: on stderr, plain
    assert "SIGTERM handler is not set" not in out.stderr  # the run handles SIGTERM itself


def test_a_raising_ray_body_is_a_failed_attempt_retried_by_the_tasks_policy(
    tmp_path: Path,
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()

    def flaky(x: int) -> int:  # fails on its first try for each item, on the worker
        mark = marks / str(x)
        if not mark.exists():
            mark.touch()
            raise ValueError(f"first try of {x}")
        return x + 1

    def always(x: int) -> int:
        raise ValueError(f"never {x}")

    policy = Retrying(max_attempts=2, on=(ValueError,), base=0.01, jitter="none")
    failed = []
    for name, body, n, state in [("flaky", flaky, 2, "succeeded"), ("always", always, 1, "failed")]:
        store = SQLiteStore(tmp_path / f"{name}.db")
        with Runner(store, concurrency=2, handle_signals=False) as runner:
            report = runner.run(
                pipeline(name, task(body, executor="ray", retry=policy)).map(range(n))
            )
        assert report.by_state == {state: n}
        failed += [a for a in store.rows(RowKind.ATTEMPTS) if a["outcome"] == "failed"]
        store.close()
    # The first tries of `flaky`'s two items, and both tries of `always`: no more (Ray
    # retried nothing), each with the body's own error, not Ray's wrapper.
    assert sorted(a["task"] for a in failed) == ["always", "always", "flaky", "flaky"]
    assert {a["error_class"] for a in failed} == {"invalid"}
    assert all(a["error"].startswith("ValueError") for a in failed), failed[0]["error"]


def test_a_ray_worker_that_dies_is_a_failed_attempt_with_its_cause_retried_by_policy(
    tmp_path: Path,
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()

    def dies_once(x: int) -> int:  # the worker process exits mid-body on the first try
        mark = marks / str(x)
        if not mark.exists():
            mark.touch()
            os._exit(1)
        return x * 10

    crashed = ("failed", "unknown")
    cases = [
        ("no_policy", None, 7, "failed", [crashed]),  # recorded, never retried
        ("named", Retrying(max_attempts=2, on=(ray.exceptions.WorkerCrashedError,)), 8, "succeeded",
         [crashed, ("ok", None)]),
    ]  # fmt: skip
    for name, policy, item, state, expected in cases:
        store = SQLiteStore(tmp_path / f"{name}.db")
        with Runner(store, concurrency=1, handle_signals=False) as runner:
            steps = pipeline(name, task(dies_once, executor="ray", retry=policy))
            report = runner.run(steps.map([item]))
        assert report.by_state == {state: 1}
        rows = list(store.rows(RowKind.ATTEMPTS))
        store.close()
        assert [(a["outcome"], a["error_class"]) for a in rows] == expected
        assert rows[0]["error"].startswith("WorkerCrashedError"), rows[0]["error"]


def _lines(log: Path) -> list[tuple[str, int]]:
    if not log.exists():
        return []
    return [(job, int(x)) for job, x in (line.split() for line in log.read_text().splitlines())]


def _crunched(store_path: Path) -> set[int]:
    """The values the Ray step (seq 1) committed its output for: its inputs, which are
    ``parse``'s outputs (three times the item), as the child logs them."""
    store = SQLiteStore(store_path, read_only=True)
    try:
        done = {
            row["pipeline_id"]
            for row in store.rows(RowKind.TASKS)
            if row["seq"] == 1 and row["state"] == "succeeded"
        }
        return {3 * row["input"] for row in results(store) if row["pipeline_id"] in done}
    finally:
        store.close()


def _committed_so_far(store_path: Path) -> set[int]:
    """``_crunched`` while the child writes (nothing yet, or a store being created: none)."""
    try:
        return _crunched(store_path) if store_path.exists() else set()
    except Exception:
        return set()


def test_a_killed_driver_resumes_and_no_committed_ray_step_runs_again(
    tmp_path: Path, cluster: str
) -> None:
    store, log, n = tmp_path / "kill.db", tmp_path / "effects.log", 30
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "RAY_ADDRESS": cluster}
    command = [sys.executable, str(CHILD), str(store), str(log), str(n)]
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while len(_committed_so_far(store)) < 2 and child.poll() is None:
        assert time.monotonic() < deadline, "the child committed nothing in 90 s"
        time.sleep(0.05)  # real time: the child works in other processes
    assert child.poll() is None, "the child finished (or failed) before it could be killed"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    committed = _crunched(store)
    killed_job = {job for job, _ in _lines(log)}
    assert 0 < len(committed) < n
    resumed = subprocess.run(command, env=env, capture_output=True, timeout=110, check=False)
    assert resumed.returncode == 0, resumed.stderr.decode()
    assert resumed.stdout.decode().startswith("succeeded {'succeeded': 30}")
    resumed_values = [x for job, x in _lines(log) if job not in killed_job]
    assert [x for x in resumed_values if x in committed] == []  # no committed step ran again
    assert set(resumed_values) | committed == {3 * x for x in range(n)}  # the rest did
    reader = SQLiteStore(store, read_only=True)
    try:
        outputs = {row["input"]: row["output"] for row in results(reader)}
    finally:
        reader.close()
    assert outputs == {x: f"<{crunch(x * 3)}>" for x in range(n)}


def _holding(directory: str) -> list[int]:
    """The processes with a file open under ``directory`` (a Ray's temp dir: its logs)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            links = [
                os.readlink(f"/proc/{entry}/fd/{fd}") for fd in os.listdir(f"/proc/{entry}/fd")
            ]
        except OSError:
            continue  # gone, or not ours to read
        if any(link.startswith(directory) for link in links):
            pids.append(int(entry))
    return pids


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_a_local_ray_the_run_started_ends_with_the_command_agents_and_all(tmp_path: Path) -> None:
    # Started from a thread that then ended, a local Ray left its agents running a minute
    # after the command; the Runner now opens it from a thread that lives as long as it.
    (tmp_path / "p.yaml").write_text(
        "run: {store: p.db}\npipeline:\n  name: p\n  tasks:\n    - {use: echo, executor: ray}\n"
    )
    (tmp_path / "items.jsonl").write_text("".join(f'{{"id": {i}}}\n' for i in range(3)))
    temp = tempfile.mkdtemp(prefix="pyat-ray-", dir="/tmp")  # short: Ray's sockets live here
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {"RAY_TMPDIR": temp}
    try:
        command = [sys.executable, "-m", "pyattacker", "run", "-c", "p.yaml", "--input",
                   "items.jsonl"]  # fmt: skip
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        deadline = wall_time() + 15  # (the agents left behind lived 35-60 s)
        while _holding(temp):
            assert wall_time() < deadline, f"still running: {_holding(temp)}"
            time.sleep(0.2)
    finally:
        for pid in _holding(temp):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)
