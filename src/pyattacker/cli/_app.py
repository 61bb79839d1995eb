"""The ``pyattacker`` command group; each subcommand lives in its own module."""

from __future__ import annotations

import click

from pyattacker._version import __version__
from pyattacker.cli._attack import attack_command
from pyattacker.cli._bench import bench_command
from pyattacker.cli._demo import demo
from pyattacker.cli._echo import echo_server
from pyattacker.cli._kernel_demo import kernel_demo
from pyattacker.cli._run import run_command
from pyattacker.cli._run_commands import export_command, report_command

__all__ = ["cli"]


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, "-V", "--version", prog_name="pyattacker")
def cli() -> None:
    """Drive large workloads against rate-limited API providers through pools of
    endpoints and keys.

    \b
    Exit codes: 0 all succeeded, 1 some work failed, 2 bad input, 130 interrupted.
    """


cli.add_command(attack_command)
cli.add_command(bench_command)
cli.add_command(demo)
cli.add_command(echo_server)
cli.add_command(export_command)
cli.add_command(kernel_demo)
cli.add_command(report_command)
cli.add_command(run_command)
