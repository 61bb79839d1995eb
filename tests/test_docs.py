"""Every Python snippet in the README and docs/ runs, top to bottom, page by page."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def snippets(page: Path) -> list[str]:
    return FENCE.findall(page.read_text(encoding="utf-8"))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_python_snippet_on_the_page_runs(page: Path) -> None:
    # One namespace per page: a later snippet builds on what an earlier one defined, as a
    # reader reading top to bottom would. A real, registered module, because dataclasses,
    # pickling and the run codecs look their module up by name.
    module = types.ModuleType(f"doc_snippets_{page.stem}")
    sys.modules[module.__name__] = module
    try:
        for number, code in enumerate(snippets(page), 1):
            exec(compile(code, f"{page.name}[snippet {number}]", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]


def test_the_docs_have_snippets_to_run() -> None:
    assert sum(len(snippets(page)) for page in PAGES) >= 6
