"""Deciding one request of the mock LLM server: answer it now, or start generating.

:func:`handle` runs once per parsed request, in this order; the first step that answers
ends it:

1. control paths (``/stats``, ``/reset``): JSON at once, never recorded;
2. the route: ``/v1/models[/{id}]`` (never recorded), a completion path, else 404/405;
3. for a completion (recorded from here on, whatever the answer): the API key (401), the
   body (400), the model (404), the ``x-mock-*`` headers (400), a ``status:`` or
   ``not-openai`` fault, the completion length, the RPM/TPM limits (429), the failure dice
   (500/503...), the capacity (429 with ``overflow="refuse"``); then an
   :class:`~pyattacker.servers._llm_exchange.Exchange` streams the answer.

Fault headers (one request each; a bad value is a 400 naming the header)::

    x-mock-ttft: 5ms           this TTFT instead of a draw
    x-mock-itl: 1ms            this gap between tokens instead of draws
    x-mock-tokens: 20          this completion length (max_tokens still cuts it)
    x-mock-fault: not-openai   200 with an HTML page
    x-mock-fault: broken-sse[:K]     an unparseable ``data:`` event after K tokens
                                     (not streamed: a JSON body cut in half)
    x-mock-fault: cut-mid-token[:K]  after K tokens, half of the next chunk, then close
    x-mock-fault: hang         the head (streamed) or nothing, then nothing more
    x-mock-fault: status:503   that status at once, OpenAI-shaped (429 with Retry-After)

K defaults to half the completion's tokens; it is at most the last token's index.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import unquote

from pyattacker._units import parse_duration
from pyattacker.errors import ConfigError
from pyattacker.servers._core import check_status
from pyattacker.servers._delays import Fixed
from pyattacker.servers._llm_dice import cut
from pyattacker.servers._llm_exchange import BROKEN, CUT, HANG, Exchange
from pyattacker.servers._llm_limits import Refusal
from pyattacker.servers._llm_truth import Record
from pyattacker.servers._llm_wire import (
    CHAT,
    COMPLETIONS,
    Ask,
    BadRequest,
    error_body,
    model_body,
    models_body,
    parse_ask,
)

if TYPE_CHECKING:
    from pyattacker.servers._llm_core import Incoming, LlmCore
    from pyattacker.servers._llm_protocol import LlmProtocol

__all__ = ["FAULTS", "Plan", "dropped", "handle", "parse_plan", "route"]

MODELS, MODEL = "models", "model"
NOT_OPENAI = "not-openai"
FAULTS = (NOT_OPENAI, BROKEN, CUT, HANG, "status:NNN")
_JSON = b"application/json"
_HTML = (
    b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n"
    b"<body><h1>Bad Gateway</h1><p>mock fault: not-openai</p></body></html>\n"
)
_KNOWN_ROUTES = {
    b"/v1/chat/completions": (CHAT, None),
    b"/v1/completions": (COMPLETIONS, None),
    b"/v1/models": (MODELS, None),
}
_STATUS_ERRORS = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}
_MESSAGES = {
    500: "The server had an error while processing your request. Sorry about that!",
    503: "The server is overloaded or not ready yet.",
}


class Plan(NamedTuple):
    """What the ``x-mock-*`` headers pin for one request (``None``: draw as configured)."""

    ttft: float | None = None
    itl: float | None = None
    tokens: int | None = None
    fault: str | None = None
    fault_at: int | None = None
    status: int | None = None


def route(path: bytes) -> tuple[str, str | None] | None:
    """``(kind, deployment or model id)`` of a path, or ``None`` when it is no API path.

    Kinds: chat and completions (under ``/v1``, bare, or an Azure
    ``/openai/deployments/{deployment}``), ``models`` and ``model``.
    """
    known = _KNOWN_ROUTES.get(path)
    if known is not None:
        return known
    parts = [part for part in unquote(path.decode("latin-1")).split("/") if part]
    deployment = None
    if parts[:2] == ["openai", "deployments"] and len(parts) > 3:
        deployment, parts = parts[2], parts[3:]
    elif parts[:1] in (["v1"], ["openai"]):
        parts = parts[1:]
    if parts == ["chat", "completions"]:
        return CHAT, deployment
    if parts == ["completions"]:
        return COMPLETIONS, deployment
    if deployment is None and parts == ["models"]:
        return MODELS, None
    if deployment is None and len(parts) == 2 and parts[0] == "models":
        return MODEL, parts[1]
    return None


def handle(core: LlmCore, conn: LlmProtocol, req: Incoming) -> None:
    """Answer ``req`` or start its exchange (the steps in the module docstring)."""
    path, _, query = req.url.partition(b"?")
    control = core.control(req.method, path, query)
    if control is not None:
        status, body = control
        conn.reply(status, body, [], _JSON, req.keep_alive, None)
        return
    target = route(path)
    if target is None or (target[0] in (CHAT, COMPLETIONS)) != (req.method == b"POST"):
        known = target is not None
        status, what = (405, "Method not allowed") if known else (404, "Invalid URL")
        message = f"{what} ({req.method.decode('latin-1')} {path.decode('latin-1')})"
        body = error_body(message, "invalid_request_error")
        conn.reply(status, body, [], _JSON, req.keep_alive, None)
        return
    kind, name = target
    if kind in (MODELS, MODEL):
        _models(core, conn, req, name)
    else:
        _completion(core, conn, req, kind, name)


def dropped(core: LlmCore, req: Incoming, now: float) -> None:
    """``req`` was never answered: its connection closed first. Recorded if a completion."""
    target = route(req.url.partition(b"?")[0])
    if target is not None and target[0] in (CHAT, COMPLETIONS) and req.method == b"POST":
        record = Record(core.next_id(), target[0], req.received)
        record.end = now
        core.ledger.add(record)


def _authorized(core: LlmCore, req: Incoming) -> bool:
    if not core.keys:
        return True
    auth = req.headers.get(b"authorization")
    if auth is not None and auth[:7].lower() == b"bearer " and auth[7:].strip() in core.keys:
        return True
    key = req.headers.get(b"api-key")
    return key is not None and key.strip() in core.keys


def _models(core: LlmCore, conn: LlmProtocol, req: Incoming, name: str | None) -> None:
    if not _authorized(core, req):
        body = error_body(_UNAUTHORIZED, "invalid_request_error", "invalid_api_key")
        conn.reply(401, body, [], _JSON, req.keep_alive, None)
    elif name is None:
        body = models_body(core.settings.models, core.created)
        conn.reply(200, body, [], _JSON, req.keep_alive, None)
    elif name in core.models:
        conn.reply(200, model_body(name, core.created), [], _JSON, req.keep_alive, None)
    else:
        body = error_body(_no_model(name), "invalid_request_error", "model_not_found", "model")
        conn.reply(404, body, [], _JSON, req.keep_alive, None)


_UNAUTHORIZED = (
    "Incorrect API key provided. Send it as 'Authorization: Bearer KEY' or 'api-key: KEY'."
)


def _no_model(model: str) -> str:
    return f"The model `{model}` does not exist or you do not have access to it."


def _completion(
    core: LlmCore, conn: LlmProtocol, req: Incoming, kind: str, deployment: str | None
) -> None:
    record = Record(core.next_id(), kind, req.received)
    checked = _checked(core, conn, req, record, deployment)
    if checked is not None:
        _admit(core, conn, req, record, *checked)


def _checked(
    core: LlmCore, conn: LlmProtocol, req: Incoming, record: Record, deployment: str | None
) -> tuple[Ask, Plan] | None:
    """The request's ask and plan, or ``None`` once it was answered 401, 400 or 404."""
    if not _authorized(core, req):
        _error(core, conn, req, record, 401, _UNAUTHORIZED)
        return None
    try:
        ask = parse_ask(record.kind, req.body, deployment)
    except BadRequest as exc:
        _error(core, conn, req, record, 400, exc.message, param=exc.param)
        return None
    record.model, record.stream, record.prompt_tokens = ask.model, ask.stream, ask.prompt_tokens
    if ask.model not in core.models:
        _error(core, conn, req, record, 404, _no_model(ask.model), param="model")
        return None
    try:
        return ask, parse_plan(req.headers)
    except ConfigError as exc:
        _error(core, conn, req, record, 400, str(exc), param=exc.field)
        return None


