"""``pyattacker compare A.json B.json``: two attack (or bench) reports side by side.

Exit codes: 0 compared (regressions or not, unless --fail-on-regression), 1 a regression
beyond the noise with --fail-on-regression, 2 bad input (a file that is not a report, two
reports of different kinds, an unwritable --json or --html path).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from pyattacker._atomic import check_output, write_atomically
from pyattacker._inputs import loads, read_bounded
from pyattacker.cli._html import html_option, write_html
from pyattacker.errors import ConfigError, PyAttackerError
from pyattacker.report import compare_html, compare_reports, comparison_text

__all__ = ["compare_command"]

_LIMIT = 1 << 30  # a report of a long run with many windows is large, never this large

_EPILOG = """\b
Examples:
  pyattacker attack URL --rate 200/s --duration 30s --json before.json
  pyattacker attack URL --rate 200/s --duration 30s --json after.json
  pyattacker compare before.json after.json --fail-on-regression
  pyattacker compare bench-main.json bench-branch.json --json -
  pyattacker compare before.json after.json --html compare.html

\b
Each figure is marked "noise" when the difference is within what chance explains, "WORSE"
or "better" when it is not, "n/a" when there is too little to judge (99% per figure for
attack reports: means by a variance bound and the spread of the time windows, percentiles
by their order-statistic intervals, error and throttled rates by a two-proportion test,
rates as Poisson counts; bench reports: each algorithm's metric paired by seed, the
bench's 95% t interval). docs/attack.md ("Compare two runs") explains each test.

\b
--html PATH writes the same table as a page (each row marked regression, improvement,
within noise or n/a; A against B charted) whose embedded JSON is the --json document.

\b
Exit codes: 0 compared, 1 a regression with --fail-on-regression, 2 bad input.
"""


@click.command("compare", epilog=_EPILOG)
@click.argument("a_path", metavar="A.json")
@click.argument("b_path", metavar="B.json")
@click.option(
    "--json",
    "json_path",
    metavar="PATH",
    help="Write the comparison as JSON to PATH ('-': stdout).",
)
@html_option("the comparison (the table, each row's verdict, A against B charted)")
@click.option(
    "--fail-on-regression",
    is_flag=True,
    help="Exit 1 when any figure of B is worse than A's beyond the noise.",
)
def compare_command(
    a_path: str,
    b_path: str,
    json_path: str | None,
    html_path: str | None,
    fail_on_regression: bool,
) -> int:
    """Compare two reports (A the baseline, B the candidate): each figure side by side,
    the change, and whether it is larger than the noise."""
    if json_path is not None and json_path != "-":
        check_output(Path(json_path).expanduser().resolve(), "--json", json_path)
    names = (a_path, b_path)
    a, b = _read(a_path), _read(b_path)
    comparison = compare_reports(a, b, names=names)
    click.echo(comparison_text(comparison, names), err=json_path == "-")
    document = {"a": a_path, "b": b_path, **comparison.to_dict()}
    if json_path is not None:
        _write(json_path, json.dumps(document, indent=2))
    if html_path is not None:
        write_html(html_path, compare_html(document, a, b))
    return 1 if fail_on_regression and comparison.regressions else 0


def _read(path: str) -> Any:
    data = read_bounded(path, path, limit=_LIMIT)
    try:
        return loads(data, path)
    except ValueError as exc:
        raise ConfigError(f"not JSON: {exc}", field=path, hint="give a --json report") from None


def _write(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text + "\n")
        return
    try:
        write_atomically(
            Path(path).expanduser().resolve(), lambda t: t.write_text(text + "\n", encoding="utf-8")
        )
    except OSError as exc:
        raise PyAttackerError(f"could not write {path!r}: {exc.strerror}") from None
