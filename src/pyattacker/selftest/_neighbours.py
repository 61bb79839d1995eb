"""How much CPU other processes took while a check ran.

A selftest that fails on a busy machine measured the machine, not pyattacker: another
process that holds a CPU when our event loop or the echo server wants it shows up as lag
and latency in every figure. The load average before the check misses work that starts
during it, so the check counts, from ``/proc/stat``, the CPU time the whole machine spent
busy over its span, less what this process and the echo server spent, each with every
process it started (``/proc/PID/stat``: a live child's own figures, an ended one's in its
parent's; ``selftest --workers`` attacks from worker processes, and an echo server of
several processes forks them), and reports the rest in CPUs. Linux only: ``None``
elsewhere.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from pyattacker.clock import wall_time

__all__ = ["OthersCpu"]


class OthersCpu:
    """Started at construction; :meth:`cpus` is the CPUs (on average) processes other than
    this one and ``pids`` kept busy since, or ``None`` where ``/proc`` cannot say."""

    def __init__(self, pids: Sequence[int] = (), *, proc: str = "/proc") -> None:
        self._pids, self._proc = [os.getpid(), *pids], proc
        self._start = self._ticks()
        self._began = wall_time()

    def cpus(self) -> float | None:
        end, span = self._ticks(), wall_time() - self._began
        if self._start is None or end is None or span <= 0:
            return None
        busy = end[0] - self._start[0]
        ours = end[1] - self._start[1]
        return max(0.0, (busy - ours) / os.sysconf("SC_CLK_TCK") / span)

    def _ticks(self) -> tuple[int, int] | None:
        """(the machine's busy ticks, our processes' ticks), or None without /proc."""
        try:
            with open(f"{self._proc}/stat", encoding="ascii") as stat:
                fields = [int(v) for v in stat.readline().split()[1:]]
            children = _children(self._proc)
            ours = sum(_tree_ticks(self._proc, pid, children) for pid in self._pids)
        except (OSError, ValueError, IndexError):
            return None
        # user nice system idle iowait irq softirq steal ...: idle and iowait are not busy;
        # steal is (the hypervisor gave our CPU to another machine).
        return sum(fields[:8]) - fields[3] - fields[4], ours


def _stat(proc: str, pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the name (in parentheses, and it may hold
    any character): index 0 is field 3 of proc(5)."""
    with open(f"{proc}/{pid}/stat", encoding="ascii") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def _children(proc: str) -> dict[int, list[int]]:
    """Each live process's children, by parent, from every ``/proc/PID/stat``."""
    found: dict[int, list[int]] = {}
    for name in os.listdir(proc):
        if name.isdigit():
            try:
                parent = int(_stat(proc, int(name))[1])
            except (OSError, ValueError, IndexError):  # ended since the listing
                continue
            found.setdefault(parent, []).append(int(name))
    return found


def _tree_ticks(proc: str, pid: int, children: dict[int, list[int]]) -> int:
    """CPU ticks of ``pid`` (every thread), of its children that ended and were waited
    for, and of its live descendants: a count that a child's end does not change."""
    after_name = _stat(proc, pid)
    # utime, stime, cutime, cstime: fields 14 to 17 of proc(5)
    own = sum(int(v) for v in after_name[11:15])
    live = 0
    for child in children.get(pid, ()):
        try:
            live += _tree_ticks(proc, child, children)
        except (OSError, ValueError, IndexError):  # ended since the listing
            continue
    return own + live
