"""Deciding one request of the mock LLM server: answer it now, or start generating.

:func:`handle` runs once per parsed request, in this order; the first step that answers
ends it:

1. control paths (``GET /stats``, ``POST /reset``; another method is a 405): the API key
   when keys are configured (401), then JSON, never recorded;
2. the route: ``/v1/models[/{id}]`` (never recorded), a completion path, else 404/405;
3. for a completion (recorded from here on, whatever the answer): the API key (401), the
   body (400, ``max_tokens`` above the server's ``max_output_tokens`` included), the model
   (404), the ``x-mock-*`` headers (400), a ``status:`` or ``not-openai`` fault, the
   completion length, the capacity (429 with ``overflow="refuse"``, paying nothing), the
   RPM/TPM limits (429, paying nothing), the failure dice (500/503..., *after* the limits
   were paid: a provider that accepted a request and then failed it has counted it);
   then an :class:`~pyattacker.servers._llm_exchange.Exchange` streams the answer.

A bug raised by any step is logged (logger ``pyattacker.servers.llm``, which reaches stderr
when nothing else is configured) and answered 500; a completion's is recorded as a 500
``error``, never lost and never passed off as the client's fault.

The ``x-mock-*`` fault headers are read by :mod:`pyattacker.servers._llm_plan`.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING
from urllib.parse import unquote

from pyattacker.errors import ConfigError
from pyattacker.servers._delays import Fixed
from pyattacker.servers._llm_dice import cut
from pyattacker.servers._llm_exchange import Exchange
from pyattacker.servers._llm_limits import Refusal
from pyattacker.servers._llm_plan import NOT_OPENAI, Plan, parse_plan
from pyattacker.servers._llm_truth import Outcome, Record
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

__all__ = ["dropped", "handle", "is_completion", "route"]

MODELS, MODEL = "models", "model"
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
#: control path -> the one method it answers
_CONTROL = {b"/stats": b"GET", b"/reset": b"POST"}
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
log = logging.getLogger("pyattacker.servers.llm")


def route(path: bytes) -> tuple[str, str | None] | None:
    """``(kind, deployment or model id)`` of a path, or ``None`` when it is no API path.

    Kinds: chat and completions (under ``/v1``, ``/openai``, ``/openai/v1`` (Azure's v1
    API), bare, or an Azure ``/openai/deployments/{deployment}``), ``models`` and
    ``model``. A path with an empty segment (``//``, a trailing ``/``) is no API path.
    """
    known = _KNOWN_ROUTES.get(path)
    if known is not None:
        return known
    parts = path.decode("latin-1").split("/")
    if parts[0] or "" in parts[1:]:
        return None
    parts = [unquote(part) for part in parts[1:]]
    deployment = None
    if parts[:2] == ["openai", "deployments"] and len(parts) > 3:
        deployment, parts = parts[2], parts[3:]
    elif parts[:2] == ["openai", "v1"]:
        parts = parts[2:]
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


def is_completion(method: bytes, url: bytes) -> bool:
    """Whether a request asks for a completion (and so will be recorded)."""
    if method != b"POST":
        return False
    target = route(url.partition(b"?")[0])
    return target is not None and target[0] in (CHAT, COMPLETIONS)


def handle(core: LlmCore, conn: LlmProtocol, req: Incoming) -> None:
    """Answer ``req`` or start its exchange (the steps in the module docstring)."""
    try:
        _handle(core, conn, req)
    except Exception as exc:  # a bug of ours: say so, never blame the client
        log.error("internal error answering %r", req.url, exc_info=exc)
        body = error_body(f"internal error: {exc!r}", "server_error")
        conn.reply(500, body, [], _JSON, False, None)


def _handle(core: LlmCore, conn: LlmProtocol, req: Incoming) -> None:
    path, _, query = req.url.partition(b"?")
    if path in _CONTROL:
        _control(core, conn, req, path, query)
        return
    target = route(path)
    if target is None or (target[0] in (CHAT, COMPLETIONS)) != (req.method == b"POST"):
        status, what = (405, "Method not allowed") if target else (404, "Invalid URL")
        _refuse(conn, req, status, f"{what} ({_said(req, path)})")
        return
    kind, name = target
    if kind in (MODELS, MODEL):
        _models(core, conn, req, name)
    else:
        _completion(core, conn, req, kind, name)


def _control(core: LlmCore, conn: LlmProtocol, req: Incoming, path: bytes, query: bytes) -> None:
    wanted = _CONTROL[path]
    if not _authorized(core, req):
        body = error_body(_UNAUTHORIZED, "invalid_request_error", "invalid_api_key")
        conn.reply(401, body, [], _JSON, req.keep_alive, None)
    elif req.method != wanted:
        hint = f"use {wanted.decode()} {path.decode()}"
        _refuse(conn, req, 405, f"Method not allowed ({_said(req, path)}): {hint}", wanted)
    else:
        conn.answer(core.control(path, query), req.keep_alive)


def _refuse(
    conn: LlmProtocol, req: Incoming, status: int, message: str, allow: bytes | None = None
) -> None:
    headers = [(b"Allow", allow)] if allow else []
    body = error_body(message, "invalid_request_error")
    conn.reply(status, body, headers, _JSON, req.keep_alive, None)


def _said(req: Incoming, path: bytes) -> str:
    return f"{req.method.decode('latin-1')} {path.decode('latin-1')}"


def dropped(core: LlmCore, req: Incoming, now: float) -> None:
    """``req`` was never answered: its connection closed first. Recorded if a completion."""
    target = route(req.url.partition(b"?")[0])
    if req.completion and target is not None:
        record = Record(core.next_id(), target[0], req.received, req.epoch)
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
    record = Record(core.next_id(), kind, req.received, req.epoch)
    try:
        checked = _checked(core, conn, req, record, deployment)
        if checked is not None:
            _admit(core, conn, req, record, *checked)
    except Exception as exc:
        _failed(core, conn, req, record, exc)


def _failed(
    core: LlmCore, conn: LlmProtocol, req: Incoming, record: Record, exc: Exception
) -> None:
    """A bug while deciding ``record``'s request: a recorded 500, the connection closed."""
    active = conn.active_exchange()
    if active is not None and active.record is record:
        active.fail(exc)  # logs, records, closes
        return
    log.error("internal error answering request %s", record.id, exc_info=exc)
    if record.end is None and record.status is None:  # nothing answered, nothing recorded
        record.outcome, record.error = Outcome.ERROR, f"internal error: {exc!r}"
        body = error_body(_MESSAGES[500], "server_error")
        conn.reply(500, body, core.headers(record.id, core.now()), _JSON, False, record)
    else:
        conn.close_after_write()


def _checked(
    core: LlmCore, conn: LlmProtocol, req: Incoming, record: Record, deployment: str | None
) -> tuple[Ask, Plan] | None:
    """The request's ask and plan, or ``None`` once it was answered 401, 400 or 404."""
    if not _authorized(core, req):
        _error(core, conn, req, record, 401, _UNAUTHORIZED)
        return None
    most = core.settings.max_output_tokens
    try:
        ask = parse_ask(record.kind, req.body, deployment, max_output=most)
    except BadRequest as exc:
        _error(core, conn, req, record, 400, exc.message, param=exc.param, code=exc.code)
        return None
    record.model, record.stream, record.prompt_tokens = ask.model, ask.stream, ask.prompt_tokens
    if ask.model not in core.models:
        _error(core, conn, req, record, 404, _no_model(ask.model), param="model")
        return None
    try:
        return ask, parse_plan(req.headers, max_tokens=most)
    except ConfigError as exc:
        _error(core, conn, req, record, 400, str(exc), param=exc.field)
        return None


def _admit(
    core: LlmCore, conn: LlmProtocol, req: Incoming, record: Record, ask: Ask, plan: Plan
) -> None:
    """Faults, length, capacity, limits, dice: answer now, or start the exchange."""
    now, settings = core.now(), core.settings
    rng = core.rng(ask.model, req.epoch)
    if plan.status is not None:
        _error(core, conn, req, record, plan.status, f"mock fault: status {plan.status}")
        return
    if plan.fault == NOT_OPENAI:
        record.outcome = Outcome.FAULT
        headers = core.headers(record.id, now)
        conn.reply(200, _HTML, headers, b"text/html; charset=utf-8", req.keep_alive, record)
        return
    most = min(ask.max_tokens or settings.max_output_tokens, settings.max_output_tokens)
    if plan.tokens is not None:
        tokens, finish = cut(plan.tokens, ask.max_tokens)
    else:
        tokens, finish = settings.output_tokens.sample(rng, ask.max_tokens, most)
    if core.full() and settings.overflow == "refuse":  # before the limits: refused for free
        message = f"The deployment is at its capacity of {core.capacity} requests in flight."
        _throttle(core, conn, req, record, Refusal("capacity", 1.0, message))
        return
    if core.limiter is not None:
        refusal = core.limiter.admit(now, ask.prompt_tokens + (ask.max_tokens or tokens))
        if refusal is not None:
            _throttle(core, conn, req, record, refusal)
            return
    failure = core.failures.status(ask.model, now - req.epoch.origin, rng)
    if failure is not None:
        status, storm = failure
        message = _MESSAGES.get(status, f"mock failure: status {status}")
        _error(core, conn, req, record, status, message + (" (storm)" if storm else ""))
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
        http10=req.http10,
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
    code: str | None = None,
    extra: list[tuple[bytes, bytes]] | None = None,
    kind: str | None = None,
) -> None:
    default, default_code = _STATUS_ERRORS.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    kind = kind or default
    if status == 429 and extra is None:
        extra = _retry_after(1.0)
    record.outcome, record.error = Outcome.ERROR, message
    headers = core.headers(record.id, core.now()) + (extra or [])
    body = error_body(message, kind, code or default_code, param)
    conn.reply(status, body, headers, _JSON, req.keep_alive, record)


def _throttle(
    core: LlmCore, conn: LlmProtocol, req: Incoming, record: Record, refusal: Refusal
) -> None:
    kind = "tokens" if refusal.kind == "tokens" else "requests"  # OpenAI's two types
    # A request larger than the whole limit can never succeed: no Retry-After invites it.
    extra = [] if refusal.wait is None else _retry_after(refusal.wait)
    _error(core, conn, req, record, 429, refusal.message, extra=extra, kind=kind)


def _retry_after(wait: float) -> list[tuple[bytes, bytes]]:
    """``Retry-After`` in whole seconds (rounded up) and ``retry-after-ms``, exact to 1 ms."""
    return [
        (b"Retry-After", b"%d" % max(1, math.ceil(wait))),
        (b"retry-after-ms", b"%d" % math.ceil(wait * 1000)),
    ]
