"""``--samples FILE`` with ``--workers``: each worker writes a part, the driver joins them.

A tap (``attack/_taps.py``): each worker writes the rows of its own requests, as they
finish, to ``FILE.worker-I`` next to FILE (I its index), flushed with every snapshot (twice
a second), so that a worker that dies leaves its rows on disk up to then at least. Once
every worker has ended, the driver joins the parts into FILE, streaming (memory stays
flat), in worker order: worker 0's rows, then worker 1's, and so on, each worker's in the
order its requests finished (a row's ``request`` is its arrival's number in the one
schedule, or a scenario step's, never the same in two workers); a CSV file has one
header. Then it removes the parts.

A lost worker's part is joined as far as it was written (an unfinished last row is left
out) and :attr:`SampleParts.notes` says so: the rows it had not written yet are missing.
A part that could not be written is counted in ``failed`` and ``lost`` as one
:class:`SampleWriter`'s would be.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pyattacker.attack._samples import SampleWriter, samples_kind
from pyattacker.measure import RequestRecord

__all__ = ["PartFacts", "SampleParts"]

_BLOCK = 1 << 16


@dataclass(frozen=True, slots=True)
class PartFacts:
    """What one worker's part holds: ``rows`` written, ``lost`` rows it could not write,
    and the first write ``error`` (None when none failed)."""

    rows: int
    lost: int
    error: str | None


class _Part:
    """One worker's rows (a :class:`~pyattacker.attack._taps.RecordTap`)."""

    def __init__(self, path: Path, kind: str, llm: bool) -> None:
        error: OSError | None = None
        stream: IO[str]
        try:
            stream = path.open("w", encoding="utf-8", newline="")
        except OSError as exc:
            stream, error = io.StringIO(), exc
        self.writer = SampleWriter(stream, kind, llm=llm)
        self.writer.failed = error
        self._stream = stream

    def add(self, record: RequestRecord) -> None:
        self.writer.write(record)

    def part(self, *, final: bool) -> PartFacts:
        writer = self.writer
        if final:
            writer.close()
        elif writer.failed is None:
            try:
                self._stream.flush()
            except OSError as exc:
                writer.failed = exc
        error = writer.failed
        return PartFacts(writer.rows, writer.lost, None if error is None else str(error))


class SampleParts:
    """``--samples FILE`` written by workers (see the module docstring): a
    :class:`~pyattacker.attack._taps.WorkerTap`. ``ConfigError`` for a FILE whose format
    its suffix does not tell. After :meth:`gather`: ``rows`` in FILE, ``failed`` (the
    first error, None if none) and ``lost`` (rows known missing, as
    :class:`SampleWriter`'s), and ``notes``, one line per thing a user must know."""

    def __init__(self, path: str | Path, *, llm: bool = False) -> None:
        self.path = Path(path)
        self.kind = samples_kind(self.path)
        self.llm = llm
        self.rows = self.lost = 0
        self.failed: OSError | None = None
        self.notes: list[str] = []

    def part_path(self, index: int) -> Path:
        """Where worker ``index`` writes its rows."""
        return self.path.with_name(f"{self.path.name}.worker-{index}")

    def open(self, index: int) -> _Part:
        return _Part(self.part_path(index), self.kind, self.llm)

    def close(self) -> None:
        """Nothing to close in the driver (the workers close their parts)."""

    def gather(self, parts: Sequence[object | None], lost: Sequence[int]) -> None:
        """Join the parts into the file, in worker order, and remove them."""
        try:
            out = self.path.open("wb")
        except OSError as exc:
            self._failed(exc)
            self.notes.append(f"--samples: the workers' rows stay in {self.path}.worker-*")
            return
        header: bytes | None = None
        with out:
            for index, facts in enumerate(parts):
                if isinstance(facts, PartFacts):
                    self.lost += facts.lost
                    if facts.error is not None:
                        self._failed(OSError(facts.error))
                header = self._join(index, out, header, index in lost)

    def _join(
        self, index: int, out: io.BufferedWriter, header: bytes | None, lost: bool
    ) -> bytes | None:
        """Append worker ``index``'s part to ``out`` (its CSV header only if none was
        written yet) and remove it; the header written so far."""
        path = self.part_path(index)
        try:
            with path.open("rb") as part:
                end = _whole_rows_end(part) if lost else None
                if self.kind == "csv":
                    first = part.readline()
                    whole = first.endswith(b"\n") and (end is None or part.tell() <= end)
                    if header is None and whole:
                        header = first
                        out.write(first)
                copied = _copy(part, out, end)
            path.unlink()
        except FileNotFoundError:  # a worker lost before it opened its part
            copied = 0
        except OSError as exc:
            self._failed(exc)
            return header
        self.rows += copied
        if lost:
            self.notes.append(
                f"--samples: worker {index} was lost: its {copied:,} rows written before it "
                f"died are in {self.path}; the rows it had not written yet are missing"
            )
        return header

    def _failed(self, exc: OSError) -> None:
        if self.failed is None:
            self.failed = exc


def _whole_rows_end(part: io.BufferedReader) -> int:
    """The offset just past the last newline of ``part`` (a row cut short by its writer's
    death is left out); the position is left at the start."""
    size = part.seek(0, os.SEEK_END)
    at = size
    while at > 0:
        start = max(0, at - _BLOCK)
        part.seek(start)
        found = part.read(at - start).rfind(b"\n")
        if found >= 0:
            part.seek(0)
            return start + found + 1
        at = start
    part.seek(0)
    return 0


def _copy(part: io.BufferedReader, out: io.BufferedWriter, end: int | None) -> int:
    """Copy ``part`` from its position (to ``end``, if given) into ``out``; the rows
    (lines) copied."""
    rows = 0
    left = None if end is None else max(0, end - part.tell())
    while left is None or left > 0:
        block = part.read(_BLOCK if left is None else min(_BLOCK, left))
        if not block:
            break
        rows += block.count(b"\n")
        out.write(block)
        if left is not None:
            left -= len(block)
    return rows
