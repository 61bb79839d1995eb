"""The shape of the code stays what docs/architecture.md draws ("Layers", "Rules for
contributors"): no import ring at import time, imports between packages point down, the
CLI reaches other packages only through their faces, and nothing cites a file a reader of
the repository cannot open.

The import graph is read from the source with :mod:`ast`, not by importing it: only
module-level imports count (an import inside a function, or under ``if TYPE_CHECKING:``,
runs later or never, so it cannot close a ring while modules load).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PACKAGE = "pyattacker"

# The layers of docs/architecture.md, bottom first. A module belongs to the entry named by
# the first part of its name under ``pyattacker`` ("pool" for pyattacker.pool._lease,
# "_checks" for pyattacker._checks, "" for the root package itself).
LAYERS: tuple[frozenset[str], ...] = (
    frozenset(
        {
            "",
            "_atomic",
            "_checks",
            "_classify",
            "_gc",
            "_inputs",
            "_native",
            "_ray",
            "_rng",
            "_plugins",
            "_secrets",
            "_signals",
            "_sim",
            "_units",
            "_usage",
            "_version",
            "clock",
            "errors",
            "retry",
        }
    ),
    frozenset({"pool", "measure", "store", "http"}),
    frozenset({"world", "llm"}),
    frozenset({"servers"}),
    frozenset({"run", "attack", "benchmark", "tasks"}),
    frozenset({"report", "testing", "selftest", "config", "_demo", "_run_demo"}),
    frozenset({"cli"}),
    frozenset({"__main__"}),  # ``python -m pyattacker``: calls the CLI and nothing else
)
LAYER_OF = {part: level for level, parts in enumerate(LAYERS) for part in parts}


# ------------------------------------------------------------------------ the import graph


def module_files(src: Path = SRC) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (``__init__`` is the
    package's own name)."""
    found = {}
    for path in sorted((src / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``<anything>.TYPE_CHECKING``, as type checkers read it."""
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _load_time_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run when the module loads: at module level, including
    inside ``if``/``try``/``with`` blocks, but not in functions, classes' methods, or the
    ``TYPE_CHECKING`` branch of an ``if``."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _load_time_imports(node.body)
            yield from _load_time_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _load_time_imports(block)
            for handler in node.handlers:
                yield from _load_time_imports(handler.body)
        elif isinstance(node, ast.With | ast.ClassDef):
            yield from _load_time_imports(node.body)


def _targets(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: Mapping[str, Path]
) -> Iterator[str]:
    """The modules of the package that ``node``, in ``module``, makes load."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
        return
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        where = ".".join([*base, *([node.module] if node.module else [])])
    else:
        where = node.module or ""
    for alias in node.names:
        submodule = f"{where}.{alias.name}"
        yield submodule if submodule in known else where


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """Module -> the package modules it imports while it loads."""
    files = module_files(src)
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_package = path.name == "__init__.py"
        for node in _load_time_imports(tree.body):
            for target in _targets(node, name, is_package, files):
                if target in files and target != name:
                    graph[name].add(target)
    return graph


def rings(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def part_of(module: str) -> str:
    """The layer entry of ``module``: ``pool`` for ``pyattacker.pool._lease``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


# ------------------------------------------------------------------- the rules, checked


def test_no_module_imports_a_ring_at_import_time() -> None:
    found = rings(import_graph())
    assert found == [], "import rings (break each; see 'Layers' in docs/architecture.md):\n" + (
        "\n".join(" <-> ".join(ring) for ring in found)
    )


def test_every_module_of_the_package_has_a_layer() -> None:
    unplaced = sorted({part_of(m) for m in module_files()} - set(LAYER_OF))
    assert unplaced == [], f"add these to LAYERS and to docs/architecture.md: {unplaced}"


def test_imports_between_packages_point_down_the_layers() -> None:
    upward = []
    for module, targets in import_graph().items():
        here = part_of(module)
        for target in targets:
            there = part_of(target)
            if there == here:
                continue
            if LAYER_OF[there] > LAYER_OF[here] or (LAYER_OF[there] == LAYER_OF[here] > 0):
                upward.append(f"{module} -> {target}")
    assert sorted(upward) == [], "imports that do not point down a layer"


def test_cli_imports_no_private_module_of_another_package() -> None:
    reaching = []
    for module, targets in import_graph().items():
        if part_of(module) != "cli":
            continue
        for target in targets:
            parts = target.split(".")
            if parts[1] != "cli" and any(p.startswith("_") for p in parts[2:]):
                reaching.append(f"{module} -> {target}")
    assert reaching == [], "cli must import package faces (the package's __init__)"


def test_cli_reaches_no_private_module_even_from_inside_a_function() -> None:
    # A private import hidden in a function body is the same reach-in, just later.
    reaching = []
    for path in sorted((SRC / PACKAGE / "cli").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                parts = node.module.split(".")
                private = any(p.startswith("_") for p in parts[2:])
                if parts[0] == PACKAGE and len(parts) > 2 and parts[1] != "cli" and private:
                    reaching.append(f"{path.name}: {node.module}")
    assert reaching == []


def _loaded_by(statement: str) -> list[str]:
    """The package modules a fresh interpreter has loaded after ``statement``."""
    listing = "print(*sorted(m for m in sys.modules if m.startswith('pyattacker')))"
    code = f"import sys; {statement}; {listing}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_importing_the_clock_loads_only_the_kernel() -> None:
    loaded = _loaded_by("import pyattacker.clock")
    assert "pyattacker.clock" in loaded
    assert [m for m in loaded if part_of(m) not in LAYERS[0]] == []


def test_the_lazy_root_still_offers_every_public_name_and_its_old_subpackages() -> None:
    statement = (
        "import pyattacker; from pyattacker import Pool, Runner, Retrying; "
        "assert Pool is pyattacker.pool.Pool and Runner is pyattacker.run.Runner; "
        "assert Retrying is pyattacker.retry.Retrying and pyattacker.store.SQLiteStore; "
        "assert set(pyattacker.__all__) <= set(dir(pyattacker)); "
        "[getattr(pyattacker, name) for name in pyattacker.__all__]"
    )
    assert "pyattacker.run" in _loaded_by(statement)


def test_testing_re_exports_the_kernel_simulation_loops_unchanged() -> None:
    import pyattacker._sim as sim
    import pyattacker.testing as testing

    for name in sim.__all__:
        assert getattr(testing, name) is getattr(sim, name), name
    assert "pyattacker.testing" not in _loaded_by("import pyattacker.benchmark")


# Built from pieces so that this file does not match itself.
_OUTSIDE = re.compile(
    "|".join(
        [
            "DESIGN" + r"\.md",
            "DESIGN" + " §",
            r"\bseeds?" + r" ?0\d\d\b",
            r"\bseed" + " §",
            r"\bseeds" + "/",
            r"\.\./" + "shared",
        ]
    ),
    re.IGNORECASE,
)
_TEXT = {".py", ".md", ".toml", ".sh", ".txt", ".yaml", ".yml", ".cfg", ".ini", ".json"}


def _checked_files() -> Iterator[Path]:
    yield ROOT / "README.md"
    for folder in ("src", "docs", "benchmarks", "examples", "tests"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and path.suffix in _TEXT and "__pycache__" not in path.parts:
                yield path


def test_the_pattern_finds_citations_of_files_outside_the_repository() -> None:
    cited = ["see DESIGN" + ".md §5", "seed 00" + "2's rule", "Seed 00" + "0 §5", "(seed" + " §4)"]
    for text in cited:
        assert _OUTSIDE.search(text), text
    for text in ["3 seeds", "--seeds 5", "RFC 9110 §8.6", "seed 3", "a design choice"]:
        assert not _OUTSIDE.search(text), text


def test_nothing_cites_a_file_outside_the_repository() -> None:
    found = []
    for path in _checked_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _OUTSIDE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:90]}")
    assert found == [], "cite docs/architecture.md or say it in your own words:\n" + "\n".join(
        found
    )


# ------------------------------------------------------- the graph reader, on small cases


def _package(tmp_path: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / PACKAGE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


def test_a_ring_through_a_package_face_is_found(tmp_path: Path) -> None:
    src = _package(
        tmp_path,
        {
            "__init__.py": "",
            "pool/__init__.py": "from pyattacker.pool._pool import Pool\n",
            "pool/_pool.py": "from pyattacker.run import Task\n",
            "run/__init__.py": "from ._task import Task\n",
            "run/_task.py": "import pyattacker.pool\n",
        },
    )
    assert rings(import_graph(src)) == [
        ["pyattacker.pool", "pyattacker.pool._pool", "pyattacker.run", "pyattacker.run._task"]
    ]


@pytest.mark.parametrize(
    "late",
    [
        "def f():\n    from pyattacker.a import x\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pyattacker.a import x\n",
        "import typing\nif typing.TYPE_CHECKING:\n    from pyattacker.a import x\n",
    ],
    ids=["in_a_function", "type_checking", "typing_dot_type_checking"],
)
def test_imports_that_run_late_or_never_close_no_ring(tmp_path: Path, late: str) -> None:
    src = _package(
        tmp_path, {"__init__.py": "", "a.py": "from pyattacker import b\n", "b.py": late}
    )
    assert rings(import_graph(src)) == []


def test_relative_and_submodule_imports_are_resolved(tmp_path: Path) -> None:
    src = _package(
        tmp_path,
        {
            "__init__.py": "",
            "p/__init__.py": "from . import _m\nfrom .._top import x\n",
            "p/_m.py": "from ..p import _n\n",
            "p/_n.py": "",
            "_top.py": "import pyattacker.p._n\n",
        },
    )
    graph = import_graph(src)
    assert graph["pyattacker.p"] == {"pyattacker.p._m", "pyattacker._top"}
    assert graph["pyattacker.p._m"] == {"pyattacker.p._n"}
    assert graph["pyattacker._top"] == {"pyattacker.p._n"}
