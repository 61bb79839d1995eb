"""The build's one dynamic part: with ``PYATTACKER_COMPILE=1``, the load path's modules
(``pyattacker._native.COMPILED``) compiled to C by mypyc; without it, pure Python.

Everything else about the package is in ``pyproject.toml``. Compiling needs mypy (the
version in ``constraints.txt``) and a C compiler; ``make`` installs the one and checks for
the other. See "The compiled load path" in ``docs/architecture.md``.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from setuptools import setup

SRC = Path(__file__).resolve().parent / "src"


def compiled_modules() -> tuple[str, ...]:
    """``COMPILED`` read from ``_native.py`` without importing the package."""
    tree = ast.parse((SRC / "pyattacker" / "_native.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "COMPILED":
            return tuple(ast.literal_eval(node.value))
    raise SystemExit("setup.py: no COMPILED in src/pyattacker/_native.py")


def ext_modules() -> list[Any]:
    flag = os.environ.get("PYATTACKER_COMPILE", "0")
    if flag not in ("0", "1"):
        raise SystemExit(f"setup.py: PYATTACKER_COMPILE must be 0 or 1, got {flag!r}")
    modules = compiled_modules()
    recorded = SRC / "pyattacker" / "_native_sources.json"
    remove_compiled(recorded)  # a build that fails leaves a pure tree, never an old one
    if flag == "0":
        return []
    from mypyc.build import mypycify  # only a compiled build needs mypy

    # The modules' imports are type-checked too, silently: the optional extras (ray,
    # openai) need not be installed to build.
    options = ["--follow-imports=silent"]
    extensions = mypycify([*options, *(str(SRC / path) for path in modules)], opt_level="3")
    # What was compiled, for the guard that keeps an edited source from being shadowed.
    digests = {path: hashlib.sha256((SRC / path).read_bytes()).hexdigest() for path in modules}
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
