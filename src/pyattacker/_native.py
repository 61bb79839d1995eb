"""The load path's modules, compiled to C by mypyc when the package is built so.

An attack spends most of its CPU in the Python of a few modules that every request goes
through (the schedule, the dispatch, the HTTP connection, the counting): compiled, they
make their calls and attribute reads in C, and one process sends markedly more requests
a second (figures: ``benchmarks/README.md``, "Issue 21: the load path compiled"). Build
them with ``PYATTACKER_COMPILE=1`` (``setup.py``; ``make`` does); without it the package
is pure Python and behaves the same, only slower. See "The compiled load path" in
``docs/architecture.md``.

A compiled module is a file beside its source (``_client.cpython-311-….so`` beside
``_client.py``), and Python imports it in preference to the source. So that an edited
source is never shadowed by an old build, the build records each source's digest
(:data:`SOURCES_FILE`) and :func:`guard`, run when the package is imported, loads every
one of these modules from its source when any source differs from what was compiled (they
call each other in C, so all or none), saying so once on stderr. ``PYATTACKER_PURE=1``
asks for the pure modules without a word (to compare the two in one tree).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

__all__ = ["COMPILED", "SOURCES_FILE", "guard", "source_digests"]

# One module per line, as ``setup.py`` and the Makefile read them.
COMPILED = (
    "pyattacker/attack/_arrivals.py",
    "pyattacker/attack/_dispatch.py",
    "pyattacker/attack/_mode.py",
    "pyattacker/attack/_requests.py",
    "pyattacker/attack/_schedule.py",
    "pyattacker/attack/_send.py",
    "pyattacker/attack/_tally.py",
    "pyattacker/http/_client.py",
    "pyattacker/http/_connection.py",
    "pyattacker/http/_exchange.py",
    "pyattacker/http/_pool.py",
    "pyattacker/http/_response.py",
    "pyattacker/http/_types.py",
    "pyattacker/measure/_batch.py",
    "pyattacker/measure/_binned.py",
    "pyattacker/measure/_histogram.py",
    "pyattacker/measure/_phases.py",
    "pyattacker/measure/_stats.py",
    "pyattacker/measure/_window_tally.py",
    "pyattacker/measure/_windows.py",
    "pyattacker/pool/_pool.py",
)

#: Written by the build beside this module: each compiled module's source digest.
SOURCES_FILE = "_native_sources.json"

_PACKAGE = Path(__file__).resolve().parent  # src/pyattacker


def source_digests(root: Path) -> dict[str, str]:
    """Each compiled module's source digest (sha256), its path under ``root`` the key."""
    return {path: hashlib.sha256((root / path).read_bytes()).hexdigest() for path in COMPILED}


def guard() -> None:
    """Load the compiled modules from their sources when asked to or when the build is
    older than them; nothing to do when the package was not compiled."""
    recorded = _PACKAGE / SOURCES_FILE
    if not recorded.exists():
        return
    if os.environ.get("PYATTACKER_PURE", "") not in ("", "0"):
        _load_from_sources()
        return
    try:
        built = json.loads(recorded.read_text())
        stale = [path for path, digest in source_digests(_PACKAGE.parent).items()
                 if built.get(path) != digest]  # fmt: skip
    except (OSError, ValueError) as exc:
        stale = [f"{SOURCES_FILE} ({exc})"]
    if stale:
        print(
            f"pyattacker: the compiled load path is older than {stale[0]}"
            f"{f' and {len(stale) - 1} more' if len(stale) > 1 else ''}; running it as pure "
            "Python (slower). Rebuild: make, or PYATTACKER_COMPILE=1 pip install -e .",
            file=sys.stderr,
        )
        _load_from_sources()


def _load_from_sources() -> None:
    names = {path.removesuffix(".py").replace("/", "."): path for path in COMPILED}
    sys.meta_path.insert(0, _SourceFinder(names))


class _SourceFinder(importlib.abc.MetaPathFinder):
    """Finds the compiled modules' sources, ahead of the extension beside each."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None
        source = _PACKAGE.parent / self.names[fullname]
        return importlib.util.spec_from_file_location(fullname, source)
