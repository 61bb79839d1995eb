"""One completion being generated: a state machine on timers, no task and no coroutine.

An :class:`Exchange` is created once a request passed every check (auth, body, model,
limits, failure dice) and lives until its record is complete. Its states and the events
that move it are one table, :data:`TRANSITIONS`; anything else is a bug
(:class:`IllegalTransition`, the state unchanged)::

    QUEUED ──START──▶ RUNNING ──FINISH──▶ ENDED ──FLUSH──▶ DONE
       │                 │                  │
       └───── LOSE (the client left) or FAIL (an internal bug) ─────▶ DONE

- START (``start(now)``, a slot is ours): a stream writes its head and, for chat, the
  ``role`` event at once, then asks the server's
  :class:`~pyattacker.servers._llm_ticker.Ticker` for a call at ``now + TTFT``; a
  non-streamed request asks for one call at ``now + TTFT + (tokens - 1) ITL draws`` (in
  closed form when the ITL is fixed; drawn :data:`DRAWS_PER_TURN` per turn of the loop
  when there are more) and writes its whole body then.
- Each call writes one content event, reads the clock (that reading, taken after the
  write returned, is the token's write time, unless the transport had to buffer: then it
  is when the buffer drained, as the echo server counts "flush included"), and asks for
  the next call at write time + one ITL draw. The last token's write carries the finish
  event, the usage event, ``[DONE]`` and the end of the chunked body: FINISH, and the
  slot is free. FLUSH: the bytes left the buffer (at once, or when it drained); the record
  is complete and enters the ledger.
- The ticker never calls early, so a gap is never shorter than its draw. Recorded gaps
  can be longer (a busy loop), and that is the truth a client sees.
- LOSE: the connection closed first; the record is ``dropped`` with the tokens that left.
  FAIL: a bug raised while answering; the record is a 500 ``error``, the bug is logged,
  the connection closes (after a 500 if nothing was sent yet).
"""

from __future__ import annotations

import enum
import logging
import math
from typing import TYPE_CHECKING

from pyattacker.servers._delays import Fixed
from pyattacker.servers._llm_truth import Outcome
from pyattacker.servers._llm_wire import (
    CHAT,
    VOCABULARY,
    Ask,
    Events,
    completion_body,
    error_body,
    head,
    text_of,
)

if TYPE_CHECKING:
    import random

    from pyattacker.servers._delays import Delay
    from pyattacker.servers._llm_core import LlmCore
    from pyattacker.servers._llm_protocol import LlmProtocol
    from pyattacker.servers._llm_truth import Record

__all__ = [
    "BROKEN",
    "CUT",
    "DRAWS_PER_TURN",
    "HANG",
    "TRANSITIONS",
    "Event",
    "Exchange",
    "IllegalTransition",
    "State",
    "next_state",
]

BROKEN, CUT, HANG = "broken-sse", "cut-mid-token", "hang"
#: ITL draws of a non-streamed answer made in one turn of the loop (a turn short enough
#: not to delay the streams' tokens)
DRAWS_PER_TURN = 4096
_VOCABULARY_SIZE = len(VOCABULARY)
_NAN = math.nan
log = logging.getLogger("pyattacker.servers.llm")


class State(enum.Enum):
    """Where an exchange is (see the module docstring)."""

    QUEUED = "queued"  # waiting for a slot
    RUNNING = "running"  # has a slot, writing
    ENDED = "ended"  # everything written, some of it still in the write buffer
    DONE = "done"  # recorded


class Event(enum.Enum):
    """What moves an exchange."""

    START = "start"
    FINISH = "finish"
    FLUSH = "flush"
    LOSE = "lose"
    FAIL = "fail"


QUEUED, RUNNING, ENDED, DONE = State.QUEUED, State.RUNNING, State.ENDED, State.DONE

#: Every legal move: ``(state, event) -> next state``.
TRANSITIONS: dict[tuple[State, Event], State] = {
    (QUEUED, Event.START): RUNNING,
    (RUNNING, Event.FINISH): ENDED,
    (ENDED, Event.FLUSH): DONE,
    (QUEUED, Event.LOSE): DONE,
    (RUNNING, Event.LOSE): DONE,
    (ENDED, Event.LOSE): DONE,
    (QUEUED, Event.FAIL): DONE,
    (RUNNING, Event.FAIL): DONE,
    (ENDED, Event.FAIL): DONE,
}


class IllegalTransition(RuntimeError):
    """An event that :data:`TRANSITIONS` does not allow in that state: a bug of ours."""


def next_state(state: State, event: Event) -> State:
    """The state ``event`` moves ``state`` to; :class:`IllegalTransition` if it may not."""
    try:
        return TRANSITIONS[state, event]
    except KeyError:
        raise IllegalTransition(f"{event.value} is not allowed when {state.value}") from None


