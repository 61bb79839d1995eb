"""``--html PATH`` on ``attack``, ``report`` and ``bench``: the option and the writers.

The option checks its path while the command line is parsed, so a path that cannot be
written exits 2 naming ``--html`` before any traffic is sent or any work done. The pages
themselves are built by :mod:`pyattacker.report`; here they are only written, atomically
(a Ctrl-C or a full disk mid-write leaves the previous file whole).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from pyattacker._atomic import check_output, write_atomically
from pyattacker.errors import ConfigError, PyAttackerError

if TYPE_CHECKING:
    from pyattacker.benchmark import BenchmarkReport
    from pyattacker.store import Store

__all__ = ["bench_page", "html_option", "write_attack_html", "write_html", "write_run_html"]

F = TypeVar("F", bound=Callable[..., Any])

_HELP = (
    "Also write {what} as one self-contained HTML page to PATH: charts and tables that open "
    "from disk in any browser and load nothing from the network."
)


def html_option(what: str) -> Callable[[F], F]:
    """The ``--html PATH`` option (parameter ``html_path``), its help naming ``what``."""
    return click.option(
        "--html",
        "html_path",
        metavar="PATH",
        callback=_checked,
        help=_HELP.format(what=what),
    )


def _checked(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """The path, refused (``ConfigError`` naming ``--html``) when it cannot be written."""
    if value is None:
        return None
    if value == "-":
        raise ConfigError(
            "an HTML report needs a file", field="--html", hint="name one, e.g. report.html"
        )
    check_output(output_path(value), "--html", value)
    return value


def output_path(path: str) -> Path:
    """Where ``path`` writes: ``~`` expanded and symlinks followed (a link is written
    through, as opening it would)."""
    try:
        return Path(path).expanduser().resolve()
    except (OSError, RuntimeError) as exc:  # no home for ``~user``; a symlink loop
        raise ConfigError(f"cannot resolve {path}: {exc}", field="--html") from None


def write_attack_html(path: str | None, report: Mapping[str, Any]) -> None:
    """The page of the attack whose JSON report is ``report`` to ``path`` (nothing when
    ``None``)."""
    if path is not None:
        from pyattacker.report import attack_html  # see bench_page

        write_html(path, attack_html(report))


def write_run_html(path: str | None, store: Store, *, errors: int) -> None:
    """The page of the run in ``store`` to ``path`` (nothing when ``None``)."""
    if path is not None:
        from pyattacker.report import run_html  # see bench_page

        write_html(path, run_html(store, errors=errors))


def bench_page(report: BenchmarkReport) -> str:
    """The bench sweep's page. The renderers are imported when a page is asked for: they
    load the attack engine and the store, which ``bench`` (and every command without
    ``--html``) need not load at start-up."""
    from pyattacker.report import bench_html

    return bench_html(report)


def write_html(path: str, page: str) -> None:
    """``page`` to ``path``, replaced atomically; a line on stderr says where it went."""
    try:
        write_atomically(output_path(path), lambda t: t.write_text(page, encoding="utf-8"))
    except OSError as exc:
        raise PyAttackerError(
            f"could not write the HTML report to {path!r}: {exc.strerror}"
        ) from None
    click.echo(f"HTML report written to {path}", err=True)
