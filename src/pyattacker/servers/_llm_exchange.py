"""One completion being generated: a state machine on timers, no task and no coroutine.

An :class:`Exchange` is created once a request passed every check (auth, body, model,
limits, failure dice) and lives until its response has ended or its connection was lost:

    queued ──start()──▶ running ──last token──▶ ended ──flushed──▶ done
       └──────────────── lost() (the client left) ─────────────────┘

- ``start(now)`` (a slot is ours): a stream writes its head and, for chat, the ``role``
  event at once, then asks the server's :class:`~pyattacker.servers._llm_ticker.Ticker`
  for a call at ``now + TTFT``; a non-streamed request asks for one call at
  ``now + TTFT + (tokens - 1) ITL draws`` and writes its whole body then.
- Each call writes one content event, reads the clock (that reading, taken after the
  write returned, is the token's write time, unless the transport had to buffer: then it
  is when the buffer drained, as the echo server counts "flush included"), and asks for
  the next call at write time + one ITL draw. The last token's write carries the finish
  event, the usage event, ``[DONE]`` and the end of the chunked body, so the response ends
  when its last token is written.
- The ticker never calls early, so a gap is never shorter than its draw. Recorded gaps
  can be longer (a busy loop), and that is the truth a client sees.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pyattacker.servers._llm_wire import (
    CHAT,
    VOCABULARY,
    Ask,
    Events,
    completion_body,
    head,
    text_of,
)

if TYPE_CHECKING:
    import random

    from pyattacker.servers._delays import Delay
    from pyattacker.servers._llm_core import LlmCore
    from pyattacker.servers._llm_protocol import LlmProtocol
    from pyattacker.servers._llm_truth import Record

__all__ = ["BROKEN", "CUT", "HANG", "Exchange"]

BROKEN, CUT, HANG = "broken-sse", "cut-mid-token", "hang"
QUEUED, RUNNING, ENDED, DONE = "queued", "running", "ended", "done"
_VOCABULARY_SIZE = len(VOCABULARY)
_NAN = math.nan


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
    ) -> None:
        self.conn, self.core, self.record, self.ask = conn, core, record, ask
        self.tokens, self.finish = tokens, finish
        self.ttft, self.itl, self._rng = ttft, itl, rng
        self.fault, self.fault_at = fault, min(fault_at, tokens - 1)
        self.keep_alive = keep_alive
        self.state = QUEUED
        self.word = int(record.id[-8:], 16) % _VOCABULARY_SIZE  # where the text starts
        self.written = 0
        self._events: Events | None = None
        self._due = 0.0
        self._unflushed = False  # token times wait for the write buffer to drain

    # -- running ------------------------------------------------------------------------------

    def start(self, now: float) -> None:
        """A slot is ours from ``now``: write the head of a stream, schedule the first write."""
        record, core = self.record, self.core
        record.started, self.state = now, RUNNING
        if self.ask.stream:
            record.status = 200
            events = self._events = Events(self.ask, self._completion_id(), core.created)
            data = head(
                200,
                core.headers(record.id, now),
                content_type=b"text/event-stream; charset=utf-8",
                length=None,
                keep_alive=self.keep_alive,
            )
            self.conn.write(data + events.first())
            self._due = now + self.ttft
        else:
            rng, itl = self._rng, self.itl
            self._due = now + self.ttft + math.fsum(itl.sample(rng) for _ in range(self.tokens - 1))
        if self.fault != HANG:
            core.ticker.at(self._due, self)

    def due(self, at: float) -> None:
        """The ticker's call: the time set for the next write has come."""
        if at != self._due or self.state != RUNNING:
            return  # lost meanwhile: the ticker does not unschedule
        if self._events is None:
            self._answer_whole(self.core.now())
            return
        conn, index = self.conn, self.written
        data = self._events.token((self.word + index) % _VOCABULARY_SIZE)
        if index == self.fault_at:
            if self.fault == CUT:
                self._cut(data)
                return
            if self.fault == BROKEN:
                data = self._events.broken() + data
        last = index + 1 == self.tokens
        if last:
            data += self._events.last(self.finish, self.tokens)
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
            self._end(written, "fault" if self.fault == BROKEN else "ok")
        else:
            self._due = due = written + self.itl.sample(self._rng)
            self.core.ticker.at(due, self)

    def _answer_whole(self, now: float) -> None:
        ask, record, core = self.ask, self.record, self.core
        text = text_of(self.word, self.tokens)
        body = completion_body(
            ask, self._completion_id(), core.created, text, self.finish, self.tokens
        )
        outcome = "ok"
        if self.fault == BROKEN:
            body, outcome = body[: len(body) // 2], "fault"
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
        record.status, record.outcome = 200, "cut"
        self.state = ENDED
        self.core.release()
        self._close(self.core.now())
        self.conn.close_after_write()

    def _end(self, now: float, outcome: str) -> None:
        record = self.record
        record.status, record.outcome, record.finish_reason = 200, outcome, self.finish
        self.state = ENDED
        self.core.release()  # generating is over: the slot is free
        if not self._unflushed:
            self._close(now)
        # else the record is closed when the buffer drains (flushed)
        self.conn.done(self)

    def _close(self, now: float) -> None:
        """The record is complete at ``now``: into the ledger."""
        record = self.record
        times = record.token_times
        for index in range(len(times) - 1, -1, -1):  # buffered, then flushed by a close
            if not math.isnan(times[index]):
                break
            times[index] = now
        record.end = now
        record.completion_tokens = len(times) if self._events is not None else self.written
        self.state = DONE
        self.core.ledger.add(record)

    # -- the write buffer and the connection --------------------------------------------------

    @property
    def live(self) -> bool:
        """Queued or generating: neither ended nor lost."""
        return self.state in (QUEUED, RUNNING)

    def _wait_for_flush(self) -> None:
        if not self._unflushed:
            self._unflushed = True
            self.conn.on_drain(self)

    def flushed(self, now: float) -> None:
        """The write buffer drained at ``now``: that is when the buffered tokens were written."""
        if not self._unflushed or self.state == DONE:
            return
        self._unflushed = False
        times = self.record.token_times
        index = len(times)
        while index and math.isnan(times[index - 1]):
            index -= 1
            times[index] = now
        if self.state == ENDED:
            self._close(now)

    def lost(self, now: float) -> None:
        """The connection closed at ``now`` before this exchange was done: it is dropped.

        Tokens still in the write buffer never reached the client and are not recorded.
        """
        if self.state == DONE:
            return
        if self.state == RUNNING:
            self.core.release()
        times = self.record.token_times
        while times and math.isnan(times[-1]):
            times.pop()
        self.record.outcome = "dropped"
        self.written = len(times)
        self._close(now)

    def _completion_id(self) -> str:
        prefix = "chatcmpl-" if self.ask.kind == CHAT else "cmpl-"
        return prefix + self.record.id

    def __repr__(self) -> str:
        return f"<Exchange {self.record.id} {self.state} {self.written}/{self.tokens} tokens>"
