"""The input of ``pyattacker run``: which rows to read, every one checked, and on
``--resume`` the recorded input read on or verified, all before the store is opened for
writing (a refusal writes nothing).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

from pyattacker.errors import CodecError, ConfigError
from pyattacker.run import (
    DEFAULT_CODECS,
    FileSource,
    InputChanged,
    Runner,
    latest_input,
    not_read,
    read_rows,
    resume_source,
)
from pyattacker.store import SQLiteStore, user_version

__all__ = ["Wanted", "duration", "pipelines_to_run", "rows_to_run"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


class Wanted:
    """What the flags ask of the input."""

    def __init__(
        self,
        path: str | None,
        format: str | None,
        limit: int | None,
        key: str | None,
        repeats: int | None,
        changed: bool,
        rows: Callable[[], FileSource] | None = None,
    ) -> None:
        self.path, self.format, self.limit, self.key = path, format, limit, key
        self.repeats, self.changed = repeats, changed
        self.rows = rows  # a source that is not a file (a config's range), opened on demand


def rows_to_run(wanted: Wanted, store: Path | None) -> tuple[FileSource | None, int, str | None]:
    """``(source, repeats, key field)`` to run, every row checked; on resume (``store``),
    checked against the input the store recorded. ``ConfigError`` names what is wrong."""
    record, runs = (None, None) if store is None else _recorded_input(store)
    repeats, key = _naming(wanted, record)
    if wanted.path is not None or wanted.rows is not None:
        source = (
            wanted.rows()
            if wanted.rows is not None
            else read_rows(wanted.path or "", wanted.format, limit=wanted.limit)
        )
        try:
            _check_given(source, wanted, key, record)
        except BaseException:
            source.close()
            raise
        return source, repeats, key
    if runs == 0:  # e.g. the first run was killed while it created the store
        raise ConfigError(
            f"{store} records no run: there is nothing to resume",
            field="--resume",
            hint="pass --input FILE to read the rows",
        )
    if record is None or (record.get("exhausted") and not _changes_limit(wanted, record)):
        return None, repeats, key
    if record.get("custom_key"):
        raise ConfigError(
            "the run's keys came from a key_of function: the command line cannot name them",
            field="--resume",
            hint="resume it from Python with the same template.map(rows, key_of=...)",
        )
    reopened = resume_source(record, limit=wanted.limit, each=_row_check(None, key, recorded=True))
    return reopened, repeats, key


def _naming(wanted: Wanted, record: Mapping[str, Any] | None) -> tuple[int, str | None]:
    """``(repeats, key field)``: as the flags say, except on a resume of a store that
    recorded its input (another input given with ``--input-changed`` included), whose rows
    are named as the run named them: a flag left out takes the recorded value, and a
    ``--key`` other than the recorded one is refused (it would name every row anew, so
    every row would run, and be paid for, again)."""
    if record is None:
        return wanted.repeats or 1, wanted.key
    recorded = record.get("key")
    if wanted.key is not None and wanted.key != recorded:
        named = "their row index (no --key)" if recorded is None else f"--key {recorded}"
        raise ConfigError(
            f"the run named its rows by {named}: --key {wanted.key} would name every row "
            "anew and run it again",
            field="--key",
            hint="leave --key out (the recorded naming is used), or use another store",
        )
    repeats = wanted.repeats if wanted.repeats is not None else record.get("repeats")
    return int(repeats or 1), recorded


def _changes_limit(wanted: Wanted, record: Mapping[str, Any]) -> bool:
    return wanted.limit is not None and wanted.limit != record.get("limit")


def _check_given(
    source: FileSource, wanted: Wanted, key: str | None, record: Mapping[str, Any] | None
) -> None:
    """Check every row of ``--input`` (named by ``key``); on resume, that it is the
    recorded input (unless ``--input-changed``): its first rows read must be the rows the
    store recorded."""
    check = _row_check(source, key, recorded=wanted.key is None and key is not None)
    if record is None or wanted.changed:
        source.check(check)
        return
    try:
        source.check(check, same_as=record)
    except InputChanged as exc:
        raise ConfigError(
            f"{exc.message}; {not_read(record)} of the recorded input were not read",
            field="--input",
            hint="pass the recorded input, or add --input-changed to read this one "
            "into the same store on purpose",
        ) from exc


def _recorded_input(store: Path) -> tuple[Mapping[str, Any] | None, int | None]:
    """The latest input record in ``store`` and how many runs it holds, read without
    writing; ``(None, None)`` for a store too old to tell."""
    try:
        reader = SQLiteStore(store, read_only=True)
    except ConfigError:
        if _no_schema(store):  # a first run killed before it wrote the schema
            return None, 0
        return None, None  # an older schema, without records: the writer upgrades it
    try:
        runs = reader.runs()
        return latest_input(runs), len(runs)
    finally:
        reader.close()


def _no_schema(store: Path) -> bool:
    """Whether ``store`` is a SQLite file with no schema yet (empty, say), read without
    writing; False when it cannot tell (not SQLite: the writer refuses it)."""
    try:
        with closing(sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            return (
                user_version(conn) == 0
                and not conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone()
            )
    except sqlite3.Error:
        return False


def _row_check(
    source: FileSource | None, key: str | None, *, recorded: bool = False
) -> Callable[[int, Any, str], None]:
    """The check of each row: it can be stored as the seed (no NaN: JSON has none), and
    its ``key`` field is there and unique."""
    name = "the input" if source is None else source.name
    fix = "or leave --key out"
    if recorded:
        fix = (
            f"as the store names its rows by {key!r} (the first run's --key); or use another store"
        )
    keys: dict[str, str] = {}

    def check(index: int, row: Any, where: str) -> None:
        try:
            DEFAULT_CODECS.encode(row)
        except CodecError as exc:
            raise ConfigError(
                f"{where} of {name} cannot be stored: {exc.message}",
                field="--input",
                hint="rows are stored as canonical JSON: no NaN or infinity",
            ) from exc
        if key is None:
            return
        if not (isinstance(row, dict) and key in row):
            raise ConfigError(
                f"{where} of {name} has no field {key!r}",
                field="--key",
                hint=f"every row needs the key field, {fix}",
            )
        value = str(row[key])
        if value in keys:
            raise ConfigError(
                f"{where} of {name} has key {value!r}, like {keys[value]}",
                field="--key",
                hint=f"keys must be unique per row: fix the input, {fix}",
            )
        keys[value] = where

    return check


def duration(text: str) -> float:
    found = _DURATION.match(text)
    if found is None:
        raise ConfigError(
            f"{text!r} is not a duration", field="--stop-after", hint="e.g. 90s, 5m, 1.5h"
        )
    return float(found.group(1)) * _UNIT_S[found.group(2)]


def pipelines_to_run(
    source: FileSource | None, repeats: int, runner: Runner, shard_count: int = 1
) -> int:
    """Pipelines the progress bar counts to. For one shard of ``shard_count``, the rows
    ahead are its expected share (pipeline ids hash evenly over the shards): an estimate,
    which the bar says it is."""
    stored = runner.store.count_pipelines()
    if source is None or source.rows_total is None:
        return stored
    ahead = source.rows_total if source.limit is None else min(source.limit, source.rows_total)
    return max(stored, round((ahead - source.first_row) * repeats / shard_count) + stored)
