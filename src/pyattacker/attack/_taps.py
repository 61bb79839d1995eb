"""Taps: what wants every record of an attack run by workers (goodput's count, sample rows).

One process hands each finished request's :class:`~pyattacker.measure.RequestRecord` to its
``on_record``; worker processes cannot hand records to the driver (that would cost the
pipe as much as the requests). A :class:`WorkerTap` is the driver's side of such a
consumer: each worker opens its own part (:meth:`WorkerTap.open`, in the worker), which
sees that worker's records; what the part says of itself (:meth:`RecordTap.part`, a
picklable value) travels back with each snapshot and with the final count, and the
driver hands every worker's last word to :meth:`WorkerTap.gather`, which makes the whole
of it (adds the counts up, joins the files). A lost worker's last word is the one of its
last snapshot (None if it sent none).

A part on another machine (a Ray actor, ``attack --ray``) cannot write a file the user
sees. A :class:`FetchedTap` says what it does there instead: the driver ships its
:meth:`~FetchedTap.held` twin, whose parts hold what they write in memory; the driver takes
it from each worker while the attack runs (:meth:`HeldTap.take`, on the worker's node) and
hands it to :meth:`FetchedTap.receive` (on the driver), before the usual ``gather``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from pyattacker.measure import RequestRecord

__all__ = ["FetchedTap", "HeldTap", "RecordTap", "WorkerTap", "gather_taps", "on_record_of"]


class RecordTap(Protocol):
    """One worker's part of a tap: ``add`` sees each record the worker counts; ``part``
    says what it has (picklable); ``final`` is the last call, once the attack is over (a
    part that holds a file closes it then)."""

    def add(self, record: RequestRecord) -> None: ...

    def part(self, *, final: bool) -> object: ...


class WorkerTap(Protocol):
    """The driver's side of a tap (picklable: it travels to each worker with the plan)."""

    def open(self, index: int) -> RecordTap:
        """Worker ``index``'s part, opened in that worker before its attack starts."""
        ...

    def gather(self, parts: Sequence[object | None], lost: Sequence[int]) -> None:
        """Every worker's last :meth:`RecordTap.part` by index (None: none came), once
        every worker ended; ``lost`` names the workers whose process died."""
        ...


@runtime_checkable
class HeldTap(WorkerTap, Protocol):
    """A tap whose parts hold what they write until :meth:`take` (see the module docstring)."""

    def take(self, index: int) -> bytes:
        """What worker ``index``'s part wrote since the last take (``b""``: nothing, or no
        part yet); called from another thread than the part's ``add``."""
        ...


@runtime_checkable
class FetchedTap(WorkerTap, Protocol):
    """A tap that can run on another machine (see the module docstring)."""

    def held(self) -> HeldTap:
        """The twin to ship to the workers."""
        ...

    def receive(self, index: int, data: bytes) -> None:
        """``data`` taken from worker ``index``'s part, in the order it was taken."""
        ...


def on_record_of(parts: Sequence[RecordTap]) -> Callable[[RequestRecord], None] | None:
    """The ``on_record`` that feeds every part (None without parts)."""
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0].add
    adds = [p.add for p in parts]

    def each(record: RequestRecord) -> None:
        for add in adds:
            add(record)

    return each


def gather_taps(
    taps: Sequence[WorkerTap], words: Sequence[Sequence[object] | None], lost: Sequence[int]
) -> None:
    """Hand each tap its workers' last words: ``words[i]`` is worker ``i``'s list of parts
    (one per tap, in the order of ``taps``), None when it sent nothing."""
    for j, tap in enumerate(taps):
        tap.gather([None if w is None else w[j] for w in words], lost)
