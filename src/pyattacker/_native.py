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

import os
import sys
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType

# (Lean imports: this runs on every `import pyattacker`, the CLI's start included.)
__all__ = ["COMPILED", "SOURCES_FILE", "guard", "source_digests"]

# setup.py and the Makefile read this list by running this module (it imports no part
# of the package).
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

_PACKAGE = os.path.dirname(os.path.abspath(__file__))  # src/pyattacker


def source_digests(root: str | os.PathLike[str]) -> dict[str, str]:
    """Each compiled module's source digest, its path under ``root`` the key: a CRC-32,
    which tells an edited file from the one compiled (nobody forges a source against it),
    and needs no import of hashlib at every start."""
    digests = {}
    for path in COMPILED:
        with open(os.path.join(root, path), "rb") as source:
            digests[path] = f"{zlib.crc32(source.read()):08x}"
    return digests


def guard() -> None:
    """Load the compiled modules from their sources when asked to or when the build is
    older than them; nothing to do when the package was not compiled."""
    recorded = os.path.join(_PACKAGE, SOURCES_FILE)
    if not os.path.exists(recorded):
        return
    if os.environ.get("PYATTACKER_PURE", "") not in ("", "0"):
        _load_from_sources()
        return
    import json  # only a compiled build reads its record

    try:
        with open(recorded) as record:
            built = json.load(record)
        stale = [path for path, digest in source_digests(os.path.dirname(_PACKAGE)).items()
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


class _SourceFinder:
    """Finds the compiled modules' sources, ahead of the extension beside each (a
    meta path finder: ``find_spec`` is all ``sys.meta_path`` asks of one)."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in self.names:
            return None
        import importlib.util

        source = os.path.join(os.path.dirname(_PACKAGE), self.names[fullname])
        return importlib.util.spec_from_file_location(fullname, source)
