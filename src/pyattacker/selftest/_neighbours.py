"""How much CPU other processes took while a check ran.

A selftest that fails on a busy machine measured the machine, not pyattacker: another
process that holds a CPU when our event loop or the echo server wants it shows up as lag
and latency in every figure. The load average before the check misses work that starts
during it, so the check counts, from ``/proc/stat``, the CPU time the whole machine spent
busy over its span, less what this process and the echo server spent (their
``/proc/PID/stat``), and reports the rest in CPUs. Linux only: ``None`` elsewhere.
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
            ours = sum(_process_ticks(self._proc, pid) for pid in self._pids)
        except (OSError, ValueError, IndexError):
            return None
        # user nice system idle iowait irq softirq steal ...: idle and iowait are not busy;
        # steal is (the hypervisor gave our CPU to another machine).
        return sum(fields[:8]) - fields[3] - fields[4], ours


def _process_ticks(proc: str, pid: int) -> int:
    """utime + stime of ``pid`` (every thread), from ``/proc/PID/stat`` (after the name,
    which is in parentheses and may hold any character)."""
    with open(f"{proc}/{pid}/stat", encoding="ascii") as stat:
        after_name = stat.read().rsplit(")", 1)[1].split()
    return int(after_name[11]) + int(after_name[12])  # fields 14 and 15 of proc(5)
