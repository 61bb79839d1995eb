"""``--samples`` with workers: each worker's part is joined into the one file, in worker
order with one CSV header, the parts removed; a lost worker's part as far as it was
written, and said so."""

from __future__ import annotations

import csv
import json
import pickle
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyattacker.attack import SampleParts, SampleWriter
from pyattacker.measure import Attempt, Outcome, RequestRecord


def record(n: int) -> RequestRecord:
    attempt = Attempt(n, 1, scheduled=n / 10, sent=n / 10, first_byte=n / 10 + 0.01,
                      end=n / 10 + 0.02, status=200, outcome=Outcome.OK)  # fmt: skip
    if n % 5 == 4:
        attempt.outcome, attempt.status, attempt.error = Outcome.FAILED, 500, "HTTP 500, once"
    return RequestRecord.from_attempts([attempt])


def write_parts(parts: SampleParts, rows: list[list[int]]) -> list[object | None]:
    """Each worker's rows written through its part, as workers do; their last words."""
    words: list[object | None] = []
    for index, numbers in enumerate(rows):
        part = parts.open(index)
        for n in numbers:
            part.add(record(n))
        words.append(pickle.loads(pickle.dumps(part.part(final=True))))
    return words


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 40), min_size=1, max_size=4),
    suffix=st.sampled_from([".csv", ".jsonl"]),
)
def test_the_parts_join_into_the_file_one_process_writes_in_worker_order(
    sizes: list[int], suffix: str
) -> None:
    rows = [[index + k * len(sizes) for k in range(size)] for index, size in enumerate(sizes)]
    with tempfile.TemporaryDirectory() as directory:
        where = Path(directory)
        writer = SampleWriter.open(where / f"one{suffix}", llm=False)
        for n in (n for numbers in rows for n in numbers):  # worker 0's rows, then 1's...
            writer.write(record(n))
        writer.close()
        joined = SampleParts(where / f"rows{suffix}")
        joined.gather(write_parts(joined, rows), lost=[])
        assert joined.path.read_bytes() == (where / f"one{suffix}").read_bytes()  # one header
        assert (joined.rows, joined.lost, joined.failed, joined.notes) == (sum(sizes), 0, None, [])
        assert sorted(p.name for p in where.iterdir()) == [f"one{suffix}", f"rows{suffix}"]


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_lost_workers_part_is_joined_as_far_as_it_was_written_and_said_so(
    suffix: str, tmp_path: Path
) -> None:
    parts = SampleParts(tmp_path / f"rows{suffix}")
    words = write_parts(parts, [[0, 2, 4], [1, 3, 5]])
    with parts.part_path(1).open("a", encoding="utf-8") as cut:  # died in the middle of a row
        cut.write("7,0.7,0.7")
    parts.gather([words[0], None], lost=[1])  # its last snapshot never came
    text = parts.path.read_text()
    if suffix == ".csv":
        numbers = [int(row["request"]) for row in csv.DictReader(text.splitlines())]
    else:
        numbers = [json.loads(line)["request"] for line in text.splitlines()]
    assert numbers == [0, 2, 4, 1, 3, 5]  # the unfinished row left out
    assert parts.rows == 6
    assert parts.notes == [
        f"--samples: worker 1 was lost: its 3 rows written before it died are in {parts.path};"
        " the rows it had not written yet are missing"
    ]
    assert not parts.part_path(1).exists()


def test_a_part_that_could_not_be_written_is_counted_as_failed_and_lost(tmp_path: Path) -> None:
    parts = SampleParts(tmp_path / "rows.csv")
    parts.part_path(0).mkdir()  # its part cannot be opened
    words = write_parts(parts, [[0, 2]])
    parts.part_path(0).rmdir()
    parts.gather(words, lost=[])
    assert parts.failed is not None
    assert (parts.rows, parts.lost) == (0, 2)


