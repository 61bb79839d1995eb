"""``attack --ray`` on one local Ray of 2 CPUs (started once for the module): two actors
against the echo server count what the server counted, the merge is exact, percentiles
are not below the server's fixed delay, each actor's clock offset comes with its
uncertainty and its node, ``--samples`` rows arrive in one file on this machine,
``--serve`` serves the actors' merged snapshots here, and what cannot work is refused with
exit 2."""

from __future__ import annotations

import csv
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from live_helpers import served_workers_run
from pyattacker.attack import (
    ACTOR_PREFIX,
    AttackPlan,
    OpenModel,
    Progress,
    SampleParts,
    WorkerActor,
    WorkerOutcome,
    merge_outcomes,
    on_common_clock,
    run_ray_workers,
)
from pyattacker.cli import run_cli
from pyattacker.report._metrics import AttackMetrics
from pyattacker.servers import EchoServerProcess

ray = pytest.importorskip("ray")

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.xdist_group("ray")]

DELAY_S = 0.005


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Iterator[None]:
    """One local Ray of 2 CPUs for the module (the caller's session: pyattacker uses it)."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)  # fmt: skip
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def server() -> Iterator[EchoServerProcess]:
    with EchoServerProcess(delay=f"fixed:{DELAY_S * 1000:g}ms") as echo:
        yield echo


def test_two_ray_actors_count_what_the_server_counted_with_their_clock_offsets(
    server: EchoServerProcess,
) -> None:
    before = server.stats()["count"]
    plan = AttackPlan.build([server.url + "/"], OpenModel(rate=200), requests=200)
    result = run_ray_workers(plan, 2, per_worker=True)
    assert result.sent == server.stats()["count"] - before == 200
    assert result.failed_requests == 0
    assert result.lost == []
    assert [w.sent for w in result.workers] == [100, 100]  # arrival k to actor k mod 2
    for q in (50, 90, 99):
        assert result.total.service_time.percentile(q) >= DELAY_S
        assert result.total.latency.percentile(q) >= DELAY_S
    report = result.to_dict()["workers"]
    for each in report["each"]:  # one machine: its clocks agree within the uncertainty
        assert each["clock_uncertainty_s"] > 0
        assert abs(each["clock_offset_s"]) <= each["clock_uncertainty_s"] + 0.01
    assert report["clock_uncertainty_s"] == max(e["clock_uncertainty_s"] for e in report["each"])
    windows = result.to_dict()["windows"]
    assert sum(w["completed"] for w in windows) == 200  # both actors' windows on one clock


def test_ray_actors_started_by_wall_clock_merge_on_their_common_clock_bucket_by_bucket(
    server: EchoServerProcess,
) -> None:
    plan = AttackPlan.build([server.url + "/"], OpenModel(rate=200), requests=60)
    actor = ray.remote(num_cpus=1, max_concurrency=4)(WorkerActor)
    actors = [actor.remote(plan, i, 2, None) for i in range(2)]
    start = max(ray.get([a.clock.remote() for a in actors])) + 1.0
    outcomes = ray.get([a.run.remote(start) for a in actors])
    for a in actors:
        ray.kill(a)
    # Each actor's requests are in the merge, bucket by bucket (merging consumes them).
    whole = outcomes[0].tally.total.latency.copy()
    whole.merge(outcomes[1].tally.total.latency)
    merged = merge_outcomes(plan, [on_common_clock(o) for o in outcomes])
    assert merged.sent == 60
    assert merged.total.latency.to_dict() == whole.to_dict()
    assert merged.total.latency.count == 60
    assert sum(w["completed"] for w in merged.to_dict()["windows"]) == 60  # one set of windows


def test_attack_ray_from_the_cli_reports_each_workers_node_and_clock_offset(
    server: EchoServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.json"
    args = ["attack", server.url + "/", "--rate", "100/s", "--requests", "60", "--quiet"]
    code = run_cli([*args, "--workers", "2", "--per-worker", "--json", str(report), "--ray"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "Ray workers: 2; clock offsets from this machine" in err
    workers = json.loads(report.read_text())["workers"]
    assert [w["sent"] for w in workers["each"]] == [30, 30]
    assert all("clock_offset_s" in w and w["clock_uncertainty_s"] > 0 for w in workers["each"])
    # Each worker's node (one here: this machine's), in the JSON and on its line.
    here = ray.get_runtime_context().get_node_id()
    ip = ray.util.get_node_ip_address()
    assert [(w["node_id"], w["node_ip"]) for w in workers["each"]] == [(here, ip)] * 2
    for index in (0, 1):
        line = next(x for x in err.splitlines() if x.startswith(f"worker {index}: "))
        assert f"; node {ip} (id {here[:8]}), clock offset " in line


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--workers", "3", "--ray"], "--workers"),  # more workers than the 2 CPUs
        (["--workers", "2", "--samples", "s.txt", "--ray"], "--samples"),  # no format
        (["--ray", "http://127.0.0.1:9/"], "--ray"),  # the URL taken as the address
    ],
)
def test_attack_ray_refuses_what_cannot_work_with_exit_2(
    extra: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.json"
    args = ["attack", "http://127.0.0.1:9/", "--rate", "10/s", "--requests", "4", "--quiet"]
    code = run_cli([*args, "--json", str(report), *extra])
    err = capsys.readouterr().err
    assert code == 2, err
    assert named in err
    assert not report.exists()


def test_a_stop_asked_by_the_driver_stops_every_actor_and_reports_what_ran(
    server: EchoServerProcess,
) -> None:
    before = server.stats()["count"]
    plan = AttackPlan.build([server.url + "/"], OpenModel(rate=100), duration=60.0)
    seen: list[int] = []

    def enough(progress: Progress) -> str | None:  # as Ctrl-C: every actor's stop()
        seen.append(progress.sent)
        return "enough" if progress.sent > 0 else None

    result = run_ray_workers(plan, 2, on_progress=enough)
    assert result.stop_reason == "enough"
    assert 0 < result.sent < 6000
    answered = server.stats()["count"] - before
    # What was in flight at the stop is cancelled and counted as such: the server may
    # or may not have answered it; every other request it answered.
    assert result.sent - result.failed_requests <= answered <= result.sent
    assert result.lost == []
    assert seen


def test_an_actor_killed_mid_run_is_lost_with_its_requests_up_to_its_last_snapshot(
    server: EchoServerProcess, tmp_path: Path
) -> None:
    before = server.stats()["count"]
    plan = AttackPlan.build([server.url + "/"], OpenModel(rate=100), duration=3.0)
    killed: list[str] = []

    def kill_worker_0(outcomes: list[WorkerOutcome | None]) -> None:
        # Once its own snapshot counts a request (the whole's may count only actor 1's).
        first = outcomes[0]
        if killed or first is None or first.tally.total.latency.count == 0:
            return
        for name in ray.util.list_named_actors():
            if name.startswith(ACTOR_PREFIX) and name.endswith("-0"):
                ray.kill(ray.get_actor(name))
                killed.append(name)

    samples = SampleParts(tmp_path / "rows.jsonl")
    result = run_ray_workers(plan, 2, on_worker_progress=kill_worker_0, per_worker=True,
                             taps=[samples])  # fmt: skip
    assert killed
    assert result.lost == [0]
    worker = result.to_dict()["workers"]["each"][0]
    assert worker["state"] == "lost"
    assert worker["partial"] is True  # kept up to the snapshot fetched before the kill
    # where its figures stop, and what its newest progress said it sent after that
    [lost] = result.to_dict()["workers"]["lost_each"]
    assert lost["index"] == 0
    assert 0 <= lost["snapshot_at_s"] <= lost["last_heard_at_s"]
    assert lost["sent_after_snapshot_at_least"] >= 0
    assert result.workers[1].state == "finished"
    assert result.workers[1].sent == 150
    assert result.sent <= server.stats()["count"] - before
    # its rows were taken after each snapshot was fetched: at least those it counted
    numbers = [json.loads(line)["request"] for line in samples.path.read_text().splitlines()]
    even = [n for n in numbers if n % 2 == 0]
    assert len(even) >= result.workers[0].completed > 0
    assert len(numbers) - len(even) == 150
    assert len(samples.notes) == 1
    assert samples.notes[0].startswith(f"--samples: worker 0 was lost: its {len(even)} rows")
    assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]


FLOWS = textwrap.dedent(
    """
    async def shop(client):
        await client.post("/login", name="login", headers={"x-echo-status": "201"})
        browse = "500" if client.flow % 4 == 3 else "202"
        await client.get("items", name="browse", headers={"x-echo-status": browse})
    """
)


def test_a_scenario_and_a_warmup_run_on_ray_actors_as_in_one_process(
    server: EchoServerProcess, tmp_path: Path
) -> None:
    flows = tmp_path / "flows.py"  # on this machine only: its code travels with the plan
    flows.write_text(FLOWS)
    reports = []
    for where in (["--workers", "1"], ["--workers", "2", "--ray"]):
        server.reset()
        out = tmp_path / f"{len(where)}.json"
        argv = ["attack", server.url, "--scenario", f"{flows}:shop", "--rate", "200/s",
                "--requests", "40", "--warmup", "0.05s", "-q", "--json", str(out)]  # fmt: skip
        argv += where
        assert run_cli(argv) == 1  # some steps failed
        reports.append((json.loads(out.read_text()), server.stats()["statuses"]))
    (one, served_one), (two, served_two) = reports
    assert served_one == served_two == {"201": 40, "202": 30, "500": 10}
    assert two["workers"]["count"] == 2
    for key in ("scheduled", "started", "completed", "failed_by_step", "cancelled"):
        assert one["flows"][key] == two["flows"][key], key
    assert one["warmup"]["scheduled"] == two["warmup"]["scheduled"] == 10  # 0 .. 45 ms
    steps = [{n: s["requests"] for n, s in r["names"].items()} for r in (one, two)]
    assert steps[0] == steps[1]


def test_taps_travel_to_ray_actors_and_their_counts_come_back_added_up(
    server: EchoServerProcess,
) -> None:
    plan = AttackPlan.build([server.url + "/"], OpenModel(rate=200), requests=40)
    metrics = AttackMetrics()
    result = run_ray_workers(plan, 2, taps=[metrics])
    assert dict(metrics.requests) == {"ok": 40} == result.total.by_outcome


def test_samples_of_two_ray_actors_arrive_in_one_file_on_this_machine_in_worker_order(
    server: EchoServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.reset()
    rows, report = tmp_path / "rows.csv", tmp_path / "report.json"
    argv = ["attack", server.url, "--rate", "200/s", "--requests", "61", "--workers", "2",
            "-q", "--samples", str(rows), "--json", str(report), "--ray"]  # fmt: skip
    assert run_cli(argv) == 0, capsys.readouterr().err
    with rows.open(newline="") as f:
        numbers = [int(row["request"]) for row in csv.DictReader(f)]
    # worker 0's rows (even arrivals), then worker 1's (odd), each in the order they ended
    assert sorted(numbers[:31]) == list(range(0, 61, 2))
    assert sorted(numbers[31:]) == list(range(1, 61, 2))
    total = json.loads(report.read_text())["total"]["requests"]
    assert len(numbers) == server.stats()["count"] == total == 61
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "rows.csv"]
    assert "--samples" not in capsys.readouterr().err


def test_a_served_ray_attack_shows_the_merged_actors_live_then_the_final_report(
    server: EchoServerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.reset()
    # The attack runs in a child process: it joins this module's Ray rather than start one.
    monkeypatch.setenv("RAY_ADDRESS", ray.get_runtime_context().gcs_address)
    flags = ("--rate", "200/s", "--duration", "3s", "--workers", "2", "--ray")
    report, _ = served_workers_run(server.url, tmp_path, lambda: server.stats()["count"], *flags)
    assert report["total"]["requests"] == 600
