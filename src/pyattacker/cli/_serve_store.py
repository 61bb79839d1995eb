"""``pyattacker serve STORE``: the command and its options; the server is the report's
(:func:`pyattacker.report.serve_store`: routes, the live page, ``/metrics``)."""

from __future__ import annotations

import asyncio
import sys
from functools import partial

import click

from pyattacker.cli._run_commands import open_reader
from pyattacker.report import serve_store

__all__ = ["serve_command"]

_EPILOG = """\b
Examples:
  pyattacker serve runs/eval.db                  # port picked by the OS, URL on stderr
  pyattacker serve runs/eval.db --port 8089
  curl -s http://127.0.0.1:8089/metrics

\b
Routes: / (the run's page, its charts redrawn in place while the run is live),
/report.json (what the page draws; its "report" is `pyattacker report --json`),
/metrics (Prometheus text: pipelines, attempts and their durations by task
and outcome, errors, retries, attempts, throttles and leases in use per
resource), /healthz. GET and HEAD only; other paths 404.
The store is opened read-only for each request: safe beside a live run.
Ctrl-C stops the server (exit 130).
"""


def _announce(store: str, url: str) -> None:
    click.echo(f"serving {store} on {url} (Ctrl-C stops)", err=True)
    sys.stderr.flush()


@click.command("serve", epilog=_EPILOG)
@click.argument("store", metavar="STORE")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port to listen on; 0 lets the OS pick one (the URL is printed on stderr).",
)
@click.option(
    "--refresh",
    "refresh_s",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    metavar="SECONDS",
    help="How often the page asks for new figures and redraws its charts while a run is "
    "live (in place, no reload); a finished run's page stops asking.",
)
def serve_command(store: str, host: str, port: int, refresh_s: int) -> None:
    """Serve a run's store (live or finished), read-only: its page, /metrics for
    Prometheus, /report.json and /healthz."""
    open_reader(store).close()  # a missing STORE: exit 2 now, naming it, creating nothing
    serving = serve_store(
        partial(open_reader, store), host=host, port=port, refresh_s=refresh_s,
        on_started=partial(_announce, store),
    )  # fmt: skip
    try:
        asyncio.run(serving)
    except OSError as exc:
        raise click.UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
