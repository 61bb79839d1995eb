"""Where a run's rows come from: a JSON Lines, CSV or Parquet file, stdin, or an iterable.

``read_rows("items.jsonl")`` is a :class:`FileSource`: iterate it (or pass it to
``template.map``) and it yields one row at a time, in bounded memory. A source keeps what a
resume needs to trust it again:

- its description: path (absolute), format, size and modification time;
- how many rows were *read* — counted only when the consumer :meth:`~FileSource.commit`\\ s
  them (the Runner does once every pipeline of a row is admitted, in the transaction that
  stores them), so the count never runs ahead of the store;
- a SHA-256 digest of the bytes of those rows: the file from its first byte to the end of
  the last row read (for CSV the header is part of it). For Parquet, whose bytes are not
  laid out row by row, the digest is over each row's canonical JSON and a newline;
- whether it was exhausted: read to its end (or to its ``limit``) and every row committed.

Formats: ``jsonl`` (one JSON value per line; blank lines skipped), ``csv`` (a header row,
then one ``dict`` per record with every value a ``str``, exactly as the ``csv`` module
gives it: no number guessing; an empty field is ``""``), ``parquet`` (needs the ``parquet``
extra: ``pip install 'pyattacker[parquet]'``; values as pyarrow's ``to_pylist`` gives
them). :meth:`FileSource.check` reads the whole source once before a run: a row that does
not parse is a ``ConfigError`` naming it.

``read_rows("-")`` reads stdin, spooled (to memory, then a temporary file past 32 MiB) so
that it can be checked before anything runs; it is recorded as source ``"stdin"``.
"""

from __future__ import annotations

import collections
import contextlib
import csv
import hashlib
import importlib
import io
import itertools
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from pyattacker.errors import ConfigError
from pyattacker.run._json import canonical_json

__all__ = ["FORMATS", "FileSource", "InputChanged", "format_of", "range_rows", "read_rows"]

FORMATS = ("jsonl", "csv", "parquet")
_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet"}
_SPOOL_IN_MEMORY = 32 * 1024 * 1024
_PARQUET_BATCH = 1024

#: (the row, the bytes it adds to the digest, where it is for messages: "line 12")
Raw = tuple[Any, bytes, str]
Opener = Callable[[], contextlib.AbstractContextManager[IO[bytes]]]


class InputChanged(ConfigError):
    """The rows a record says were read are not the first rows of this source."""


def format_of(path: str | os.PathLike[str], format: str | None = None) -> str:
    """``format`` checked, or the one ``path``'s suffix names; ``ConfigError`` otherwise."""
    if format is not None:
        if format not in FORMATS:
            raise ConfigError(
                f"unknown input format {format!r}", field="format", hint=f"one of: {FORMATS}"
            )
        return format
    found = _SUFFIXES.get(Path(path).suffix.lower())
    if found is None:
        raise ConfigError(
            f"cannot tell the format of {os.fspath(path)} from its name",
            field="format",
            hint="name it .jsonl, .csv or .parquet, or say the format (--input-format)",
        )
    return found


