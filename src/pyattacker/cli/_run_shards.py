"""``pyattacker run --shard i/N`` and ``--shards N --jobs J``: one run split between
processes, each with its own store, read back as one (``pyattacker report A.db B.db``).

``--shard i/N`` runs the pipelines of shard i (``pyattacker.run.Shard``: a SHA-256 of the
pipeline id, the same on every machine) into ``<store>.shard-i-of-N.db``, with a N-th of
each key's limits. ``--shards N`` starts the N children itself (at most ``--jobs`` at once),
each the same command with ``--shard i/N``, waits, and prints the merged report of their
stores. See docs/run.md, "Shards".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from pyattacker.cli._run_commands import print_run_report
from pyattacker.errors import ConfigError
from pyattacker.pool import Pool
from pyattacker.run import Shard, divide_pools, shard_store_name
from pyattacker.store import MergedStore, open_store

__all__ = [
    "child_argv",
    "run_shards",
    "shard_of_flag",
    "shard_options",
    "shard_path",
    "sharded_pools",
]

F = TypeVar("F", bound=Callable[..., Any])


def shard_options(command: F) -> F:
    """The flags ``--shard``, ``--shards`` and ``--jobs`` (declared here, not in _run)."""
    for option in reversed(
        [
            click.option(
                "--shard",
                metavar="I/N",
                help="Run only shard I of N (1 <= I <= N): the pipelines whose id hashes "
                "there, with 1/N of each key's limits, into <store>.shard-I-of-N.db "
                "(--store given here: used as it is).",
            ),
            click.option(
                "--shards",
                type=click.IntRange(min=1, max=10_000),
                metavar="N",
                help="Split the run into N shards, start them as child processes, and print "
                "the merged report.",
            ),
            click.option(
                "--jobs",
                type=click.IntRange(min=1, max=10_000),
                metavar="J",
                help="With --shards: run at most J children at once [default: N].",
            ),
        ]
    ):
        command = option(command)
    return command


def shard_of_flag(shard: str | None, shards: int | None, jobs: int | None) -> Shard | None:
    """The ``--shard`` given, checked with the flags it cannot go with (``ConfigError``)."""
    if jobs is not None and shards is None:
        raise ConfigError("--jobs goes with --shards", field="--jobs", hint="add --shards N")
    if shard is not None and shards is not None:
        raise ConfigError(
            "--shard runs one shard, --shards starts them all: pass one",
            field="--shard",
            hint="--shards N starts each child with --shard i/N itself",
        )
    return None if shard is None else Shard.parse(shard, field="--shard")


def shard_path(path: Path, shard: Shard | None) -> Path:
    """The store of ``shard``: ``eval.db`` -> ``eval.shard-2-of-4.db`` (kept when it is
    already a shard's name, as in the command that resumes a shard)."""
    if shard is None or shard.count == 1:
        return path
    named = shard_store_name(str(path), shard)
    if path.name.endswith(f".shard-{shard.index}-of-{shard.count}{path.suffix}"):
        return path
    return Path(named)


def sharded_pools(pools: list[Pool], shard: Shard | None) -> list[Pool]:
    """``pools`` with a N-th of each key's limits for a shard of N (``divide_pools``); a
    warning on stderr for each capacity raised to 1."""
    if shard is None:
        return pools
    divided, warnings = divide_pools(pools, shard.count)
    for warning in warnings:
        click.echo(f"warning: --shard {shard}: {warning}", err=True)
    return divided


def child_argv(ctx: click.Context, store: Path, shard: Shard) -> list[str]:
    """The command line given, as the child of ``shard`` runs it: the flags given, with
    ``--store`` (the shard's own file) and ``--shard i/N`` instead of ``--shards``/
    ``--jobs``; ``--json`` so that its report is read, not shown."""
    words: list[str] = [str(ctx.info_name or "run")]
    assert isinstance(ctx.command, click.Command)
    skip = {"shards", "jobs", "store", "as_json", "shard"}
    for param in ctx.command.params:
        name = param.name or ""
        if name in skip or ctx.get_parameter_source(name) is not ParameterSource.COMMANDLINE:
            continue
        value = ctx.params[name]
        if isinstance(param, click.Argument):
            words.append(str(value))
        elif isinstance(param, click.Option) and param.is_flag:
            if value:
                words.append(param.opts[-1] if param.opts[-1].startswith("--") else param.opts[0])
        elif isinstance(param, click.Option):
            words += [_long(param), str(value)]
    return [*words, "--store", str(shard_path(store, shard)), "--shard", str(shard), "--json"]


def _long(option: click.Option) -> str:
    return next((o for o in option.opts if o.startswith("--")), option.opts[0])


def run_shards(ctx: click.Context, store: Path, count: int, jobs: int | None) -> int:
    """Start the ``count`` children (``jobs`` at once), wait, print the merged report of
    their stores; the exit code (the worst of theirs: 2, 130, 1, 0)."""
    if ctx.params.get("input_path") == "-":
        raise ConfigError(
            "the children of --shards cannot share stdin",
            field="--input",
            hint="write the rows to a file and pass --input FILE",
        )
    shards = [Shard(i, count) for i in range(1, count + 1)]
    env = {**os.environ, "PYTHONPATH": _pythonpath()}
    if store.parent == Path("runs"):  # the default folder, as a run without shards makes it
        store.parent.mkdir(exist_ok=True)

    def one(shard: Shard) -> tuple[Shard, subprocess.CompletedProcess[str]]:
        argv = [sys.executable, "-m", "pyattacker", *child_argv(ctx, store, shard)]
        return shard, subprocess.run(argv, capture_output=True, text=True, env=env, check=False)

    with ThreadPoolExecutor(max_workers=jobs or count) as pool:
        done = list(pool.map(one, shards))
    codes = []
    for shard, result in done:
        codes.append(result.returncode)
        click.echo(f"shard {shard}: {_said(result)}", err=True)
    paths = [shard_path(store, shard) for shard, _ in done]
    existing = [p for p in paths if p.is_file()]
    if existing and 2 not in codes:  # a refused child: its message above says why
        merged = MergedStore([open_store(str(p), read_only=True) for p in existing])
        try:
            print_run_report(merged, as_json=bool(ctx.params.get("as_json")), errors=5)
        finally:
            merged.close()
        click.echo("Merged: pyattacker report " + " ".join(str(p) for p in existing), err=True)
    return _worst(codes)


def _said(result: subprocess.CompletedProcess[str]) -> str:
    """A child's outcome in one line: its run's state and counts, or its last error."""
    try:
        run = json.loads(result.stdout)["run"]
        return f"exit {result.returncode}, run {run['state']} in {run['elapsed_s']:.1f} s"
    except (ValueError, KeyError, TypeError):
        last = [line for line in result.stderr.splitlines() if line.strip()][-3:]
        return f"exit {result.returncode}: " + " | ".join(last)


def _worst(codes: list[int]) -> int:
    for code in (2, 130, 1):
        if code in codes:
            return code
    return max(codes, default=0)


def _pythonpath() -> str:
    """This pyattacker first: the children run the same code as their parent."""
    here = str(Path(__file__).resolve().parents[2])  # src/pyattacker/cli/this.py -> src
    rest = os.environ.get("PYTHONPATH")
    return here if not rest else os.pathsep.join([here, rest])
