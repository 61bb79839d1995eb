"""``pyattacker run --artifacts inline|file|null``: where the outputs of a run's tasks are
kept (``pyattacker.store``, "Artifact backends"; ``run.artifacts`` in a config file)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from pyattacker.store import ARTIFACT_BACKENDS, SQLiteStore, Store

__all__ = ["artifacts_option", "store_with"]

F = TypeVar("F", bound=Callable[..., Any])


def artifacts_option(command: F) -> F:
    """The ``--artifacts`` flag (declared here, not in _run)."""
    return click.option(
        "--artifacts",
        type=click.Choice(ARTIFACT_BACKENDS),
        help="Where task outputs are kept: inline (in the store, the default), file "
        "(outputs of 1 KiB or more as content-addressed files in <store>.artifacts/), "
        "null (only their digest and size).",
    )(command)


@contextmanager
def store_with(path: Path, backend: str | None) -> Iterator[Path | Store]:
    """What the Runner opens: ``path`` itself for ``inline``, else a store on ``path``
    that spills outputs as ``backend`` says (closed on the way out)."""
    if backend in (None, "inline"):
        yield path
        return
    store = SQLiteStore(path, artifacts=backend)
    try:
        yield store
    finally:
        store.close()
