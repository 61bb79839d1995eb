"""The compiled load path (``pyattacker._native``): a build never shadows an edited source.

The guard is tested on a copy of the package (with whatever compiled files this tree has),
in a fresh interpreter, since it acts when the package is first imported.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pyattacker
from pyattacker._native import COMPILED, SOURCES_FILE, source_digests

SRC = Path(pyattacker.__file__).resolve().parent.parent
NAMES = [path.removesuffix(".py").replace("/", ".") for path in COMPILED]
SHOW_FILES = (
    "import sys, importlib; [print(importlib.import_module(n).__file__) for n in sys.argv[1:]]"
)


def copy_of_the_package(root: Path) -> Path:
    """``src`` copied under ``root`` (compiled files included), its build record written
    as a build of these very sources would write it."""
    src = root / "src"
    shutil.copytree(
        SRC / "pyattacker", src / "pyattacker", ignore=shutil.ignore_patterns("__pycache__")
    )
    for shared in SRC.glob("*__mypyc.*.so"):
        shutil.copy2(shared, src / shared.name)
    (src / "pyattacker" / SOURCES_FILE).write_text(json.dumps(source_digests(src)))
    return src


def import_files(src: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SHOW_FILES, *NAMES],
        env={**os.environ, "PYTHONPATH": str(src), "PYATTACKER_PURE": "", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def test_a_source_edited_since_the_build_loads_every_compiled_module_from_source(
    tmp_path: Path,
) -> None:
    src = copy_of_the_package(tmp_path)
    with (src / "pyattacker/http/_pool.py").open("a") as edited:
        edited.write("\n# edited after the build\n")
    shown = import_files(src)
    files = shown.stdout.split()
    # all of them, not only the edited one: compiled modules call each other in C
    assert [Path(f).suffix for f in files] == [".py"] * len(NAMES)
    assert all(Path(f).is_relative_to(src) for f in files)
    assert "older than pyattacker/http/_pool.py" in shown.stderr
    assert "Rebuild" in shown.stderr
    assert shown.stderr.count("pyattacker:") == 1


def test_pyattacker_pure_loads_the_sources_without_a_word(tmp_path: Path) -> None:
    src = copy_of_the_package(tmp_path)
    shown = import_files(src, PYATTACKER_PURE="1")
    assert [Path(f).suffix for f in shown.stdout.split()] == [".py"] * len(NAMES)
    assert shown.stderr == ""


def test_an_unedited_build_loads_its_compiled_modules(tmp_path: Path) -> None:
    if not (SRC / "pyattacker" / SOURCES_FILE).exists():
        pytest.skip("this tree is a pure build (no C compiler when it was installed)")
    shown = import_files(copy_of_the_package(tmp_path))
    assert [Path(f).suffixes[-1] for f in shown.stdout.split()] == [".so"] * len(NAMES)
    assert shown.stderr == ""


def test_every_compiled_module_is_a_module_of_the_package() -> None:
    assert tuple(sorted(COMPILED)) == COMPILED
    assert all((SRC / path).is_file() for path in COMPILED)