def read_rows(
    path: str | os.PathLike[str], format: str | None = None, *, limit: int | None = None
) -> FileSource:
    """The rows of ``path`` (``"-"``: stdin), the first ``limit`` of them when given.

    ``format`` is ``"jsonl"``, ``"csv"`` or ``"parquet"``; by default the file's suffix
    says (``.jsonl``/``.ndjson``, ``.csv``, ``.parquet``), and stdin is JSON Lines.
    Raises ``ConfigError`` (field ``input``) for a missing file, an unknown format or, for
    Parquet, a missing pyarrow. Nothing is read until the source is checked or iterated
    (stdin excepted: it is spooled at once).
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ConfigError(f"must be an integer >= 0, got {limit!r}", field="limit")
    if os.fspath(path) == "-":
        fmt = format_of("-.jsonl", format)
        spooled = _spool(sys.stdin.buffer)
        return FileSource(
            origin="stdin", path=None, name="stdin", format=fmt, opener=_reopen(spooled),
            size=spooled.seek(0, io.SEEK_END), mtime=None, limit=limit, spool=spooled,
        )  # fmt: skip
    where = Path(path)
    if where.is_dir():
        raise ConfigError(
            f"{where} is a directory, not a file", field="input", hint="name one file of rows"
        )
    fmt = format_of(path, format)
    if not where.is_file():
        what = "is not a regular file" if where.exists() else "does not exist"
        raise ConfigError(f"{where} {what}", field="input", hint="check the path")
    if fmt == "parquet":
        _pyarrow()
    stat = where.stat()
    return FileSource(
        origin="file", path=where.resolve(), name=str(where), format=fmt,
        opener=lambda: where.open("rb"), size=stat.st_size, mtime=stat.st_mtime, limit=limit,
    )  # fmt: skip


def range_rows(count: int, *, limit: int | None = None) -> FileSource:
    """The integers ``0..count-1`` as rows (a config's ``source.range``), a source like a
    file's: recorded as source ``"range"``, checked and digested the same way."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ConfigError(f"must be an integer >= 0, got {count!r}", field="range")
    data = b"".join(b"%d\n" % n for n in range(count))

    @contextlib.contextmanager
    def opener() -> Iterator[IO[bytes]]:
        yield io.BytesIO(data)

    return FileSource(
        origin="range", path=None, name=f"range {count}", format="jsonl", opener=opener,
        size=len(data), mtime=None, limit=limit,
    )  # fmt: skip


class FileSource:
    """Rows of a file or of stdin, counted and digested as they are committed; see the
    module docstring. Iterable more than once (each iteration starts at :attr:`first_row`)
    but not by two loops at once."""

    def __init__(
        self,
        *,
        origin: str,
        path: Path | None,
        name: str,
        format: str,
        opener: Opener,
        size: int | None,
        mtime: float | None,
        limit: int | None,
        spool: IO[bytes] | None = None,
    ) -> None:
        self.origin, self.path, self.name, self.format = origin, path, name, format
        self._spool = spool
        self.size, self.mtime, self.limit = size, mtime, limit
        self._open = opener
        self.rows_total: int | None = None
        # Where an iteration starts: (rows, bytes, digest of them); moved by `check`.
        self._start: tuple[int, int, Any] = (0, 0, hashlib.sha256())
        self._restart()

    def _restart(self) -> None:
        rows, offset, hasher = self._start
        self.rows_read, self.bytes_read, self._hasher = rows, offset, hasher.copy()
        self._yielded, self._ended = rows, False
        self._pending: collections.deque[bytes] = collections.deque()

    @property
    def first_row(self) -> int:
        """The index of the first row an iteration yields (after a resume, rows read)."""
        return self._start[0]

    @property
    def digest(self) -> str:
        return f"sha256:{self._hasher.hexdigest()}"

    @property
    def exhausted(self) -> bool:
        """Read to the end (or ``limit``), and every row yielded committed."""
        return self._ended and self.rows_read == self._yielded

    def __iter__(self) -> Iterator[Any]:
        self._restart()
        rows, offset, _ = self._start
        for row, raw, _where in self._raw(rows, offset):
            self._pending.append(raw)
            self._yielded += 1
            yield row
        self._ended = True

    def commit(self, rows: int) -> bool:
        """Count the rows before index ``rows`` as read (never backwards); whether the
        count moved."""
        moved = False
        while self.rows_read < rows and self._pending:
            raw = self._pending.popleft()
            self._hasher.update(raw)
            self.bytes_read += len(raw)
            self.rows_read += 1
            moved = True
        return moved

    def check(
        self,
        each: Callable[[int, Any, str], None] | None = None,
        *,
        resume_at: Mapping[str, Any] | None = None,
        same_as: Mapping[str, Any] | None = None,
    ) -> int:
        """Read every row once, calling ``each(index, row, where)`` (it raises
        ``ConfigError`` for a bad row), and return how many rows there are.

        With ``resume_at`` (an input record), the first ``resume_at["rows_read"]`` rows must
        have the recorded digest: then iterations start after them, and the record's count
        and digest go on from there. ``ConfigError`` (field ``input``) when they differ or
        the source has fewer rows: it is not the data the record was made from. With
        ``same_as`` the same check is made, and iterations still start at the first row.
        """
        record = resume_at if resume_at is not None else same_as
        wanted = None if record is None else int(record["rows_read"])
        hasher, offset, count, start = hashlib.sha256(), 0, 0, None
        if wanted == 0:
            start = (0, 0, hasher.copy())
        for index, (row, raw, where) in enumerate(self._raw(0, 0)):
            if each is not None:
                each(index, row, where)
            hasher.update(raw)
            offset += len(raw)
            count = index + 1
            if count == wanted:
                start = (count, offset, hasher.copy())
        self.rows_total = count
        if record is not None:
            self._verify(record, start, move=resume_at is not None)
        return count

    def _verify(
        self, record: Mapping[str, Any], start: tuple[int, int, Any] | None, *, move: bool
    ) -> None:
        found = None if start is None else "sha256:" + start[2].hexdigest()
        if start is None or (record["rows_read"] and found != record.get("digest")):
            what = "has fewer rows than" if start is None else "differs from"
            raise InputChanged(
                f"{self.name} {what} the input the run recorded: its first "
                f"{record['rows_read']} rows are not the rows already read",
                field="input",
                hint="pass the same data, or consent to reading this one (--input-changed)",
            )
        if move:
            self._start = start
            self._restart()

    def record(self) -> dict[str, Any]:
        """The source's part of a run's input record (see ``pyattacker.run._input``)."""
        return {
            "source": self.origin,
            "path": None if self.path is None else str(self.path),
            "format": self.format,
            "size": self.size,
            "mtime": self.mtime,
            "digest": self.digest,
            "bytes_read": self.bytes_read,
            "rows_read": self.rows_read,
            "rows_total": self.rows_total,
            "exhausted": self.exhausted,
            "limit": self.limit,
        }

    # -- the readers ---------------------------------------------------------------------

    def _raw(self, rows: int, offset: int) -> Iterator[Raw]:
        """Rows from index ``rows`` (at byte ``offset`` for the line formats), to the limit."""
        reader = {"jsonl": _jsonl, "csv": _csv, "parquet": _parquet}[self.format]
        try:
            opened = self._open()
        except OSError as exc:  # unreadable to this user, or gone since it was named
            why = exc.strerror or type(exc).__name__
            raise ConfigError(f"cannot read {self.name}: {why}", field="input") from exc
        with opened as stream:
            found = reader(stream, rows, offset, self.name)
            if self.limit is not None:  # not one row more: a bad row past the limit is fine
                found = itertools.islice(found, max(0, self.limit - rows))
            yield from found

    def close(self) -> None:
        """Release the spool of stdin (a file is opened only while it is read)."""
        if self._spool is not None:
            self._spool.close()

    def __enter__(self) -> FileSource:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<FileSource {self.name!r} {self.format} rows_read={self.rows_read}"
            f" exhausted={self.exhausted}>"
        )