def _admit(
    core: LlmCore, conn: LlmProtocol, req: Incoming, record: Record, ask: Ask, plan: Plan
) -> None:
    """Faults, length, limits, dice, capacity: answer now, or start the exchange."""
    now, rng, settings = core.now(), core.rng(ask.model), core.settings
    if plan.status is not None:
        _error(core, conn, req, record, plan.status, f"mock fault: status {plan.status}")
        return
    if plan.fault == NOT_OPENAI:
        record.outcome = "fault"
        headers = core.headers(record.id, now)
        conn.reply(200, _HTML, headers, b"text/html; charset=utf-8", req.keep_alive, record)
        return
    if plan.tokens is not None:
        tokens, finish = cut(plan.tokens, ask.max_tokens)
    else:
        tokens, finish = settings.output_tokens.sample(rng, ask.max_tokens)
    if core.limiter is not None:
        refusal = core.limiter.admit(now, ask.prompt_tokens + (ask.max_tokens or tokens))
        if refusal is not None:
            _throttle(core, conn, req, record, refusal)
            return
    failure = core.failures.status(ask.model, now - core.origin, rng)
    if failure is not None:
        status, storm = failure
        message = _MESSAGES.get(status, f"mock failure: status {status}")
        _error(core, conn, req, record, status, message + (" (storm)" if storm else ""))
        return
    if core.full() and settings.overflow == "refuse":
        message = f"The deployment is at its capacity of {core.capacity} requests in flight."
        _throttle(core, conn, req, record, Refusal("capacity", 1.0, message))
        return
    exchange = Exchange(
        conn,
        core,
        record,
        ask,
        tokens=tokens,
        finish=finish,
        ttft=plan.ttft if plan.ttft is not None else settings.ttft.sample(rng),
        itl=settings.itl if plan.itl is None else Fixed(plan.itl),
        rng=rng,
        fault=plan.fault,
        fault_at=tokens // 2 if plan.fault_at is None else plan.fault_at,
        keep_alive=req.keep_alive,
    )
    conn.begin(exchange)
    core.acquire(exchange, now)


