"""What the attack report says of its workers (``--workers``, ``--ray``): each lost worker,
near the top, since its figures stop short of what it sent.

A worker that dies leaves its counts as of its last snapshot (every two seconds); its
progress, twice a second, says how many requests it had sent after that. Those reached
the server but are in no figure, so the report says so beside the figures it shows: the
summary would otherwise count fewer requests than the server received, without a word.
Text and Markdown print the same lines, from the JSON's ``workers.lost_each``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["lost_worker_lines"]


def lost_worker_lines(data: Mapping[str, Any]) -> list[str]:
    """One line per lost worker (none without workers, or when none was lost)."""
    workers = data.get("workers") or {}
    return [_lost_line(w) for w in workers.get("lost_each", ())]


def _lost_line(w: Mapping[str, Any]) -> str:
    index, at = w["index"], w.get("snapshot_at_s")
    if w["counted"] and at is not None:
        kept = (
            f"its figures stop at its last snapshot, {at:.2f}s into the run "
            f"({w['sent']} requests sent by then)"
        )
    elif w["counted"]:
        kept = f"its figures stop at its last snapshot ({w['sent']} requests sent by then)"
    else:
        kept = "it died before its first snapshot: none of its requests are in these figures"
    return f"WORKER LOST: worker {index} died; {kept}; {_after(w)}."


def _after(w: Mapping[str, Any]) -> str:
    """What its newest progress said beyond the figures."""
    more, heard = w.get("sent_after_snapshot_at_least"), w.get("last_heard_at_s")
    if more is None or heard is None:
        return "what it sent after that is not known"
    if not more:
        return f"last heard from {heard:.2f}s into the run, it had sent no more"
    return (
        f"last heard from {heard:.2f}s into the run, it had sent at least {more} more "
        "requests, not in these figures"
    )
