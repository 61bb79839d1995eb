"""The options both server commands share: the limits they keep against hostile clients."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from pyattacker.servers.echo import HEAD_LIMIT, MAX_CONNECTIONS, REQUEST_TIMEOUT_S

__all__ = ["limit_options"]

F = TypeVar("F", bound=Callable[..., Any])


def limit_options(body_default: int, body_what: str) -> Callable[[F], F]:
    """``--max-head-size``, ``--max-body-size`` (default ``body_default``, ``body_what``
    saying why), ``--request-timeout`` and ``--max-connections``, in that order."""
    options = (
        click.option(
            "--max-head-size",
            default=HEAD_LIMIT,
            show_default=True,
            metavar="BYTES",
            help="Largest request head (request line and headers); a larger one is "
            "answered 431 and the connection closed.",
        ),
        click.option(
            "--max-body-size",
            default=body_default,
            show_default=True,
            metavar="BYTES",
            help=f"Largest request body ({body_what}); a larger one is answered 413 without "
            "being read (at once when its Content-Length says so), then the connection "
            "closes.",
        ),
        click.option(
            "--request-timeout",
            default=f"{REQUEST_TIMEOUT_S:g}s",
            show_default=True,
            metavar="DURATION",
            help="A connection the server owes nothing must send a whole request within "
            "this long of its previous one (or of opening), else it is closed, with 408 when "
            "a request had begun: slow or idle clients (slowloris, idle keep-alive). Checked "
            "every quarter of it.",
        ),
        click.option(
            "--max-connections",
            default=MAX_CONNECTIONS,
            show_default=True,
            metavar="N",
            help="Connections open at once; a connection beyond them is closed as soon as "
            "it is accepted.",
        ),
    )

    def decorate(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate
