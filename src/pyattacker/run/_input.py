"""A run's input record: what it read, how far, and whether a resume can trust it again.

Every run over ``template.map(rows)`` records its input in its row of ``runs``
(``RunRow.input``)::

    {"source": "file" | "stdin" | "python iterable", "path": ..., "format": ...,
     "size": ..., "mtime": ..., "digest": "sha256:...", "bytes_read": ...,
     "rows_read": 1673, "rows_total": 2000, "exhausted": false,
     "repeats": 1, "key": "id", "limit": null}

The record is written in the same transaction as the pipelines it counts (the Committer
asks :meth:`InputTracker.take` at every flush), and a row counts as read only once every
one of its repeats was admitted, so ``rows_read`` never runs ahead of the store: a resume
that goes on from there skips nothing (it may meet rows whose pipelines exist, wholly or
partly; the store recognises them).

A resume without rows (``runner.run(template, resume=True)``, ``pyattacker run --resume``
without ``--input``) goes on from the latest record: :func:`resume_source` re-opens a file
when its first ``rows_read`` rows still have the recorded digest (a file that only grew is
unchanged), and refuses otherwise, and refuses a stdin or Python iterable that was not
read to its end: only the caller has those rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pyattacker.errors import ConfigError
from pyattacker.run._pipeline import PipelineSpec, PipelineSpecs, PipelineTemplate
from pyattacker.run._shard import Shard
from pyattacker.run._sources import FileSource, InputChanged, read_rows
from pyattacker.store import RunRow, Store

__all__ = [
    "CarriedInput",
    "FieldKey",
    "InputTracker",
    "IterableSource",
    "Tracked",
    "as_iterable",
    "input_of",
    "latest_input",
    "not_read",
    "resume_source",
]


class FieldKey:
    """``key_of`` naming each row by one of its fields (``str(row[field])``); recorded, so
    a resume without rows can name the rows it reads again the same way."""

    __slots__ = ("field",)

    def __init__(self, field: str) -> None:
        self.field = field

    def __call__(self, row: Any) -> str:
        if not isinstance(row, dict) or self.field not in row:
            raise ValueError(f"the row has no field {self.field!r}")
        return str(row[self.field])

    def __repr__(self) -> str:
        return f"FieldKey({self.field!r})"


class IterableSource:
    """A Python iterable as a source: rows counted, no digest (the rows cannot be read
    again by anyone but their owner)."""

    first_row = 0

    def __init__(self, rows: Iterable[Any]) -> None:
        self._rows = rows
        self.rows_read = self._yielded = 0
        self._ended = False

    def __iter__(self) -> Iterator[Any]:
        self.rows_read = self._yielded = 0
        self._ended = False
        for row in self._rows:
            self._yielded += 1
            yield row
        self._ended = True

    def commit(self, rows: int) -> bool:
        moved = self.rows_read < min(rows, self._yielded)
        self.rows_read = max(self.rows_read, min(rows, self._yielded))
        return moved

    @property
    def exhausted(self) -> bool:
        return self._ended and self.rows_read == self._yielded

    def record(self) -> dict[str, Any]:
        total = len(self._rows) if isinstance(self._rows, Sequence) else None
        return {
            "source": "python iterable", "path": None, "format": None, "size": None,
            "mtime": None, "digest": None, "bytes_read": None, "rows_read": self.rows_read,
            "rows_total": total, "exhausted": self.exhausted, "limit": None,
        }  # fmt: skip


class InputTracker:
    """Follows admission through one source and makes the run's input record.

    ``admitted(spec)`` after a chunk of specs was admitted (staged): the rows before
    ``spec``'s row count as read, and its row too when ``spec`` is its last repeat.
    """

    def __init__(self, specs: PipelineSpecs, source: FileSource | IterableSource) -> None:
        self.source = source
        self.repeats = specs.repeats
        key_of = specs.key_of
        self.key = key_of.field if isinstance(key_of, FieldKey) else None
        self.custom_key = key_of is not None and self.key is None
        self.shard = specs.shard
        self._taken: tuple[int, bool] | None = None

    @classmethod
    def of(cls, specs: Any) -> tuple[Any, InputTracker | None]:
        """``(specs, tracker)``: a ``template.map(rows)`` over a tracked source (a plain
        iterable is wrapped in one); anything else untracked, as it is."""
        if not isinstance(specs, PipelineSpecs):
            return specs, None
        source = specs.rows
        if not isinstance(source, FileSource | IterableSource):
            source = IterableSource(specs.rows)
            specs = PipelineSpecs(
                specs.template, source, repeats=specs.repeats, key_of=specs.key_of,
                shard=specs.shard,
            )  # fmt: skip
        return specs, cls(specs, source)

    def admitted(self, last: PipelineSpec) -> None:
        if last.row is None:
            return
        done = last.row + 1 if last.repeat >= self.repeats - 1 else last.row
        self.source.commit(done)

    def ended(self) -> None:
        """The input ended and every spec it yielded was admitted: its rows are all read,
        the rows of other shards (which yield no spec) included."""
        self.source.commit(2**62)

    @property
    def exhausted(self) -> bool:
        return self.source.exhausted

    def record(self) -> dict[str, Any]:
        record = self.source.record()
        record.update(repeats=self.repeats, key=self.key)
        if self.custom_key:
            record["custom_key"] = True
        if self.shard is not None:
            record["shard"] = str(self.shard)
        return record

    def take(self) -> dict[str, Any] | None:
        """The record when it changed since the last ``take`` (for the next flush)."""
        now = (self.source.rows_read, self.source.exhausted)
        if now == self._taken:
            return None
        self._taken = now
        return self.record()


class CarriedInput:
    """The input record of a run that resumed a finished input without rows: the same
    record, carried over so that the latest run always says what the store's input was."""

    def __init__(self, record: Mapping[str, Any]) -> None:
        self._record = dict(record)
        self.exhausted = bool(record.get("exhausted"))

    def record(self) -> dict[str, Any]:
        return dict(self._record)

    def take(self) -> dict[str, Any] | None:
        return None  # written once, with the run row

    def admitted(self, last: PipelineSpec) -> None:
        """Other specs than the input's: they read nothing of it."""

    def ended(self) -> None:
        """Nothing to read."""


#: What follows a run's input for it: a tracked source, or a finished record carried over.
Tracked = InputTracker | CarriedInput


def check_same_keys(tracker: InputTracker, record: Mapping[str, Any] | None) -> None:
    """Refuse a resume whose rows are named otherwise than the recorded run named them:
    each row would be a new pipeline, so every finished row would run (and be paid for)
    again and the store would hold each item twice. ``ConfigError`` on ``key``."""
    if record is None:
        return
    recorded = _naming(record.get("key"), bool(record.get("custom_key")))
    given = _naming(tracker.key, tracker.custom_key)
    if given != recorded:
        raise ConfigError(
            f"the store names its pipelines by {recorded}, this run by {given}: every row "
            "would be a new pipeline, and the rows already done would run again",
            field="key",
            hint=f"name the rows by {recorded} as the first run did (CLI: --key FIELD, "
            "or no --key for the row index; Python: key_of=...), or use another store",
        )


def check_same_shard(tracker: InputTracker, record: Mapping[str, Any] | None) -> None:
    """Refuse a resume that reads the input as another shard than the recorded run did:
    it would run the pipelines of other shards into this shard's store. ``ConfigError``
    on ``shard``."""
    if record is None:
        return
    recorded = record.get("shard")
    given = None if tracker.shard is None else str(tracker.shard)
    if given != recorded:
        was = f"shard {recorded}" if recorded else "every pipeline (no shard)"
        now = f"shard {given}" if given else "every pipeline (no shard)"
        raise ConfigError(
            f"the store's run read the input as {was}, this resume as {now}",
            field="shard",
            hint=f"resume with --shard {recorded}" if recorded else "resume without --shard",
        )


def _naming(key: Any, custom: bool) -> str:
    if custom:
        return "a key_of function"
    return "their row index" if key is None else f"the field {key!r}"


def latest_input(runs: Iterable[RunRow]) -> Mapping[str, Any] | None:
    """The input record of the latest run that has one (``runs`` oldest first)."""
    found = None
    for run in runs:
        if run.input is not None:
            found = run.input
    return found


def not_read(record: Mapping[str, Any]) -> str:
    """How many rows of ``record`` were not read, in words (``"327 rows"``)."""
    total, read = record.get("rows_total"), record.get("rows_read", 0)
    if total is None:
        return f"the rows after the first {read}"
    return f"{max(0, total - read)} of {total} rows"


def resume_source(
    record: Mapping[str, Any],
    *,
    limit: int | None = None,
    each: Callable[[int, Any, str], None] | None = None,
) -> FileSource:
    """The recorded file, re-opened after its rows read (``check``-ed whole with ``each``,
    so a row that no longer parses is found now). ``limit`` replaces the recorded one.

    Raises ``ConfigError`` (field ``input``) when the input cannot be read again: stdin, a
    Python iterable, a file that is missing or whose first ``rows_read`` rows changed. The
    message names the source and how many rows were not read.
    """
    source, unread = record.get("source"), not_read(record)
    if source != "file" or not record.get("path"):
        what = "stdin" if source == "stdin" else "a Python iterable"
        raise ConfigError(
            f"the run read {record.get('rows_read', 0)} rows of {what} and did not finish "
            f"it ({unread} not read), and only you have those rows",
            field="input",
            hint="pass the rows again: runner.run(template.map(rows), resume=True) "
            "(CLI: --input FILE --resume); finished work is skipped",
        )
    path = Path(str(record["path"]))
    if not path.is_file():
        raise ConfigError(
            f"the run's input {path} is missing; {unread} were not read yet",
            field="input",
            hint="put it back, or pass another file with --input FILE --input-changed",
        )
    recorded_limit = record.get("limit")
    if limit is not None and limit < int(record.get("rows_read") or 0):
        raise ConfigError(
            f"the limit {limit} is below the {record.get('rows_read')} rows already read",
            field="limit",
            hint="a resume can read more rows, never fewer: raise the limit or leave it out",
        )
    reopened = read_rows(
        path, record.get("format"), limit=limit if limit is not None else recorded_limit
    )
    try:
        reopened.check(each, resume_at=record)
    except InputChanged as exc:
        raise InputChanged(
            f"the run's input {path} changed since it was read ({exc.message}); "
            f"{unread} were not read yet",
            field="input",
            hint="restore the file, or read another one on purpose: --input FILE --input-changed",
        ) from exc
    return reopened


def input_of(
    specs: Any, store: Store, *, resume: bool, add_pipeline: bool
) -> tuple[Any, Tracked | None]:
    """``(specs, tracker)`` for a run of ``specs`` on ``store``: a template alone on resume
    reads the latest recorded input on (see ``Runner.run_async``); ``template.map(rows)``
    is tracked, and on resume must name its rows as the recorded run did; anything else
    is not tracked."""
    specs, tracker = InputTracker.of(specs)
    if not resume:
        return specs, tracker
    record = latest_input(store.runs())
    if tracker is not None:
        if not add_pipeline:
            check_same_keys(tracker, record)
            check_same_shard(tracker, record)
        return specs, tracker
    if record is None:
        return specs, None
    if record.get("exhausted") or not isinstance(specs, PipelineTemplate):
        # Other specs cannot read the recorded input on: it stays what it was, and a
        # run that leaves it unfinished ends `incomplete`, never `succeeded`.
        return specs, CarriedInput(record)
    if record.get("custom_key"):
        raise ConfigError(
            f"the run read {record.get('rows_read')} rows and did not finish them, "
            "and its keys came from a key_of function this resume does not have",
            field="specs",
            hint="pass the rows again: runner.run(template.map(rows, key_of=...), resume=True)",
        )
    source = resume_source(record)
    key = record.get("key")
    shard = record.get("shard")
    again = specs.map(
        source,
        repeats=int(record.get("repeats") or 1),
        key_of=FieldKey(key) if key else None,
        shard=Shard.parse(shard, field="shard") if shard else None,
    )
    return InputTracker.of(again)


def as_iterable(specs: Iterable[Any] | Any) -> Iterable[Any]:
    """The input of a run as an iterable of specs (one spec or template alone is one)."""
    if isinstance(specs, PipelineSpec | PipelineTemplate):
        return (specs,)
    if not isinstance(specs, Iterable):
        raise ConfigError(
            f"cannot run a {type(specs).__name__}",
            field="specs",
            hint="pass template.map(rows), template.bind(seed) or a list of those",
        )
    return specs
