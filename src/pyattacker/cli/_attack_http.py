"""``attack``'s HTTP options: TLS (``--insecure``, ``--cacert``, ``--cert``, ``--cert-key``),
``--resolve`` and ``--follow-redirects``, declared here and turned into the plan's ``tls``,
``resolve`` and ``follow_redirects``; a bad file or entry exits 2 naming the flag.

The client key is ``--cert-key``, not curl's ``--key``: ``--key`` is the API key.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from pyattacker.attack import AttackPlan, plugin_sender
from pyattacker.errors import ConfigError
from pyattacker.http import Resolve, TlsOptions, connect_map

__all__ = ["http_options", "http_plan_options", "resolve_note"]

F = TypeVar("F", bound=Callable[..., Any])

_FLAGS = {"cacert": "--cacert", "cert": "--cert", "key": "--cert-key", "insecure": "--insecure"}


def http_options(command: F) -> F:
    """The TLS, redirect and sender options of ``attack`` (TLS and redirects for plain and
    ``--llm`` attacks alike)."""
    options = [
        click.option(
            "--resolve",
            "resolve",
            multiple=True,
            metavar="HOST:PORT:ADDRESS",
            help="Connect to ADDRESS for URLs of HOST and PORT, as curl's --resolve: the "
            "URL, its Host header, TLS's server name (SNI) and the certificate's name stay "
            "HOST (repeatable).",
        ),
        click.option(
            "--sender",
            metavar="NAME",
            help="Send each attempt with the installed plugin sender NAME (entry point group "
            "pyattacker.senders; `pyattacker plugins` lists them) instead of plain HTTP.",
        ),
        click.option(
            "--follow-redirects",
            "follow_redirects",
            type=int,
            default=0,
            show_default=True,
            metavar="N",
            help="Follow up to N redirects (3xx with a Location), each hop one more attempt "
            "of the request. 0: a redirect is the answer, counted as failed (error class "
            "redirect).",
        ),
        click.option(
            "--cert-key",
            "cert_key",
            metavar="FILE",
            help="https: the private key of --cert (PEM, unencrypted), if not in its file.",
        ),
        click.option(
            "--cert",
            "cert",
            metavar="FILE",
            help="https: a client certificate (PEM) for servers that ask for one.",
        ),
        click.option(
            "--cacert",
            "cacert",
            metavar="FILE",
            help="https: trust the CA certificate(s) in FILE (PEM) instead of the system's.",
        ),
        click.option(
            "--insecure/--no-insecure",
            default=False,
            help="https: do not verify the server's certificate (still encrypted).",
        ),
    ]
    for option in options:
        command = option(command)
    return command


def http_plan_options(
    insecure: bool,
    cacert: str | None,
    cert: str | None,
    cert_key: str | None,
    follow: int,
    sender: str | None = None,
    resolve: Sequence[str] = (),
) -> dict[str, Any]:
    """The plan's ``tls`` (``None`` when no TLS flag was given), ``resolve``,
    ``follow_redirects`` and ``sender`` (its plugin loaded now, before any traffic); a
    ``ConfigError`` names the flag (a file that cannot be read or used included)."""
    if sender is not None:
        plugin_sender(sender)
    tls = None
    if insecure or cacert is not None or cert is not None or cert_key is not None:
        try:
            tls = TlsOptions(insecure=insecure, cacert=cacert, cert=cert, key=cert_key)
        except ConfigError as exc:
            field = _FLAGS.get(exc.field or "", exc.field)
            hint = exc.hint
            if exc.field == "key" and cert is None:
                hint = "give --cert FILE too"
            elif exc.field == "cacert" and insecure:
                hint = "give one of --insecure or --cacert"
            raise ConfigError(exc.message, field=field, hint=hint) from None
    try:
        entries = tuple(Resolve.parse(text) for text in resolve)
        connect_map(entries)
    except ConfigError as exc:
        raise ConfigError(exc.message, field="--resolve", hint=exc.hint) from None
    return {"tls": tls, "resolve": entries, "follow_redirects": follow, "sender": sender}


def resolve_note(plan: AttackPlan) -> str | None:
    """A note when a ``--resolve`` entry matches none of the plan's targets (a typo in its
    host or port would otherwise send the load to the real address without a word); none
    for scenarios and followed redirects, which may reach other hosts."""
    if plan.scenario is not None or plan.follow_redirects:
        return None
    origins = {(url.host, url.port) for url in plan.targets}
    unused = [str(entry) for entry in plan.resolve if (entry.host, entry.port) not in origins]
    if not unused:
        return None
    shown = ", ".join(sorted({f"{host}:{port}" for host, port in origins}))
    return f"note: --resolve {', '.join(unused)} matches none of the targets ({shown})"
