"""The command line: the error boundary, --version/--help, and the kernel demo."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

from pyattacker import __version__
from pyattacker.cli import cli, run_cli
from pyattacker.errors import ConfigError, PyAttackerError


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"pyattacker, version {__version__}"


def test_python_dash_m_runs_the_same_cli() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pyattacker", "--version"], capture_output=True, text=True
    )
    assert (out.returncode, out.stdout.strip()) == (0, f"pyattacker, version {__version__}")


def test_help_lists_every_command_and_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("attack", "demo", "export", "kernel-demo", "report"):
        assert command in out
    assert "130 interrupted" in out


def test_an_unknown_command_is_a_usage_error_with_exit_code_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_cli(["attack-the-moon"]) == 2
    assert "No such command" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("error", "code", "message"),
    [
        (ConfigError("must be >= 1", field="--jobs", hint="e.g. 100"), 2, "--jobs: must be >= 1"),
        (PyAttackerError("the run failed"), 1, "the run failed"),
        (KeyboardInterrupt(), 130, "interrupted"),
    ],
)
def test_the_error_boundary_maps_our_exceptions_to_exit_codes_and_one_line(
    error: BaseException, code: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    @cli.command("raise-for-test")
    def boom() -> None:
        raise error

    try:
        assert run_cli(["raise-for-test"]) == code
    finally:
        cli.commands.pop("raise-for-test")
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_a_bug_of_ours_prints_a_traceback_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    @cli.command("bug-for-test")
    def bug() -> None:
        raise ZeroDivisionError("oops")

    try:
        assert run_cli(["bug-for-test"]) == 1
    finally:
        cli.commands.pop("bug-for-test")
    err = capsys.readouterr().err
    assert "ZeroDivisionError" in err
    assert "bug in pyattacker" in err


def test_the_kernel_demo_compares_algorithms_on_the_same_world(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["kernel-demo", "--algorithms", "immediate,wait", "--jobs", "60", "--json"]
    assert run_cli(args) == 0
    rows = {row["algorithm"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"immediate", "wait"}
    for row in rows.values():
        assert row["jobs_done"] + row["jobs_failed"] == 60
        assert row["leaked"] == 0
    # With more workers than capacity, only waiting finishes the work.
    assert rows["wait"]["jobs_done"] > rows["immediate"]["jobs_done"]
    assert rows["immediate"]["unavailable"] > 0
    assert rows["wait"]["unavailable"] == 0


def test_the_kernel_demo_is_reproducible_for_a_seed(capsys: pytest.CaptureFixture[str]) -> None:
    runs = []
    for _ in range(2):
        assert run_cli(["kernel-demo", "--algorithms", "backoff", "--jobs", "40", "--json"]) == 0
        (row,) = json.loads(capsys.readouterr().out)
        row.pop("wall_s")
        runs.append(row)
    assert runs[0] == runs[1]


def test_the_kernel_demo_prints_a_table_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["kernel-demo", "--algorithms", "wait", "--jobs", "20"]) == 0
    out = capsys.readouterr().out
    assert "20 jobs x 2 calls" in out
    assert "wait" in out


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--algorithms", "fastest"], "--algorithms"),
        (["--algorithms", ","], "--algorithms"),
        (["--jobs", "0"], "--jobs"),
        (["--workers", "-1"], "--workers"),
    ],
)
def test_bad_kernel_demo_input_names_the_option_and_exits_2(
    args: list[str], field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["kernel-demo", *args]) == 2
    err = capsys.readouterr().err
    assert field in err
    assert "Traceback" not in err


def test_every_command_has_help_text() -> None:
    ctx = click.Context(cli)
    names = cli.list_commands(ctx)
    assert {"attack", "bench", "demo", "echo-server", "export", "run"} <= set(names)
    for name in names:
        command = cli.get_command(ctx, name)
        assert command is not None, name
        assert command.help, name
        for param in command.params:
            if isinstance(param, click.Option):
                assert param.help, f"{name} {param.opts}"
