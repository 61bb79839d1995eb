"""Our servers against hostile clients: size limits, slow clients, a connection cap, absurd
numbers, and a /stats that stays cheap.

Raw asyncio sockets on loopback against an in-process server on a port the OS picks. Limits
are set small through the servers' parameters so each test is quick; every wait has a
generous safety bound and nothing asserts how long anything took. What the server buffers
is shown by what it answers before the client has sent it (a 413 for a body never sent, a
431 for a head that never ends), not by its memory use.
"""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import pytest

from pyattacker.cli import run_cli
from pyattacker.errors import ConfigError
from pyattacker.servers import EchoServer, LlmServer
from pyattacker.servers._listening import ListeningServer

Check = Callable[[ListeningServer], Awaitable[None]]
SAFETY_S = 20.0  # a bound on waits that must end much sooner: never a measurement

# A request each server answers 200 at once, and its expected status.
PLAIN = {
    "echo": b"GET / HTTP/1.1\r\nHost: t\r\n\r\n",
    "llm": b"GET /v1/models HTTP/1.1\r\nHost: t\r\n\r\n",
}
KINDS = list(PLAIN)


def make(kind: str, **limits: object) -> ListeningServer:
    if kind == "echo":
        return EchoServer(**limits)  # type: ignore[arg-type]
    return LlmServer(models="m", ttft="0", itl="0", output_tokens=1, **limits)  # type: ignore[arg-type]


def serve(kind: str, check: Check, **limits: object) -> None:
    async def main() -> None:
        async with make(kind, **limits) as server:
            await asyncio.wait_for(check(server), SAFETY_S)

    asyncio.run(main())


async def connect(server: ListeningServer) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    parts = urlsplit(server.url)
    return await asyncio.open_connection(parts.hostname, parts.port)


