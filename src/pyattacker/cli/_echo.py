"""``pyattacker echo-server``: the calibrated echo server as a command."""

from __future__ import annotations

import sys
from functools import partial
from typing import Any

import click

from pyattacker._units import format_duration
from pyattacker.cli._server_limits import limit_options
from pyattacker.errors import ConfigError
from pyattacker.servers import (
    Delay,
    EchoServer,
    check_processes,
    serve_echo_fleet,
    serve_until_signalled,
    server_tls,
)
from pyattacker.servers.echo import BODY_LIMIT, check_fail, check_status

__all__ = ["echo_server"]


@click.command("echo-server")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=0, show_default=True, help="Port to listen on; 0 picks a free one.")
@click.option(
    "--delay",
    default="0",
    show_default=True,
    metavar="SPEC",
    help="How long to hold each request: 0 | fixed:20ms | uniform:min=10ms,max=30ms | "
    "lognormal:median=20ms,sigma=0.5 | bimodal:fast=5ms,slow=100ms,p_slow=0.1[,sigma=0.1].",
)
@click.option("--seed", default=0, show_default=True, help="Same seed, same delays and failures.")
@click.option(
    "--body-size",
    default=2,
    show_default=True,
    metavar="BYTES",
    help="Response body size when the request has no body (a body is echoed back).",
)
@click.option(
    "--fail",
    "fails",
    multiple=True,
    metavar="STATUS:FRACTION",
    help="Answer this fraction of requests with STATUS (429 carries Retry-After: 1). "
    "Repeat it, or separate with commas: --fail 429:0.1,500:0.01.",
)
@limit_options(BODY_LIMIT, "the echo server's reply repeats it")
@click.option("--tls-cert", metavar="FILE", help="Speak TLS (https://) with this PEM certificate.")
@click.option("--tls-key", metavar="FILE", help="The key of --tls-cert, if not in its file.")
@click.option(
    "--tls-client-ca",
    metavar="FILE",
    help="With --tls-cert: require a client certificate signed by a CA in FILE (PEM).",
)
@click.option(
    "--processes",
    default=1,
    show_default=True,
    metavar="N",
    help="Run N server processes behind the one port (SO_REUSEPORT, Linux): the kernel "
    "spreads connections over them; /stats, /reset and /stall, wherever they land, cover "
    "all of them (/stats exact). Each process draws its own delays.",
)
def echo_server(
    host: str,
    port: int,
    delay: str,
    seed: int,
    body_size: int,
    fails: tuple[str, ...],
    max_head_size: int,
    max_body_size: int,
    request_timeout: str,
    max_connections: int,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    tls_client_ca: str | None = None,
    processes: int = 1,
) -> None:
    """Serve HTTP on loopback, holding each request for a delay drawn from SPEC.

    The first line on stdout is the server's URL (http://127.0.0.1:PORT), so scripts can
    find it; one line on stderr describes the delay. Runs until SIGINT or SIGTERM, then
    exits 0. The server records exactly how long it held each request, from the moment
    the request was parsed until its response was flushed to the socket:

    \b
      GET  /stats[?samples=1]   count, min, mean, p50..p99.9, max in seconds (JSON)
      POST /reset               forget them (GET works too)
      POST /stall?seconds=S     write no response for S seconds

    GET /redirect?to=TARGET&code=301 is echoed as a redirect (a 301, 302, 303, 307 or 308
    with Location: TARGET), held and counted as any echo request.

    Any other method or path is echoed (the request body, or --body-size bytes). Request
    headers override one request: x-echo-delay: 5ms (at most 1h), x-echo-status: 429,
    x-echo-retry-after: 2 (at most a day); a bad or out-of-range one is a 400 naming it,
    as is /stall?seconds= beyond 1h.

    Limits against hostile clients: a head over --max-head-size is a 431, a body over
    --max-body-size a 413, a connection slower than --request-timeout is closed, and one
    beyond --max-connections is closed at once.

    \b
    Examples:
      pyattacker echo-server --delay 0
      pyattacker echo-server --port 8080 --delay lognormal:median=20ms,sigma=0.5
      pyattacker echo-server --delay fixed:5ms --fail 429:0.1 --fail 500:0.01
      pyattacker echo-server --port 8080 --delay 20ms &  curl -s 127.0.0.1:8080/stats
      pyattacker echo-server --port 8080 --processes 2   # two cores' worth
    """
    _check(port, seed, body_size, processes)
    try:
        if tls_cert is None and (tls_key is not None or tls_client_ca is not None):
            raise ConfigError(
                "needs --tls-cert", field="--tls-key" if tls_key else "--tls-client-ca"
            )
        context = None if tls_cert is None else server_tls(tls_cert, tls_key, tls_client_ca)
        _serve(
            processes,
            port,
            host=host,
            delay=Delay.parse(delay, field="--delay"),
            seed=seed,
            body_size=body_size,
            fail=parse_fails(fails),
            max_head_size=max_head_size,
            max_body_size=max_body_size,
            request_timeout=request_timeout,
            max_connections=max_connections,
            ssl=context,
        )
    except ConfigError as exc:  # a library argument (or the address): name the flag
        if exc.field is not None and not exc.field.startswith("-"):
            flag = "--" + exc.field.replace("_", "-")
            raise ConfigError(exc.message, field=flag, hint=exc.hint) from None
        raise


