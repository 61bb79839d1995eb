"""Per-request rows (``--samples``): CSV or JSON Lines, written as requests finish.

Rows are written as they come, so memory stays flat on long runs and a run stopped with
Ctrl-C keeps every row it finished. Columns are ``RequestRecord.to_dict()``'s keys.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import IO, Any

from pyattacker.errors import ConfigError
from pyattacker.measure import RequestRecord

__all__ = ["SampleWriter"]

_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


class SampleWriter:
    """Writes one row per :class:`RequestRecord`; use :meth:`open`, then ``write``/``close``."""

    def __init__(self, stream: IO[str], kind: str) -> None:
        self._stream = stream
        self._kind = kind
        self._csv: Any = None
        self.rows = 0

    @classmethod
    def open(cls, path: str | Path) -> SampleWriter:
        """A writer for ``path``; its suffix picks the format (.csv, .jsonl, .ndjson)."""
        target = Path(path)
        kind = _FORMATS.get(target.suffix.lower())
        if kind is None:
            raise ConfigError(
                f"cannot tell the format of {str(target)!r}",
                field="--samples",
                hint="name the file .csv or .jsonl",
            )
        try:
            stream = target.open("w", encoding="utf-8", newline="")
        except OSError as exc:
            raise ConfigError(
                f"cannot write {str(target)!r}: {exc.strerror}", field="--samples"
            ) from None
        return cls(stream, kind)

    def write(self, record: RequestRecord) -> None:
        row = record.to_dict()
        if self._kind == "jsonl":
            self._stream.write(json.dumps(row, separators=(",", ":")) + "\n")
        else:
            if self._csv is None:
                self._csv = csv.DictWriter(self._stream, fieldnames=list(row))
                self._csv.writeheader()
            self._csv.writerow(row)
        self.rows += 1

    def close(self) -> None:
        self._stream.close()
