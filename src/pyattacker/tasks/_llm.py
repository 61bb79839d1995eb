"""``llm.chat`` and ``llm.completion``: one call through :class:`~pyattacker.llm.LlmClient`
on an endpoint leased from the task's pool.

The prompt is a :class:`~pyattacker.tasks.Template` filled from the row; the endpoint's
``base_url`` and ``api_key`` come from the leased resource (its ``secrets``, then its
``options``), so the pool's algorithm spreads the calls over keys and endpoints. One call
is one request: the client never retries, the task's ``retry`` policy decides, and every
attempt is a row of the run's record. The lease is told how the call went (usage and
rate-limit headers: pacing and health follow the server).

Each call opens its own connection (a run has no hook yet to close a shared client when it
ends), so ``ttft_s`` and ``e2e_s`` are measured from the request's send, after the
connect, as :class:`~pyattacker.llm.LlmResult` measures them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pyattacker.errors import ConfigError
from pyattacker.http import HttpClient
from pyattacker.llm import (
    Api,
    LlmClient,
    LlmResult,
    auth_headers,
    build_request,
    endpoint_url,
    is_azure,
)
from pyattacker.pool import Lease, TaskContext
from pyattacker.tasks._args import (
    flag,
    mapping,
    optional_text,
    result_of,
    setting,
    shaped,
    text,
)
from pyattacker.tasks._template import Template

__all__ = ["llm_chat", "llm_completion"]

LlmTask = Callable[[Any, TaskContext], Awaitable[Any]]


def llm_chat(
    *,
    prompt: str | None = None,
    system: str | None = None,
    messages: list[Mapping[str, str]] | None = None,
    model: str | None = None,
    max_tokens: int | None = None,
    params: Mapping[str, Any] | None = None,
    stream: bool = True,
    output: str | None = None,
    carry: bool = True,
    task_name: str = "llm",
) -> LlmTask:
    """A chat call: ``prompt`` (a template, one user message, after ``system`` when given)
    or ``messages`` (``[{role, content}]``, each content a template). Its output is the row
    with ``{text, model, finish_reason, usage, ttft_s, e2e_s, resource}`` under ``output``
    (default: the task's name)."""
    if (prompt is None) == (messages is None):
        raise ConfigError("give prompt or messages (one of them)", field="prompt")
    chat: list[tuple[str, Template]] = []
    if system is not None:
        chat.append(("system", Template(system, field="system")))
    if prompt is not None:
        chat.append(("user", Template(prompt, field="prompt")))
    for n, message in enumerate(messages or []):
        chat.append(_message(message, f"messages[{n}]"))
    call = _Call(Api.CHAT, model, max_tokens, params, stream, output or task_name, carry)

    async def chat_task(value: Any, ctx: TaskContext) -> Any:
        said = [{"role": role, "content": t.render(value)} for role, t in chat]
        return await call(value, said, ctx)

    return shaped(chat_task, [t for _, t in chat], call.output, call.carry)


def llm_completion(
    *,
    prompt: str,
    model: str | None = None,
    max_tokens: int | None = None,
    params: Mapping[str, Any] | None = None,
    stream: bool = True,
    output: str | None = None,
    carry: bool = True,
    task_name: str = "llm",
) -> LlmTask:
    """A ``completions`` call with ``prompt`` (a template); output as ``llm.chat``'s."""
    template = Template(prompt, field="prompt")
    call = _Call(Api.COMPLETIONS, model, max_tokens, params, stream, output or task_name, carry)

    async def completion_task(value: Any, ctx: TaskContext) -> Any:
        return await call(value, template.render(value), ctx)

    return shaped(completion_task, [template], call.output, call.carry)


def _message(message: object, field: str) -> tuple[str, Template]:
    if not isinstance(message, Mapping) or set(message) != {"role", "content"}:
        raise ConfigError(f"a message is {{role, content}}, got {message!r}", field=field)
    return text(message["role"], f"{field}.role"), Template(message["content"], field=field)


class _Call:
    """The checked settings of one LLM task, and the call itself."""

    def __init__(
        self,
        api: Api,
        model: str | None,
        max_tokens: int | None,
        params: Mapping[str, Any] | None,
        stream: bool,
        output: str,
        carry: bool,
    ) -> None:
        self.api, self.model = api, optional_text(model, "model")
        self.max_tokens, self.params = max_tokens, mapping(params, "params")
        self.stream, self.carry = flag(stream, "stream"), flag(carry, "carry")
        self.output = text(output, "output")
        try:  # every parameter checked now, not on the first row
            build_request(api, model, "x", max_tokens=max_tokens, stream=stream, extra=self.params)
        except ConfigError as exc:
            field = exc.field or ""
            field = "params" + field[5:] if field.startswith("extra") else field
            raise ConfigError(exc.message, field=field, hint=exc.hint) from None

    async def __call__(self, value: Any, prompt: Any, ctx: TaskContext) -> Any:
        async with ctx.acquire() as lease:
            base_url = setting(lease.resource, "base_url")
            if not isinstance(base_url, str) or not base_url:
                raise ConfigError(
                    f"resource {lease.resource.id!r} has no base_url",
                    field="options.base_url",
                    hint="give each resource of the pool options: {base_url: http://host/v1}",
                )
            model = self.model or setting(lease.resource, "model")
            request = build_request(
                self.api, model, prompt, max_tokens=self.max_tokens, stream=self.stream,
                extra=self.params,
            )  # fmt: skip
            result = await _send(lease, endpoint_url(base_url, self.api), request)
        return result_of(value, self.output, _facts(result, model, lease), carry=self.carry)


async def _send(lease: Lease, url: Any, request: Any) -> LlmResult:
    key = setting(lease.resource, "api_key")
    headers = auth_headers(str(key), azure=is_azure(url)) if key else ()
    result = LlmResult()
    try:
        async with HttpClient(clock=lease.pool.clock, max_connections=1) as http:
            await LlmClient(http).send(url, request, headers=headers, result=result)
    except Exception as exc:
        lease.report(ok=False, error=exc, headers=result.headers or None)
        raise
    usage = result.usage.as_dict() if result.usage is not None else None
    lease.report(ok=True, usage=usage, headers=result.headers)
    return result


def _facts(result: LlmResult, model: str | None, lease: Lease) -> dict[str, Any]:
    usage = result.usage
    return {
        "text": result.text,
        "model": model,
        "finish_reason": result.finish_reason,
        "usage": {} if usage is None else {k: int(v) for k, v in usage.as_dict().items()},
        "ttft_s": result.ttft,
        "e2e_s": result.e2e,
        "resource": lease.resource.id,
    }
