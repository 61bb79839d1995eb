"""``pyattacker._atomic``: outputs refused early, written whole or not at all."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyattacker._atomic import check_output, replace, stage, write_atomically
from pyattacker.errors import ConfigError


@pytest.fixture
def umask_027() -> Iterator[None]:
    previous = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(previous)


def _text(text: str) -> Any:
    return lambda path: path.write_text(text, encoding="utf-8")


def test_a_folder_is_refused_as_an_output(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        check_output(tmp_path, "--json", "given/")
    assert refused.value.field == "--json"
    assert refused.value.message == "given/ is a folder"
    assert refused.value.hint == "name a file in it"


def test_an_output_in_a_missing_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        check_output(tmp_path / "nope" / "r.json", "out")
    assert refused.value.field == "out"
    assert refused.value.message == f"the folder {tmp_path / 'nope'} does not exist"
    assert refused.value.hint is not None


def test_an_existing_file_in_an_unwritable_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Simulated through os.access: the tests may run as root, whom permissions do not stop.
    (tmp_path / "r.json").write_text("old")
    real_access = os.access

    def access(path: Any, mode: int, **kwargs: Any) -> bool:
        return Path(path) != tmp_path and real_access(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", access)
    with pytest.raises(ConfigError) as refused:
        check_output(tmp_path / "r.json", "--markdown")
    assert refused.value.field == "--markdown"
    assert refused.value.message.endswith(f"the folder {tmp_path} is not writable")


def test_a_writable_path_passes_whether_or_not_the_file_exists(tmp_path: Path) -> None:
    (tmp_path / "old.json").write_text("old")
    check_output(tmp_path / "old.json", "out")
    check_output(tmp_path / "new.json", "out")


def test_a_replaced_file_keeps_its_mode(tmp_path: Path, umask_027: None) -> None:
    out = tmp_path / "r.json"
    out.write_text("old")
    out.chmod(0o604)
    write_atomically(out, _text("new"))
    assert out.read_text() == "new"
    assert out.stat().st_mode & 0o777 == 0o604


def test_a_new_file_gets_what_the_umask_leaves_of_0666(tmp_path: Path, umask_027: None) -> None:
    out = tmp_path / "r.json"
    write_atomically(out, _text("new"))
    assert out.stat().st_mode & 0o777 == 0o640


def test_write_atomically_returns_what_the_writer_returned(tmp_path: Path) -> None:
    assert write_atomically(tmp_path / "r.txt", lambda path: path.write_bytes(b"abc")) == 3


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_failing_writer_leaves_the_target_untouched_and_no_temporary(
    tmp_path: Path, error: BaseException
) -> None:
    out = tmp_path / "r.json"
    out.write_text("old")

    def write(path: Path) -> None:
        path.write_text("half")
        raise error

    with pytest.raises(type(error)):
        write_atomically(out, write)
    assert out.read_text() == "old"
    assert list(tmp_path.iterdir()) == [out]


def test_a_staged_file_is_invisible_until_replaced(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    out.write_text("old")
    temporary, _ = stage(out, _text("new"))
    assert temporary.parent == tmp_path
    assert temporary.name.startswith(".r.json.")
    assert out.read_text() == "old"
    replace(temporary, out)
    assert out.read_text() == "new"
    assert list(tmp_path.iterdir()) == [out]


def test_a_failing_rename_removes_the_temporary(tmp_path: Path) -> None:
    folder = tmp_path / "a folder in the way"
    (folder / "inside").mkdir(parents=True)
    temporary, _ = stage(folder, _text("new"))
    with pytest.raises(IsADirectoryError):
        replace(temporary, folder)  # a file cannot replace a non-empty folder
    assert not temporary.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a folder in the way"]
