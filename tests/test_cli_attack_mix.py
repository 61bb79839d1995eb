"""``attack --targets``, ``--data`` and ``-c PLAN`` end to end against the echo server:
counts per name equal what the server answered, plan files with the command line on top,
and bad input refused (exit 2) before any request and any file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyattacker.cli import run_cli
from pyattacker.servers import EchoServerProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServerProcess]:
    with EchoServerProcess(delay="fixed:1ms") as server:
        yield server


# Each line asks the echo server for its own status, so the server's count per status is
# its count per line: the truth the report's counts per name are held to.
THREE_LINES = [
    {"url": "/users/1", "name": "user", "weight": 3, "headers": {"x-echo-status": "201"}},
    {"method": "POST", "url": "/orders", "body": {"item": 7}, "headers": {"x-echo-status": "202"}},
    {"url": "{origin}/health", "weight": 1},
]


def write_lines(path: Path, lines: list[dict[str, object]], origin: str) -> Path:
    text = "\n".join(json.dumps(line).replace("{origin}", origin) for line in lines)
    path.write_text(text + "\n")
    return path


def test_counts_per_name_equal_what_the_server_answered_per_line(
    echo: EchoServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    echo.reset()
    targets = write_lines(tmp_path / "targets.jsonl", THREE_LINES, echo.url)
    out = tmp_path / "r.json"
    argv = ["attack", "--targets", str(targets), "--rate", "300/s", "--requests", "600"]
    assert run_cli([*argv, "-q", "--seed", "4", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert f"a mix of 3 requests ({targets}) on {echo.url}/," in capsys.readouterr().out
    truth = echo.stats()["statuses"]
    names = {name: figures["requests"] for name, figures in report["names"].items()}
    assert names == {
        "user": truth["201"], "POST /orders": truth["202"], "GET /health": truth["200"],
    }  # fmt: skip
    assert sum(names.values()) == echo.stats()["count"] == 600
    assert report["targets"].keys() == {echo.url + "/"}  # no URL given: the lines' host
    assert {line["name"] for line in report["plan"]["mix"]["lines"]} == set(names)
    # the same seed draws the same lines (arrival by arrival, whatever the timing)
    echo.reset()
    again = tmp_path / "again.json"
    assert run_cli([*argv, "-q", "--seed", "4", "--json", str(again)]) == 0
    assert {n: f["requests"] for n, f in json.loads(again.read_text())["names"].items()} == names


def test_names_are_reported_in_the_order_of_the_targets_file(
    echo: EchoServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    targets = tmp_path / "targets.jsonl"
    targets.write_text('{"url": "/z", "name": "zeta"}\n{"url": "/a", "name": "alpha"}\n')
    out = tmp_path / "r.json"
    argv = [f"{echo.url}/", "--targets", str(targets), "--rate", "50/s", "--requests", "6"]
    # seed 2 draws the second line for the first arrival: first seen, alpha comes first
    assert run_cli(["attack", *argv, "--seed", "2", "--json", str(out), "-q"]) == 0
    report = json.loads(out.read_text())
    assert list(report["names"]) == list(report["name_windows"]) == ["zeta", "alpha"]
    text = capsys.readouterr().out
    assert text.index("name: zeta") < text.index("name: alpha")


def test_data_rows_fill_the_template_in_turn(echo: EchoServerProcess, tmp_path: Path) -> None:
    echo.reset()
    rows = tmp_path / "rows.csv"
    rows.write_text("id,status\n1,200\n2,203\n3,203\n")
    argv = ["attack", echo.url + "/users/{id}", "-H", "x-echo-status: {status}", "--data"]
    argv += [str(rows), "--rate", "200/s", "--requests", "90", "-q"]
    assert run_cli(argv) == 0
    assert echo.stats()["statuses"] == {"200": 30, "203": 60}


def test_a_plan_file_gives_the_flags_and_the_command_line_wins(
    echo: EchoServerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ECHO_URL", echo.url)
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "url: ${ECHO_URL}/\nrate: 200/s\nrequests: 80\nquiet: true\nseed: 2\n"
        "targets:\n  - {url: /a, name: a, weight: 3}\n  - {url: /b, name: b}\n"
    )
    out = tmp_path / "r.json"
    echo.reset()
    assert run_cli(["attack", "-c", str(plan), "--requests", "40", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert echo.stats()["count"] == report["plan"]["requests"] == 40  # the flag's, not 80
    assert (report["plan"]["seed"], report["plan"]["load"]["rate"]) == (2, 200)
    assert set(report["names"]) == {"a", "b"}


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_toml_and_json_plans_with_thresholds_from_the_file_exit_99_on_a_breach(
    echo: EchoServerProcess, tmp_path: Path, suffix: str
) -> None:
    settings = {"urls": [echo.url + "/"], "rate": "100/s", "requests": 20, "quiet": True,
                "threshold": ["p50(latency) < 1us"]}  # fmt: skip
    plan = tmp_path / f"plan{suffix}"
    if suffix == ".json":
        plan.write_text(json.dumps(settings))
    else:
        plan.write_text(
            f'urls = ["{echo.url}/"]\nrate = "100/s"\nrequests = 20\nquiet = true\n'
            'threshold = ["p50(latency) < 1us"]\n'
        )
    echo.reset()
    out = tmp_path / "r.json"
    assert run_cli(["attack", "-c", str(plan), "--json", str(out)]) == 99
    assert json.loads(out.read_text())["thresholds"]["passed"] is False
    # a --threshold typed on the command line replaces the file's list
    assert run_cli(["attack", "-c", str(plan), "--threshold", "error_rate < 1%"]) == 0


@pytest.mark.parametrize(
    ("files", "args", "says"),
    [
        ({"p.yaml": "rate: 5/s\nduraton: 1s\n"}, ["-c", "p.yaml"], "-c: p.yaml: unknown key"),
        ({"p.yaml": "rate: [1, 2]\nrequests: 1\n"}, ["-c", "p.yaml"], "-c: p.yaml: rate"),
        ({"p.yaml": "rate: 5/s\nrequests: many\n"}, ["-c", "p.yaml"], "-c: p.yaml: requests"),
        ({"p.yaml": "rate: 5/s\nquiet: 3\nrequests: 1\n"}, ["-c", "p.yaml"], "-c: p.yaml: quiet"),
        ({"p.yaml": "- rate\n"}, ["-c", "p.yaml"], "-c: p.yaml: a plan is a mapping"),
        ({"p.ini": "rate=1"}, ["-c", "p.ini"], "-c: p.ini: cannot tell the format"),
        ({"p.yaml": "rate: 5/s\nrequests: 1\nbody: ${NOT_SET_ANYWHERE}\n"}, ["-c", "p.yaml"],
         "-c: p.yaml: body: ${NOT_SET_ANYWHERE} is not set"),
        ({"p.toml": "rate = \n"}, ["-c", "p.toml"], "-c: p.toml: cannot read it"),
        ({"t.jsonl": '{"url": "/a", "wieght": 2}\n'}, ["--targets", "t.jsonl"],
         "--targets: t.jsonl line 1: key 'wieght'"),
        ({"t.jsonl": '{"url": "/a", "weight": -1}\n'}, ["--targets", "t.jsonl"],
         "--targets: t.jsonl line 1: key 'weight'"),
        ({"t.jsonl": '{"url": "http://127.0.0.1:9/"}\n'}, ["--targets", "t.jsonl"],
         "url: t.jsonl line 1: url"),
        ({}, ["--targets", "none.jsonl"], "--targets"),
        ({"t.jsonl": '{"url": "/u/{id}"}\n', "d.jsonl": '{"id": 1}\n{"di": 2}\n'},
         ["--targets", "t.jsonl", "--data", "d.jsonl"], "--data: d.jsonl row 2 has no field 'id'"),
        ({"d.jsonl": '{"id": 1}\n[2]\n'}, ["--data", "d.jsonl"], "--data: d.jsonl line 2"),
        ({"t.yaml": "targets:\n  - {url: /a, weight: 0}\n"}, ["-c", "t.yaml"],
         "--targets: t.yaml: targets[0]: key 'weight'"),
    ],
)  # fmt: skip
def test_bad_input_exits_2_naming_the_field_and_writes_nothing(
    echo: EchoServerProcess,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    files: dict[str, str],
    args: list[str],
    says: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    echo.reset()
    argv = ["attack", echo.url + "/", *args, "--json", "r.json", "--rate", "5/s"]
    argv += ["--requests", "2"]
    if "-c" in args:  # the file's rate and requests are the ones under test
        argv = ["attack", echo.url + "/", *args, "--json", "r.json"]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert f"error: {says}" in err, err
    assert "Traceback" not in err
    assert echo.stats()["count"] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(files)


@pytest.mark.parametrize("flag", ["--targets", "--data"])
def test_a_file_flag_left_without_its_file_says_it_took_the_next_flag(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["attack", "http://127.0.0.1:9/", flag, "--rate", "5/s", "--requests", "1"]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert f"error: {flag}: cannot read '--rate'" in err
    assert f"{flag} needs a file; '--rate' looks like the next flag" in err


@pytest.mark.parametrize(
    ("flag", "text"), [("--data", '{"id": 1}\n'), ("--targets", '{"url": "/a"}\n')]
)
def test_an_llm_attack_refuses_a_mix_naming_the_flag_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, text: str
) -> None:
    given = tmp_path / "given.jsonl"
    given.write_text(text)
    argv = ["attack", "--llm", "http://127.0.0.1:9/v1", "--model", "m", "--shape", "10:5"]
    assert run_cli([*argv, "--rate", "5/s", "--requests", "1", flag, str(given)]) == 2
    err = capsys.readouterr().err
    assert f"error: {flag}: an LLM attack builds its own requests" in err, err
    assert "--prompts FILE.jsonl" in err


@pytest.mark.parametrize(
    ("lines", "says"),
    [
        (['{"url": "/a"}'], "error: URL: no target URL given"),
        (['{"url": "http://127.0.0.1:9/a"}', '{"url": "http://127.0.0.1:10/b"}'],
         "error: --targets: the targets file names 2 hosts"),
    ],
)  # fmt: skip
def test_without_a_url_the_lines_must_name_one_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: list[str], says: str
) -> None:
    targets = tmp_path / "t.jsonl"
    targets.write_text("\n".join(lines) + "\n")
    assert run_cli(["attack", "--targets", str(targets), "--rate", "5/s", "--requests", "1"]) == 2
    assert says in capsys.readouterr().err


def test_a_plan_reads_stage_lists_header_objects_and_files_next_to_it(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    plans = tmp_path / "plans"
    plans.mkdir()
    (plans / "mix.jsonl").write_text('{"url": "/u/{id}", "name": "u"}\n')
    (plans / "rows.jsonl").write_text('{"id": 1}\n{"id": 2}\n')
    plan = plans / "plan.yaml"
    plan.write_text(
        f"urls: [{echo.url}/]\nstages: ['0.2s:100/s', {{duration: 0.2s, rate: 50/s}}]\n"
        "headers: {X-Team: load}\ntargets: mix.jsonl\ndata: rows.jsonl\nquiet: true\n"
    )
    out = tmp_path / "r.json"
    echo.reset()
    assert run_cli(["attack", "-c", str(plan), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["plan"]["load"]["stages"] == [[0.2, 100.0], [0.2, 50.0]]
    assert report["plan"]["headers"] == ["X-Team"]
    assert report["plan"]["mix"]["data"] == {"file": str(plans / "rows.jsonl"), "rows": 2,
                                             "order": "sequential"}  # fmt: skip
    assert report["names"]["u"]["requests"] == echo.stats()["count"] > 0
