"""Per-request rows (``--samples``): CSV or JSON Lines, written as requests finish.

Rows are written as they come, so memory stays flat on long runs and a run stopped with
Ctrl-C keeps every row it finished. The columns are fixed by the kind of attack, not by
the first row: :data:`~pyattacker.measure.SAMPLE_COLUMNS` for HTTP, and
:data:`~pyattacker.measure.LLM_SAMPLE_COLUMNS` (the same plus the last attempt's first
token, TTFT on both clocks, chunks, tokens, request id, ``Retry-After`` and rate-limit
headers) for an LLM attack. A CSV cell cannot hold an object, so there the
``rate_limit_headers`` column is JSON text; JSON Lines has the object itself.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import IO, Any

from pyattacker.errors import ConfigError
from pyattacker.measure import LLM_SAMPLE_COLUMNS, SAMPLE_COLUMNS, RequestRecord

__all__ = ["SampleWriter", "samples_kind"]

_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
_OBJECT_COLUMNS = ("rate_limit_headers",)  # JSON text in a CSV cell


def samples_kind(path: Path) -> str:
    """``csv`` or ``jsonl``, as ``path``'s suffix says; ``ConfigError`` otherwise."""
    kind = _FORMATS.get(path.suffix.lower())
    if kind is None:
        raise ConfigError(
            f"cannot tell the format of {str(path)!r}",
            field="--samples",
            hint="name the file .csv or .jsonl",
        )
    return kind


class SampleWriter:
    """Writes one row per :class:`RequestRecord`; use :meth:`open`, then ``write``/``close``.

    ``llm`` (the plan is an LLM attack) adds the LLM columns to every row, so that a CSV
    file has one header whatever its first request did.

    Writing never raises during a run (a full disk must not stop the attack or lose its
    report): the first ``OSError`` is kept in ``failed``, later rows are only counted in
    ``lost``, and the caller says so when the run is over.
    """

    def __init__(self, stream: IO[str], kind: str, *, llm: bool = False) -> None:
        self._stream = stream
        self._kind = kind
        self._llm = llm
        self._csv: Any = None
        self.columns = LLM_SAMPLE_COLUMNS if llm else SAMPLE_COLUMNS
        self.rows = 0
        self.lost = 0
        self.failed: OSError | None = None

    @classmethod
    def open(cls, path: str | Path, *, llm: bool = False) -> SampleWriter:
        """A writer for ``path``; its suffix picks the format (.csv, .jsonl, .ndjson)."""
        target = Path(path)
        kind = samples_kind(target)
        try:
            stream = target.open("w", encoding="utf-8", newline="")
        except OSError as exc:
            raise ConfigError(
                f"cannot write {str(target)!r}: {exc.strerror}", field="--samples"
            ) from None
        return cls(stream, kind, llm=llm)

    def write(self, record: RequestRecord) -> None:
        if self.failed is not None:
            self.lost += 1
            return
        try:
            self._write(record)
        except OSError as exc:
            self.failed = exc
            self.lost += 1

    def _write(self, record: RequestRecord) -> None:
        row = record.to_dict(llm=self._llm)
        if self._kind == "jsonl":
            self._stream.write(json.dumps(row, separators=(",", ":")) + "\n")
        else:
            if self._csv is None:
                self._csv = csv.DictWriter(self._stream, fieldnames=self.columns)
                self._csv.writeheader()
            if self._llm:
                for name in _OBJECT_COLUMNS:
                    if row[name] is not None:
                        row[name] = json.dumps(row[name], separators=(",", ":"), sort_keys=True)
            self._csv.writerow(row)
        self.rows += 1

    def close(self) -> None:
        try:
            self._stream.close()
        except OSError as exc:  # the last buffered rows did not reach the file
            if self.failed is None:
                self.failed = exc
