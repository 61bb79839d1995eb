"""``attack --targets`` and ``--data``: the options, and the mix they make.

A mix's lines are what to send; the URLs on the command line are where (the pool's
targets). Without a URL, the targets file's absolute URLs name the one host (see
``docs/attack.md``, "Request mixes").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import click

from pyattacker.attack import ORDERS, DataRows, Mix, MixLine, read_targets
from pyattacker.errors import ConfigError
from pyattacker.http import URL

__all__ = ["mix_for", "mix_options"]

F = TypeVar("F", bound=Callable[..., object])


def mix_options(command: F) -> F:
    """``-c``, ``--targets``, ``--data`` and ``--data-order``."""
    command = click.option(
        "-c",
        "--config",
        "config_path",
        metavar="PLAN",
        help="A plan file (.yaml, .toml or .json) whose keys are these flags' long names "
        "(rate: 500/s, duration: 30s, threshold: [...], targets: FILE or a list of "
        "requests); a flag given here overrides its value, and a load given here "
        "(--rate, --stages, --clients, --sweep) replaces the file's whole load. ${VAR} is "
        "read from the environment.",
    )(command)
    command = click.option(
        "--data-order",
        type=click.Choice(ORDERS),
        default="sequential",
        show_default=True,
        help="--data: rows in turn (request n takes row n, from the start again when they "
        "run out), or drawn at random (reproducibly with --seed).",
    )(command)
    command = click.option(
        "--data",
        "data_path",
        metavar="FILE",
        help="Rows (JSONL objects, or .csv with a header) whose fields fill {field} in the "
        "URL, header values and body, e.g. /users/{id}. Every row must have every field the "
        "templates use (checked before the attack). At most 256 MiB.",
    )(command)
    return click.option(
        "--targets",
        "targets_path",
        metavar="FILE",
        help="A request mix: one request per line (JSONL: method, url, headers, body or "
        "body_file, weight, name; or a text format, see docs/attack.md); each arrival "
        "picks a line by weight (reproducibly with --seed), the report breaks figures "
        "down by name. URLs are then optional: the lines' host is the target.",
    )(command)


def mix_for(
    urls: Sequence[str],
    targets: str | Sequence[MixLine] | None,
    data: str | None,
    order: str,
    seed: int,
) -> tuple[tuple[str, ...], Mix | None]:
    """The attack's URLs and its mix (None without --targets and --data)."""
    lines = read_targets(targets) if isinstance(targets, str) else targets
    rows = None if data is None else DataRows.load(data, order=order, seed=seed)  # type: ignore[arg-type]
    if not urls:
        urls = _origins(lines or ())
    if lines is None and rows is None:
        return tuple(urls), None
    source = targets if isinstance(targets, str) else None
    mix = Mix(lines or (MixLine(url=None),), data=rows, source=source)
    return tuple(urls), mix


def _origins(lines: Sequence[MixLine]) -> tuple[str, ...]:
    """Without a URL on the command line: the one origin the lines' absolute URLs name."""
    found: dict[tuple[str, str, int], str] = {}
    for line in lines:
        if line.url is not None and not line.url.startswith("/"):
            url = URL.parse(line.url, field="--targets")
            found.setdefault(url.origin, f"{url.scheme}://{url.authority}/")
    if len(found) == 1:
        return tuple(found.values())
    if not found:
        raise ConfigError(
            "no target URL given",
            field="URL",
            hint="give a URL (e.g. http://127.0.0.1:8080/), or absolute URLs in --targets",
        )
    raise ConfigError(
        f"the targets file names {len(found)} hosts ({', '.join(sorted(found.values()))})",
        field="--targets",
        hint="a mix sends every line through one pool: write paths (/users/1) and give "
        "the hosts as URLs, or run one attack per host",
    )
