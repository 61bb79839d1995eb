"""``attack -c PLAN``: what the command line overrides. A load typed on the command line
replaces the file's whole load model (never merged into it), a companion alone tunes the
file's load, and every boolean key a plan can set has a ``--no-X`` that switches it off.

The rule is checked on the values the command is handed (``from_plan_file`` inside the
command's own parsed context), and end to end against the echo server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest

from pyattacker.cli import run_cli
from pyattacker.cli._attack import attack_command
from pyattacker.cli._attack_plan_file import OFF_FLAGS, from_plan_file
from pyattacker.errors import ConfigError
from pyattacker.servers import EchoServerProcess

DOC_PLAN = "stages: ['1s:100/s', {duration: 1s, rate: 100/s}]\nquiet: true\n"


def resolved(tmp_path: Path, plan: str, *args: str) -> dict[str, Any]:
    """The options ``attack -c plan.yaml ARGS`` hands over, as the command sees them."""
    path = tmp_path / "plan.yaml"
    path.write_text(plan)
    argv = ["http://127.0.0.1:9/", "-c", str(path), *args]
    with attack_command.make_context("attack", argv) as ctx, ctx.scope():
        options = dict(ctx.params)
        urls = options.pop("urls")
        return from_plan_file(urls, options)[1]


def load_of(options: dict[str, Any]) -> dict[str, Any]:
    keys = ("rate", "stages", "clients", "think", "arrival", "sweep", "sweep_levels")
    return {key: options[key] for key in keys if options[key] is not None}


@pytest.mark.parametrize(
    ("plan", "args", "load"),
    [
        (DOC_PLAN, ["--rate", "50/s"], {"rate": "50/s"}),
        ("rate: 10/s\narrival: poisson\n", ["--clients", "2"], {"clients": 2}),
        ("clients: 2\nthink: 1s\n", ["--rate", "10/s"], {"rate": "10/s"}),
        ("sweep: concurrency=1,2\nsweep-levels: 3\n", ["--rate", "5/s"], {"rate": "5/s"}),
        ("rate: 10/s\n", ["--stages", "1s:5/s"], {"stages": "1s:5/s"}),
        ("clients: 4\n", ["--sweep", "rate=1/s,2/s"], {"sweep": "rate=1/s,2/s"}),
        (DOC_PLAN, ["--rate", "50/s", "--arrival", "poisson"],
         {"rate": "50/s", "arrival": "poisson"}),
        ("rate: 10/s\n", ["--clients", "2", "--think", "5ms"], {"clients": 2, "think": "5ms"}),
    ],
)  # fmt: skip
def test_a_load_on_the_command_line_replaces_the_files_whole_load(
    tmp_path: Path, plan: str, args: list[str], load: dict[str, Any]
) -> None:
    assert load_of(resolved(tmp_path, plan, *args)) == load


@pytest.mark.parametrize(
    ("plan", "args", "load"),
    [
        ("rate: 10/s\n", ["--arrival", "poisson"], {"rate": "10/s", "arrival": "poisson"}),
        ("clients: 2\n", ["--think", "5ms"], {"clients": 2, "think": "5ms"}),
        ("sweep: auto\n", ["--sweep-levels", "3"], {"sweep": "auto", "sweep_levels": 3}),
    ],
)
def test_a_companion_alone_tunes_the_files_load(
    tmp_path: Path, plan: str, args: list[str], load: dict[str, Any]
) -> None:
    assert load_of(resolved(tmp_path, plan, *args)) == load


def test_without_a_load_on_the_command_line_the_files_load_stands(tmp_path: Path) -> None:
    options = resolved(tmp_path, DOC_PLAN + "max-in-flight: 7\n", "--requests", "3")
    assert load_of(options) == {"stages": "1s:100/s,1s:100/s"}
    assert (options["requests_"], options["max_in_flight"]) == (3, 7)


def boolean_options() -> list[click.Option]:
    """The on/off flags (not the off flags of value options, --no-serve and --no-ray)."""
    return [
        p
        for p in attack_command.params
        if isinstance(p, click.Option) and p.is_bool_flag and p.name not in OFF_FLAGS
    ]


def test_every_boolean_flag_has_a_no_form() -> None:
    found = {p.name: p.secondary_opts for p in boolean_options()}
    assert {"quiet", "insecure", "llm", "abort_on_fail", "per_worker", "feedback"} <= set(found)
    assert all(
        no == [f"--no-{p.opts[-1][2:]}"] for p in boolean_options() for no in [p.secondary_opts]
    ), found


@pytest.mark.parametrize("option", boolean_options(), ids=lambda p: p.opts[-1])
def test_a_no_flag_switches_off_what_the_file_switched_on(
    tmp_path: Path, option: click.Option
) -> None:
    key = option.opts[-1][2:]
    assert resolved(tmp_path, f"{key}: true\n")[option.name or ""] is True
    assert (
        resolved(tmp_path, f"{key}: true\n", option.secondary_opts[0])[option.name or ""] is False
    )
    assert resolved(tmp_path, f"{key}: false\n", option.opts[-1])[option.name or ""] is True


def test_without_either_form_the_boolean_flags_keep_their_defaults() -> None:
    with attack_command.make_context("attack", ["http://127.0.0.1:9/"]) as ctx:
        found = {p.name: ctx.params[p.name or ""] for p in boolean_options()}
    assert found == {"quiet": False, "insecure": False, "llm": False, "abort_on_fail": False,
                     "per_worker": False, "feedback": False, "stream": True}  # fmt: skip


def test_help_shows_each_boolean_flag_with_its_no_form(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_cli(["attack", "--help"]) == 0
    text = capsys.readouterr().out
    for option in boolean_options():
        assert f"{option.opts[-1]} / {option.secondary_opts[0]}" in text, option.opts


# End to end: what the run sent, and what its report says the plan was.


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServerProcess]:
    with EchoServerProcess(delay="fixed:1ms") as server:
        yield server


def run(tmp_path: Path, plan: str, *args: str) -> tuple[int, dict[str, Any]]:
    path = tmp_path / "plan.yaml"
    path.write_text(plan)
    out = tmp_path / "r.json"
    code = run_cli(["attack", "-c", str(path), *args, "--json", str(out)])
    return code, json.loads(out.read_text()) if out.exists() else {}


@pytest.mark.slow
def test_the_docs_rate_example_sends_the_typed_rate_and_none_of_the_files_stages(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    echo.reset()
    plan = f"url: {echo.url}/\n{DOC_PLAN}"
    code, report = run(tmp_path, plan, "--rate", "50/s", "--duration", "1s")
    assert code == 0
    load = report["plan"]["load"]
    assert (load["model"], load["rate"], load["stages"]) == ("open", 50, [])
    assert echo.stats()["count"] == report["summary"]["sent"] == 50  # a ramp from 50: 75


@pytest.mark.slow
@pytest.mark.parametrize(
    ("plan", "args", "load"),
    [
        ("rate: 10/s\n", ["--clients", "2"], {"model": "closed", "clients": 2}),
        ("clients: 2\nthink: 1s\n", ["--rate", "200/s"], {"model": "open", "rate": 200}),
        ("sweep: concurrency=1,2\n", ["--rate", "200/s"], {"model": "open", "rate": 200}),
    ],
)
def test_the_typed_model_runs_where_the_file_had_another(
    echo: EchoServerProcess, tmp_path: Path, plan: str, args: list[str], load: dict[str, Any]
) -> None:
    echo.reset()
    code, report = run(tmp_path, f"url: {echo.url}/\nquiet: true\n{plan}", *args, "--requests", "6")
    assert code == 0
    assert "sweep" not in report  # a plain attack's report, even where the file swept
    assert {k: report["plan"]["load"][k] for k in load} == load
    assert echo.stats()["count"] == 6


@pytest.mark.slow
def test_no_quiet_and_no_insecure_undo_the_files_quiet_and_insecure(
    echo: EchoServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = f"url: {echo.url}/\nrate: 200/s\nrequests: 2\nquiet: true\ninsecure: true\n"
    code, report = run(tmp_path, plan)
    assert (code, report["plan"]["tls"]["insecure"]) == (0, True)
    assert "attacking" not in capsys.readouterr().err
    code, report = run(tmp_path, plan, "--no-quiet", "--no-insecure")
    assert (code, report["plan"]["tls"]) == (0, None)
    assert "attacking" in capsys.readouterr().err


# The report holds the plan: the file it came from, and what each mix line sends.


@pytest.mark.slow
def test_the_report_names_the_plan_file_and_what_each_inline_line_sends(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    (tmp_path / "rows.jsonl").write_text('{"id": 1}\n{"id": 2}\n')
    plan = (
        f"url: {echo.url}/\nrate: 200/s\nrequests: 4\nquiet: true\nkey: [sk-plan-1]\n"
        "header: ['Authorization: Bearer {key}']\ndata: rows.jsonl\ndata-order: random\n"
        "targets:\n  - {url: '/u/{id}', name: u, headers: {Cookie: sid=9, X-T: a}}\n"
        "  - {url: /o, method: POST, body: 'item=7&note=sk-plan-1'}\n"
    )
    code, report = run(tmp_path, plan)
    assert code == 0
    shown = report["plan"]
    assert shown["file"] == str(tmp_path / "plan.yaml")
    rows = {"file": str(tmp_path / "rows.jsonl"), "rows": 2, "order": "random"}
    assert shown["data"] == shown["mix"]["data"] == rows
    sends = [{k: line[k] for k in ("name", "method", "url", "headers", "body")}
             for line in shown["mix"]["lines"]]  # fmt: skip
    assert sends == [
        {"name": "u", "method": "GET", "url": "/u/{id}",
         "headers": ["Cookie: ***", "X-T: a"], "body": None},
        {"name": "POST /o", "method": "POST", "url": "/o", "headers": [],
         "body": "item=7&note=***"},
    ]  # fmt: skip
    assert "sk-plan-1" not in json.dumps(report)


@pytest.mark.slow
def test_a_scenario_plans_report_names_its_data_file(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    (tmp_path / "rows.jsonl").write_text('{"id": 1}\n')
    (tmp_path / "flows.py").write_text(
        "async def visit(client, row):\n    await client.get(f'/u/{row[\"id\"]}', name='u')\n"
    )
    plan = f"url: {echo.url}/\nrate: 200/s\nrequests: 2\nquiet: true\n"
    code, report = run(tmp_path, plan + "scenario: flows.py:visit\ndata: rows.jsonl\n")
    assert code == 0
    assert report["plan"]["scenario"] == "flows.py:visit"
    assert report["plan"]["data"] == {"file": str(tmp_path / "rows.jsonl"), "rows": 1,
                                      "order": "sequential"}  # fmt: skip


@pytest.mark.slow
def test_a_plan_files_reports_name_it_in_the_json_plan_and_the_markdown_title(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    plan = f"url: {echo.url}/\nrate: 200/s\nrequests: 2\nquiet: true\n"
    code, report = run(tmp_path, plan, "--markdown", str(tmp_path / "r.md"))
    assert code == 0
    path = str(tmp_path / "plan.yaml")
    assert report["plan"]["file"] == path
    assert f"as planned in {path}" in (tmp_path / "r.md").read_text().splitlines()[0]


@pytest.mark.slow
def test_each_sweep_levels_plan_names_the_plan_file(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    plan = f"url: {echo.url}/\nrequests: 3\nquiet: true\nsweep: rate=100/s,200/s\n"
    code, report = run(tmp_path, plan)
    assert code == 0
    files = [level["report"]["plan"]["file"] for level in report["levels"]]
    assert files == [str(tmp_path / "plan.yaml")] * 2


def test_a_plan_files_resolve_list_is_the_flags_and_a_typed_one_replaces_it(
    tmp_path: Path,
) -> None:
    plan = "rate: 5/s\nrequests: 1\nresolve: [a.test:80:127.0.0.1, b.test:443:127.0.0.2]\n"
    assert resolved(tmp_path, plan)["resolve"] == ("a.test:80:127.0.0.1", "b.test:443:127.0.0.2")
    one = "resolve: c.test:80:127.0.0.1\n"
    assert resolved(tmp_path, one)["resolve"] == ("c.test:80:127.0.0.1",)
    typed = resolved(tmp_path, plan, "--resolve", "d.test:80:127.0.0.1")
    assert typed["resolve"] == ("d.test:80:127.0.0.1",)


def test_no_serve_and_no_ray_switch_off_what_the_file_switched_on(tmp_path: Path) -> None:
    plan = "rate: 5/s\nrequests: 1\nserve: 9646\nray: 10.0.0.5:6379\nworkers: 2\n"
    kept = resolved(tmp_path, plan)
    assert (kept["serve"], kept["ray_address"]) == ("9646", "10.0.0.5:6379")
    off = resolved(tmp_path, plan, "--no-serve", "--no-ray")
    assert (off["serve"], off["ray_address"], off["workers"]) == (None, None, 2)
    assert "no_serve" not in off
    assert "no_ray" not in off


@pytest.mark.parametrize(("both", "named"), [(["--serve", "0", "--no-serve"], "--no-serve"),
                                             (["--ray", "--no-ray"], "--no-ray")])  # fmt: skip
def test_an_off_flag_beside_its_own_flag_exits_2_naming_it(
    both: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["attack", "http://127.0.0.1:9/", "--rate", "1/s", "--requests", "1", *both]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert f"error: {named}: cannot be combined with" in err, err


def test_an_off_key_in_a_plan_file_is_unknown(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown key 'no-serve'"):
        resolved(tmp_path, "rate: 5/s\nrequests: 1\nno-serve: true\n")
