"""``attack --sweep --samples``: each level's rows moved into the sweep's file behind its
level's number and name (``cli/_sweep_samples.py``), and what is kept when that fails."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import IO

import pytest

from pyattacker.cli._sweep_samples import SweepSamples


def test_each_levels_csv_rows_follow_one_header_behind_their_level_and_load(
    tmp_path: Path,
) -> None:
    samples = SweepSamples(str(tmp_path / "rows.csv"))
    for i, body in enumerate(["request,ttft\n0,0.1\n1,0.2\n", "request,ttft\n0,0.3\n"]):
        Path(samples.level_path(i)).write_text(body)
        samples.append(i, f"concurrency {i + 1}")
    samples.append(2, "never ran")  # a level with no file adds nothing
    samples.close()
    assert (tmp_path / "rows.csv").read_text().splitlines() == [
        "level,load,request,ttft",
        "1,concurrency 1,0,0.1",
        "1,concurrency 1,1,0.2",
        "2,concurrency 2,0,0.3",
    ]
    assert samples.rows == 3
    assert [p.name for p in tmp_path.iterdir()] == ["rows.csv"]


def test_json_lines_rows_lead_with_the_level_and_its_load(tmp_path: Path) -> None:
    samples = SweepSamples(str(tmp_path / "rows.jsonl"))
    assert samples.level_path(0) == str(tmp_path / "rows.level-1.jsonl")
    Path(samples.level_path(0)).write_text('{"request":0,"ttft":0.1}\n\n')
    samples.append(0, "rate 5/s")
    samples.close()
    (line,) = (tmp_path / "rows.jsonl").read_text().splitlines()
    assert list(json.loads(line).items()) == [
        ("level", 1), ("load", "rate 5/s"), ("request", 0), ("ttft", 0.1),
    ]  # fmt: skip


def test_a_level_whose_rows_cannot_be_appended_stays_in_its_file_and_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    samples = SweepSamples(str(tmp_path / "rows.csv"))

    def full(self: SweepSamples, rows: IO[str], number: int, load: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(SweepSamples, "_copy", full)
    level = Path(samples.level_path(0))
    level.write_text("request\n0\n")
    samples.append(0, "concurrency 1")
    samples.close()
    assert samples.failed is not None
    assert level.exists()  # kept: the only copy of those rows
    assert f"level 1's rows stay in {level}" in capsys.readouterr().err
