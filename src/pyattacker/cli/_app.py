"""The ``pyattacker`` command group; each subcommand lives in its own module.

A subcommand's module is imported only when that command runs (or ``--help`` lists them
all): ``pyattacker bench`` need not load the HTTP client and the load engine, nor
``pyattacker attack`` the benchmark. That halves the start-up of every command.
"""

from __future__ import annotations

import importlib

import click

from pyattacker._version import __version__

__all__ = ["cli"]

#: command name -> "module:attribute" of its click command
_COMMANDS = {
    "attack": "pyattacker.cli._attack:attack_command",
    "bench": "pyattacker.cli._bench:bench_command",
    "compare": "pyattacker.cli._compare:compare_command",
    "demo": "pyattacker.cli._demo:demo",
    "echo-server": "pyattacker.cli._echo:echo_server",
    "export": "pyattacker.cli._run_commands:export_command",
    "kernel-demo": "pyattacker.cli._kernel_demo:kernel_demo",
    "llm-server": "pyattacker.cli._llm_server:llm_server",
    "plugins": "pyattacker.cli._plugins:plugins_command",
    "report": "pyattacker.cli._run_commands:report_command",
    "resume": "pyattacker.cli._run_config:resume_command",
    "run": "pyattacker.cli._run:run_command",
    "selftest": "pyattacker.cli._selftest:selftest_command",
    "serve": "pyattacker.cli._serve_store:serve_command",
    "validate": "pyattacker.cli._run_config:validate_command",
    "watch": "pyattacker.cli._watch:watch_command",
}


class _LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*_COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in _COMMANDS:
            module, _, attribute = _COMMANDS[cmd_name].partition(":")
            command = getattr(importlib.import_module(module), attribute)
            assert isinstance(command, click.Command), cmd_name
            assert command.name == cmd_name, cmd_name
            self.add_command(command)
        return self.commands.get(cmd_name)


@click.group(
    cls=_LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, "-V", "--version", prog_name="pyattacker")
def cli() -> None:
    """Drive large workloads against rate-limited API providers through pools of
    endpoints and keys.

    \b
    Exit codes: 0 all succeeded, 1 some work failed, 2 bad input, 130 interrupted;
    3 a worker of attack --workers died; 99 a threshold of attack --threshold breached.
    """