async def read_reply(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    status_line, *lines = head.strip().split("\r\n")
    headers = {name.lower(): value for name, value in (line.split(": ", 1) for line in lines)}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return int(status_line.split()[1]), headers, body


async def until_closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the server still sends, until it closes (a reset counts as closed)."""
    try:
        return await reader.read()
    except ConnectionResetError:
        return b""


async def still_serves(server: ListeningServer, kind: str) -> None:
    reader, writer = await connect(server)
    writer.write(PLAIN[kind])
    status, _, _ = await read_reply(reader)
    assert status == 200
    writer.close()
    await writer.wait_closed()


# -- sizes ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_head_over_the_limit_is_a_431_before_it_ends_then_the_connection_closes(
    kind: str,
) -> None:
    async def check(server: ListeningServer) -> None:
        reader, writer = await connect(server)
        # A header line that never ends: the answer cannot wait for the end of the head.
        writer.write(b"GET / HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * 200_000)
        status, headers, _ = await read_reply(reader)
        assert (status, headers["connection"]) == (431, "close")
        assert await until_closed(reader) == b""
        writer.close()
        await still_serves(server, kind)

    serve(kind, check, max_head_size=8192)


@pytest.mark.parametrize("kind", KINDS)
def test_a_head_within_the_limit_is_answered_and_pipelined_heads_each_get_the_limit(
    kind: str,
) -> None:
    async def check(server: ListeningServer) -> None:
        reader, writer = await connect(server)
        one = PLAIN[kind].replace(b"\r\n\r\n", b"\r\nX-Pad: " + b"p" * 6000 + b"\r\n\r\n")
        writer.write(one * 5)  # 5 heads of 6 KB in one write: 30 KB, each under 8 KiB
        for _ in range(5):
            status, _, _ = await read_reply(reader)
            assert status == 200
        writer.close()

    serve(kind, check, max_head_size=8192)


@pytest.mark.parametrize("kind", KINDS)
def test_a_declared_body_over_the_limit_is_a_413_before_any_of_it_is_sent(kind: str) -> None:
    async def check(server: ListeningServer) -> None:
        reader, writer = await connect(server)
        path = b"/" if kind == "echo" else b"/v1/chat/completions"
        writer.write(b"POST " + path + b" HTTP/1.1\r\nHost: t\r\nContent-Length: 268435456\r\n\r\n")
        # Not one byte of the 256 MB was sent: the answer came from the head alone.
        status, headers, _ = await read_reply(reader)
        assert (status, headers["connection"]) == (413, "close")
        assert await until_closed(reader) == b""
        writer.close()
        await still_serves(server, kind)

    serve(kind, check)


@pytest.mark.parametrize("kind", KINDS)
def test_a_chunked_body_is_a_413_once_it_passes_the_limit_though_it_never_ends(
    kind: str,
) -> None:
    async def check(server: ListeningServer) -> None:
        reader, writer = await connect(server)
        path = b"/" if kind == "echo" else b"/v1/chat/completions"
        writer.write(
            b"POST " + path + b" HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"%x\r\n" % 16384 + b"x" * 16384 + b"\r\n"

        async def endless() -> None:  # an endless chunked body: no last chunk, ever
            while True:
                writer.write(chunk)
                await writer.drain()

        sending = asyncio.create_task(endless())
        status, headers, _ = await read_reply(reader)
        assert (status, headers["connection"]) == (413, "close")
        sending.cancel()
        writer.close()
        await still_serves(server, kind)

    serve(kind, check, max_body_size=65536)


def test_a_body_at_the_limit_is_still_echoed() -> None:
    async def check(server: ListeningServer) -> None:
        reader, writer = await connect(server)
        body = b"b" * 65536
        writer.write(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 65536\r\n\r\n" + body)
        status, _, echoed = await read_reply(reader)
        assert (status, echoed) == (200, body)
        writer.close()

    serve("echo", check, max_body_size=65536)


# -- time -------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_slow_and_silent_connections_are_closed_after_the_request_timeout(kind: str) -> None:
    async def check(server: ListeningServer) -> None:
        silent = [await connect(server) for _ in range(20)]
        dripping = []
        begun = (  # a head, then a body, begun and never ended
            b"GET / HTTP/1.1\r\nHost: t\r\n",
            b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n",
        )
        for index in range(20):
            reader, writer = await connect(server)
            writer.write(begun[index % 2])
            dripping.append((reader, writer))

        async def drip() -> None:  # slowloris: one more byte now and then, forever
            while True:
                for _, writer in dripping:
                    if not writer.is_closing():
                        writer.write(b"x")
                await asyncio.sleep(0.02)

        dripper = asyncio.create_task(drip())
        # Silent connections are closed without a word, dripping ones with a 408.
        for reader, _ in silent:
            assert await until_closed(reader) == b""
        for reader, _ in dripping:
            status, _, _ = await read_reply(reader)
            assert status == 408
            assert await until_closed(reader) == b""
        dripper.cancel()
        for _, writer in silent + dripping:
            writer.close()
        await still_serves(server, kind)

    serve(kind, check, request_timeout=0.5)


@pytest.mark.parametrize("kind", KINDS)
def test_an_idle_keep_alive_connection_is_closed_after_the_request_timeout(kind: str) -> None:
    async def check(server: ListeningServer) -> None:
        reader, writer = await connect(server)
        writer.write(PLAIN[kind])
        status, headers, _ = await read_reply(reader)
        assert (status, headers["connection"]) == (200, "keep-alive")
        assert await until_closed(reader) == b""  # nothing more sent: closed, no reply
        writer.close()

    serve(kind, check, request_timeout=0.2)


def test_a_request_held_longer_than_the_timeout_is_still_answered() -> None:
    async def check(server: ListeningServer) -> None:
        reader, writer = await connect(server)
        writer.write(b"GET / HTTP/1.1\r\nHost: t\r\nx-echo-delay: 500ms\r\n\r\n")
        status, _, _ = await read_reply(reader)  # the server owed it: no time was counted
        assert status == 200
        writer.close()

    serve("echo", check, request_timeout=0.1)


# -- connections ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_connection_beyond_the_cap_is_closed_at_once_and_a_freed_place_is_reused(
    kind: str,
) -> None:
    async def check(server: ListeningServer) -> None:
        held = []
        for _ in range(5):
            reader, writer = await connect(server)
            writer.write(PLAIN[kind])
            assert (await read_reply(reader))[0] == 200  # accepted and served
            held.append((reader, writer))
        reader, writer = await connect(server)
        writer.write(PLAIN[kind])
        assert await until_closed(reader) == b""  # the sixth: closed, never answered
        writer.close()
        held.pop()[1].close()
        while True:  # the freed place is taken again once the server saw the close
            reader, writer = await connect(server)
            writer.write(PLAIN[kind])
            answer = await until_closed(reader)
            writer.close()
            if answer:
                assert answer.startswith(b"HTTP/1.1 200")
                break
            await asyncio.sleep(0.01)
        for _, writer in held:
            writer.close()

    serve(kind, check, max_connections=5, request_timeout=1.0)


# -- absurd numbers -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_bytes", "field"),
    [
        (b"GET / HTTP/1.1\r\nHost: t\r\nx-echo-delay: 1e300\r\n\r\n", "x-echo-delay"),
        (b"GET / HTTP/1.1\r\nHost: t\r\nx-echo-delay: 2h\r\n\r\n", "x-echo-delay"),
        (
            b"GET / HTTP/1.1\r\nHost: t\r\nx-echo-retry-after: 99999999999999999999\r\n\r\n",
            "x-echo-retry-after",
        ),
        (b"POST /stall?seconds=1e300 HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", "seconds"),
    ],
)
def test_an_absurd_number_in_an_echo_request_is_a_400_naming_it(
    request_bytes: bytes, field: str
) -> None:
    async def check(server: ListeningServer) -> None:
        reader, writer = await connect(server)
        writer.write(request_bytes)
        status, _, body = await read_reply(reader)
        assert status == 400
        assert field in body.decode()
        writer.close()
        await still_serves(server, "echo")
        assert isinstance(server, EchoServer)
        assert server.stats()["count"] == 1  # only the plain request was held

    serve("echo", check)


@pytest.mark.parametrize(
    ("headers", "path", "param"),
    [
        ({"x-mock-tokens": "9" * 5000}, "/v1/chat/completions", "x-mock-tokens"),
        ({"x-mock-fault": "broken-sse:99999999999"}, "/v1/chat/completions", "x-mock-fault"),
        ({"x-mock-fault": "status:" + "5" * 5000}, "/v1/chat/completions", "x-mock-fault"),
        ({}, "/stats?offset=" + "9" * 5000, "offset"),
        ({}, "/stats?limit=%C2%B2", "limit"),
    ],
)
def test_an_absurd_number_in_an_llm_request_is_a_400_naming_it(
    headers: dict[str, str], path: str, param: str
) -> None:
    async def check(server: ListeningServer) -> None:
        reader, writer = await connect(server)
        if path.startswith("/stats"):
            head = f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode()
        else:
            body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
            lines = [f"POST {path} HTTP/1.1", "Host: t", f"Content-Length: {len(body)}"]
            lines += [f"{name}: {value}" for name, value in headers.items()]
            head = ("\r\n".join(lines) + "\r\n\r\n" + body).encode()
        writer.write(head)
        status, _, reply = await read_reply(reader)
        assert status == 400
        assert json.loads(reply)["error"]["param"] == param
        writer.close()
        await still_serves(server, "llm")

    serve("llm", check)


# -- /stats ---------------------------------------------------------------------------------------


def test_the_echo_stats_of_a_long_run_cost_what_is_new_not_what_was_recorded() -> None:
    async def check(server: ListeningServer) -> None:
        assert isinstance(server, EchoServer)
        core = server._core
        for i in range(200_000):  # a long run's hold times, as the protocol records them
            core.record(i * 1e-6, 200)
        first = server.stats()
        core.record(0.5, 200)
        tracemalloc.start()
        second = server.stats()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        # Sorting all 200,001 again would hold a list of them: 1.6 MB of pointers alone.
        assert peak < 200_000
        assert (first["count"], second["count"]) == (200_000, 200_001)
        assert (second["max"], second["p50"]) == (0.5, 100_000 * 1e-6)

    serve("echo", check)


# -- arguments and flags ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("max_head_size", 10),
        ("max_body_size", -1),
        ("request_timeout", "0s"),
        ("request_timeout", "1e300"),
        ("max_connections", 0),
    ],
)
def test_bad_limits_are_config_errors_naming_the_argument(
    kind: str, argument: str, value: object
) -> None:
    with pytest.raises(ConfigError) as caught:
        make(kind, **{argument: value})
    assert caught.value.field == argument


@pytest.mark.parametrize("command", ["echo-server", "llm-server"])
@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--max-head-size", "10"),
        ("--max-body-size", "-1"),
        ("--request-timeout", "never"),
        ("--max-connections", "0"),
    ],
)
def test_bad_limit_flags_exit_2_naming_the_flag(
    command: str, flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli([command, flag, value]) == 2
    assert f"error: {flag}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("command", "flag", "value"),
    [
        ("echo-server", "--max-connections", "99999999999999"),
        ("echo-server", "--max-head-size", "99999999999999"),
        ("echo-server", "--max-body-size", "99999999999999"),
        ("echo-server", "--seed", "99999999999999999999999999"),
        ("llm-server", "--max-connections", "99999999999999"),
        ("llm-server", "--capacity", "99999999999999"),
        ("llm-server", "--rpm", "99999999999999999999"),
        ("llm-server", "--tpm", "99999999999999999999"),
        ("llm-server", "--max-output-tokens", "99999999999999999"),
        ("llm-server", "--seed", "99999999999999999999999"),
    ],
)
def test_absurdly_large_server_flags_exit_2_naming_the_flag(
    command: str, flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli([command, flag, value]) == 2
    err = capsys.readouterr().err
    assert f"error: {flag}" in err
    assert "_" not in err  # the message names no library field
    assert "None" not in err  # nor Python's word for "no limit"


def test_too_many_output_tokens_names_the_flags_not_the_field(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_cli(["llm-server", "--output-tokens", "200", "--max-output-tokens", "100"]) == 2
    err = capsys.readouterr().err
    assert "error: --output-tokens" in err
    assert "max_output_tokens" not in err


@pytest.mark.parametrize("command", ["echo-server", "llm-server"])
def test_the_help_lists_every_limit_with_its_default(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli([command, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for flag, default in (
        ("--max-head-size", "32768"),
        ("--max-body-size", "1048576" if command == "echo-server" else "8388608"),
        ("--request-timeout", "60s"),
        ("--max-connections", "10000"),
    ):
        assert flag in text
        assert f"[default: {default}]" in text


@pytest.mark.parametrize("command", ["echo-server", "llm-server"])
def test_a_host_label_too_long_to_encode_exits_2_naming_host(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli([command, "--host", "a" * 64]) == 2
    err = capsys.readouterr().err
    assert "error: --host" in err
    assert "bug" not in err
