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

__all__ = ["flows_of", "scenario_option", "with_scenario"]

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


def flows_of(plan: AttackPlan, spec: str | None, targets: object) -> AttackPlan:
    """``plan`` running the flows ``spec`` names, each given its row of ``--data`` (the
    plan's mix, which then carries no lines of its own); ``plan`` itself without a
    scenario. A ``--targets`` mix beside a scenario is refused: the flow's code says what
    each step sends."""
    if spec is None:
        return plan
    if targets is not None:
        raise ConfigError(
            "--targets cannot be combined with --scenario",
            field="--targets",
            hint="a scenario's steps say what they send; keep --data for the rows it reads",
        )
    rows = None if plan.mix is None or plan.mix.data is None else plan.mix.data.row
    return with_scenario(replace(plan, mix=None), spec, rows=rows)