class Exchange:
    """One admitted completion request on one connection (see the module docstring)."""

    __slots__ = (
        "_due",
        "_events",
        "_rng",
        "_unflushed",
        "ask",
        "conn",
        "core",
        "fault",
        "fault_at",
        "finish",
        "http10",
        "itl",
        "keep_alive",
        "record",
        "state",
        "tokens",
        "ttft",
        "word",
        "written",
    )

    def __init__(
        self,
        conn: LlmProtocol,
        core: LlmCore,
        record: Record,
        ask: Ask,
        *,
        tokens: int,
        finish: str,
        ttft: float,
        itl: Delay,
        rng: random.Random,
        fault: str | None,
        fault_at: int,
        keep_alive: bool,
        http10: bool = False,
    ) -> None:
        self.conn, self.core, self.record, self.ask = conn, core, record, ask
        self.tokens, self.finish = tokens, finish
        self.ttft, self.itl, self._rng = ttft, itl, rng
        self.fault, self.fault_at = fault, min(fault_at, tokens - 1)
        self.http10 = http10
        # An HTTP/1.0 stream has no chunked encoding: its body ends when the server closes.
        self.keep_alive = keep_alive and not (http10 and ask.stream)
        self.state = QUEUED
        self.word = int(record.id[-8:], 16) % _VOCABULARY_SIZE  # where the text starts
        self.written = 0
        self._events: Events | None = None
        self._due = 0.0
        self._unflushed = False  # token times wait for the write buffer to drain

    def _move(self, event: Event) -> None:
        self.state = next_state(self.state, event)

    # -- running ------------------------------------------------------------------------------

    def start(self, now: float) -> None:
        """A slot is ours from ``now``: write the head of a stream, schedule the first write."""
        self._move(Event.START)
        record, core = self.record, self.core
        record.started = now
        if self.ask.stream:
            record.status = 200
            chunked = not self.http10
            events = Events(self.ask, self._completion_id(), core.created, chunked=chunked)
            self._events = events
            data = head(
                200,
                core.headers(record.id, now),
                content_type=b"text/event-stream; charset=utf-8",
                length=None,
                keep_alive=self.keep_alive,
                chunked=chunked,
            )
            self.conn.write(data + events.first())
            self._due = now + self.ttft
        else:
            self._due = now + self.ttft
            gaps = self.tokens - 1
            if isinstance(self.itl, Fixed):
                self._due += self.itl.seconds * gaps  # the sum, in closed form
            elif gaps > DRAWS_PER_TURN:  # thousands of draws: a slice per turn of the loop
                self._draw(gaps)
                return
            else:
                self._due += self._gaps(gaps)
        if self.fault != HANG:
            core.ticker.at(self._due, self)

    def _gaps(self, count: int) -> float:
        """The sum of ``count`` ITL draws."""
        itl, rng = self.itl, self._rng
        return math.fsum(itl.sample(rng) for _ in range(count))

    def _draw(self, left: int) -> None:
        """Add :data:`DRAWS_PER_TURN` of the ``left`` gaps of a whole answer to its due
        time, then the rest on the loop's next turn; schedule it once all are drawn."""
        if self.state is not RUNNING:
            return  # lost meanwhile
        count = min(left, DRAWS_PER_TURN)
        self._due += self._gaps(count)
        if left > count:
            self.core.loop.call_soon(self._draw, left - count)
        elif self.fault != HANG:
            self.core.ticker.at(self._due, self)

    def due(self, at: float) -> None:
        """The ticker's call: the time set for the next write has come."""
        if at != self._due or self.state is not RUNNING:
            return  # lost meanwhile: the ticker does not unschedule
        try:
            if self._events is None:
                self._answer_whole(self.core.now())
            else:
                self._write_token()
        except Exception as exc:  # a bug: recorded as a 500, never left hanging
            self.fail(exc)

    def _write_token(self) -> None:
        events = self._events
        assert events is not None
        conn, index = self.conn, self.written
        data = events.token((self.word + index) % _VOCABULARY_SIZE)
        if index == self.fault_at:
            if self.fault == CUT:
                self._cut(data)
                return
            if self.fault == BROKEN:
                data = events.broken() + data
        last = index + 1 == self.tokens
        if last:
            data += events.last(self.finish, self.tokens)
        conn.write(data)
        written = self.core.now()
        self.written = index + 1
        times = self.record.token_times
        if conn.paused:
            times.append(_NAN)
            self._wait_for_flush()
        else:
            times.append(written)
        if last:
            self._end(written, Outcome.FAULT if self.fault == BROKEN else Outcome.OK)
        else:
            self._due = due = written + self.itl.sample(self._rng)
            self.core.ticker.at(due, self)

    def _answer_whole(self, now: float) -> None:
        ask, record, core = self.ask, self.record, self.core
        text = text_of(self.word, self.tokens)
        body = completion_body(
            ask, self._completion_id(), core.created, text, self.finish, self.tokens
        )
        outcome = Outcome.OK
        if self.fault == BROKEN:
            body, outcome = body[: len(body) // 2], Outcome.FAULT
        headers = core.headers(record.id, now)
        data = head(
            200,
            headers,
            content_type=b"application/json",
            length=len(body),
            keep_alive=self.keep_alive,
        )
        if self.fault == CUT:  # no usable token reached the client
            self._cut(body, data)
            return
        self.written = self.tokens
        self.conn.write(data + body)
        if self.conn.paused:
            self._wait_for_flush()
        self._end(core.now(), outcome)

    def _cut(self, data: bytes, before: bytes = b"") -> None:
        """Write ``before`` and half of ``data``, then close: a response cut mid-token."""
        self.conn.write(before + data[: len(data) // 2])
        record = self.record
        record.status, record.outcome = 200, Outcome.CUT
        self._move(Event.FINISH)
        self.core.release()
        self._move(Event.FLUSH)
        self._record(self.core.now())
        self.conn.close_after_write()

    def _end(self, now: float, outcome: Outcome) -> None:
        record = self.record
        record.status, record.outcome, record.finish_reason = 200, outcome, self.finish
        self._move(Event.FINISH)
        self.core.release()  # generating is over: the slot is free
        if not self._unflushed:
            self._move(Event.FLUSH)
            self._record(now)
        # else the record is complete when the buffer drains (flushed)
        self.conn.done(self)

    def _record(self, now: float) -> None:
        """The record is complete at ``now``: into the ledger."""
        record = self.record
        times = record.token_times
        for index in range(len(times) - 1, -1, -1):  # buffered, then flushed by a close
            if not math.isnan(times[index]):
                break
            times[index] = now
        record.end = now
        record.completion_tokens = len(times) if self._events is not None else self.written
        self.core.ledger.add(record)

    # -- the write buffer and the connection --------------------------------------------------

    @property
    def live(self) -> bool:
        """Queued or generating: neither ended nor recorded."""
        return self.state is QUEUED or self.state is RUNNING

    @property
    def unflushed(self) -> bool:
        """Ended, its last bytes still in the write buffer: not yet recorded."""
        return self.state is ENDED

    def _wait_for_flush(self) -> None:
        if not self._unflushed:
            self._unflushed = True
            self.conn.on_drain(self)

    def flushed(self, now: float) -> None:
        """The write buffer drained at ``now``: that is when the buffered tokens were written."""
        if not self._unflushed or self.state is DONE:
            return
        self._unflushed = False
        times = self.record.token_times
        index = len(times)
        while index and math.isnan(times[index - 1]):
            index -= 1
            times[index] = now
        if self.state is ENDED:
            self._move(Event.FLUSH)
            self._record(now)

    def lost(self, now: float) -> None:
        """The connection closed at ``now`` before this exchange was done: it is dropped.

        Tokens still in the write buffer never reached the client and are not recorded.
        """
        if self.state is DONE:
            return
        self._leave(Event.LOSE)
        times = self.record.token_times
        while times and math.isnan(times[-1]):
            times.pop()
        self.record.outcome = Outcome.DROPPED
        self.written = len(times)
        self._record(now)

    def fail(self, exc: BaseException) -> None:
        """A bug raised while answering: log it, record a 500, close the connection (after
        a 500 response when nothing of this one was sent yet)."""
        log.error("internal error answering request %s", self.record.id, exc_info=exc)
        if self.state is DONE:
            return
        sent = self.state is not QUEUED and (self._events is not None or self.written > 0)
        self._leave(Event.FAIL)
        record, now = self.record, self.core.now()
        record.status, record.outcome = 500, Outcome.ERROR
        record.error = f"internal error: {exc!r}"
        self.keep_alive = False
        if not sent:
            body = error_body(
                "The server had an error while processing your request.", "server_error"
            )
            length = len(body)
            headers = self.core.headers(record.id, now)
            reply = head(
                500, headers, content_type=b"application/json", length=length, keep_alive=False
            )
            self.conn.write(reply + body)
        self._record(now)
        self.conn.done(self)

    def _leave(self, event: Event) -> None:
        """LOSE or FAIL: give back the slot, or the place in the queue."""
        was = self.state
        self._move(event)
        if was is RUNNING:
            self.core.release()
        elif was is QUEUED:
            self.core.leave()

    def _completion_id(self) -> str:
        prefix = "chatcmpl-" if self.ask.kind == CHAT else "cmpl-"
        return prefix + self.record.id

    def __repr__(self) -> str:
        return f"<Exchange {self.record.id} {self.state.value} {self.written}/{self.tokens} tokens>"
