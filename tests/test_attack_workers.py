"""``attack --workers``: one plan on several processes against the echo server on loopback.

No timed assertion: the machine is shared. Counts must equal the server's; the sent clock
is checked against the server's fixed delay from below only (every answer was held that
long), since how late a busy machine reads an answer is the benchmark's business
(``benchmarks/README.md``, "Issue 22: workers", has the accuracy with workers).
"""

from __future__ import annotations

import csv
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from pyattacker.attack import (
    AttackPlan,
    ClosedModel,
    OpenModel,
    SampleParts,
    Stage,
    WorkerOutcome,
    run_workers,
    worker_plan,
)
from pyattacker.attack._engine import Progress
from pyattacker.attack._processes import newest
from pyattacker.attack._result import RunTimes
from pyattacker.attack._tally import Tally
from pyattacker.attack._workers import run_worker
from pyattacker.cli import _attack_workers as cli_workers
from pyattacker.cli import run_cli
from pyattacker.clock import wall_time
from pyattacker.errors import ConfigError
from pyattacker.report import attack_text
from pyattacker.servers import EchoServerProcess, LlmServerProcess

pytestmark = pytest.mark.slow

DELAY = 0.020
# A histogram percentile may read up to 1/2048 of the value low (Histogram's error bound).
LOW = 1 - 2**-11
PATIENCE_S = 60.0


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServerProcess]:
    with EchoServerProcess(delay=f"fixed:{DELAY * 1000:g}ms") as server:
        yield server


