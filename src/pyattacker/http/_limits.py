"""How much of a response the client reads and keeps: every size limit in one place.

A hostile or broken server can send a head that never ends, a body that never ends or a
stream line that never ends. Each limit below has one name, used by every part that
enforces it (the connection, the attack's flags, the LLM stream parser):

- :data:`MAX_HEAD_SIZE` (64 KiB: h11 stops at 16 KiB, nginx at 32 KiB of request head
  by default, curl at 100 KiB for one header line): a response head longer than this
  (status line, headers and any 1xx heads before it) ends its request with
  :class:`~pyattacker.errors.ResponseTooLarge` and closes the connection.
- :data:`KEEP_BODY` (4 KiB): what a load test keeps of each body. The attack measures
  bodies, it does not need them: every byte is counted (``Response.body_size``), only
  the first ``keep_body`` bytes stay in ``Response.body``.
- :data:`MAX_LINE` (8 MiB): the longest server-sent-events line or event, and the
  longest whole (not streamed) LLM answer the LLM client parses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyattacker._checks import check_whole
from pyattacker.errors import ConfigError

__all__ = [
    "HEAD_SIZE_RANGE",
    "KEEP_BODY",
    "KEEP_BODY_RANGE",
    "MAX_HEAD_SIZE",
    "MAX_LINE",
    "Limits",
    "parse_size",
    "size_text",
]

MAX_HEAD_SIZE = 64 * 1024
KEEP_BODY = 4 * 1024
MAX_LINE = 8 * 1024 * 1024
# What the flags accept: a head needs its status line; beyond these, the limit no longer
# protects memory (one response may hold that much, per connection).
HEAD_SIZE_RANGE = (1024, 64 * 1024 * 1024)
KEEP_BODY_RANGE = (0, 1024 * 1024 * 1024)

_SIZE = re.compile(r"(?P<number>[0-9]+)\s*(?P<unit>[kmg]i?b?|b)?", re.IGNORECASE)
_SCALES = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


@dataclass(frozen=True, slots=True)
class Limits:
    """An :class:`~pyattacker.http.HttpClient`'s limits on what it reads and keeps.

    - ``max_head``: the longest response head, in bytes; a longer one fails its request
      with :class:`~pyattacker.errors.ResponseTooLarge` (error class ``protocol``) and
      closes the connection.
    - ``keep_body``: how many bytes of a body ``request()`` keeps in ``Response.body``;
      the rest is read, counted in ``Response.body_size`` and dropped. ``None`` (the
      default): the whole body is kept. Streamed bodies go to their consumer whole.

    Raises :class:`~pyattacker.errors.ConfigError` for a limit that is not a whole number
    (``max_head`` at least 1 KiB, which any status line fits in; ``keep_body`` at least 0).
    """

    max_head: int = MAX_HEAD_SIZE
    keep_body: int | None = None

    def __post_init__(self) -> None:
        check_whole(self.max_head, "max_head", at_least=HEAD_SIZE_RANGE[0])
        if self.keep_body is not None:
            check_whole(self.keep_body, "keep_body", at_least=0)


def parse_size(text: str, *, field: str, within: tuple[int, int]) -> int:
    """Bytes from ``"65536"``, ``"64KiB"``, ``"64k"``, ``"8MiB"``, ``"1G"`` (units are
    powers of 1024), in the range ``within``; else a :class:`ConfigError` naming
    ``field``."""
    low, high = within
    hint = f"e.g. 64KiB, 1MiB, 4096; from {size_text(low)} to {size_text(high)}"
    match = _SIZE.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise ConfigError(f"{text!r} is not a size", field=field, hint=hint)
    size = int(match["number"]) * _SCALES[(match["unit"] or "")[:1].lower()]
    if not low <= size <= high:
        raise ConfigError(f"{text!r} is out of range", field=field, hint=hint)
    return size


def size_text(size: int) -> str:
    """``size`` bytes as a message says it: ``64 KiB``, ``8 MiB``, ``1000 bytes``."""
    for unit, scale in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} bytes"
