"""``attack --serve [PORT]``: the flags, checked before any traffic, and the served run.

``--serve`` alone picks a free port (the URL is printed on stderr); ``--serve 9646`` a
fixed one, which a Prometheus scrape config can name. The server binds 127.0.0.1 unless
``--serve-host`` says otherwise. It stops with the attack, unless ``--serve-linger`` keeps
it answering with the final figures for that long (Ctrl-C ends the wait early), so a
scrape sees the counts the report prints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from pyattacker._units import parse_duration
from pyattacker.attack import AttackPlan, AttackResult, Progress
from pyattacker.cli._attack_workers import Shared
from pyattacker.errors import ConfigError, PyAttackerError
from pyattacker.http import Limits
from pyattacker.measure import RequestRecord
from pyattacker.report import LiveServer, serve_attack, serve_workers

__all__ = ["Serving", "serve_options"]

F = TypeVar("F", bound=Callable[..., Any])

#: what bare ``--serve`` means: a port the OS picks (printed), so two runs never collide
ANY_PORT = "0"


def serve_options(command: F) -> F:
    """The ``--serve``, ``--no-serve``, ``--serve-host`` and ``--serve-linger`` options."""
    command = click.option(
        "--no-serve",
        "no_serve",
        is_flag=True,
        help="Serve nothing, though the plan file (-c) says serve.",
    )(command)
    command = click.option(
        "--serve-linger",
        metavar="DURATION",
        default="0s",
        show_default=True,
        help="With --serve: keep serving the final figures this long after the attack "
        "(the report is printed first; Ctrl-C ends the wait), so a Prometheus scrape sees "
        "the final counts, e.g. 30s for a 15s scrape interval.",
    )(command)
    command = click.option(
        "--serve-host",
        metavar="HOST",
        default="127.0.0.1",
        show_default=True,
        help="With --serve: the address to listen on (another than loopback exposes the "
        "page and /metrics to the network).",
    )(command)
    return click.option(
        "--serve",
        metavar="[PORT]",
        is_flag=False,
        flag_value=ANY_PORT,
        default=None,
        help="While the attack runs, serve its whole report page updated live every 2 s "
        "(/, the charts of --html; its data at /report.json), a light progress page "
        "(/progress), Prometheus metrics (/metrics) and /healthz on 127.0.0.1:PORT "
        "(no PORT: a free one; the URL is printed). "
        "Put it after the URLs, or give a port.",
    )(command)


@dataclass(frozen=True)
class Serving:
    """Where and how long to serve one attack (``from_flags``), and the run (``run``)."""

    host: str
    port: int
    linger: float

    @classmethod
    def from_flags(cls, port: str | None, host: str, linger: str) -> Serving | None:
        """The serving the flags ask for, or None without ``--serve``; ``ConfigError``
        naming the flag for a bad port or duration, or --serve-* without --serve."""
        if port is None:
            if host != "127.0.0.1" or linger != "0s":
                raise ConfigError(
                    "--serve-host and --serve-linger apply with --serve only",
                    field="--serve-host" if host != "127.0.0.1" else "--serve-linger",
                    hint="add --serve",
                )
            return None
        if not port.isdigit() or int(port) > 65535:
            raise ConfigError(
                f"{port!r} is not a port number (0-65535)",
                field="--serve",
                hint="give a port (--serve 9646), or put --serve after the URLs",
            )
        return cls(host, int(port), parse_duration(linger, field="--serve-linger"))

    def run(
        self,
        plan: AttackPlan,
        *,
        on_record: Callable[[RequestRecord], None] | None,
        on_progress: Callable[[Progress], str | None] | None,
        limits: Limits,
        on_finish: Callable[[AttackResult], None],
        sections: Callable[[AttackResult], Mapping[str, Any]] | None = None,
        workers: Shared | None = None,
    ) -> AttackResult:
        """Run ``plan`` served (see the module docstring); ``on_finish`` prints the report
        before the linger; ``sections`` adds the gate's to the page's report; ``workers``
        runs it on worker processes or Ray actors instead of this one (``on_record`` is then
        unused).
        A port that cannot be bound is an error before any request."""
        targets = tuple(t.id for t in plan.resolved_targets())  # ids hold no key
        server = LiveServer(llm=plan.llm is not None, targets=targets, sections=sections)
        try:
            if workers is not None:  # processes here, or Ray actors: the page is here
                return serve_workers(
                    plan, workers.n, server, host=self.host, port=self.port,
                    linger=self.linger, on_progress=on_progress, limits=limits,
                    on_started=self._announce, on_finish=workers.finished(on_finish),
                    per_worker=workers.per_worker, taps=workers.taps,
                    ray=workers.ray_address, on_worker_progress=workers.on_worker_progress(),
                )  # fmt: skip
            return serve_attack(
                plan, server, host=self.host, port=self.port, linger=self.linger,
                on_record=on_record, on_progress=on_progress, limits=limits,
                on_started=self._announce, on_finish=on_finish,
            )  # fmt: skip
        except OSError as exc:
            if server.started:
                raise
            raise PyAttackerError(
                f"--serve: cannot listen on {self.host}:{self.port}: {exc.strerror or exc}"
            ) from None

    def _announce(self, url: str) -> None:
        linger = f"; it stays up {self.linger:g}s after the attack" if self.linger else ""
        click.echo(f"live page: {url}  metrics: {url}metrics{linger}", err=True)
