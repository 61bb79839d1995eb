"""How an attack runs, decided once from its plan, and what each arrival of it may do.

:class:`Mode` is read off the plan, its acquire algorithm and its sender before the run
starts; nothing per request asks again. :func:`admit` is the open model's rule for one
arrival, a pure function of the counts the engine keeps (see :class:`Flight`).
"""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from dataclasses import dataclass

from pyattacker.attack._load import OpenModel
from pyattacker.attack._mix_send import MixSender
from pyattacker.attack._plan import AttackPlan
from pyattacker.attack._send import DirectRequest, HttpSender, Sender
from pyattacker.pool import AcquireAlgorithm, Immediate, Wait

__all__ = ["DROP", "QUEUE", "START", "Admit", "Flight", "Mode", "admit"]


@dataclass(frozen=True, slots=True)
class Mode:
    """How this plan's requests run.

    - ``open``: a schedule of arrivals (the open model), not clients in a loop.
    - ``try_first``: the algorithm (``wait``, ``immediate``) begins with a plain
      ``try_acquire`` on the pool: the engine takes that step itself, synchronously, and
      enters the algorithm only when it found nothing free.
    - ``queue_when_full``: open-model arrivals that find every connection busy wait in the
      engine's own queue, oldest first, rather than as tasks parked in the pool (cheaper
      per request, so a generator that fell behind once does not fall further behind).
      Only for ``wait`` without a timeout, whose waiters the pool would serve in the same
      order.
    - ``direct``: one-attempt requests go out from the scheduler's own callback on an idle
      connection, with no task (the plain :class:`HttpSender`, whose ``start`` can).
    """

    open: bool
    try_first: bool
    queue_when_full: bool
    direct: bool

    @classmethod
    def of(cls, plan: AttackPlan, algorithm: AcquireAlgorithm, sender: Sender) -> Mode:
        open_model = isinstance(plan.load, OpenModel)
        try_first = type(algorithm) in (Wait, Immediate)
        return cls(
            open=open_model,
            try_first=try_first,
            queue_when_full=open_model and type(algorithm) is Wait and algorithm.timeout is None,
            direct=open_model
            and try_first
            and plan.retry.max_attempts == 1
            and plan.follow_redirects == 0  # a hop is a second attempt: a task's loop
            and type(sender) in (HttpSender, MixSender),
        )


class Admit(enum.Enum):
    """What becomes of one open-model arrival."""

    DROP = "drop"  # max_in_flight requests are in progress: counted as dropped
    QUEUE = "queue"  # in progress, waiting in the engine's queue for a connection
    START = "start"  # handed to the dispatcher now


# The verdicts as module names: on Python 3.11 reading an Enum member off its class goes
# through the enum's metaclass hook, about a call's cost, and the schedule reads them on
# every arrival.
DROP, QUEUE, START = Admit.DROP, Admit.QUEUE, Admit.START


def admit(in_flight: int, max_in_flight: int, queued: int, busy: int, capacity: float) -> Admit:
    """The open model's rule for an arrival: dropped when ``in_flight >= max_in_flight``;
    else queued behind ``queued`` earlier arrivals, or when ``busy`` connections (leased,
    or promised to a task that has not run yet) fill ``capacity``; else started.
    ``capacity`` is infinite when the mode does not queue."""
    if in_flight >= max_in_flight:
        return DROP
    if queued or busy >= capacity:
        return QUEUE
    return START


class Flight:
    """The book of one run's requests in progress, which admission reads and the
    dispatchers keep.

    ``in_flight``: admitted and not counted yet. ``leased``: holding a lease (a
    connection). ``backlog``: ``(number, scheduled)`` of arrivals queued for a
    connection. ``unstarted``: requests handed to a task that has not run yet, which the
    pool cannot see; a connection is promised to each. ``tasks``: the request tasks
    running. ``live``: requests sent directly (each holds its lease, or None for a unit
    of the pool's one resource, ``Pool.take_unit``, and the function that abandons it).
    ``stopping``: why the run stops, once it does.
    """

    __slots__ = (
        "backlog",
        "capacity",
        "in_flight",
        "leased",
        "live",
        "stopping",
        "tasks",
        "unstarted",
    )

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.in_flight = 0
        self.leased = 0
        self.backlog: deque[tuple[int, float]] = deque()
        self.unstarted: dict[int, float] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.live: dict[int, DirectRequest] = {}
        self.stopping: str | None = None

    def busy(self) -> int:
        """Connections in use or promised: leases held, and tasks about to ask for one."""
        return self.leased + len(self.unstarted)

    def has_room(self) -> bool:
        """A connection is free for one more request (without counting the unstarted
        tasks, a whole backlog was admitted at once and parked in the pool)."""
        return self.leased + len(self.unstarted) < self.capacity

    def statistics(self) -> dict[str, int]:
        return {
            "in_flight": self.in_flight,
            "queued": len(self.backlog),
            "leased": self.leased,
            "unstarted": len(self.unstarted),
            "tasks": len(self.tasks),
            "direct": len(self.live),
        }
