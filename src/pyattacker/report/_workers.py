"""What the attack report says of its workers (``--workers``, ``--ray``): each lost worker,
near the top, since its figures stop short of what it sent.

A worker that dies leaves its counts as of its last snapshot (every two seconds); its
progress, twice a second, says how many requests it had sent after that. Those reached
the server but are in no figure, so the report says so beside the figures it shows: the
summary would otherwise count fewer requests than the server received, without a word.
Text and Markdown print the same lines, from the JSON's ``workers.lost_each``.

While the workers run, :func:`workers_now` says where each one is (``--per-worker``: the
live view on a terminal, ``/progress.json`` of ``--serve``): its current loop lag and CPU
seconds from its newest progress, and how long it has been silent while the others went
on (a worker stalled or paused sends nothing: its silence names it before its lag can).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyattacker.attack import WorkerOutcome

__all__ = ["clock_text", "lost_worker_lines", "worker_now_line", "workers_line", "workers_now"]


def workers_line(data: Mapping[str, Any]) -> str | None:
    """What ran the attack when workers did: how many, where, and for Ray workers how
    exact their common start was (their clocks' offsets from this machine's); None for
    one process."""
    w = data.get("workers")
    if not w:
        return None
    if not w.get("on_ray"):
        return f"Workers: {w['count']} processes on this machine, their figures merged"
    if w.get("clock_offset_min_s") is None:
        return f"Workers: {w['count']} on Ray; no clock measured (every worker was lost first)"
    clocks = clock_text(w["clock_offset_min_s"], w["clock_offset_max_s"], w["clock_uncertainty_s"])
    return f"Workers: {w['count']} on Ray, their figures merged; {clocks}"


def clock_text(low: float, high: float, within: float) -> str:
    """The Ray workers' clock offsets from this machine and the worst uncertainty."""
    span = f"{low * 1000:+.3f}ms" if low == high else f"{low * 1000:+.3f}ms to {high * 1000:+.3f}ms"
    return (
        f"clock offsets from this machine {span}, each within ±{within * 1000:.3f}ms: the "
        "common start instant is no more exact than that"
    )


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


def workers_now(lasts: Sequence[WorkerOutcome | None]) -> list[dict[str, Any]]:
    """Each worker's newest figures (``lasts``: its last snapshot with its newest progress,
    None before its first): sent, loop lag since its previous progress, CPU seconds, and
    ``silent_s``, how far its newest progress is behind the newest of any worker's."""
    # A progress without a lag was taken before the start instant (its elapsed time is
    # not yet from the start): the worker is waiting, not silent.
    heard = [o.progress for o in lasts if o is not None and o.progress is not None]
    newest = max((p.elapsed for p in heard if p.loop_lag_s is not None), default=0.0)
    rows = []
    for index, last in enumerate(lasts):
        progress = None if last is None else last.progress
        if last is None or progress is None or progress.loop_lag_s is None:
            state = "finished" if last is not None and last.final else "waiting"
            rows.append({"index": index, "state": state})
            continue
        rows.append({
            "index": index,
            "state": "running",
            "elapsed_s": progress.elapsed,
            "sent": progress.sent,
            "loop_lag_s": progress.loop_lag_s,
            "cpu_s": progress.cpu_s,
            "silent_s": newest - progress.elapsed,
        })  # fmt: skip
    return rows


def worker_now_line(row: Mapping[str, Any]) -> str:
    """``worker 1: sent 450 · loop lag 1490.2 ms · CPU 0.41 s · silent 1.5 s``."""
    if row["state"] != "running":
        return f"worker {row['index']}: {row['state']}"
    lag, cpu = row["loop_lag_s"], row["cpu_s"]
    line = (
        f"worker {row['index']}: sent {row['sent']} · loop lag "
        + ("-" if lag is None else f"{lag * 1000:.1f} ms")
        + " · CPU "
        + ("-" if cpu is None else f"{cpu:.2f} s")
    )
    # a progress comes twice a second: a second without one is a worker stalled
    return line + (f" · silent {row['silent_s']:.1f} s" if row["silent_s"] >= 1.0 else "")
