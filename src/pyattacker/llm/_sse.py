"""Server-sent events, parsed incrementally: byte chunks in, with their arrival times;
events out, each stamped with the arrival time of the chunk that completed it.

Written by hand because the timestamps are the point: existing SSE packages sit on top of
their own HTTP client's iterators, and we need the arrival time of the exact chunk that
finished each event, from our client, without an extra async layer per event. The format
is small (the WHATWG HTML standard, "Interpreting an event stream"):

- the stream is UTF-8; a leading BOM is dropped; lines end with CRLF, LF or a lone CR;
- ``field: value`` (one space after the colon dropped); ``data`` lines of one event are
  joined with ``\\n``; ``event`` sets the type (default ``message``); ``id`` and ``retry``
  are remembered or ignored; a line starting with ``:`` is a comment;
- a blank line ends an event; an event without ``data`` is not dispatched.

Two deliberate differences from a browser, because a load test must notice a broken
endpoint instead of quietly skipping lines: with ``strict`` (the default) a line that is
not one of those fields (an HTML page, a JSON body) is an :class:`SseError` naming the
line, and :meth:`SseParser.close` reports a stream that ends in the middle of a line or an
event. OpenAI's ``[DONE]`` sentinel ends the stream: it is dispatched as an event with
``done`` set, and everything after it is ignored.

Pure: no I/O, no clock. The same bytes split into chunks at any positions give the same
events (only their timestamps follow the chunks).
"""

from __future__ import annotations

from typing import NamedTuple

from pyattacker.http._limits import MAX_LINE
from pyattacker.llm._errors import LlmErrorKind, SseError

__all__ = ["DONE", "SseEvent", "SseParser"]

DONE = "[DONE]"
_BOM = "\ufeff"
_QUOTE = 60  # characters of an offending line quoted in an error


class SseEvent(NamedTuple):
    """One dispatched event: its ``data`` (lines joined with ``\\n``), the arrival time
    ``at`` of the chunk that completed it, and its ``type`` (``message`` unless an
    ``event:`` line said otherwise)."""

    data: str
    at: float
    type: str = "message"

    @property
    def done(self) -> bool:
        """Whether this is OpenAI's end-of-stream sentinel, ``data: [DONE]``."""
        return self.data == DONE


class SseParser:
    """Feed byte chunks with :meth:`feed`; end with :meth:`close`. One parser per stream.

    - ``strict``: refuse lines that are not SSE fields (see the module docstring).
    - ``max_line``: the longest line or event, in bytes, before :class:`SseError` (a
      server that never ends a line must not fill our memory); default
      ``pyattacker.http.MAX_LINE``, 8 MiB.

    ``done`` turns true at ``[DONE]``; ``last_id`` is the last ``id:`` seen.
    """

    __slots__ = (
        "_data", "_data_size", "_line", "_partial", "_partial_size", "_pending", "_skip_lf",
        "_type", "done", "last_id", "max_line", "strict",
    )  # fmt: skip

    def __init__(self, *, strict: bool = True, max_line: int = MAX_LINE) -> None:
        self.strict = strict
        self.max_line = max_line
        self.done = False
        self.last_id: str | None = None
        self._partial: list[bytes] = []  # bytes of a line not ended yet
        self._partial_size = 0
        self._skip_lf = False  # the last line ended with CR: a following LF belongs to it
        self._line = 0  # lines seen so far (for error messages)
        self._data: list[str] = []
        self._data_size = 0
        self._type = ""
        self._pending = False  # a field line since the last dispatch

    def feed(self, chunk: bytes, at: float) -> list[SseEvent]:
        """The events that ``chunk`` (arrived at ``at``) completes, in order.

        Raises :class:`SseError` for a malformed line; nothing after ``[DONE]`` counts.
        """
        if self.done or not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == 0x0A:
                chunk = chunk[1:]
                if not chunk:
                    return []
        if b"\n" not in chunk and b"\r" not in chunk:
            self._keep(chunk)
            return []
        if self._partial:
            chunk = b"".join((*self._partial, chunk))
            self._partial, self._partial_size = [], 0
        if b"\r" in chunk:
            lines = chunk.splitlines(keepends=True)
            last = lines[-1]
            if last[-1] not in (0x0A, 0x0D):  # an unfinished line: keep it for the next chunk
                self._keep(lines.pop())
            elif last[-1] == 0x0D:
                self._skip_lf = True
            lines = [raw.rstrip(b"\r\n") for raw in lines]
        else:  # the common case (LF only): cheaper to split
            lines = chunk.split(b"\n")
            unfinished = lines.pop()  # b"" when the chunk ended with its line
            if unfinished:
                self._keep(unfinished)
        events: list[SseEvent] = []
        for raw in lines:
            event = self._line_of(raw, at)
            if event is not None:
                events.append(event)
                if event.done:
                    break
        return events

    def close(self) -> None:
        """The stream has ended: raise :class:`SseError` (``stream_cut``) if it ended in
        the middle of a line or an event. After ``[DONE]`` nothing is checked."""
        if self.done:
            return
        if self._partial:
            raise SseError(
                f"the stream ended in the middle of line {self._line + 1} "
                f"({self._partial_size} bytes without a line end)",
                kind=LlmErrorKind.STREAM_CUT,
                line=self._line + 1,
            )
        if self._pending:
            raise SseError(
                f"the stream ended in the middle of an event (no blank line after line "
                f"{self._line})",
                kind=LlmErrorKind.STREAM_CUT,
                line=self._line,
            )

    # ------------------------------------------------------------------------- internals

    def _keep(self, part: bytes) -> None:
        self._partial.append(part)
        self._partial_size += len(part)
        if self._partial_size > self.max_line:
            raise SseError(
                f"line {self._line + 1} is longer than {self.max_line} bytes",
                line=self._line + 1,
            )

    def _line_of(self, raw: bytes, at: float) -> SseEvent | None:
        """Interpret one line; the event it dispatches, if it is a blank line."""
        self._line += 1
        if not raw:
            return self._dispatch(at)
        if len(raw) > self.max_line:
            raise SseError(
                f"line {self._line} is longer than {self.max_line} bytes", line=self._line
            )
        if raw.startswith(b"data: ") and self._line > 1:  # the hot path, spelled out
            self._add_data(raw[6:].decode("utf-8", errors="replace"), len(raw))
            return None
        line = raw.decode("utf-8", errors="replace")
        if self._line == 1 and line.startswith(_BOM):
            line = line[1:]
        if line.startswith(":"):
            return None  # a comment (servers send them as keep-alives)
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._add_data(value, len(raw))
            return None
        elif name == "event":
            self._type = value
        elif name == "id":
            if "\0" not in value:
                self.last_id = value
        elif name != "retry" and self.strict:
            quoted = line if len(line) <= _QUOTE else line[: _QUOTE - 1] + "…"
            raise SseError(
                f"line {self._line} is not a server-sent event field: {quoted!r}",
                line=self._line,
            )
        self._pending = True
        return None

    def _add_data(self, value: str, size: int) -> None:
        self._data.append(value)
        self._data_size += size
        self._pending = True
        if self._data_size > self.max_line:
            raise SseError(
                f"the event ending at line {self._line} is longer than {self.max_line} bytes",
                line=self._line,
            )

    def _dispatch(self, at: float) -> SseEvent | None:
        data, kind = self._data, self._type or "message"
        self._data, self._data_size, self._type, self._pending = [], 0, "", False
        if not data:
            return None
        event = SseEvent(data[0] if len(data) == 1 else "\n".join(data), at, kind)
        if event.done:
            self.done = True
        return event
