"""``--data``: the rows templated requests are filled from, used in turn or at random.

A rows file is JSON Lines (one object per line; blank lines skipped) or, when its name
ends in ``.csv``, CSV with a header row (every value a string). It is read whole, before
any traffic; :meth:`DataRows.row` is what a request (or a scripted flow) asks for its row.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pyattacker._inputs import MiB, loads, read_bounded
from pyattacker.attack._draws import Draws
from pyattacker.errors import ConfigError

__all__ = ["DATA_LIMIT", "ORDERS", "DataRows", "Order"]

Order = Literal["sequential", "random"]
ORDERS: tuple[Order, ...] = ("sequential", "random")
DATA_LIMIT = 256 * MiB  # rows are kept in memory for the whole run
_HINT = 'one JSON object per line, e.g. {"id": 42}, or a .csv file with a header row'


class DataRows:
    """The rows of a data file and how requests take them.

    ``row(n)`` is request ``n``'s row: ``sequential`` takes row ``n mod len(rows)`` (in
    turn, from the first, again from the start when they run out); ``random`` draws one
    uniformly from a stream seeded by ``seed``, a pure function of ``(seed, n)`` (two runs
    with one seed give request ``n`` the same row, whatever the timing). Every attempt of a
    request has its row.
    """

    __slots__ = ("_draw", "_n", "order", "path", "rows", "seed")

    def __init__(
        self, rows: Sequence[Mapping[str, Any]], *, order: Order = "sequential", seed: int = 0,
        path: str | None = None,
    ) -> None:  # fmt: skip
        if not rows:
            raise ConfigError("the data has no rows", field="--data", hint=_HINT)
        if order not in ORDERS:
            raise ConfigError(
                f"unknown order {order!r}", field="--data-order", hint="sequential or random"
            )
        self.rows, self.order, self.seed, self.path = tuple(rows), order, seed, path
        self._n = len(self.rows)
        self._draw = Draws(seed, "data", [1.0] * self._n) if order == "random" else None

    def __len__(self) -> int:
        return self._n

    def __repr__(self) -> str:
        return f"DataRows({len(self)} rows, order={self.order!r}, path={self.path!r})"

    def describe(self) -> dict[str, Any]:
        """What a report's plan says of the rows: their file, how many, the order."""
        return {"file": self.path, "rows": len(self), "order": self.order}

    def row(self, index: int) -> Mapping[str, Any] | None:
        """Request ``index``'s row (never None: the type leaves room for "no data")."""
        draw = self._draw
        return self.rows[index % self._n if draw is None else draw(index)]

    @classmethod
    def load(cls, path: str, *, order: Order = "sequential", seed: int = 0) -> DataRows:
        """Read ``path`` (JSONL, or CSV by its ``.csv`` name); a ConfigError names the file,
        the line and what is wrong."""
        raw = read_bounded(path, "--data", DATA_LIMIT)
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 ({exc.reason})", field="--data") from None
        reader = _csv_rows if Path(path).suffix.lower() == ".csv" else _jsonl_rows
        return cls(reader(text, path), order=order, seed=seed, path=path)


def _jsonl_rows(text: str, path: str) -> list[Mapping[str, Any]]:
    rows: list[Mapping[str, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = loads(line, "--data")
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{path} line {number}: not JSON ({exc.msg})", field="--data", hint=_HINT
            ) from None
        if not isinstance(value, dict):
            raise ConfigError(
                f"{path} line {number}: a row must be a JSON object, got {type(value).__name__}",
                field="--data",
                hint=_HINT,
            )
        rows.append(value)
    return rows


def _csv_rows(text: str, path: str) -> list[Mapping[str, Any]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    rows: list[Mapping[str, Any]] = []
    for row in reader:
        if None in row or None in row.values():
            raise ConfigError(
                f"{path} line {reader.line_num}: not as many values as the header has names",
                field="--data",
                hint=_HINT,
            )
        rows.append(dict(row))
    return rows
