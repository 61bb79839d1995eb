"""What sleeping on the kernel timer costs against polling, for the open model's schedule.

Usage: ``.venv/bin/python benchmarks/timer_costs.py [--arrivals 10000] [--rounds 2]``

The schedule (``pyattacker.attack._schedule``) sleeps on a ``PreciseTimer`` (one Linux
``timerfd``) until each arrival, except for waits under ``POLL_BELOW_S``, which it polls
one loop turn at a time, and it sets the timer up to ``WAKE_EARLY_S`` early (at most
``POLL_SHARE`` of the wait) and polls the rest. This prints what those constants rest on:

1. microseconds per ``timerfd_settime`` call, by how far ahead the instant is (a virtual
   machine reprograms its timer on a call that brings the next expiry forward);
2. CPU microseconds per arrival and lateness (p50/p99) of a loop that waits for evenly
   spaced instants (``--arrivals`` of them, 15 to 1,000 us apart), sleeping on the timer
   for each, or polling the waits under 40 us, or waking 250 us early (at most 5 % of the
   wait) and polling the rest, as the schedule does; and, for comparison, one periodic
   timer set once for the whole series (what a constant rate alone could use).

Linux only; one process, uvloop. A measurement, not a test: the machine's other work shows.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import os
import time

import uvloop

from pyattacker.clock import PreciseTimer, cpu_time


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


_LIBC = ctypes.CDLL(None, use_errno=True)


def settime_cost(ahead_s: float, calls: int = 5000) -> float:
    """Microseconds per ``timerfd_settime`` for an instant ``ahead_s`` from now."""
    fd = _LIBC.timerfd_create(1, os.O_NONBLOCK)
    spec = _Itimerspec()
    ref = ctypes.byref(spec)
    started = time.perf_counter()
    for _ in range(calls):
        spec.it_value.tv_sec, spec.it_value.tv_nsec = divmod(
            int((time.monotonic() + ahead_s) * 1e9), 10**9
        )
        _LIBC.timerfd_settime(fd, 1, ref, None)
    spent = time.perf_counter() - started
    os.close(fd)
    return spent / calls * 1e6


async def periodic(gap: float, arrivals: int) -> str:
    """Wait for the same instants on one *periodic* timerfd (set once, interval ``gap``):
    each wake-up reads the expiry count instead of setting the timer again. Not what the
    schedule does (it serves any arrival process, Poisson too); what a constant rate
    could save."""
    loop = asyncio.get_running_loop()
    now = time.monotonic
    fd = _LIBC.timerfd_create(1, os.O_NONBLOCK)
    first = now() + 0.01
    spec = _Itimerspec()
    spec.it_value.tv_sec, spec.it_value.tv_nsec = divmod(int(first * 1e9), 10**9)
    spec.it_interval.tv_sec, spec.it_interval.tv_nsec = divmod(int(gap * 1e9), 10**9)
    first = spec.it_value.tv_sec + spec.it_value.tv_nsec / 1e9  # the instant as set
    woken: asyncio.Future[None] = loop.create_future()

    def ready() -> None:
        try:
            os.read(fd, 8)
        except BlockingIOError:
            return
        if not woken.done():
            woken.set_result(None)

    loop.add_reader(fd, ready)
    _LIBC.timerfd_settime(fd, 1, ctypes.byref(spec), None)
    lateness: list[float] = []
    cpu = cpu_time()
    while len(lateness) < arrivals:
        woken = loop.create_future()
        await woken
        at = now()
        while len(lateness) < arrivals and first + len(lateness) * gap <= at:
            lateness.append(at - (first + len(lateness) * gap))
    cpu = cpu_time() - cpu
    loop.remove_reader(fd)
    os.close(fd)
    return _figures(cpu, gap, lateness)


def _figures(cpu: float, gap: float, lateness: list[float]) -> str:
    arrivals = len(lateness)
    lateness.sort()
    p50, p99 = lateness[arrivals // 2], lateness[arrivals * 99 // 100]
    return (
        f"{cpu / arrivals * 1e6:7.2f} us CPU/arrival ({cpu / (arrivals * gap):4.0%} of a core)"
        f"  late p50 {p50 * 1e6:6.1f} us  p99 {p99 * 1e6:7.1f} us"
    )


async def paced(gap: float, arrivals: int, poll_below: float, early: float, share: float) -> str:
    """Wait for ``arrivals`` instants ``gap`` apart as the schedule would with those settings."""
    loop = asyncio.get_running_loop()
    timer = PreciseTimer.open(loop)
    assert timer is not None, "no timerfd here"
    now = time.monotonic
    first = now() + 0.01
    lateness = []
    cpu = cpu_time()
    for k in range(arrivals):
        due = first + k * gap
        wait = due - now()
        if wait >= poll_below:
            await timer.at(due - min(early, share * wait))
        while now() < due:  # noqa: ASYNC110  (polling is what is measured)
            await asyncio.sleep(0)  # a loop turn: I/O would be served here
        lateness.append(now() - due)
    cpu = cpu_time() - cpu
    timer.close()
    return _figures(cpu, gap, lateness)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arrivals", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for ahead in (-0.001, 0.0, 50e-6, 1e-3, 0.1):
        print(
            f"timerfd_settime, instant {ahead * 1e6:+8.0f} us ahead: {settime_cost(ahead):6.2f} us"
        )
    variants = {
        "timer for every wait": (0.0, 0.0, 0.0),
        "poll waits < 40 us": (40e-6, 0.0, 0.0),
        "+ wake <= 250 us early": (40e-6, 250e-6, 0.05),
    }
    for gap in (15e-6, 30e-6, 60e-6, 200e-6, 1e-3):
        count = min(args.arrivals, int(2.0 / gap))  # at most ~2 s a variant
        for _ in range(args.rounds):
            for name, (poll_below, early, share) in variants.items():
                figures = uvloop.run(paced(gap, count, poll_below, early, share))
                print(f"gap {gap * 1e6:6.0f} us  {name:24}  {figures}")
            figures = uvloop.run(periodic(gap, count))
            print(f"gap {gap * 1e6:6.0f} us  {'one periodic timer':24}  {figures}")


if __name__ == "__main__":
    main()