def _jsonl(stream: IO[bytes], rows: int, offset: int, name: str) -> Iterator[Raw]:
    stream.seek(offset)
    pending = b""  # blank lines before a row are part of its bytes
    for number, line in enumerate(stream, 1):
        where = f"line {number}" if offset == 0 else f"row {rows}"
        pending += line
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"{where} of {name} is not UTF-8: {exc.reason}", field="input"
            ) from exc
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except ValueError as exc:
            raise ConfigError(
                f"{where} of {name} is not JSON: {exc}",
                field="input",
                hint="one JSON value per line",
            ) from exc
        yield row, pending, where
        pending, rows = b"", rows + 1


def _csv(stream: IO[bytes], rows: int, offset: int, name: str) -> Iterator[Raw]:
    consumed: list[bytes] = []  # the lines the csv reader pulled for the current record

    def lines() -> Iterator[str]:
        codec = "utf-8-sig"  # the first line may start with a byte order mark
        for line in stream:
            consumed.append(line)
            try:
                yield line.decode(codec)
                codec = "utf-8"
            except UnicodeDecodeError as exc:
                raise ConfigError(
                    f"record {rows + 1} of {name} is not UTF-8: {exc.reason}", field="input"
                ) from exc

    records = csv.reader(lines())
    header = _header(next(records, None), name)
    if offset:
        stream.seek(offset)
        consumed.clear()
    for record in records:
        if not record:  # a blank line
            continue
        where = f"record {rows + 1}" if offset == 0 else f"row {rows}"
        if len(record) != len(header):
            raise ConfigError(
                f"{where} of {name} has {len(record)} fields; the header has {len(header)}",
                field="input",
            )
        raw = b"".join(consumed)
        consumed.clear()
        yield dict(zip(header, record, strict=True)), raw, where
        rows += 1


def _header(header: list[str] | None, name: str) -> list[str]:
    if not header:
        raise ConfigError(f"{name} has no header row", field="input", hint="CSV needs one")
    if len(set(header)) != len(header):
        raise ConfigError(f"the header of {name} names a column twice", field="input")
    return header


def _parquet(stream: IO[bytes], rows: int, offset: int, name: str) -> Iterator[Raw]:
    pq = _pyarrow()
    try:
        batches = pq.ParquetFile(stream).iter_batches(batch_size=_PARQUET_BATCH)
        index = 0
        for batch in batches:
            for row in batch.to_pylist():
                if index >= rows:
                    yield row, _canonical(row, index, name), f"row {index}"
                index += 1
    except ConfigError:
        raise
    except Exception as exc:  # pyarrow's errors: a file that is not Parquet, a bad page
        raise ConfigError(f"cannot read {name} as Parquet: {exc}", field="input") from exc


def _canonical(row: Any, index: int, name: str) -> bytes:
    try:
        return canonical_json(row) + b"\n"
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"row {index} of {name} cannot be stored as JSON: {exc}",
            field="input",
            hint="convert such columns (timestamps, decimals) to strings or numbers",
        ) from exc


def _pyarrow() -> Any:
    try:
        return importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise ConfigError(
            "reading Parquet needs pyarrow",
            field="input",
            hint="install the parquet extra: pip install 'pyattacker[parquet]'",
        ) from None


def _spool(stream: IO[bytes]) -> IO[bytes]:
    spooled = tempfile.SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY)  # noqa: SIM115
    while chunk := stream.read(1 << 20):
        spooled.write(chunk)
    return spooled


def _reopen(spooled: IO[bytes]) -> Opener:
    @contextlib.contextmanager
    def opener() -> Iterator[IO[bytes]]:
        spooled.seek(0)
        yield spooled  # kept open: the spool is the only copy of stdin

    return opener