def _error(
    core: LlmCore,
    conn: LlmProtocol,
    req: Incoming,
    record: Record,
    status: int,
    message: str,
    *,
    param: str | None = None,
    extra: list[tuple[bytes, bytes]] | None = None,
    kind: str | None = None,
) -> None:
    default, code = _STATUS_ERRORS.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    kind = kind or default
    if status == 429 and extra is None:
        extra = _retry_after(1.0)
    record.outcome, record.error = "error", message
    headers = core.headers(record.id, core.now()) + (extra or [])
    conn.reply(
        status, error_body(message, kind, code, param), headers, _JSON, req.keep_alive, record
    )


def _throttle(
    core: LlmCore, conn: LlmProtocol, req: Incoming, record: Record, refusal: Refusal
) -> None:
    kind = "tokens" if refusal.kind == "tokens" else "requests"  # OpenAI's two types
    extra = _retry_after(refusal.wait)
    _error(core, conn, req, record, 429, refusal.message, extra=extra, kind=kind)


def _retry_after(wait: float) -> list[tuple[bytes, bytes]]:
    """``Retry-After`` in whole seconds (rounded up) and ``retry-after-ms``, exact to 1 ms."""
    return [
        (b"Retry-After", b"%d" % max(1, math.ceil(wait))),
        (b"retry-after-ms", b"%d" % math.ceil(wait * 1000)),
    ]


def parse_plan(headers: dict[bytes, bytes]) -> Plan:
    """The :class:`Plan` of a request's ``x-mock-*`` headers; ``ConfigError`` naming the
    header for an unknown one or a bad value."""
    plan: dict[str, object] = {}
    for name, raw in headers.items():
        if not name.startswith(b"x-mock-"):
            continue
        field, value = name.decode("latin-1"), raw.decode("latin-1").strip()
        if name == b"x-mock-ttft":
            plan["ttft"] = parse_duration(value, field=field)
        elif name == b"x-mock-itl":
            plan["itl"] = parse_duration(value, field=field)
        elif name == b"x-mock-tokens":
            plan["tokens"] = _whole(value, field, at_least=1)
        elif name == b"x-mock-fault":
            plan.update(_fault(value, field))
        else:
            raise ConfigError(
                "unknown mock header",
                field=field,
                hint="known: x-mock-ttft, x-mock-itl, x-mock-tokens, x-mock-fault",
            )
    return Plan(**plan)  # type: ignore[arg-type]


def _fault(value: str, field: str) -> dict[str, object]:
    name, colon, arg = value.lower().partition(":")
    if name == "status" and colon:
        return {"status": check_status(arg, field, lowest=400)}
    if name in (BROKEN, CUT):
        return {"fault": name, "fault_at": _whole(arg, field, at_least=0) if colon else None}
    if name in (NOT_OPENAI, HANG) and not colon:
        return {"fault": name}
    raise ConfigError(
        f"unknown fault {value!r}",
        field=field,
        hint="not-openai | broken-sse[:K] | cut-mid-token[:K] | hang | status:NNN",
    )


def _whole(text: str, field: str, *, at_least: int) -> int:
    if not text.isdigit() or int(text) < at_least:
        raise ConfigError(f"must be a whole number >= {at_least}, got {text!r}", field=field)
    return int(text)