def take_in_turns(parts: SampleParts, rows: list[list[int]], every: int) -> list[object | None]:
    """Each worker's rows written through a part of the held twin (as on a Ray node), the
    driver taking what each wrote after every ``every`` rows and at the end, as the Ray
    driver does; the workers' last words."""
    twin = parts.held()
    opened = [twin.open(index) for index in range(len(rows))]
    for index, numbers in enumerate(rows):
        for k, n in enumerate(numbers, 1):
            opened[index].add(record(n))
            if k % every == 0:
                parts.receive(index, twin.take(index))
        parts.receive(index, twin.take(index))
    return [pickle.loads(pickle.dumps(p.part(final=True))) for p in opened]


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 40), min_size=1, max_size=4),
    suffix=st.sampled_from([".csv", ".jsonl"]),
    every=st.integers(1, 50),
)
def test_rows_taken_from_held_parts_join_into_the_file_one_process_writes(
    sizes: list[int], suffix: str, every: int
) -> None:
    rows = [[index + k * len(sizes) for k in range(size)] for index, size in enumerate(sizes)]
    with tempfile.TemporaryDirectory() as directory:
        where = Path(directory)
        writer = SampleWriter.open(where / f"one{suffix}", llm=False)
        for n in (n for numbers in rows for n in numbers):
            writer.write(record(n))
        writer.close()
        joined = SampleParts(where / f"rows{suffix}")
        joined.gather(take_in_turns(joined, rows, every), lost=[])
        assert joined.path.read_bytes() == (where / f"one{suffix}").read_bytes()
        assert (joined.rows, joined.lost, joined.failed, joined.notes) == (sum(sizes), 0, None, [])
        assert sorted(p.name for p in where.iterdir()) == [f"one{suffix}", f"rows{suffix}"]


def test_a_held_part_that_was_never_taken_from_is_not_joined_from_a_stale_file(
    tmp_path: Path,
) -> None:
    parts = SampleParts(tmp_path / "rows.jsonl")
    parts.part_path(1).write_text('{"request": 99}\n')  # left by another run
    words = take_in_turns(parts, [[0, 2], []], every=1)
    parts.gather(words, lost=[])
    numbers = [json.loads(line)["request"] for line in parts.path.read_text().splitlines()]
    assert numbers == [0, 2]
    assert (parts.rows, parts.lost, parts.failed) == (2, 0, None)


def test_rows_a_worker_wrote_that_never_reached_the_driver_are_counted_and_said() -> None:
    with tempfile.TemporaryDirectory() as directory:
        parts = SampleParts(Path(directory) / "rows.csv")
        twin = parts.held()
        part = twin.open(0)
        for n in range(5):
            part.add(record(n))
        parts.receive(0, twin.take(0))
        part.add(record(5))  # its last take never came back
        parts.gather([part.part(final=True)], lost=[])
        assert (parts.rows, parts.lost) == (5, 1)
        assert parts.failed is not None
        assert parts.notes == [
            f"--samples: worker 0 wrote 1 rows that never reached this machine; {parts.path} "
            "is incomplete"
        ]


def test_a_lost_workers_taken_rows_are_joined_and_the_note_says_the_rest_is_missing(
    tmp_path: Path,
) -> None:
    parts = SampleParts(tmp_path / "rows.jsonl")
    words = take_in_turns(parts, [[0, 2, 4], [1, 3]], every=1)
    parts.gather([words[0], None], lost=[1])
    numbers = [json.loads(line)["request"] for line in parts.path.read_text().splitlines()]
    assert numbers == [0, 2, 4, 1, 3]
    assert parts.notes == [
        f"--samples: worker 1 was lost: its 2 rows taken before then are in {parts.path}; "
        "the rows it wrote after the last take (every half second) and those it had not "
        "written yet are missing"
    ]


def test_a_held_part_past_its_limit_counts_its_later_rows_as_lost(tmp_path: Path) -> None:
    parts = SampleParts(tmp_path / "rows.jsonl")
    twin = parts.held()
    twin.limit = 1  # the driver stopped taking: the first row fills it
    part = twin.open(0)
    for n in range(4):
        part.add(record(n))
    parts.receive(0, twin.take(0))
    parts.gather([part.part(final=True)], lost=[])
    assert (parts.rows, parts.lost) == (1, 3)
    assert parts.failed is not None
    assert "had not taken" in str(parts.failed)
