"""``pyattacker attack --scenario FILE.py:FUNCTION``: scripted flows (docs/attack.md,
"Scripted flows").

The option's declaration and the one step the command takes with it: load the scenario
(its file runs now, before any traffic) into the plan, every mistake a
:class:`~pyattacker.errors.ConfigError` naming ``--scenario`` (exit 2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

import click

from pyattacker.attack import AttackPlan, RowProvider, load_scenario
from pyattacker.errors import ConfigError

__all__ = ["scenario_option", "with_scenario"]

F = TypeVar("F", bound=Callable[..., object])

_HELP = (
    "Run a scripted flow per arrival (per turn with --clients): an `async def NAME(client, "
    "row)` in FILE.py whose steps, e.g. `await client.get('/login', name='login')`, are the "
    "requests, each reported by name on both clocks; a failed step ends its flow. --rate "
    "and --requests then count flows; paths resolve against URL."
)


def scenario_option(command: F) -> F:
    """Declare ``--scenario`` on ``command`` (its value arrives as ``scenario``)."""
    return click.option("--scenario", metavar="FILE.py:FUNCTION", help=_HELP)(command)


def with_scenario(
    plan: AttackPlan, spec: str | None, *, rows: RowProvider | None = None
) -> AttackPlan:
    """``plan`` running the flows ``spec`` names (``plan`` itself without one); ``rows``
    gives each flow its row of data (``None``: no rows)."""
    if spec is None:
        return plan
    try:
        return replace(plan, scenario=load_scenario(spec, rows=rows))
    except ConfigError as exc:
        raise ConfigError(exc.message, field="--scenario", hint=exc.hint) from None