def test_two_workers_send_the_whole_schedule_once_and_count_what_the_server_served(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    echo.reset()
    out = tmp_path / "r.json"
    argv = ["attack", echo.url, "--rate", "100/s", "--arrival", "poisson", "--requests", "150"]
    assert run_cli([*argv, "--workers", "2", "--per-worker", "--json", str(out), "-q"]) == 0
    report = json.loads(out.read_text())
    served = echo.stats()["count"]
    summary = report["summary"]
    assert summary["scheduled"] == summary["sent"] == report["total"]["requests"] == served == 150
    each = report["workers"]["each"]
    # runs of 2 (as many as come in 20 ms at 100/s): 0-1, 4-5, ..., 148-149 to worker 0
    assert [w["sent"] for w in each] == [76, 74]
    assert sum(w["completed"] for w in each) == 150
    assert all(w["state"] == "finished" and w["cpu_s"] > 0 for w in each)
    # the report's CPU is every worker's and the driver's (forking, reading, merging)
    assert report["cpu"]["process_s"] > sum(w["cpu_s"] for w in each)
    # The server held every request DELAY: no sent-clock figure can be below it.
    assert report["total"]["latency_s"]["sent"]["min"] >= DELAY * LOW


def test_poisson_arrivals_reach_two_workers_in_runs_and_every_one_is_sent_once(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    """At 4,000/s a run is 32 arrivals (a quarter of a worker's 128 connections; 80 come in
    20 ms), so of 150 worker 0 takes 0-31, 64-95 and 128-149 (86 in all) and worker 1 the
    other 64; the server serves each once."""
    echo.reset()
    out, rows = tmp_path / "r.json", tmp_path / "rows.jsonl"
    argv = ["attack", echo.url, "--rate", "4000/s", "--arrival", "poisson", "--requests", "150",
            "--workers", "2", "--per-worker", "--json", str(out), "--samples", str(rows),
            "-q"]  # fmt: skip
    assert run_cli(argv) == 0
    report = json.loads(out.read_text())
    summary = report["summary"]
    assert summary["sent"] == report["total"]["requests"] == echo.stats()["count"] == 150
    assert [w["sent"] for w in report["workers"]["each"]] == [86, 64]
    numbers = sorted(json.loads(line)["request"] for line in rows.read_text().splitlines())
    assert numbers == list(range(150))


def test_a_worker_killed_mid_attack_is_named_lost_and_the_others_finish(
    echo: EchoServerProcess,
) -> None:
    echo.reset()
    plan = AttackPlan.build([echo.url + "/"], OpenModel(rate=60), duration=4.0)
    killed: list[int] = []

    def kill_worker_1(last: list[WorkerOutcome | None]) -> None:
        if killed or any(o is None for o in last):
            return  # kill once, after each worker has sent a snapshot
        for child in multiprocessing.active_children():
            if child.name == "pyattacker-worker-1" and child.pid is not None:
                os.kill(child.pid, signal.SIGKILL)
                killed.append(child.pid)

    result = run_workers(plan, 2, on_worker_progress=kill_worker_1, per_worker=True)
    assert killed, "worker 1 was never seen running"
    assert result.lost == [1]
    kept, lost = result.workers
    assert (kept.state, lost.state) == ("finished", "lost")
    assert lost.counted  # its requests up to its last snapshot are in the report
    assert kept.scheduled == 120  # its whole share of 240 arrivals
    assert result.scheduled == kept.scheduled + lost.scheduled < 240
    assert result.total.requests <= echo.stats()["count"]
    assert result.to_dict()["workers"]["lost"] == [1]


def test_a_lost_workers_requests_after_its_last_snapshot_are_counted_from_its_progress(
    echo: EchoServerProcess,
) -> None:
    # Killed once its progress (twice a second) is ahead of its snapshot (every two
    # seconds): those requests are in no figure, and the report says how many at least.
    plan = AttackPlan.build([echo.url + "/"], OpenModel(rate=60), duration=4.0)
    seen: list[int] = []

    def kill_worker_1_between_snapshots(last: list[WorkerOutcome | None]) -> None:
        one = last[1]
        if seen or one is None or one.progress is None or one.progress.sent <= one.tally.sent:
            return
        for child in multiprocessing.active_children():
            if child.name == "pyattacker-worker-1" and child.pid is not None:
                os.kill(child.pid, signal.SIGKILL)
                seen.append(one.progress.sent - one.tally.sent)

    result = run_workers(plan, 2, on_worker_progress=kill_worker_1_between_snapshots)
    assert seen, "worker 1's progress never got ahead of its snapshot"
    assert result.lost == [1]
    lost = result.workers[1]
    assert lost.sent_after_snapshot is not None
    assert lost.sent_after_snapshot >= seen[0] > 0
    assert lost.snapshot_at_s is not None
    assert lost.heard_at_s is not None
    assert 0 <= lost.snapshot_at_s < lost.heard_at_s
    [line] = [x for x in attack_text(result).splitlines() if x.startswith("WORKER LOST")]
    assert f"at least {lost.sent_after_snapshot} more requests, not in these figures" in line


def test_ctrl_c_stops_every_worker_and_reports_what_ran_with_exit_130(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    echo.reset()
    out, rows = tmp_path / "r.json", tmp_path / "rows.csv"
    command = [sys.executable, "-m", "pyattacker", "attack", echo.url, "--rate", "100/s"]
    command += ["--duration", "60s", "--workers", "2", "--json", str(out), "-q"]
    command += ["--samples", str(rows), "--per-worker"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = wall_time() + PATIENCE_S
    while echo.stats()["count"] < 20:  # both workers under way (arrivals alternate)
        assert proc.poll() is None, proc.communicate()
        assert wall_time() < deadline, "the attack never began"
        time.sleep(0.05)  # real time: another process is at work
    proc.send_signal(signal.SIGINT)  # to the driver alone: it tells its workers
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    report = json.loads(out.read_text())
    assert report["summary"]["stop_reason"] == "interrupted"
    assert (report["workers"]["count"], report["workers"]["lost"]) == (2, [])
    assert [w["stop_reason"] for w in report["workers"]["each"]] == ["interrupted"] * 2
    assert "worker 1: stopped (interrupted);" in err  # not "finished"
    # What was in flight was cancelled and counted; every answer counted OK was served.
    assert report["summary"]["sent"] >= 20
    assert report["total"]["outcomes"].get("ok", 0) <= echo.stats()["count"]
    # every request counted has its row, the workers' parts joined and removed
    with rows.open(newline="") as f:
        assert len(list(csv.DictReader(f))) == report["total"]["requests"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "rows.csv"]


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", "100000"])
def test_a_bad_workers_value_exits_2_and_sends_nothing(
    value: str, echo: EchoServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    echo.reset()
    argv = ["attack", echo.url, "--rate", "10/s", "--requests", "5", "--workers", value]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert "--workers" in err
    assert "Traceback" not in err
    assert echo.stats()["count"] == 0


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (["--connections", "1"], "--workers"),  # fewer connections than workers
        (["--warmup", "1", "--requests", "1"], "--warmup"),  # as in one process
    ],
)
def test_a_plan_the_workers_cannot_share_is_refused_naming_the_flag(
    extra: list[str],
    field: str,
    echo: EchoServerProcess,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    echo.reset()
    argv = ["attack", echo.url, "--rate", "10/s", "--requests", "5", "--workers", "2", *extra]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert f"error: {field}" in err, err
    assert "attacking" not in err  # refused before the start line
    assert echo.stats()["count"] == 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("cores", "load", "workers"),
    [
        (1, ["--rate", "40/s"], 1),  # one usable core: one worker, and --per-worker shows it
        (2, ["--clients", "1"], 1),  # one client cannot be shared
        (4, ["--rate", "40/s", "--connections", "3"], 3),  # nor three connections by four
        (2, ["--rate", "40/s"], 2),
    ],
)
def test_workers_auto_takes_the_cores_the_plan_can_be_shared_by(
    cores: int,
    load: list[str],
    workers: int,
    echo: EchoServerProcess,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cli_workers, "usable_cores", lambda: cores)
    echo.reset()
    out = tmp_path / "r.json"
    argv = ["attack", echo.url, *load, "--requests", "20", "--workers", "auto", "--per-worker"]
    assert run_cli([*argv, "--json", str(out), "-q"]) == 0
    report = json.loads(out.read_text())
    assert report["workers"]["count"] == len(report["workers"]["each"]) == workers
    assert report["summary"]["sent"] == echo.stats()["count"] == 20


def test_a_plan_is_shared_clients_connections_and_requests_divided() -> None:
    url = "http://127.0.0.1:9/"
    closed = AttackPlan.build([url], ClosedModel(clients=5), requests=11, connections=9)
    parts = [worker_plan(closed, i, 2) for i in range(2)]
    assert [p.load.clients for p in parts if isinstance(p.load, ClosedModel)] == [3, 2]
    assert [p.requests for p in parts] == [6, 5]
    assert [p.connections for p in parts] == [5, 4]
    opened = AttackPlan.build([url], OpenModel(rate=10), requests=7)
    assert worker_plan(opened, 1, 2).requests == 7  # the whole schedule, every other arrival
    with pytest.raises(ConfigError, match="clients"):
        worker_plan(closed, 0, 6)


# Each step asks the echo server for a status of its own (the server's count per status is
# its count per step); every fourth flow (by arrival index) fails at browse.
FLOWS = textwrap.dedent(
    """
    async def shop(client):
        await client.post("/login", name="login", headers={"x-echo-status": "201"})
        browse = "500" if client.flow % 4 == 3 else "202"
        await client.get("items", name="browse", headers={"x-echo-status": browse})
        await client.post("/cart", name="checkout", headers={"x-echo-status": "203"})
    """
)


def _flows_run(echo: EchoServerProcess, tmp_path: Path, workers: int) -> tuple[dict, dict]:
    """One --scenario run on ``workers`` processes: its report and the server's counts;
    every step's sample row has a number of its own."""
    echo.reset()
    flows = tmp_path / "flows.py"
    flows.write_text(FLOWS)
    out, rows = tmp_path / f"flows-{workers}.json", tmp_path / f"rows-{workers}.jsonl"
    argv = ["attack", echo.url, "--scenario", f"{flows}:shop", "--rate", "200/s", "--arrival",
            "poisson", "--seed", "7", "--requests", "41", "--workers", str(workers), "-q",
            "--json", str(out), "--samples", str(rows)]  # fmt: skip
    assert run_cli(argv) == 1  # some steps failed
    numbers = [json.loads(line)["request"] for line in rows.read_text().splitlines()]
    assert len(set(numbers)) == len(numbers) == 113
    return json.loads(out.read_text()), echo.stats()["statuses"]


def test_a_scenario_on_two_workers_counts_the_flows_and_steps_of_one_process_and_the_server(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    one, served_one = _flows_run(echo, tmp_path, 1)
    two, served_two = _flows_run(echo, tmp_path, 2)
    assert served_one == served_two == {"201": 41, "202": 31, "203": 31, "500": 10}
    for report in (one, two):
        names = {name: stats["requests"] for name, stats in report["names"].items()}
        assert names == {"login": 41, "browse": 41, "checkout": 31}
        assert report["summary"]["sent"] == report["total"]["requests"] == 113
    flows = [dict(r["flows"]) for r in (one, two)]
    assert [f.pop("duration_s")["count"] for f in flows] == [31, 31]
    assert flows[0] == flows[1]
    assert flows[1]["failed_by_step"] == {"browse": 10}
    assert (flows[1]["scheduled"], flows[1]["started"], flows[1]["completed"]) == (41, 41, 31)
    assert two["workers"] == {"count": 2, "lost": [], "on_ray": False}


@pytest.mark.parametrize("warmup", ["12", "0.1s"])
def test_a_warmup_on_two_workers_leaves_out_the_arrivals_one_process_leaves_out(
    warmup: str, echo: EchoServerProcess, tmp_path: Path
) -> None:
    reports = []
    for workers in ("1", "2"):
        echo.reset()
        out = tmp_path / f"w{workers}.json"
        argv = ["attack", echo.url, "--rate", "200/s", "--arrival", "poisson", "--seed", "5",
                "--requests", "60", "--warmup", warmup, "--workers", workers, "-q",
                "--json", str(out)]  # fmt: skip
        assert run_cli(argv) == 0
        report = json.loads(out.read_text())
        served = echo.stats()["count"]
        assert report["warmup"]["sent_attempts"] + report["total"]["sent_attempts"] == served
        reports.append(report)
    one, two = (r["warmup"] for r in reports)
    assert one.pop("skipped_s") == pytest.approx(two.pop("skipped_s"))
    assert one == two
    assert one["scheduled"] == (12 if warmup == "12" else one["scheduled"]) > 0
    assert (
        reports[0]["total"]["requests"] == reports[1]["total"]["requests"] == 60 - one["scheduled"]
    )


@pytest.mark.parametrize("warmup", ["3", "0.25s"])
def test_a_scenarios_warmup_on_two_workers_sets_apart_the_flows_one_process_sets_apart(
    warmup: str, echo: EchoServerProcess, tmp_path: Path
) -> None:
    # A warmup's flows (the first N arrivals, or those in its span) are set apart with
    # every step they send, on one process and on two workers alike.
    flows = tmp_path / "flows.py"
    flows.write_text(FLOWS)
    reports = []
    for workers in ("1", "2"):
        echo.reset()
        out = tmp_path / f"w{workers}.json"
        argv = ["attack", echo.url, "--scenario", f"{flows}:shop", "--rate", "20/s",
                "--requests", "10", "--warmup", warmup, "--workers", workers, "-q",
                "--json", str(out)]  # fmt: skip
        assert run_cli(argv) in (0, 1)  # (one flow in four fails its browse step: exit 1)
        report = json.loads(out.read_text())
        assert (
            report["warmup"]["sent_attempts"] + report["total"]["sent_attempts"]
            == (echo.stats()["count"])
        )
        reports.append(report)
    for report in reports:
        apart = report["flows"]["warmup"]
        assert apart == (3 if warmup == "3" else apart) > 0
        assert report["flows"]["scheduled"] == report["flows"]["started"] == 10 - apart
        assert report["warmup"]["scheduled"] == apart
    one, two = reports
    assert one["flows"]["warmup"] == two["flows"]["warmup"]
    assert one["total"]["requests"] == two["total"]["requests"]
    assert one["warmup"]["sent_attempts"] == two["warmup"]["sent_attempts"]


def test_samples_from_two_workers_are_joined_into_one_file_in_worker_order(
    echo: EchoServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    echo.reset()
    rows = tmp_path / "rows.csv"
    argv = ["attack", echo.url, "--rate", "200/s", "--requests", "61", "--workers", "2", "-q",
            "--samples", str(rows)]  # fmt: skip
    assert run_cli(argv) == 0
    with rows.open(newline="") as f:
        numbers = [int(row["request"]) for row in csv.DictReader(f)]
    # worker 0's rows (even arrivals), then worker 1's (odd), each in the order they ended
    assert sorted(numbers[:31]) == list(range(0, 61, 2))
    assert sorted(numbers[31:]) == list(range(1, 61, 2))
    assert len(numbers) == echo.stats()["count"] == 61
    assert [p.name for p in tmp_path.iterdir()] == ["rows.csv"]  # the parts are removed
    assert "--samples" not in capsys.readouterr().err


def test_a_lost_workers_samples_are_kept_as_far_as_written_and_named(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    echo.reset()
    plan = AttackPlan.build([echo.url + "/"], OpenModel(rate=60), duration=4.0)
    samples = SampleParts(tmp_path / "rows.jsonl")
    killed: list[int] = []

    def kill_worker_1(last: list[WorkerOutcome | None]) -> None:
        if killed or any(o is None or o.tally.total.requests == 0 for o in last):
            return  # kill once, after each worker has counted something
        for child in multiprocessing.active_children():
            if child.name == "pyattacker-worker-1" and child.pid is not None:
                os.kill(child.pid, signal.SIGKILL)
                killed.append(child.pid)

    result = run_workers(plan, 2, on_worker_progress=kill_worker_1, taps=[samples])
    assert result.lost == [1]
    lines = samples.path.read_text().splitlines()
    numbers = [json.loads(line)["request"] for line in lines]
    odd = [n for n in numbers if n % 2]
    # its rows were flushed with each snapshot: at least those its last snapshot counted
    assert len(odd) >= result.workers[1].completed > 0
    assert len(numbers) - len(odd) == result.workers[0].completed == 120
    assert samples.notes == [
        f"--samples: worker 1 was lost: its {len(odd)} rows written before it died are in "
        f"{samples.path}; the rows it had not written yet are missing"
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]


def test_goodput_on_two_workers_counts_what_one_process_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = "sk-test-0123456789"
    with LlmServerProcess(models="m", ttft="fixed:5ms", itl="fixed:1ms", output_tokens=4,
                          api_keys=key) as llm:  # fmt: skip
        sections = []
        for workers in ("1", "2"):
            out = tmp_path / f"g{workers}.json"
            argv = ["attack", "--llm", f"{llm.url}/v1", "--model", "m", "--shape", "30:4",
                    "--key", key, "--rate", "50/s", "--requests", "30", "-q", "--json",
                    str(out), "--workers", workers, "--goodput", "ttft<10s,e2e<1us"]  # fmt: skip
            assert run_cli(argv) == 0
            sections.append(json.loads(out.read_text())["goodput"])
    one, two = sections
    for section in sections:
        assert (section["requests"], section["good"], section["not_ok"]) == (30, 0, 0)
        assert section["missed"] == {"ttft < 10s": 0, "e2e < 1us": 30}
    one.pop("span_s"), two.pop("span_s"), one.pop("rate_per_s"), two.pop("rate_per_s")
    assert one == two


def test_a_worker_hands_over_its_progress_every_tick_and_its_whole_count_every_few(
    echo: EchoServerProcess,
) -> None:
    # Pickling the whole count holds the worker's loop, so it goes every snapshot_every
    # seconds; the progress (the live view's counts) every tick in between.
    plan = AttackPlan.build([echo.url + "/"], OpenModel(rate=50), duration=2.0)
    kinds: list[str] = []
    outcome = run_worker(
        plan, 0, 1, time.monotonic() + 0.2,
        on_snapshot=lambda o: kinds.append("final" if o.final else "snapshot"),
        on_progress=lambda p: kinds.append("progress"),
        progress_every=0.1, snapshot_every=0.4,
    )  # fmt: skip
    assert outcome.final
    assert outcome.tally.total.requests == 100
    assert len(kinds) >= 5, kinds
    assert (
        kinds
        == (["snapshot"] + ["progress"] * 3) * (len(kinds) // 4)
        + (["snapshot"] + ["progress"] * 3)[: len(kinds) % 4]
    )


def test_the_live_view_reads_a_workers_newest_progress_beside_its_last_snapshot() -> None:
    tally = Tally(origin=0.0, window=1.0, late_after=0.01, per_target=False, on_record=None)
    old = Progress(0.5, 5.0, 5, 5, 4, 1, 0, 0, 0, None, None, None, None)
    new = replace(old, elapsed=1.0, sent=9)
    times = RunTimes(0.0, 0.0, 0.0, 0.0, 0.0)
    last = WorkerOutcome(0, tally, times, {}, None, None, 0.1, False, progress=old)
    assert newest(last, new) == replace(last, progress=new)
    assert newest(last, None) is last
    assert newest(None, new) is None
    final = replace(last, final=True, progress=None)
    assert newest(final, new) is final  # a final count has no progress to refresh


def test_a_workers_progress_carries_its_current_loop_lag_and_cpu_seconds(
    echo: EchoServerProcess,
) -> None:
    plan = AttackPlan.build([echo.url + "/"], OpenModel(rate=50), duration=1.0)
    seen: list[Progress] = []
    run_worker(plan, 0, 1, time.monotonic() + 0.2, on_progress=seen.append,
               on_snapshot=lambda o: seen.append(o.progress) if o.progress else None,
               progress_every=0.1, snapshot_every=0.4)  # fmt: skip
    assert len(seen) >= 5
    # the loop's probe runs from the start instant on (before it, no lag is measured,
    # and the elapsed time is not yet counted from the start)
    started = [p for p in seen if 0.05 < p.elapsed < 60]
    assert len(started) >= 4
    assert all(p.loop_lag_s is not None and p.loop_lag_s >= 0 for p in started)
    cpu = [p.cpu_s for p in seen]
    assert all(c is not None and c > 0 for c in cpu)
    assert cpu == sorted(cpu)  # CPU seconds spent so far, rising


def test_served_per_worker_progress_json_says_where_each_worker_is(
    echo: EchoServerProcess,
) -> None:
    from pyattacker.report import LiveServer, serve_workers

    plan = AttackPlan.build([echo.url + "/"], OpenModel(rate=100), duration=1.5)
    server = LiveServer()
    told: list[int] = []
    serve_workers(plan, 2, server, per_worker=True,
                  on_worker_progress=lambda lasts: told.append(len(lasts)))  # fmt: skip
    assert told  # the terminal's view was told each round
    assert set(told) == {2}
    workers = server.progress_json()["workers"]
    assert [w["index"] for w in workers] == [0, 1]
    running = [w for w in workers if w["state"] == "running"]
    assert running, workers
    assert all(w["loop_lag_s"] is not None and w["cpu_s"] > 0 for w in running)


@pytest.mark.parametrize(
    ("load", "n", "on_ray", "each"),
    [
        (OpenModel(rate=2000), 2, False, "1000/s each"),
        (
            OpenModel(stages=(Stage(10, 500), Stage(10, 6000))),
            2,
            False,
            "at up to 6000/s have 3000/s each",
        ),
        (OpenModel(rate=8000), 2, False, None),  # 4,000/s a worker: workers pay from here
        (OpenModel(rate=2000), 1, False, None),  # one process
        (OpenModel(rate=2000), 2, True, None),  # Ray: other machines' cores
        (ClosedModel(clients=8), 2, False, None),  # no planned rate to share
    ],
)
def test_workers_with_few_arrivals_each_are_noted_as_costing_more_than_one_process(
    load: OpenModel | ClosedModel, n: int, on_ray: bool, each: str | None
) -> None:
    plan = AttackPlan.build(["http://127.0.0.1:9/"], load, duration=20)
    note = cli_workers.sparse_note(plan, n, on_ray=on_ray)
    if each is None:
        assert note is None
    else:
        assert note is not None
        assert each in note
        assert "more CPU per request than one process" in note


def test_the_docs_quote_the_sparse_workers_note_as_the_cli_prints_it() -> None:
    plan = AttackPlan.build(["http://127.0.0.1:9/"], OpenModel(rate=2000), duration=1)
    note = cli_workers.sparse_note(plan, 2, on_ray=False)
    assert note is not None
    docs = Path(__file__).parent.parent / "docs" / "attack.md"
    assert note in docs.read_text(encoding="utf-8")


def test_the_cli_notes_workers_too_sparse_to_pay_on_stderr(
    echo: EchoServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["attack", echo.url, "--rate", "40/s", "--requests", "4", "-q", "--workers"]
    assert run_cli([*argv, "2"]) == 0
    assert "note: 2 workers at 40/s have 20/s each" in capsys.readouterr().err
    assert run_cli([*argv, "1"]) == 0
    assert "note:" not in capsys.readouterr().err
