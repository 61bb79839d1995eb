"""``attack --sweep --samples FILE``: every level's rows in one file, each row with its level.

Each level writes its rows as a single attack does (from this process, or a part per
worker joined when the level ends) into a file of its own beside FILE
(``rows.level-1.csv`` for ``rows.csv``). When the level ends its rows are appended to FILE
behind two columns of their own: ``level``, the level's number (1, 2, ... in the order
the report's rows have) and ``load``, its name there (``concurrency 8``, ``rate
12.5/s``); then the level's file is removed. So FILE holds the rows of every level that
ran, with one CSV header, however each level ran; a level interrupted by Ctrl-C
keeps the rows it wrote. A level's file that could not be appended stays, and stderr
says so.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import IO

import click

from pyattacker.attack import samples_kind
from pyattacker.errors import ConfigError

__all__ = ["LEVEL_COLUMNS", "SweepSamples"]

LEVEL_COLUMNS = ("level", "load")
"""The columns a sweep's rows have before a single attack's."""


class SweepSamples:
    """FILE, opened (emptied) before the first level; :meth:`level_path` says where level
    ``i`` writes, :meth:`append` moves its rows into FILE. ``rows`` counts the rows
    moved; ``failed`` is the first error writing FILE (later levels are then left in
    their files)."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.kind = samples_kind(self.path)  # ConfigError for a suffix it cannot tell
        try:
            self._out: IO[str] = self.path.open("w", encoding="utf-8", newline="")
        except OSError as exc:
            raise ConfigError(
                f"cannot write {str(self.path)!r}: {exc.strerror}", field="--samples"
            ) from None
        self._csv = csv.writer(self._out) if self.kind == "csv" else None
        self._header = False
        self.rows = 0
        self.failed: OSError | None = None

    def level_path(self, i: int) -> str:
        """Where level ``i`` (0-based) writes its rows: ``rows.level-1.csv`` for
        ``rows.csv``."""
        path = self.path
        return str(path.with_name(f"{path.stem}.level-{i + 1}{path.suffix}"))

    def append(self, i: int, load: str) -> None:
        """Move level ``i``'s rows (named ``load``) into FILE, and remove its file."""
        level = Path(self.level_path(i))
        if not level.exists():  # the level sent nothing it could write (or never ran)
            return
        if self.failed is None:
            try:
                with level.open(encoding="utf-8", newline="") as rows:
                    self._copy(rows, i + 1, load)
                self._out.flush()
            except OSError as exc:
                self.failed = exc
        if self.failed is not None:
            click.echo(f"--samples: level {i + 1}'s rows stay in {level}: writing "
                       f"{self.path} failed ({self.failed.strerror})", err=True)  # fmt: skip
            return
        level.unlink(missing_ok=True)

    def _copy(self, rows: IO[str], number: int, load: str) -> None:
        if self._csv is None:  # JSON Lines: the two keys first
            for line in rows:
                if line.strip():
                    row = {"level": number, "load": load, **json.loads(line)}
                    self._out.write(json.dumps(row, separators=(",", ":")) + "\n")
                    self.rows += 1
            return
        reader = csv.reader(rows)
        header = next(reader, None)
        if header is None:
            return
        if not self._header:
            self._csv.writerow([*LEVEL_COLUMNS, *header])
            self._header = True
        for cells in reader:
            self._csv.writerow([number, load, *cells])
            self.rows += 1

    def close(self) -> None:
        try:
            self._out.close()
        except OSError as exc:
            self.failed = self.failed or exc
