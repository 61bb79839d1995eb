"""``export_rows``: one kind of row from a store to a file, for people and other tools.

What each kind exports:

- ``pipelines`` — NESTED: each pipeline gets ``tasks`` (by ``seq``), each task its
  ``attempts``. Attempts of a task that has no row yet (in flight when a run crashed, or
  beside a live run) appear under a stub task ``{"seq", "name", "state": None}``.
- ``artifacts`` — ``pipeline_id``, ``seq`` (-1 for the seed), ``digest``, ``codec``,
  ``size``, ``created_at`` and the content: ``value`` (the decoded JSON) for codec
  ``json``, else ``data_base64``.
- ``results`` — one row per item (pipeline): its key, input, final output, state, error,
  attempts and usage; see ``pyattacker.store.results``.
- ``runs`` — what ``Store.rows`` yields with ``state`` as every reader shows it (a run
  still marked ``running`` whose process died is ``crashed``), then the other keys of
  ``pyattacker.store._liveness.run_view`` (``stored_state``, ``live``,
  ``crashed_because``, ...) but ``heartbeat_age_s``. The store is not changed.
- every other kind — exactly what ``Store.rows`` yields.

Formats: ``jsonl`` (one object per line), ``json`` (one array), ``csv`` (columns from the
first row; dict/list values as JSON text; keys first seen in later rows go into a final
``extra`` column as one JSON object), ``parquet`` (needs ``pyarrow``; dict/list values as
JSON text, as in CSV). Rows are streamed except for Parquet, which builds its table.

The file appears atomically: rows go to a temporary file in the same folder, which then
replaces ``out``. On any error the temporary file is removed and an existing ``out`` is
untouched.
"""

from __future__ import annotations

import base64
import csv
import importlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from pyattacker._atomic import check_output, create_beside, fill, replace
from pyattacker.errors import ConfigError
from pyattacker.store._liveness import judged_runs, run_view
from pyattacker.store._protocol import Store
from pyattacker.store._results import results
from pyattacker.store._rows import ROW_KINDS, RowKind
from pyattacker.store._tables import resolve_kind

__all__ = ["EXPORT_FORMATS", "EXPORT_KINDS", "RESULTS", "export_rows", "format_for"]

EXPORT_FORMATS: tuple[str, ...] = ("jsonl", "json", "csv", "parquet")
#: The view of one row per item, exported beside the stored kinds (not a table).
RESULTS = "results"
#: What ``export_rows`` (and ``pyattacker export --rows``) can write.
EXPORT_KINDS: tuple[str, ...] = (RESULTS, *ROW_KINDS)

Row = dict[str, Any]
_to_json = json.JSONEncoder(ensure_ascii=False).encode


def export_rows(
    store: Store, out: str | os.PathLike[str], *, kind: RowKind | str, fmt: str | None = None
) -> int:
    """Write every row of ``kind`` (one of ``EXPORT_KINDS``: a stored kind or
    ``"results"``) in ``store`` to ``out`` as ``fmt``; return how many.

    ``fmt`` None: the format ``out``'s extension names (:func:`format_for`). Raises
    ``ConfigError`` naming the valid choices for an unknown ``kind`` (field ``kind``), an
    extension that names no format (field ``out``) or ``fmt`` (field ``format``, also when
    Parquet is asked for without ``pyarrow``), and when ``out``'s folder does not exist or
    is not writable, ``out`` is a folder or the store's own file (field ``out``). Errors
    while writing propagate after the temporary file is removed. The file's mode is the
    replaced file's, else what the umask leaves of 0666.
    """
    resolved: RowKind | str = RESULTS if kind == RESULTS else _stored_kind(kind)
    write = _writer(format_for(out, field="out") if fmt is None else fmt)
    target = Path(out)
    check_output(target, "out")
    _not_the_store(store, target)
    return _atomically(target, lambda path: write(_view(store, resolved), path))


_EXTENSIONS = {**{fmt: fmt for fmt in EXPORT_FORMATS}, "ndjson": "jsonl", "pq": "parquet"}


