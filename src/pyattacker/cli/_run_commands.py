"""``pyattacker report`` and ``pyattacker export``: read a run's store, change nothing.

Both open the store read-only, so they work beside a live run (SQLite WAL readers never
block the writer) and can never create or alter a file: a missing store is a ``ConfigError``
(exit 2) naming the path. The numbers come from :func:`pyattacker.report.summarize`,
computed from the stored rows every time.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import click
from rich.console import Console

from pyattacker.cli._html import html_option, write_run_html
from pyattacker.errors import ConfigError
from pyattacker.report import render_run_text, summarize
from pyattacker.store import (
    EXPORT_FORMATS,
    EXPORT_KINDS,
    MergedStore,
    Store,
    export_rows,
    format_for,
    open_store,
)

__all__ = [
    "export_command",
    "open_reader",
    "open_readers",
    "print_run_report",
    "report_command",
]

_REPORT_EPILOG = """\b
Examples:
  pyattacker report runs/demo-20261130-084200.db
  pyattacker report runs/eval.db --json > summary.json
  pyattacker report runs/eval.db --errors 20
  pyattacker report runs/eval.db --html eval.html
  pyattacker report eval.shard-1-of-2.db eval.shard-2-of-2.db     (shards, merged)

\b
Safe beside a live run: the store is opened read-only. Every figure is computed from the
stored rows (runs, pipelines, tasks, attempts, events); nothing is written but the
--html page. Several STOREs (the shards of a run) are read as one: each pipeline from
the store where its state ranks highest (succeeded > failed > interrupted > running >
pending; the later STORE between equals).
"""

_EXPORT_EPILOG = """\b
Examples:
  pyattacker export runs/eval.db results.csv --rows results
  pyattacker export runs/eval.db attempts.csv --rows attempts --format csv
  pyattacker export runs/eval.db pipelines.jsonl --rows pipelines
  pyattacker export runs/eval.db tasks.parquet --rows tasks     (needs pyattacker[parquet])
  pyattacker export eval.shard-1-of-2.db eval.shard-2-of-2.db results.csv --rows results

\b
`results` is one row per item: key (--key value, else the input row index), input,
output, state, step, error_class, error, attempts, usage and tokens.
The format comes from OUT's extension (.jsonl, .json, .csv, .parquet; none: jsonl);
another extension is refused unless --format says what to write.
Rows come in the order Store.rows gives (oldest first; attempts and artifacts in two
parts, see docs/run.md); in csv and parquet, JSON-shaped columns hold JSON text. Pipelines
come nested, each with its tasks and their attempts; artifacts with the JSON they hold as
`value`, other bytes as `data_base64`.
The count of rows written is printed on stderr. The store is opened read-only, and OUT
appears whole or not at all. Several STOREs are merged as `pyattacker report` merges them.
"""


def open_reader(location: str) -> Store:
    """The store at ``location``, opened read-only; ``ConfigError`` (field ``STORE``) if
    there is no file there. Never creates anything."""
    path = Path(location)
    if not path.is_file():
        what = "is a directory, not a store" if path.is_dir() else "does not exist"
        raise ConfigError(
            f"{location} {what}",
            field="STORE",
            hint="pass the .db file a run wrote, e.g. runs/demo-<timestamp>.db",
        )
    return open_store(location, read_only=True)


def open_readers(locations: tuple[str, ...]) -> Store:
    """One store read-only, or several merged (``MergedStore``); all checked first."""
    if len(locations) == 1:
        return open_reader(locations[0])
    for location in locations:
        open_reader(location).close()  # each one there and a store: before any is kept
    return MergedStore([open_reader(location) for location in locations])


def print_run_report(store: Store, *, as_json: bool, errors: int) -> None:
    """Summarize ``store`` and print it: JSON on stdout, or tables sized to the terminal."""
    summary = summarize(store, errors=errors)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    console = Console()
    if not console.is_terminal:  # piped or captured: do not squeeze tables into 80 columns
        console = Console(width=120)
    console.print(render_run_text(summary))


@click.command("report", epilog=_REPORT_EPILOG)
@click.argument("stores", metavar="STORE...", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON instead.")
@click.option(
    "--errors",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    metavar="N",
    help="Show the N most frequent error messages.",
)
@html_option("the report (progress over time, resources, retries, failed items by key)")
def report_command(
    stores: tuple[str, ...], as_json: bool, errors: int, html_path: str | None
) -> None:
    """Summarize a run's store (or its shards' stores, merged): pipelines, tasks,
    attempts, retries, resources, errors."""
    reader = open_readers(stores)
    try:
        print_run_report(reader, as_json=as_json, errors=errors)
        write_run_html(html_path, reader, errors=errors)
    finally:
        reader.close()


@click.command("export", epilog=_EXPORT_EPILOG)
@click.argument("stores", metavar="STORE...", nargs=-1, required=True)
@click.argument("out", metavar="OUT")
@click.option(
    "--rows",
    "kind",
    type=click.Choice(EXPORT_KINDS),
    required=True,
    help="Which rows to write (results: one row per item).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(EXPORT_FORMATS),
    help="File format (default: from OUT's extension, e.g. .csv; jsonl when it has none).",
)
def export_command(stores: tuple[str, ...], out: str, kind: str, fmt: str | None) -> None:
    """Write one kind of a store's rows (several stores: merged) to a file OUT (replaced
    atomically), or to stdout when OUT is -."""
    fmt = fmt or _format_of(out)
    if out != "-" and Path(out).resolve() in {Path(s).resolve() for s in stores}:
        raise ConfigError(f"{out} is one of the stores", field="OUT", hint="write elsewhere")
    reader = open_readers(stores)
    try:
        if out == "-":
            written = _to_stdout(reader, kind, fmt)
        else:
            written = export_rows(reader, out, kind=kind, fmt=fmt)
    finally:
        reader.close()
    click.echo(f"{written} {kind} rows written to {'stdout' if out == '-' else out}", err=True)


def _to_stdout(reader: Store, kind: str, fmt: str) -> int:
    """The export, through a temporary file (the writers are atomic file writers)."""
    if fmt == "parquet":
        raise ConfigError("parquet is binary: name a file", field="OUT")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"export.{fmt}"
        written = export_rows(reader, path, kind=kind, fmt=fmt)
        with path.open(encoding="utf-8") as exported:
            shutil.copyfileobj(exported, sys.stdout)
    return written


def _format_of(out: str) -> str:
    """The format OUT's extension names; an unknown one is refused naming ``--format``."""
    try:
        return format_for(out, field="OUT")
    except ConfigError as exc:
        hint = f"name a file with one of them, or pass --format ({', '.join(EXPORT_FORMATS)})"
        raise ConfigError(exc.message, field="OUT", hint=hint) from None
