"""``benchmarks/compare.py``'s pure parts: reading each tool's printed output, and the
open model's truth of the stall case. (The comparison itself is a measurement: run it.)"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "compare.py"


def load_compare() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_compare", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


compare = load_compare()

WRK = """\
Running 5s test @ http://127.0.0.1:1/
  Latency Distribution
     50%  820.00us
     75%   20.44ms
     90%   20.54ms
     99%    1.02s
  1017 requests in 5.01s, 17.23KB read
"""

HEY = """\
Latency distribution:
  10% in 0.0204 secs
  50% in 0.0207 secs
  90% in 0.0212 secs
  99% in 0.0232 secs

Status code distribution:
  [200]\t192 responses
  [503]\t3 responses

Error distribution:
  [5]\tGet "http://127.0.0.1:1/": EOF
"""

LOCUST = """\
Type     Name          # reqs      # fails |    Avg     Min     Max    Med |   req/s
         Aggregated       550     0(0.00%) |     22      20      62     22 |  200.98
Type     Name     50%    66%    75%    80%    90%    95%    98%    99%  99.9% 99.99%   100% # reqs
GET      /         22     22     23     23     25     26     27     54     63     63     63    550
         Aggregated 22    22     23     23     25     26     27     54     63     63     63    550
"""


def test_wrk_figures_read_every_unit_and_the_request_count() -> None:
    figures, count = compare.wrk_figures(WRK)
    assert figures == pytest.approx({"p50": 820e-6, "p90": 0.02054, "p99": 1.02})
    assert count == 1017


def test_hey_counts_every_status_and_every_error() -> None:
    figures, count = compare.hey_figures(HEY)
    assert figures == pytest.approx({"p50": 0.0207, "p90": 0.0212, "p99": 0.0232})
    assert count == 192 + 3 + 5


def test_locust_figures_come_from_the_aggregated_row_of_its_printed_summary() -> None:
    figures, count = compare.locust_figures(LOCUST)
    assert figures == pytest.approx({"p50": 0.022, "p90": 0.025, "p99": 0.054})
    assert count == 550


def test_output_a_tool_did_not_print_is_unknown_not_zero() -> None:
    for parse in (compare.wrk_figures, compare.hey_figures, compare.locust_figures):
        figures, count = parse("connection refused\n")
        assert figures == {"p50": None, "p90": None, "p99": None}
        assert count is None


def test_the_stall_truth_holds_arrivals_during_the_stall_until_it_ends() -> None:
    case = compare.Case("stall", "fixed:10ms", rate=200, duration=5, stall=1)
    truth = compare.stalled_truth(case)
    # A fifth of the arrivals land in the 1 s stall, waiting up to its end: p90 is half
    # way through it, p99 near its start; the rest are held their 10 ms.
    assert truth["p50"] == pytest.approx(0.010)
    assert truth["p90"] == pytest.approx(0.5, abs=0.02)
    assert truth["p99"] == pytest.approx(0.95, abs=0.02)


def test_a_tool_that_is_not_installed_is_reported_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compare.shutil, "which", lambda name: None)
    table = compare.runners(None)
    assert {tool: table[tool] for tool in ("wrk", "hey", "k6", "vegeta", "siege")} == dict.fromkeys(
        ("wrk", "hey", "k6", "vegeta", "siege"), "not installed"
    )
    assert str(table["locust"]).startswith("not installed (not on PATH, nor at ")
    assert callable(table["ours"])


def test_closed_tools_get_the_connections_littles_law_gives() -> None:
    assert compare.closed_n(compare.Case("c", "fixed:20ms", rate=200, duration=1)) == 4
    assert compare.closed_n(compare.Case("c", "fixed:1ms", rate=10, duration=1)) == 1


def refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """``parse_args``'s message for ``argv``, which it must refuse with exit code 2."""
    with pytest.raises(SystemExit) as exited:
        compare.parse_args(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--delay", "nope"], "--delay"),
        (["--rate", "0"], "--rate must be above 0"),
        (["--rate", "nan"], "--rate must be above 0"),
        (["--duration", "-1"], "--duration must be above 0"),
        (["--rounds", "0"], "--rounds must be 1 or more"),
        (["--stall", "-1"], "--stall must be 0 (no stall case) or more"),
        (["--out", "/nonexistent/x.json"], "--out: the folder /nonexistent does not exist"),
        (["--tools", ","], "--tools"),
        (["--tools", "ours,jmeter"], "jmeter"),
        (["--locust", "/nonexistent/locust"], "--locust /nonexistent/locust is not an"),
    ],
)
def test_a_bad_setting_exits_2_naming_its_flag_before_anything_runs(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert words in refusal(argv, capsys)


def test_an_output_that_is_a_folder_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert "--out" in refusal(["--out", str(tmp_path)], capsys)


def test_good_settings_are_kept_and_stall_0_runs_no_stall_case(tmp_path: Path) -> None:
    out = tmp_path / "compare.json"
    settings = compare.parse_args(["--stall", "0", "--tools", "ours", "--out", str(out)])
    assert [case.name for case in settings.cases()] == ["steady"]
    assert settings.tools == ["ours"]
    assert settings.out == out
    assert not out.exists()  # checked, not written
    assert [case.name for case in compare.parse_args([]).cases()] == ["steady", "stall"]


def test_help_shows_every_default_and_what_stall_0_means(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        compare.parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"(default {compare.DEFAULT_DELAY})" in text
    assert f"(default {','.join(compare.TOOLS)})" in text
    assert "0: no stall case" in text
    assert "PEERS_DIR" in text


def test_the_peers_locust_is_found_under_peers_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    locust = tmp_path / "locust" / "bin" / "locust"
    locust.parent.mkdir(parents=True)
    locust.write_text("#!/bin/sh\n")
    locust.chmod(0o755)
    monkeypatch.setattr(compare.shutil, "which", lambda name: None)
    monkeypatch.setenv("PEERS_DIR", str(tmp_path))
    assert compare.find_locust(None) == str(locust)
    monkeypatch.setenv("PEERS_DIR", str(tmp_path / "elsewhere"))
    assert compare.find_locust(None) is None
    assert str(tmp_path / "elsewhere") in str(compare.runners(None)["locust"])


def test_a_case_where_no_tool_is_installed_says_so_and_starts_no_server(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(compare.shutil, "which", lambda name: None)
    monkeypatch.setattr(compare, "EchoServerProcess", None)  # starting one would fail
    cases = compare.parse_args(["--tools", "k6,siege"]).cases()
    done = compare.run_round(cases, ["k6", "siege"], None)
    out = capsys.readouterr().out
    assert out.count("no tool ran: none of --tools is installed here") == 2
    assert "server p99 per tool" not in out
    assert [case["absent"] for case in done] == [["k6: not installed", "siege: not installed"]] * 2


def test_wrks_clock_label_gets_a_footnote_once_and_other_clocks_none() -> None:
    def run(tool: str, clock: str) -> Any:
        return compare.Run(tool, "1", "closed", clock, "cmd", 1, 1, {}, {})

    wrk = [run("wrk", compare.WRK_CLOCK), run("wrk", compare.WRK_CLOCK)]
    notes = compare.clock_notes([run("hey", "sent"), *wrk])
    assert notes == [f'clock "{compare.WRK_CLOCK}": {compare.CLOCK_NOTES[compare.WRK_CLOCK]}']
    assert compare.clock_notes([run("hey", "sent"), run("ours", "scheduled")]) == []
