"""``Scenario``: a scripted user flow, and how ``--scenario FILE.py:NAME`` finds one.

A scenario is an ``async def`` the attack calls once per arrival (open model) or back to
back per client (closed model), with a :class:`~pyattacker.attack.FlowClient` and, when it
takes a second parameter, the row of data for that flow (``None`` until rows are given).
What it sends, and how the flows went, is counted by ``attack/_flows.py``.

Loading runs the file as a module (its top-level code runs, once, before any traffic) and
checks the attribute is an async function taking one or two positional parameters; every
mistake is a :class:`~pyattacker.errors.ConfigError` naming ``--scenario``.
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyattacker.errors import ConfigError

__all__ = ["FlowFunction", "RowProvider", "Scenario", "load_scenario"]

FIELD = "--scenario"
_HINT = "e.g. --scenario flows.py:checkout, where flows.py has `async def checkout(client, row)`"

FlowFunction = Callable[..., Awaitable[Any]]
"""``async def flow(client)`` or ``async def flow(client, row)``."""

RowProvider = Callable[[int], Mapping[str, Any] | None]
"""The row of data for flow ``n`` (its arrival's number), or ``None``."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """A flow function and what the reports call it (``label``: ``flows.py:checkout``).

    ``takes_row``: the function has a second parameter, the row; ``rows`` gives flow
    ``n`` its row (``None``: every flow gets ``None``).
    """

    function: FlowFunction
    label: str
    rows: RowProvider | None = None
    takes_row: bool = field(init=False, default=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "takes_row", _arity(self.function, self.label) == 2)

    def row(self, n: int) -> Mapping[str, Any] | None:
        """Flow ``n``'s row, or ``None`` when the scenario has no rows."""
        return None if self.rows is None else self.rows(n)


def load_scenario(spec: str, *, rows: RowProvider | None = None) -> Scenario:
    """The scenario ``spec`` names, ``PATH.py:NAME``; raises :class:`ConfigError` (field
    ``--scenario``) when the form is wrong, the file is missing or fails to load, or the
    attribute is missing or not an async function of one or two parameters."""
    path_text, sep, name = spec.rpartition(":")
    if not sep or not path_text or not name.isidentifier():
        raise ConfigError(f"expected FILE.py:FUNCTION, got {spec!r}", field=FIELD, hint=_HINT)
    path = Path(path_text)
    if not path.is_file():
        raise ConfigError(f"no such file: {path_text}", field=FIELD, hint=_HINT)
    module = _load_module(path)
    function = getattr(module, name, None)
    if function is None:
        raise ConfigError(f"{path.name} defines no {name!r}", field=FIELD, hint=_HINT)
    return Scenario(function, f"{path.name}:{name}", rows=rows)


def _load_module(path: Path) -> types.ModuleType:
    """Run ``path`` as a module registered under a name of its own (so its dataclasses
    and pickles find it). Compiled here, not imported: no ``__pycache__`` is written
    beside the user's file."""
    module_name = f"pyattacker_scenario_{path.stem}"
    module = types.ModuleType(module_name)
    module.__file__ = str(path)
    sys.modules[module_name] = module
    try:
        code = compile(path.read_bytes(), str(path), "exec")
        exec(code, module.__dict__)  # the user's own file, as --scenario asked
    except Exception as exc:  # the user's file: say what broke, never a traceback
        del sys.modules[module_name]
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ConfigError(
            f"{path.name} failed to load: {type(exc).__name__}: {first}", field=FIELD
        ) from None
    return module


def _arity(function: object, label: str) -> int:
    """How many arguments ``function`` takes (1: the client; 2: the client and the row)."""
    if not inspect.iscoroutinefunction(function):
        raise ConfigError(
            f"{label} is not an async function", field=FIELD, hint="define it with `async def`"
        )
    parameters = [
        p
        for p in inspect.signature(function).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    if len(parameters) not in (1, 2):
        raise ConfigError(
            f"{label} takes {len(parameters)} parameters; a flow takes (client) or (client, row)",
            field=FIELD,
            hint=_HINT,
        )
    return len(parameters)
