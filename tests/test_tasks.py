"""The built-in tasks (``pyattacker.tasks``): templates, the network-free helpers on
virtual time, http.request against the echo server, shell, write_jsonl, and llm.chat /
llm.completion over two keys of the mock LLM server."""

from __future__ import annotations

import asyncio
import json
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.errors import ConfigError
from pyattacker.pool import Pool, Resource, TaskContext
from pyattacker.run import Runner, Task, pipeline
from pyattacker.servers import EchoServer, LlmServerProcess
from pyattacker.store import MemoryStore, RowKind
from pyattacker.tasks import BUILT_IN_TASKS, MissingField, Template
from run_helpers import rows, run_virtually

KEYS = ("sk-test-key-one", "sk-test-key-two")


def built(name: str, resource: str | None = None, **args: Any) -> Task:
    factory = BUILT_IN_TASKS[name]
    fn = factory(**args, task_name=name) if "task_name" in _params(factory) else factory(**args)
    return Task(
        fn, name=name.replace(".", "_"), resource=resource, retry={"max_attempts": 3, "base": 0.01}
    )


def _params(factory: Any) -> set[str]:
    import inspect

    return set(inspect.signature(factory).parameters)


# ---------------------------------------------------------------------------- templates


def test_a_template_fills_fields_paths_and_the_whole_input() -> None:
    row = {"q": "why?", "ask": {"text": "because", "n": [1, 2]}}
    assert (
        Template("Q: {q} A: {ask.text} {ask.n.1} {{x}}").render(row) == "Q: why? A: because 2 {x}"
    )
    assert Template("{ask}").render(row) == '{"n":[1,2],"text":"because"}'
    assert Template("n={input}").render(7) == "n=7"


def test_a_missing_field_fails_the_row_and_names_what_it_has() -> None:
    with pytest.raises(
        MissingField, match=r"'ask.txt' is not in the row \(it has \['n', 'text'\]\)"
    ):
        Template("{ask.txt}").render({"ask": {"text": "x", "n": 1}})


