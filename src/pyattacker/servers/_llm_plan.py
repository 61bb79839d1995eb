"""What a request's ``x-mock-*`` headers pin: its TTFT, its gaps, its length, a fault.

Fault headers (one request each; a bad value is a 400 naming the header)::

    x-mock-ttft: 5ms           this TTFT instead of a draw (at most 1 h)
    x-mock-itl: 1ms            this gap between tokens instead of draws (at most 1 h)
    x-mock-tokens: 20          this completion length (max_tokens still cuts it; at most
                               the server's max_output_tokens)
    x-mock-fault: not-openai   200 with an HTML page
    x-mock-fault: broken-sse[:K]     an unparseable ``data:`` event after K tokens
                                     (not streamed: a JSON body cut in half)
    x-mock-fault: cut-mid-token[:K]  after K tokens, half of the next chunk, then close
    x-mock-fault: hang         the head (streamed) or nothing, then nothing more
    x-mock-fault: status:503   that status at once, OpenAI-shaped (429 with Retry-After)

K defaults to half the completion's tokens; it is at most the last token's index.
"""

from __future__ import annotations

from typing import NamedTuple

from pyattacker.errors import ConfigError
from pyattacker.servers._core import check_status
from pyattacker.servers._llm_exchange import BROKEN, CUT, HANG
from pyattacker.servers._ranges import MOST_HELD_S, request_seconds, request_whole

__all__ = ["FAULTS", "MOST_PINNED_S", "NOT_OPENAI", "Plan", "parse_plan"]

NOT_OPENAI = "not-openai"
FAULTS = (NOT_OPENAI, BROKEN, CUT, HANG, "status:NNN")
#: the longest ``x-mock-ttft`` or ``x-mock-itl`` (seconds): beyond it, ``hang`` says it better
MOST_PINNED_S = MOST_HELD_S
_OF_MAX = " (the server's max_output_tokens)"


class Plan(NamedTuple):
    """What the ``x-mock-*`` headers pin for one request (``None``: draw as configured)."""

    ttft: float | None = None
    itl: float | None = None
    tokens: int | None = None
    fault: str | None = None
    fault_at: int | None = None
    status: int | None = None


def parse_plan(headers: dict[bytes, bytes], *, max_tokens: int | None = None) -> Plan:
    """The :class:`Plan` of a request's ``x-mock-*`` headers; ``ConfigError`` naming the
    header for an unknown one or a bad value (a duration above :data:`MOST_PINNED_S`, a
    length above ``max_tokens``, the server's ``max_output_tokens``, included)."""
    plan: dict[str, object] = {}
    for name, raw in headers.items():
        if not name.startswith(b"x-mock-"):
            continue
        field, value = name.decode("latin-1"), raw.decode("latin-1").strip()
        if name == b"x-mock-ttft":
            plan["ttft"] = request_seconds(value, field)
        elif name == b"x-mock-itl":
            plan["itl"] = request_seconds(value, field)
        elif name == b"x-mock-tokens":
            plan["tokens"] = request_whole(value, field, at_least=1, at_most=max_tokens, of=_OF_MAX)
        elif name == b"x-mock-fault":
            plan.update(_fault(value, field, max_tokens))
        else:
            raise ConfigError(
                "unknown mock header",
                field=field,
                hint="known: x-mock-ttft, x-mock-itl, x-mock-tokens, x-mock-fault",
            )
    return Plan(**plan)  # type: ignore[arg-type]


def _fault(value: str, field: str, max_tokens: int | None) -> dict[str, object]:
    name, colon, arg = value.lower().partition(":")
    if name == "status" and colon:
        return {"status": check_status(arg, field, lowest=400)}
    if name in (BROKEN, CUT):
        at = request_whole(arg, field, at_most=max_tokens, of=_OF_MAX) if colon else None
        return {"fault": name, "fault_at": at}
    if name in (NOT_OPENAI, HANG) and not colon:
        return {"fault": name}
    raise ConfigError(
        f"unknown fault {value!r}",
        field=field,
        hint="not-openai | broken-sse[:K] | cut-mid-token[:K] | hang | status:NNN",
    )
