"""``run --ray [ADDRESS]``: the Ray cluster a run's Ray steps go to, as ``bench --ray`` and
``attack --ray`` take it.

A run's steps go to Ray by their own word (``@task(executor="ray")``, ``executor: ray`` in
a config); the cluster is ``RAY_ADDRESS``'s, else a local Ray. ``--ray ADDRESS`` sets
``RAY_ADDRESS`` for the command (and so for its shards, which inherit it), and its
refusals name ``--ray``; ``--ray`` alone leaves the cluster as it was, and both refuse a
pipeline none of whose steps runs on Ray (the flag would do nothing).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import click

from pyattacker.run import check_ray_address

__all__ = ["check_run_ray", "ray_option"]

F = TypeVar("F", bound=Callable[..., Any])

_META = "pyattacker.run.ray"  # the --ray the command was given (None: not given)


def ray_option(command: F) -> F:
    """``--ray [ADDRESS]`` on ``run``: put it right above the command's function."""

    @functools.wraps(command)
    def with_address(*args: Any, ray_address: str | None, **kwargs: Any) -> Any:
        click.get_current_context().meta[_META] = ray_address
        if not ray_address:
            return command(*args, **kwargs)
        before = os.environ.get("RAY_ADDRESS")
        os.environ["RAY_ADDRESS"] = ray_address
        try:
            return command(*args, **kwargs)
        finally:  # in-process callers (run_cli) get their environment back
            if before is None:
                os.environ.pop("RAY_ADDRESS", None)
            else:
                os.environ["RAY_ADDRESS"] = before

    option = click.option(
        "--ray",
        "ray_address",
        is_flag=False,
        flag_value="",
        metavar="[ADDRESS]",
        help="Send the steps that run on Ray (@task(executor='ray'), executor: ray) to the "
        "cluster at ADDRESS (e.g. 10.0.0.5:6379; it sets RAY_ADDRESS for the run and its "
        "shards); alone, to RAY_ADDRESS's cluster, else a local Ray. Checked before the "
        "store is created: exit 2 when no step runs on Ray or the cluster refuses.",
    )
    return option(with_address)  # type: ignore[return-value]


def check_run_ray(tasks: Iterable[Any], *, open_session: bool) -> None:
    """:func:`~pyattacker.run.check_ray_address` for the running ``run`` command, naming
    ``--ray`` when it was given."""
    given = click.get_current_context().meta.get(_META)
    check_ray_address(tasks, open_session=open_session, flag=None if given is None else "--ray")
