"""Plugins: what other installed distributions add to pyattacker, by entry point.

A distribution declares entry points in one of :data:`GROUPS` (in its ``pyproject.toml``:
``[project.entry-points."pyattacker.tasks"] shout = "mypkg:shout"``). Nothing is imported
until a name is asked for: :func:`load` imports one entry point, by group and name, the
first time a config's ``use:``, a pool's ``algorithm``, a codec name or a store location
``NAME://...`` needs it, and keeps the result. An entry point that fails to import is
recorded (:func:`failures`) with its error, and raises ``ConfigError`` only for the
caller that asked for it: a plugin that is broken never stops a run that does not use it.
:func:`installed` lists every entry point of every group with the distribution that
declares it (``pyattacker plugins``).

This module is kernel code (no pyattacker import but ``errors``): the pool, run and config
layers each look their own group up through it. See ``docs/run.md`` ("Plugins").
"""

from __future__ import annotations

import contextlib
import importlib.metadata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyattacker.errors import ConfigError

__all__ = ["GROUPS", "Installed", "failures", "installed", "load", "names"]

#: group -> what its entry points name (the object each must load to).
GROUPS: dict[str, str] = {
    "pyattacker.tasks": "a task for `use: NAME`: an @task, a task function, or a factory",
    "pyattacker.algorithms": "an AcquireAlgorithm subclass, registered by its `name`",
    "pyattacker.codecs": "a Codec instance (or a zero-argument callable returning one)",
    "pyattacker.stores": "a Store class or factory, (location, read_only=...), for NAME://...",
    "pyattacker.senders": "an attack sender factory (client, plan) -> Sender: attack --sender NAME",
}


@dataclass(frozen=True, slots=True)
class Installed:
    """One entry point: its group, name, target (``module:attr``) and distribution."""

    group: str
    name: str
    value: str
    distribution: str
    version: str
    error: str | None = None  # set once a load failed


_LOADED: dict[tuple[str, str], Any] = {}
_FAILED: dict[tuple[str, str], str] = {}


def _entry_points(group: str) -> Iterator[tuple[importlib.metadata.EntryPoint, str, str]]:
    """``(entry point, distribution name, version)`` for each entry point of ``group``."""
    seen: set[str] = set()
    for dist in importlib.metadata.distributions():
        for ep in dist.entry_points:
            if ep.group == group and ep.name not in seen:
                seen.add(ep.name)  # the first on sys.path wins, as importlib finds modules
                yield ep, str(dist.metadata["Name"]), str(dist.version)


def installed() -> list[Installed]:
    """Every entry point of every group (not loaded), with the errors of loads tried."""
    found = []
    for group in GROUPS:
        for ep, dist, version in _entry_points(group):
            error = _FAILED.get((group, ep.name))
            found.append(Installed(group, ep.name, ep.value, dist, version, error))
    return sorted(found, key=lambda item: (item.group, item.name))


def names(group: str) -> list[str]:
    """The entry point names of ``group``, sorted (for "did you mean" and hints)."""
    return sorted(ep.name for ep, _, _ in _entry_points(group))


def load(group: str, name: str, *, field: str) -> Any | None:
    """The object entry point ``name`` of ``group`` names, imported once; None when no
    distribution declares it. A failing import is recorded and raised as ``ConfigError``
    naming ``field`` (the config field or flag that asked for it)."""
    key = (group, name)
    if key in _LOADED:
        return _LOADED[key]
    for ep, dist, _ in _entry_points(group):
        if ep.name != name:
            continue
        try:
            found = ep.load()
        except Exception as exc:  # the plugin's own failure: recorded, named, never a crash
            _FAILED[key] = f"{type(exc).__name__}: {exc}"
            raise ConfigError(
                f"the plugin {name!r} ({group}, from {dist}) failed to load: {_FAILED[key]}",
                field=field,
                hint="`pyattacker plugins` lists the installed plugins and their errors",
            ) from exc
        _LOADED[key] = found
        return found
    return None


def load_all() -> None:
    """Try every entry point once (``pyattacker plugins --check``); errors are recorded."""
    for group in GROUPS:
        for ep, _, _ in _entry_points(group):
            with contextlib.suppress(ConfigError):
                load(group, ep.name, field=group)


def failures() -> dict[tuple[str, str], str]:
    """``(group, name) -> error`` of every load that failed in this process."""
    return dict(_FAILED)
