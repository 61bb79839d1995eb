"""``pyattacker compare`` end to end: an attack on a server holding requests 2 ms and then
6 ms (median) is a regression; a rerun against the same server is not. The attacks run the
real engine on virtual time (``simulated_reports``), so a busy machine cannot add noise
between two runs that the comparison has no way to see. Bench reports compare too; bad
input exits 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyattacker.cli import run_cli
from simulated_reports import simulated_attack_report


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("compare")
    return {
        "fast": simulated_attack_report(0.002, 1, where / "fast.json"),
        "slow": simulated_attack_report(0.006, 2, where / "slow.json"),
        "slow_again": simulated_attack_report(0.006, 3, where / "slow_again.json"),
    }


def test_a_slower_server_is_flagged_as_a_regression(
    reports: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cmp.json"
    argv = ["compare", str(reports["fast"]), str(reports["slow"]), "--json", str(out)]
    assert run_cli([*argv, "--fail-on-regression"]) == 1
    assert "WORSE" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["kind"] == "attack"
    latency = {
        f"{stat}({name})" for stat in ("mean", "p50") for name in ("latency", "service_time")
    }
    assert latency <= set(data["regressions"]), data["regressions"]
    assert run_cli(argv) == 0  # without --fail-on-regression it only reports


@pytest.mark.parametrize("seed", [10, 20, 30, 40, 50])
def test_reruns_against_the_same_server_are_never_flagged_and_a_tripled_latency_always_is(
    seed: int, tmp_path: Path
) -> None:
    def regressions(a: Path, b: Path) -> list[str]:
        out = tmp_path / "cmp.json"
        run_cli(["compare", str(a), str(b), "--json", str(out)])
        found: list[str] = json.loads(out.read_text())["regressions"]
        return found

    same = [simulated_attack_report(0.006, seed + i, tmp_path / f"s{i}.json") for i in (1, 2)]
    slower = simulated_attack_report(0.018, seed + 3, tmp_path / "slower.json")
    assert regressions(*same) == []
    assert "mean(latency)" in regressions(same[0], slower)


def test_a_rerun_with_the_same_server_settings_is_not_flagged(
    reports: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compare", str(reports["slow"]), str(reports["slow_again"]), "--fail-on-regression"]
    code = run_cli(argv)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "regressions beyond the noise: none" in out


def test_json_to_stdout_is_only_json(
    reports: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["compare", str(reports["fast"]), str(reports["fast"]), "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["regressions"] == []
    assert "compare (attack reports)" in captured.err


def test_two_bench_reports_compare_by_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small = ["bench", "--algorithms", "wait", "--seeds", "2", "--jobs", "40", "--horizon", "30"]
    small += ["--jobs-parallel", "1", "-q"]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert run_cli([*small, "--concurrency", "4", "--json", str(a)]) == 0
    assert run_cli([*small, "--concurrency", "4", "--json", str(b)]) == 0
    capsys.readouterr()
    assert run_cli(["compare", str(a), str(b), "--fail-on-regression"]) == 0
    out = capsys.readouterr().out
    assert "compare (bench reports)" in out
    assert "jobs_done[wait]" in out
    assert "regressions beyond the noise: none" in out  # the seeded world repeats exactly


@pytest.mark.parametrize(
    ("content", "says"),
    [("not json", "not JSON"), ("[1, 2]", "not an attack or bench JSON report")],
)
def test_a_file_that_is_not_a_report_exits_2_naming_it(
    reports: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str,
    says: str,
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert run_cli(["compare", str(reports["fast"]), str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err
    assert says in err


def test_a_missing_file_and_an_unwritable_json_path_exit_2(
    reports: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["compare", str(reports["fast"]), str(tmp_path / "none.json")]) == 2
    argv = ["compare", str(reports["fast"]), str(reports["fast"]), "--json", str(tmp_path)]
    assert run_cli(argv) == 2
    assert "--json" in capsys.readouterr().err
