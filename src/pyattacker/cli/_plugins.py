"""``pyattacker plugins``: what installed distributions add to pyattacker (entry points),
and which of them fail to load.

Listing reads the installed distributions' metadata and imports nothing; ``--check``
imports each entry point once and shows the error of each that fails (a broken plugin
never stops a run that does not name it). See docs/run.md, "Plugins".
"""

from __future__ import annotations

import json

import click

from pyattacker import _plugins

__all__ = ["plugins_command"]

_EPILOG = """\b
Examples:
  pyattacker plugins
  pyattacker plugins --check          (import each one; show the errors)
  pyattacker plugins --json

\b
A distribution adds to pyattacker by entry points in its pyproject.toml:
  [project.entry-points."pyattacker.tasks"]
  shout = "mypkg.tasks:shout"          (then `use: shout` in a config file)
  [project.entry-points."pyattacker.algorithms"]
  coinflip = "mypkg.algos:CoinFlip"    (then `algorithm: coinflip` in a pool)
Exit codes: 0 listed (and, with --check, every plugin loaded), 1 some plugin failed to load.
"""


@click.command("plugins", epilog=_EPILOG)
@click.option("--check", is_flag=True, help="Import every plugin and show the ones that fail.")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON on stdout.")
def plugins_command(check: bool, as_json: bool) -> int:
    """List the installed plugins: group, name, target and distribution."""
    if check:
        _plugins.load_all()
    found = _plugins.installed()
    if as_json:
        rows = [
            {"group": p.group, "name": p.name, "value": p.value,
             "distribution": p.distribution, "version": p.version, "error": p.error}
            for p in found
        ]  # fmt: skip
        click.echo(json.dumps({"groups": _plugins.GROUPS, "plugins": rows}, indent=2))
    elif not found:
        click.echo("No plugins installed. Groups: " + ", ".join(_plugins.GROUPS))
    else:
        for group in _plugins.GROUPS:
            mine = [p for p in found if p.group == group]
            if mine:
                click.echo(f"{group}  ({_plugins.GROUPS[group]})")
            for p in mine:
                state = f"  FAILED: {p.error}" if p.error else ""
                click.echo(f"  {p.name:<20} {p.value:<36} {p.distribution} {p.version}{state}")
    return 1 if any(p.error for p in found) else 0