def format_for(out: str | os.PathLike[str], *, field: str = "out") -> str:
    """The export format ``out``'s extension names (``.jsonl``, ``.ndjson``, ``.json``,
    ``.csv``, ``.parquet``, ``.pq``); ``jsonl`` for ``-`` (stdout) or no extension.

    ``ConfigError`` (``field``) for any other extension: JSON Lines written into
    ``out.xlsx`` would be a file its user's tool cannot open."""
    name = os.fspath(out)
    suffix = Path(name).suffix.lstrip(".").lower()
    if name == "-" or not suffix:
        return "jsonl"
    found = _EXTENSIONS.get(suffix)
    if found is None:
        known = ", ".join(f".{ext}" for ext in _EXTENSIONS)
        raise ConfigError(
            f"{name}: unknown extension .{suffix} (known: {known})",
            field=field,
            hint=f"name a file with one of them, or say which format ({', '.join(EXPORT_FORMATS)})",
        )
    return found


def _stored_kind(kind: RowKind | str) -> RowKind:
    try:
        return resolve_kind(kind)
    except ConfigError as exc:
        hint = f"one of: {', '.join(EXPORT_KINDS)}"
        raise ConfigError(exc.message, field="kind", hint=hint) from None


def _not_the_store(store: Store, target: Path) -> None:
    """Replacing the database (or its WAL, or its writer lock) with an export would
    destroy the record (or let a second writer in)."""
    path = getattr(store, "path", None)
    if not isinstance(path, Path):
        return
    suffixes = ("", "-wal", "-shm", "-journal", ".lock")
    own = {Path(f"{path}{suffix}").resolve() for suffix in suffixes}
    if target.resolve() in own:
        raise ConfigError(
            f"{target} is the store itself",
            field="out",
            hint="write the export to another file",
        )


# -- what is exported -------------------------------------------------------------------


def _view(store: Store, kind: RowKind | str) -> Iterator[Row]:
    if not isinstance(kind, RowKind):  # the one view that is not a stored kind
        return results(store)
    if kind is RowKind.PIPELINES:
        return (_nested(store, p) for p in store.rows(RowKind.PIPELINES))
    if kind is RowKind.ARTIFACTS:
        return (_readable_artifact(a) for a in store.rows(RowKind.ARTIFACTS))
    if kind is RowKind.TASK_HISTORY:
        return (_readable_history(h) for h in store.rows(RowKind.TASK_HISTORY))
    if kind is RowKind.RUNS:
        return _shown_runs(store)
    return store.rows(kind)


def _shown_runs(store: Store) -> Iterator[Row]:
    """The runs rows, judged live or dead as every reader judges them (the runs of one
    judgement, matched by id: a few rows, read twice)."""
    views = {run.run_id: run_view(run, verdict) for run, verdict in judged_runs(store)}
    for row in store.rows(RowKind.RUNS):
        view = views.get(row["run_id"])
        if view is not None:
            del view["heartbeat_age_s"]  # a moving figure: the row has heartbeat_at
            row = {**row, **view}
        yield row


def _nested(store: Store, pipeline: Row) -> Row:
    pipeline_id = pipeline["pipeline_id"]
    by_seq: dict[int, list[Row]] = {}
    for attempt in store.rows(RowKind.ATTEMPTS, pipeline_id=pipeline_id):
        by_seq.setdefault(attempt["seq"], []).append(attempt)
    tasks = [
        {**task, "attempts": by_seq.pop(task["seq"], [])}
        for task in store.rows(RowKind.TASKS, pipeline_id=pipeline_id)
    ]
    tasks += [
        {"seq": seq, "name": group[0]["task"], "state": None, "attempts": group}
        for seq, group in by_seq.items()
    ]
    tasks.sort(key=_seq)
    return {**pipeline, "tasks": tasks}


def _seq(row: Row) -> int:
    seq: int = row["seq"]
    return seq


