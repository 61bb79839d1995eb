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

On a Ray cluster (``attack --ray``) a worker's node is not the user's machine: the driver
ships :meth:`SampleParts.held`'s twin instead, whose parts write the same rows into memory,
and takes them from each worker while it runs (every half second, a
:class:`~pyattacker.attack._taps.FetchedTap`), appending them to ``FILE.worker-I`` on the
driver's machine (:meth:`SampleParts.receive`); the join is the same. A worker holds the
rows of its requests since the last take (half a second's, unless the driver falls
behind); past :data:`HELD_LIMIT` characters it stops holding and counts its later rows
as lost, as a full disk would. A lost worker's rows are kept up to the last take; rows a
worker wrote that never reached the driver are counted in ``lost`` and said so.
"""

from __future__ import annotations

import errno
import io
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pyattacker.attack._samples import SampleWriter, samples_kind
from pyattacker.measure import RequestRecord

__all__ = ["HELD_LIMIT", "PartFacts", "SampleParts"]

_BLOCK = 1 << 16
#: The most a held part (``attack --ray``) keeps for the driver, in characters: about
#: 140,000 plain HTTP rows of JSON Lines (280,000 of CSV), some seconds of a fast worker's
#: rows, reached only if the driver stopped taking them.
HELD_LIMIT = 64 << 20


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


class _HeldPart:
    """One worker's rows, held in memory until the driver takes them (a
    :class:`~pyattacker.attack._taps.RecordTap`; ``add`` and ``take`` on two threads)."""

    def __init__(self, kind: str, llm: bool, limit: int) -> None:
        self._stream = io.StringIO(newline="")
        self.writer = SampleWriter(self._stream, kind, llm=llm)
        self._limit = limit
        self._lock = threading.Lock()

    def add(self, record: RequestRecord) -> None:
        with self._lock:
            if self.writer.failed is None and self._stream.tell() >= self._limit:
                self.writer.failed = OSError(
                    errno.ENOBUFS, f"a Ray worker held {self._limit:,} characters of rows the "
                    "driver had not taken",
                )  # fmt: skip
            self.writer.write(record)

    def take(self) -> bytes:
        """The rows written since the last take (whole rows: each is one write)."""
        with self._lock:
            text = self._stream.getvalue()
            self._stream.seek(0)
            self._stream.truncate()
        return text.encode("utf-8")

    def part(self, *, final: bool) -> PartFacts:
        with self._lock:
            w = self.writer
            return PartFacts(w.rows, w.lost, None if w.failed is None else str(w.failed))


class _HeldSamples:
    """:meth:`SampleParts.held`: the tap a Ray worker opens (a
    :class:`~pyattacker.attack._taps.HeldTap`)."""

    def __init__(self, kind: str, llm: bool, limit: int) -> None:
        self.kind, self.llm, self.limit = kind, llm, limit
        self._parts: dict[int, _HeldPart] = {}

    def open(self, index: int) -> _HeldPart:
        self._parts[index] = part = _HeldPart(self.kind, self.llm, self.limit)
        return part

    def take(self, index: int) -> bytes:
        part = self._parts.get(index)
        return b"" if part is None else part.take()

    def gather(self, parts: Sequence[object | None], lost: Sequence[int]) -> None:
        """Nothing: the driver gathers the :class:`SampleParts` this twin came from."""


class SampleParts:
    """``--samples FILE`` written by workers (see the module docstring): a
    :class:`~pyattacker.attack._taps.WorkerTap`, and a
    :class:`~pyattacker.attack._taps.FetchedTap` for workers on other machines (:meth:`held`,
    :meth:`receive`). ``ConfigError`` for a FILE whose format
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
        self._received: set[int] | None = None  # the parts received (after held())

    def part_path(self, index: int) -> Path:
        """Where worker ``index`` writes its rows (or the driver the rows it took from it)."""
        return self.path.with_name(f"{self.path.name}.worker-{index}")

    def held(self) -> _HeldSamples:
        """The twin for workers on other machines (see the module docstring); once it
        is made, this tap joins only the parts it received (:meth:`receive`)."""
        self._received = set()
        return _HeldSamples(self.kind, self.llm, HELD_LIMIT)

    def receive(self, index: int, data: bytes) -> None:
        """Append ``data`` (whole rows taken from worker ``index``'s held part) to its
        part file; the first data of a worker starts the file afresh."""
        if not data:
            return
        received = self._received if self._received is not None else set()
        self._received = received
        first = index not in received
        received.add(index)
        try:
            with self.part_path(index).open("wb" if first else "ab") as part:
                part.write(data)
        except OSError as exc:
            self._failed(exc)
            header = 1 if first and self.kind == "csv" else 0
            self.lost += data.count(b"\n") - header

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
                before = self.rows
                header = self._join(index, out, header, index in lost)
                if isinstance(facts, PartFacts) and index not in lost:
                    self._check_arrived(index, facts.rows - (self.rows - before))

    def _check_arrived(self, index: int, missing: int) -> None:
        """Count and say the rows worker ``index`` wrote that never reached the driver
        (a take that failed at the end): only rows taken from other machines can be."""
        if self._received is None or missing <= 0:
            return
        self.lost += missing
        self._failed(OSError(errno.EIO, f"{missing:,} rows of worker {index} never arrived"))
        self.notes.append(
            f"--samples: worker {index} wrote {missing:,} rows that never reached this "
            f"machine; {self.path} is incomplete"
        )

    def _join(
        self, index: int, out: io.BufferedWriter, header: bytes | None, lost: bool
    ) -> bytes | None:
        """Append worker ``index``'s part to ``out`` (its CSV header only if none was
        written yet) and remove it; the header written so far."""
        copied = 0  # no part: a worker lost before it opened one, or none taken from it
        if self._received is None or index in self._received:
            try:
                header, copied = self._copy_part(self.part_path(index), out, header, lost)
            except FileNotFoundError:
                pass
            except OSError as exc:
                self._failed(exc)
                return header
        self.rows += copied
        if lost and self._received is not None:
            self.notes.append(
                f"--samples: worker {index} was lost: its {copied:,} rows taken before then "
                f"are in {self.path}; the rows it wrote after the last take (every half "
                "second) and those it had not written yet are missing"
            )
        elif lost:
            self.notes.append(
                f"--samples: worker {index} was lost: its {copied:,} rows written before it "
                f"died are in {self.path}; the rows it had not written yet are missing"
            )
        return header

    def _copy_part(
        self, path: Path, out: io.BufferedWriter, header: bytes | None, lost: bool
    ) -> tuple[bytes | None, int]:
        """Copy the part at ``path`` into ``out`` and remove it: the header written so
        far, and the rows copied."""
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
        return header, copied

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