def _check(port: int, seed: int, body_size: int, processes: int) -> None:
    """Refuse out-of-range numbers, naming the flag."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"must be a port 0..65535, got {port}", field="--port")
    if seed < 0:
        raise ConfigError(f"must be >= 0, got {seed}", field="--seed")
    if body_size < 0:
        raise ConfigError(f"must be >= 0, got {body_size}", field="--body-size")
    check_processes(processes, "--processes")


def _serve(processes: int, port: int, **options: Any) -> None:
    """Serve the echo server ``options`` describe on ``port``, as ``processes`` processes
    behind it; every argument is checked (one server built) before anything is forked."""
    server = EchoServer(port=port, **options)
    if processes == 1:
        serve_until_signalled(server, announce=_announce)
        return

    def build(bound: int) -> EchoServer:
        return EchoServer(port=bound, **options)

    say = partial(_announce_url, server=server, processes=processes)
    serve_echo_fleet(build, processes, host=options["host"], port=port, announce=say)


def parse_fails(
    fails: tuple[str, ...],
    *,
    example: str = "429:0.1",
    total_hint: str = "e.g. --fail 429:0.1,500:0.01",
) -> dict[int, float]:
    """``("429:0.1", "500=0.01,503:0.02")`` as ``{429: 0.1, 500: 0.01, 503: 0.02}`` (a
    status and its fraction joined by ``:`` or ``=``; empty parts are skipped). Shared by
    ``echo-server`` and ``llm-server``; ``example`` is the form their hints show."""
    table: dict[int, float] = {}
    for part in (p.strip() for text in fails for p in text.split(",") if p.strip()):
        status, sep, fraction = part.replace("=", ":", 1).partition(":")
        if not sep:
            raise ConfigError(
                f"expected STATUS:FRACTION or STATUS=FRACTION, got {part!r}",
                field="--fail",
                hint=f"e.g. {example}",
            )
        code = check_status(status.strip(), "--fail", lowest=400)
        try:
            table[code] = float(fraction)
        except ValueError:
            raise ConfigError(
                f"bad fraction {fraction!r}", field="--fail", hint=f"e.g. {example}"
            ) from None
    return check_fail(table, "--fail", hint=total_hint)


def _announce(server: EchoServer) -> None:
    _announce_url(server.url, server=server, processes=1)


def _announce_url(url: str, *, server: EchoServer, processes: int) -> None:
    # The URL first and flushed: a script reading our stdout waits for exactly this line.
    sys.stdout.write(url + "\n")
    sys.stdout.flush()
    delay = server.delay
    described = delay.describe()
    if not delay.is_zero:
        quantiles = (f"p{q * 100:g} {format_duration(delay.quantile(q))}" for q in (0.5, 0.99))
        described += f" ({', '.join(quantiles)})"
    fails = ", ".join(f"{s}: {f:g}" for s, f in server.fail.items()) or "none"
    click.echo(
        f"echo-server: delay {described}, fail {fails}, "
        f"{f'{processes} processes, ' if processes > 1 else ''}"
        f"seed {server.seed}; GET /stats, POST /reset, POST /stall?seconds=S",
        err=True,
    )