def _readable_artifact(artifact: Row) -> Row:
    data: bytes = artifact["data"]
    keys = ("pipeline_id", "seq", "digest", "codec", "size", "created_at")
    row = {k: artifact[k] for k in keys}
    if artifact["codec"] == "json":
        try:
            return {**row, "value": json.loads(data)}
        except ValueError:  # bytes that do not decode: export them as they are
            pass
    return {**row, "data_base64": base64.b64encode(data).decode("ascii")}


def _readable_history(row: Row) -> Row:
    """A superseded task row with its old output as a value (JSON) or base64, like an
    artifact's (``output_value`` or ``output_base64``)."""
    data = row.get("output_data")
    rest = {k: v for k, v in row.items() if k != "output_data"}
    if data is None:
        return rest
    if row["output_codec"] == "json":
        try:
            return {**rest, "output_value": json.loads(data)}
        except ValueError:  # bytes that do not decode: export them as they are
            pass
    return {**rest, "output_base64": base64.b64encode(data).decode("ascii")}


# -- formats ----------------------------------------------------------------------------


def _jsonl(rows: Iterable[Row], path: Path) -> int:
    count = 0
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(_to_json(row) + "\n")
            count += 1
    return count


def _json(rows: Iterable[Row], path: Path) -> int:
    count = 0
    with path.open("w", encoding="utf-8") as f:
        f.write("[")
        for row in rows:
            f.write(("\n" if count == 0 else ",\n") + _to_json(row))
            count += 1
        f.write("\n]\n" if count else "]\n")
    return count


def _csv(rows: Iterable[Row], path: Path) -> int:
    count = 0
    columns: list[str] = []
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        for row in rows:
            if not columns:
                columns = list(row)
                writer.writerow([*columns, "extra"])
            extra = {k: v for k, v in row.items() if k not in columns}
            cells = [_csv_cell(row.get(c)) for c in columns]
            writer.writerow([*cells, _to_json(extra) if extra else ""])
            count += 1
    return count


def _csv_cell(value: Any) -> str:
    """How one value reads in a CSV cell: empty for ``None``, JSON for dicts, lists and
    booleans, ``str`` otherwise (``repr``-exact for floats)."""
    if value is None:
        return ""
    if isinstance(value, dict | list | bool):
        return _to_json(value)
    return str(value)


def _parquet(rows: Iterable[Row], path: Path) -> int:
    pa, pq = _pyarrow()
    flat = [{k: _flat(v) for k, v in row.items()} for row in rows]
    pq.write_table(pa.Table.from_pylist(flat), str(path))
    return len(flat)


def _pyarrow() -> tuple[Any, Any]:
    """``pyarrow`` and ``pyarrow.parquet``, imported only when Parquet is asked for (an
    optional extra): ``ConfigError`` (field ``format``) with the install hint if missing."""
    try:
        return importlib.import_module("pyarrow"), importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise ConfigError(
            "Parquet export needs pyarrow",
            field="format",
            hint="pip install 'pyattacker[parquet]'",
        ) from None


def _flat(value: Any) -> Any:
    return _to_json(value) if isinstance(value, dict | list) else value


_WRITERS: dict[str, Callable[[Iterable[Row], Path], int]] = {
    "jsonl": _jsonl,
    "json": _json,
    "csv": _csv,
    "parquet": _parquet,
}


def _writer(fmt: str) -> Callable[[Iterable[Row], Path], int]:
    if fmt not in _WRITERS:
        raise ConfigError(
            f"unknown export format {fmt!r}",
            field="format",
            hint=f"one of: {', '.join(EXPORT_FORMATS)}",
        )
    if fmt == "parquet":
        _pyarrow()  # refuse before any file is made
    return _WRITERS[fmt]


# -- the file ---------------------------------------------------------------------------


def _atomically(out: Path, write: Callable[[Path], int]) -> int:
    """Run ``write`` on a temporary file beside ``out``, then move it over ``out``."""
    try:
        temporary = create_beside(out)
    except OSError as exc:
        raise ConfigError(
            f"cannot write in {out.absolute().parent}: {exc.strerror}",
            field="out",
            hint="choose a writable folder",
        ) from exc
    count = fill(temporary, out, write)
    replace(temporary, out)
    return count
