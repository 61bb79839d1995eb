"""Rewrite a generated region of a docs page: the text between two HTML-comment markers."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def replace_region(page: Path, name: str, body: str) -> None:
    """Put ``body`` between ``<!-- {name}:start -->`` and ``<!-- {name}:end -->``."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = page.read_text(encoding="utf-8")
    head, found, rest = text.partition(start)
    _, found_end, tail = rest.partition(end)
    if not found or not found_end:
        raise SystemExit(f"{page} has no {start} ... {end} region")
    page.write_text(f"{head}{start}\n{body}\n{end}{tail}", encoding="utf-8")


def commit() -> str:
    """The short hash of HEAD, or "unknown" outside a git checkout."""
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return done.stdout.strip()
