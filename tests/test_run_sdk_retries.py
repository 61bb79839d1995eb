"""The SDK's own retries never go unrecorded: checked against a server that counts.

A Runner task leases a user-built ``openai.AsyncOpenAI`` (the SDK's default
``max_retries=2``) from the mock LLM server on a loopback port the OS picks, which answers
429 and 503 at random. The pool turns the client's retries off before its first request,
so the requests the server saw are exactly the attempts the store recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llm_server_helpers import serve
from pyattacker.cli import run_cli
from pyattacker.errors import ConfigError
from pyattacker.pool import Pool, Resource, TaskContext
from pyattacker.run import pipeline, task
from pyattacker.servers import LlmServer
from pyattacker.store import MemoryStore, RowKind
from run_helpers import rows, runner

openai = pytest.importorskip("openai")


@task  # no retries: one attempt per item, as the record will say
async def ask(n: int, ctx: TaskContext) -> str:
    async with ctx.acquire() as lease:
        reply = await lease.client.chat.completions.create(  # type: ignore[attr-defined]
            model="m", messages=[{"role": "user", "content": f"question {n}"}], max_tokens=3
        )
        lease.report(ok=True, usage={"total_tokens": reply.usage.total_tokens})
        return str(reply.choices[0].message.content)


@task(retry={"max_attempts": 3, "base": 0.001, "cap": 0.002})
async def ask_twice_more(n: int, ctx: TaskContext) -> str:
    return await ask.fn(n, ctx)


def attempts_recorded(store: MemoryStore) -> int:
    """Every attempt the store holds (the successful ones included)."""
    return len(rows(store, RowKind.ATTEMPTS))


@pytest.mark.parametrize("chosen", [ask, ask_twice_more], ids=["no-retries", "3-attempts"])
def test_the_server_saw_exactly_the_attempts_the_store_recorded(chosen: Any) -> None:
    async def main(server: LlmServer) -> tuple[dict[str, Any], MemoryStore]:
        client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="sk-test")
        assert client.max_retries == 2  # the SDK's default: would be 3 requests per call
        pool = Pool("llm", [Resource.create("openai", id="key-1", factory=lambda r: client)])
        store = MemoryStore()
        report = await runner(store, pools=[pool], concurrency=4).run_async(
            pipeline("p", chosen).map(range(24))
        )
        assert sum(report.by_state.values()) == 24
        quiet = pool.client_of("key-1")
        assert getattr(quiet, "max_retries", None) == 0
        await quiet.close()  # type: ignore[attr-defined]
        await client.close()  # no connection left for a later test's garbage collector
        return server.stats(), store

    stats, store = serve(main, fail={429: 0.3, 503: 0.3}, ttft="fixed:1ms", itl="fixed:1ms", seed=7)
    assert stats["statuses"]["429"]
    assert stats["statuses"]["503"]
    assert stats["requests"] == attempts_recorded(store)
    (event,) = rows(store, RowKind.EVENTS, kind="resource.retries_off")
    assert (event["data"]["client"], event["data"]["max_retries"]) == ("AsyncOpenAI", 2)


_CAPTURED = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk-unused")


async def _ask_captured(n: int) -> str:
    reply = await _CAPTURED.chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"question {n}"}], max_tokens=3
    )
    return str(reply.choices[0].message.content)


@task("ask_captured", resource="llm")
async def ask_captured(n: int, ctx: TaskContext) -> str:
    async with ctx.acquire():
        return await _ask_captured(n)  # the client is a module global, not the lease's


def test_a_task_reaching_a_retrying_sdk_client_outside_its_lease_is_refused_up_front() -> None:
    """The pool cannot turn off the retries of a client it never hands out: the server
    would see up to 3 requests per recorded attempt. Nothing runs, nothing is written."""
    store = MemoryStore()
    pool = Pool("llm", [Resource.create("openai", id="k")])
    with runner(store, pools=[pool]) as r, pytest.raises(ConfigError) as refused:
        r.run(pipeline("captured", ask_captured).map(range(3)))
    assert refused.value.field == "task"
    assert "_CAPTURED" in refused.value.message
    assert "max_retries=0" in (refused.value.hint or "")
    assert store.runs() == []
    quiet = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="x", max_retries=0)
    assert quiet.max_retries == 0  # the fix the hint names passes the check (below)
    from pyattacker.run._vendor import captured_client

    assert captured_client(ask_captured.fn) == ("_CAPTURED", _CAPTURED)


def test_the_cli_refuses_such_a_task_with_exit_2_and_creates_no_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.py").write_text(
        "from openai import AsyncOpenAI\n"
        "from pyattacker import Pool, Resource, TaskContext, pipeline, task\n"
        "CLIENT = AsyncOpenAI(base_url='http://127.0.0.1:9/v1', api_key='sk-unused')\n"
        "pools = [Pool('llm', [Resource.create('openai', id='k')])]\n"
        "@task('ask', resource='llm')\n"
        "async def ask(row: dict, ctx: TaskContext) -> str:\n"
        "    async with ctx.acquire():\n"
        "        reply = await CLIENT.models.list()\n"
        "        return str(reply)\n"
        "job = pipeline('job', ask)\n"
    )
    (tmp_path / "items.jsonl").write_text('{"q": 1}\n')
    args = ["run", "job.py:job", "--input", "items.jsonl", "--pools", "job.py:pools"]
    assert run_cli([*args, "--store", "s.db"]) == 2
    assert "error: task: task 'ask' calls CLIENT" in capsys.readouterr().err
    assert not (tmp_path / "s.db").exists()