@pytest.mark.parametrize("text", ["{a b}", "{", "}", "{1x}", "{a.}"])
def test_a_malformed_template_is_refused_when_built(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Template(text, field="prompt")
    assert caught.value.field == "prompt"


@given(st.text(st.characters(blacklist_characters="{}")))
def test_text_without_braces_renders_as_itself(text: str) -> None:
    assert Template(text).render({}) == text


@given(st.dictionaries(st.text(string.ascii_letters, min_size=1, max_size=6), st.text(max_size=10)))
def test_every_field_of_a_row_renders_as_its_value(row: dict[str, str]) -> None:
    for name, value in row.items():
        assert Template(f"<{{{name}}}>").render(row) == f"<{value}>"


# ------------------------------------------------------------- network-free, virtual time


def _pool() -> Pool:
    return Pool("llm", [Resource.create("sim", id=f"k{n}", capacity=2) for n in (1, 2)])


def test_the_helpers_run_retry_and_record_on_virtual_time() -> None:
    store = MemoryStore()
    steps = pipeline(
        "helpers",
        built("simulate_llm", "llm", ttft_s=0.5, itl_s=0.1, tokens=6),
        built("flaky", fail_attempts=1),
        built("delay", seconds=2.0),
        built("echo"),
    )
    runner = Runner(store, pools=[_pool()], handle_signals=False)
    report = run_virtually(runner, steps.map(range(4)))
    assert report.by_state == {"succeeded": 4}
    attempts = rows(store, RowKind.ATTEMPTS)
    flaky = [a for a in attempts if a["task"] == "flaky"]
    assert sorted(a["outcome"] for a in flaky) == ["failed"] * 4 + ["ok"] * 4  # each recorded
    llm = [a for a in attempts if a["task"] == "simulate_llm"]
    assert {round(a["duration_s"], 6) for a in llm} == {1.0}  # 0.5 + 5 * 0.1, virtual


def test_simulate_llm_output_has_llm_chats_shape() -> None:
    fn = BUILT_IN_TASKS["simulate_llm"](prompt="{q}", tokens=3, ttft_s=0, itl_s=0, task_name="ask")
    out = asyncio.run(fn({"q": "a b"}, TaskContext()))
    assert out["q"] == "a b"
    assert set(out["ask"]) == {
        "text",
        "model",
        "finish_reason",
        "usage",
        "ttft_s",
        "e2e_s",
        "resource",
    }
    assert out["ask"]["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}


def test_boom_fails_every_item_and_is_not_retried() -> None:
    store = MemoryStore()
    runner = Runner(store, handle_signals=False)
    report = run_virtually(runner, pipeline("b", built("boom", message="no")).map(range(2)))
    assert report.by_state == {"failed": 2}
    assert {a["error"] for a in rows(store, RowKind.ATTEMPTS)} == {"Boom: no"}


def test_write_jsonl_appends_each_value(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "out.jsonl"
    fn = BUILT_IN_TASKS["write_jsonl"](path=str(out))
    assert fn({"b": 1, "a": 2}) == {"b": 1, "a": 2}
    fn(3)
    assert out.read_text().splitlines() == ['{"a": 2, "b": 1}', "3"]


def test_shell_runs_a_command_from_a_template_and_fails_on_a_non_zero_exit() -> None:
    ok = BUILT_IN_TASKS["shell"](command="echo hello {name}", task_name="sh")
    out = asyncio.run(ok({"name": "there"}))  # no ctx: so that it can run on Ray
    assert out["sh"] == {"exit_code": 0, "stdout": "hello there\n", "stderr": ""}
    bad = BUILT_IN_TASKS["shell"](command="echo oops >&2; exit 3")
    with pytest.raises(Exception, match="exited 3: oops"):
        asyncio.run(bad(1))
    slow = BUILT_IN_TASKS["shell"](command="sleep 5", timeout_s=0.05)
    with pytest.raises(Exception, match=r"ran over 0\.05 s and was killed"):
        asyncio.run(slow(1))


# --------------------------------------------------------------------------- http.request


def test_http_request_sends_the_templates_and_checks_the_status() -> None:
    async def main() -> None:
        async with EchoServer() as server:
            fn = BUILT_IN_TASKS["http.request"](
                url=server.url + "/items/{id}", method="post",
                headers={"X-Item": "{id}"}, body={"q": "{q}"}, task_name="call",
            )  # fmt: skip
            out = await fn({"id": 7, "q": "hi"}, TaskContext())
            assert out["call"]["status"] == 200
            assert out["call"]["e2e_s"] >= 0
            assert out["id"] == 7
            refused = BUILT_IN_TASKS["http.request"](url=server.url + "/", expect=201)
            with pytest.raises(Exception, match="HTTP 200, expected \\[201\\]"):
                await refused({}, TaskContext())

    asyncio.run(main())


# --------------------------------------------------------------------- llm over two keys


@pytest.fixture(scope="module")
def llm() -> Iterator[LlmServerProcess]:
    with LlmServerProcess(
        models="m", ttft="fixed:5ms", itl="fixed:1ms", output_tokens=4, api_keys=KEYS
    ) as server:
        yield server


def _keys_pool(url: str, keys: tuple[str, ...] = KEYS) -> Pool:
    return Pool(
        "llm",
        [
            Resource.create(
                "openai",
                id=f"key-{n}",
                capacity=2,
                options={"base_url": f"{url}/v1", "model": "m", "secrets": {"api_key": key}},
            )
            for n, key in enumerate(keys, 1)
        ],
        algorithm="least_busy",
    )


@pytest.mark.parametrize("stream", [True, False])
def test_llm_chat_calls_every_key_of_the_pool_and_outputs_text_usage_and_timings(
    llm: LlmServerProcess, stream: bool
) -> None:
    store = MemoryStore()
    ask = built("llm.chat", "llm", prompt="Say {q}", system="Be brief.", stream=stream)
    runner = Runner(store, pools=[_keys_pool(llm.url)], concurrency=4, handle_signals=False)
    report = runner.run(pipeline("chat", ask).map({"q": f"thing {n}"} for n in range(8)))
    assert report.by_state == {"succeeded": 8}
    outputs = [t["output"] for t in _outputs(store)]
    answers = [o["llm.chat"] for o in outputs]
    assert {a["resource"] for a in answers} == {"key-1", "key-2"}
    assert all(a["text"].strip() and a["usage"]["completion_tokens"] == 4 for a in answers)
    assert all(a["e2e_s"] > 0 for a in answers)
    assert all((a["ttft_s"] is not None) == stream for a in answers)
    usage = [a["usage"] for a in rows(store, RowKind.ATTEMPTS)]
    assert all(u and u["completion_tokens"] == 4 for u in usage)  # the lease reported it


def _outputs(store: MemoryStore) -> list[dict[str, Any]]:
    import tempfile

    from pyattacker.store import export_rows

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "r.jsonl"
        export_rows(store, path, kind="results", fmt="jsonl")
        return [json.loads(line) for line in path.read_text().splitlines()]


def test_llm_completion_retries_only_as_the_policy_says_and_every_attempt_is_recorded(
    llm: LlmServerProcess,
) -> None:
    store = MemoryStore()
    ask = built("llm.completion", "llm", prompt="Complete {input}", max_tokens=4)
    pool = _keys_pool(llm.url, (KEYS[0], "sk-wrong-key"))
    runner = Runner(store, pools=[pool], concurrency=1, handle_signals=False)
    report = runner.run(pipeline("comp", ask).map(range(4)))
    attempts = rows(store, RowKind.ATTEMPTS)
    failed = [a for a in attempts if a["outcome"] == "failed"]
    assert failed
    assert all("401" in a["error"] for a in failed)
    assert "sk-wrong-key" not in json.dumps(attempts)
    # a 401 is not a retryable class: the policy (3 attempts) declines, and says so
    assert all(a["decision"]["retry"] is False for a in failed)
    assert len(attempts) == 4  # one request per item: nothing retried behind the policy
    assert report.by_state.get("failed", 0) == len(failed)
    assert all(a["resources"] == ["llm/key-1"] for a in attempts if a["outcome"] == "ok")


def test_llm_chat_429s_are_retried_by_the_policy_and_every_request_is_an_attempt() -> None:
    with LlmServerProcess(
        models="m", ttft="fixed:1ms", itl="fixed:1ms", output_tokens=2, fail={429: 0.5}, seed=1
    ) as server:
        store = MemoryStore()
        ask = Task(
            BUILT_IN_TASKS["llm.chat"](prompt="{input}", task_name="ask"),
            name="ask",
            resource="llm",
            retry={"max_attempts": 20, "base": 0.01},
        )
        pool = _keys_pool(server.url, ("", ""))
        runner = Runner(store, pools=[pool], concurrency=2, handle_signals=False)
        report = runner.run(pipeline("retried", ask).map(range(10)))
        served = server.stats()["requests"]
    attempts = rows(store, RowKind.ATTEMPTS)
    refused = [a for a in attempts if a["outcome"] == "failed"]
    assert report.by_state == {"succeeded": 10}
    assert refused  # the seed makes some 429s
    assert {a["error_class"] for a in refused} == {"rate_limit"}
    assert all(a["decision"]["retry"] is True for a in refused)
    assert served == len(attempts)  # no request the record does not hold
