"""Where ``attack`` (and its sweep) write their report files: checked before any traffic,
written atomically after it, ``-`` meaning stdout."""

from __future__ import annotations

import sys
from pathlib import Path

from pyattacker._atomic import check_output, write_atomically
from pyattacker.errors import PyAttackerError

__all__ = ["check_report_path", "write_report"]


def _resolved(path: str) -> Path:
    return Path(path).expanduser().resolve()


def check_report_path(path: str | None, field: str) -> None:
    """Refuse, before any traffic, a report path (given as ``field``) that could not be
    written; ``None`` and ``-`` (stdout) always can."""
    if path is not None and path != "-":
        check_output(_resolved(path), field, path)


def write_report(path: str, text: str) -> None:
    """The report on stdout for ``-``; else replaced atomically (a Ctrl-C or a full disk
    mid-write leaves the previous report whole)."""
    if path == "-":
        sys.stdout.write(text + "\n")
        return
    try:
        write_atomically(_resolved(path), lambda t: t.write_text(text + "\n", encoding="utf-8"))
    except OSError as exc:
        raise PyAttackerError(f"could not write the report to {path!r}: {exc.strerror}") from None
