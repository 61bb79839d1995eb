"""``http.request`` and ``shell``: one HTTP request, one command.

``http.request`` sends ``method`` to ``url`` (a template filled from the row), with
``headers`` (each value a template) and ``body`` (a template string, or a mapping/list
whose strings are templates, sent as JSON). A status outside ``expect`` (default: any
below 400) fails the attempt with :class:`~pyattacker.errors.HttpStatusError`, which
the retry policy reads as every other status error (429: rate limit, 5xx: upstream). When
the task has a pool, the request is made while holding one of its resources, and a
resource's ``base_url`` fills ``{base_url}`` in the URL.

``shell`` runs ``command`` (a template; run by ``/bin/sh``) with a ``timeout_s``; a non-zero
exit fails the attempt. Its output is ``{exit_code, stdout, stderr}``. It takes no ``ctx``,
so it can run on a Ray worker (``executor: ray``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from pyattacker.errors import ConfigError, HttpStatusError
from pyattacker.http import HttpClient, Response
from pyattacker.pool import TaskContext
from pyattacker.tasks._args import flag, mapping, result_of, seconds, setting, shaped, text
from pyattacker.tasks._template import Template

__all__ = ["CommandFailed", "http_request", "shell"]

Task = Callable[[Any, TaskContext], Awaitable[Any]]
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


class CommandFailed(Exception):
    """A ``shell`` command exited non-zero or ran out of time (classified unknown: not
    retried unless the policy says so)."""


def http_request(
    *,
    url: str,
    method: str = "GET",
    headers: Mapping[str, str] | None = None,
    body: Any = None,
    expect: int | Sequence[int] | None = None,
    output: str | None = None,
    carry: bool = True,
    task_name: str = "http",
) -> Task:
    """The request task; output ``{status, body, json (when the body is JSON), e2e_s}``."""
    verb = text(method, "method").upper()
    if verb not in _METHODS:
        raise ConfigError(f"unknown method {method!r}", field="method", hint=", ".join(_METHODS))
    url_t = Template(url, field="url")
    header_ts = {
        k: Template(v, field=f"headers.{k}") for k, v in mapping(headers, "headers").items()
    }
    body_t = _body(body, "body")
    wanted = _expected(expect)
    name, keep = text(output or task_name, "output"), flag(carry, "carry")

    async def request_task(value: Any, ctx: TaskContext) -> Any:
        row = value
        if ctx.default_pool is not None:
            async with ctx.acquire() as lease:
                base = setting(lease.resource, "base_url")
                row = {**value, "base_url": base} if isinstance(value, Mapping) else value
                try:
                    response = await _send(verb, url_t.render(row), header_ts, body_t, row, ctx)
                except Exception as exc:
                    lease.report(ok=False, error=exc)
                    raise
                lease.report(ok=response.status < 400, headers=response.headers)
        else:
            response = await _send(verb, url_t.render(row), header_ts, body_t, row, ctx)
        if (wanted is None and response.status >= 400) or (
            wanted and response.status not in wanted
        ):
            response.raise_for_status()
            raise HttpStatusError(f"HTTP {response.status}, expected {sorted(wanted or ())}",
                                  status=response.status, url=response.url)  # fmt: skip
        return result_of(value, name, _facts(response), carry=keep)

    templates = [url_t, *header_ts.values(), *_templates(body_t)]
    return shaped(request_task, templates, name, keep, given=("base_url",))


async def _send(
    verb: str, url: str, headers: Mapping[str, Template], body: Any, row: Any, ctx: TaskContext
) -> Response:
    pairs = [(k, t.render(row)) for k, t in headers.items()]
    data = None if body is None else _render_body(body, row)
    if data is not None and isinstance(body, (dict, list)):
        pairs.append(("Content-Type", "application/json"))
    async with HttpClient(clock=ctx.clock, max_connections=1) as http:
        return await http.request(verb, url, headers=pairs, body=data)


def _body(body: Any, field: str) -> Any:
    """The body's templates, parsed: a Template, or the same structure with Templates."""
    if body is None:
        return None
    if isinstance(body, str):
        return Template(body, field=field)
    if isinstance(body, Mapping):
        return {str(k): _body(v, f"{field}.{k}") for k, v in body.items()}
    if isinstance(body, list):
        return [_body(v, f"{field}[{n}]") for n, v in enumerate(body)]
    if isinstance(body, int | float | bool):
        return body
    raise ConfigError(f"a body is a string, a mapping or a list, got {body!r}", field=field)


def _templates(body: Any) -> list[Template]:
    if isinstance(body, Template):
        return [body]
    if isinstance(body, dict):
        return [t for v in body.values() for t in _templates(v)]
    if isinstance(body, list):
        return [t for v in body for t in _templates(v)]
    return []


def _render_body(body: Any, row: Any) -> bytes:
    if isinstance(body, Template):
        return body.render(row).encode()
    return json.dumps(_fill(body, row), ensure_ascii=False).encode()


def _fill(body: Any, row: Any) -> Any:
    if isinstance(body, Template):
        return body.render(row)
    if isinstance(body, dict):
        return {k: _fill(v, row) for k, v in body.items()}
    if isinstance(body, list):
        return [_fill(v, row) for v in body]
    return body


def _expected(expect: object) -> frozenset[int] | None:
    if expect is None:
        return None
    codes = [expect] if isinstance(expect, int) else expect
    if not isinstance(codes, list | tuple) or not all(
        isinstance(c, int) and not isinstance(c, bool) and 100 <= c <= 599 for c in codes
    ):
        raise ConfigError(
            f"must be a status code or a list of them, got {expect!r}", field="expect"
        )
    return frozenset(codes)


def _facts(response: Response) -> dict[str, Any]:
    body = response.text()
    facts: dict[str, Any] = {"status": response.status, "body": body}
    if "json" in (response.headers.get("content-type") or ""):
        with contextlib.suppress(ValueError):
            facts["json"] = json.loads(body)
    timing = response.timing
    sent, end = timing.sent, timing.end
    facts["e2e_s"] = None if sent is None or end is None else end - sent
    return facts


def shell(
    *,
    command: str,
    timeout_s: float = 60.0,
    output: str | None = None,
    carry: bool = True,
    task_name: str = "shell",
) -> Callable[[Any], Awaitable[Any]]:
    """The command task (see the module docstring)."""
    template = Template(command, field="command")
    limit = seconds(timeout_s, "timeout_s")
    name, keep = text(output or task_name, "output"), flag(carry, "carry")

    # Needs nothing of the Runner's (no lease, no clock: the timeout is the subprocess's
    # own, in real time), so it takes no ctx and may run on a Ray worker (executor: ray),
    # where a CPU-heavy command gets a core of its own.
    async def shell_task(value: Any) -> Any:
        line = template.render(value)
        process = await asyncio.create_subprocess_shell(
            line, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(), limit)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise CommandFailed(f"{line!r} ran over {limit} s and was killed") from None
        stderr = err.decode(errors="replace")
        if process.returncode != 0:
            raise CommandFailed(f"{line!r} exited {process.returncode}: {stderr[-200:]}")
        facts = {"exit_code": 0, "stdout": out.decode(errors="replace"), "stderr": stderr}
        return result_of(value, name, facts, carry=keep)

    return shaped(shell_task, [template], name, keep)
