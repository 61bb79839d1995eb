"""The build's one dynamic part: with ``PYATTACKER_COMPILE=1``, the load path's modules
(``pyattacker._native.COMPILED``) compiled to C by mypyc; without it, pure Python.

Everything else about the package is in ``pyproject.toml``. Compiling needs mypy (the
version in ``constraints.txt``) and a C compiler; ``make`` installs the one and checks for
the other. See "The compiled load path" in ``docs/architecture.md``.
"""

from __future__ import annotations

import json
import os
import runpy
from pathlib import Path
from typing import Any

from setuptools import setup

SRC = Path(__file__).resolve().parent / "src"
# The list and the digests the import-time guard checks, from the module itself (it
# imports nothing of the package).
NATIVE = runpy.run_path(str(SRC / "pyattacker" / "_native.py"))


def ext_modules() -> list[Any]:
    flag = os.environ.get("PYATTACKER_COMPILE", "0")
    if flag not in ("0", "1"):
        raise SystemExit(f"setup.py: PYATTACKER_COMPILE must be 0 or 1, got {flag!r}")
    modules: tuple[str, ...] = NATIVE["COMPILED"]
    recorded = SRC / "pyattacker" / NATIVE["SOURCES_FILE"]
    remove_compiled(recorded)  # a build that fails leaves a pure tree, never an old one
    if flag == "0":
        return []
    from mypyc.build import mypycify  # only a compiled build needs mypy

    # The modules' imports are type-checked too, silently: the optional extras (ray,
    # openai) need not be installed to build.
    options = ["--follow-imports=silent"]
    extensions = mypycify([*options, *(str(SRC / path) for path in modules)], opt_level="3")
    # What was compiled, for the guard that keeps an edited source from being shadowed.
    digests = NATIVE["source_digests"](SRC)
    recorded.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
    return list(extensions)


def remove_compiled(recorded: Path) -> None:
    """What an earlier compiled build left in ``src`` (an editable install puts its
    files there, and Python would import them before the sources): its record, every
    compiled module (the package has no other extension) and their shared library."""
    recorded.unlink(missing_ok=True)
    for built in [*(SRC / "pyattacker").rglob("*.so"), *SRC.glob("*__mypyc.*.so")]:
        built.unlink()


setup(ext_modules=ext_modules())
