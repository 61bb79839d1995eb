"""The mock LLM server from the outside: the official openai SDK, its own process, the CLI."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import openai
import pytest

from pyattacker.cli import run_cli
from pyattacker.errors import ConfigError
from pyattacker.servers import LlmServer, LlmServerProcess
from pyattacker.servers._llm_process import API_KEYS_ENV


def with_server(main: Callable[[LlmServer], Awaitable[None]], **options: Any) -> None:
    async def body() -> None:
        async with LlmServer(**options) as server:
            await main(server)

    asyncio.run(body())


# -- the official SDK ------------------------------------------------------------------------


def test_the_openai_sdk_streams_and_completes_against_the_server() -> None:
    async def main(server: LlmServer) -> None:
        client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="sk-test", max_retries=0)
        async with client:
            stream = await client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": "count to five please"}],
                stream=True,
                stream_options={"include_usage": True},
                max_tokens=6,
            )
            words, usage = [], None
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    words.append(chunk.choices[0].delta.content)
                usage = chunk.usage or usage
            assert len(words) == 6
            assert usage is not None
            assert (usage.prompt_tokens, usage.completion_tokens) == (4, 6)

            whole = await client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
            )
            assert whole.choices[0].finish_reason == "stop"
            assert whole.usage is not None
            assert whole.usage.completion_tokens == len(whole.choices[0].message.content.split())

            text = await client.completions.create(model="gpt-4o-mini", prompt="a b c")
            assert text.usage is not None
            assert text.usage.prompt_tokens == 3

            models = await client.models.list()
            assert [m.id for m in models.data] == ["gpt-4o-mini"]
        stats = server.stats()
        assert stats["statuses"] == {"200": 3}
        assert stats["ttft"]["count"] == 1

    with_server(
        main, models="gpt-4o-mini", api_keys="sk-test", ttft="1ms", itl="1ms", output_tokens=8
    )


def test_the_sdk_sees_each_error_once_as_its_own_exception_class() -> None:
    async def main(server: LlmServer) -> None:
        good = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)
        bad = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="nope", max_retries=0)
        messages = [{"role": "user", "content": "hi"}]
        async with good, bad:
            with pytest.raises(openai.AuthenticationError) as unauthorized:
                await bad.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
            assert unauthorized.value.code == "invalid_api_key"
            with pytest.raises(openai.NotFoundError):
                await good.chat.completions.create(model="x", messages=messages)  # type: ignore[arg-type]
            await good.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
            with pytest.raises(openai.RateLimitError) as throttled:
                await good.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
            assert throttled.value.response.headers["x-ratelimit-remaining-requests"] == "0"
        # max_retries=0: one attempt each, and the server counted exactly those.
        assert server.stats()["statuses"] == {"200": 1, "401": 1, "404": 1, "429": 1}

    with_server(main, models="m", api_keys="k", rpm=1, ttft="0", itl="0", output_tokens=1)


def test_the_azure_sdk_reaches_the_deployment_path_with_its_api_key_header() -> None:
    async def main(server: LlmServer) -> None:
        client = openai.AsyncAzureOpenAI(
            azure_endpoint=server.url, api_key="az-key", api_version="2024-06-01", max_retries=0
        )
        async with client:
            raw = await client.chat.completions.with_raw_response.create(
                model="my-deployment", messages=[{"role": "user", "content": "hi there"}]
            )
            reply = raw.parse()
        assert reply.model == "my-deployment"
        assert raw.headers["azure-openai-deployment-utilization"] == "50.0%"
        (sample,) = server.stats(samples=True)["samples"]
        assert (sample["model"], sample["id"]) == ("my-deployment", raw.headers["x-request-id"])

    with_server(
        main,
        models="my-deployment",
        api_keys="az-key",
        capacity=2,
        utilization_header=True,
        ttft="0",
        itl="0",
        output_tokens=3,
    )


# -- the process ---------------------------------------------------------------------------------


def _post(url: str, body: dict[str, Any], key: str) -> dict[str, Any]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=30) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


def test_the_process_prints_its_url_first_and_keeps_keys_off_its_command_line() -> None:
    server = LlmServerProcess(
        models=["a", "b"],
        ttft="fixed:1ms",
        itl="0",
        output_tokens=3,
        api_keys=["sk-hidden"],
        fail={503: 0.001},
        storms="rate=0.01,duration=10s,error_rate=0.5",
        rpm=1000,
        seed=9,
    )
    assert "sk-hidden" not in " ".join(server.command)
    with server:
        assert urlsplit(server.url).hostname == "127.0.0.1"
        body = {"model": "b", "messages": [{"role": "user", "content": "one two"}]}
        answer = _post(server.url + "/v1/chat/completions", body, "sk-hidden")
        assert answer["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}
        stats = server.stats(samples=True)
        assert stats["statuses"] == {"200": 1}
        assert stats["settings"]["seed"] == 9
        assert stats["settings"]["fail"] == {"503": 0.001}
        assert stats["settings"]["storms"]["rate"] == 0.01
        server.reset()
        assert server.stats()["requests"] == 0
    assert server.returncode == 0
    assert "models a, b" in server.stderr()
    assert "sk-hidden" not in server.stderr()
    server.stop()  # idempotent


def test_the_process_never_passes_the_parents_keys_to_a_server_without_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(API_KEYS_ENV, "sk-from-the-parent")
    with LlmServerProcess(models="m", ttft="0", itl="0", output_tokens=1) as server:
        request = urllib.request.Request(
            server.url + "/v1/chat/completions",
            data=json.dumps(
                {"model": "m", "messages": [{"role": "user", "content": "x"}]}
            ).encode(),
            headers={"Content-Type": "application/json"},
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=30) as response:
            assert response.status == 200  # no key asked for
        assert server.stats()["settings"]["api_keys"] == 0
    assert "no API key" in server.stderr()


def test_a_child_that_refuses_its_flags_is_a_config_error() -> None:
    server = LlmServerProcess(extra_args=["--rpm", "0"])
    with pytest.raises(ConfigError, match="--rpm: must be >= 1"):
        server.start()
    assert server.returncode == 2


def test_the_command_exits_0_on_sigint_too() -> None:
    command = [sys.executable, "-m", "pyattacker", "llm-server", "--model", "x"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as child:
        assert child.stdout is not None
        assert child.stdout.readline().startswith(b"http://127.0.0.1:")
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=30)
    assert child.returncode == 0
    assert b"llm-server: models x; ttft lognormal:median=200ms,sigma=0.5" in err


# -- the CLI ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--ttft", "bogus:1"], "--ttft"),
        (["--itl", "lognormal:median=1ms"], "--itl"),
        (["--output-tokens", "many"], "--output-tokens"),
        (["--capacity", "0"], "--capacity"),
        (["--rpm", "-5"], "--rpm"),
        (["--tpm", "0"], "--tpm"),
        (["--fail", "503"], "--fail"),
        (["--fail", "200=0.1"], "--fail"),
        (["--fail", "503=0.8,500:0.8"], "--fail"),
        (["--storms", "rate=0.1"], "--storms"),
        (["--port", "99999"], "--port"),
        (["--seed", "-1"], "--seed"),
        (["--model", "a", "--model", "a"], "--model"),
        (["--utilization-header"], "--utilization-header"),
        (["--api-key", "two words"], "--api-key"),
        (["--max-output-tokens", "0"], "--max-output-tokens"),
        (["--output-tokens", "200", "--max-output-tokens", "100"], "--output-tokens"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag_without_a_traceback(
    args: list[str], field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["llm-server", *args]) == 2
    err = capsys.readouterr().err
    assert f"error: {field}" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--utilization-header"], "error: --utilization-header: the utilization header needs"),
        (["--utilization-header"], "add --capacity N"),
        (["--fail", "503=0.8,500=0.8"], "e.g. --fail 503=0.01,500=0.005"),
        (["--output-tokens", "200", "--max-output-tokens", "100"], "raise --max-output-tokens"),
        (["--host", "256.0.0.1"], "error: --host: cannot listen on 256.0.0.1:0"),
        (["--host", "256.0.0.1"], "--host 127.0.0.1"),
    ],
)
def test_an_error_names_the_flag_and_hints_in_the_commands_own_words(
    args: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["llm-server", *args]) == 2
    err = capsys.readouterr().err
    assert said in err
    assert "{" not in err  # no Python syntax in a hint
    assert "--port" not in err


def test_a_port_in_use_is_an_error_naming_port_with_the_way_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert run_cli(["llm-server", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"error: --port: cannot listen on 127.0.0.1:{port}" in err
    assert "--port 0 picks a free port" in err


def test_a_flag_of_the_wrong_type_is_a_usage_error() -> None:
    assert run_cli(["llm-server", "--capacity", "lots"]) == 2


def test_the_help_shows_the_endpoints_the_token_rule_the_headers_and_examples(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_cli(["llm-server", "--help"]) == 0
    out = capsys.readouterr().out
    for text in (
        "/v1/chat/completions",
        "/openai/deployments/NAME/chat/completions",
        "/stats",
        "/v1/models/{name}",
        "/openai/v1/chat/completions",
        "--max-output-tokens",
        "One token is one word",
        "x-mock-fault",
        "cut-mid-token",
        "--output-tokens",
        "--overflow",
        "Examples",
        "lognormal:median=200ms,sigma=0.5",
    ):
        assert text in out
