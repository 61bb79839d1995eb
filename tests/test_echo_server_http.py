"""What the echo server answers and how it is run: bodies, statuses, overrides, protocol
edges, the control paths, the process and the CLI."""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import sys
import time
from urllib.parse import urlsplit

import pytest

import pyattacker.servers
from echo_helpers import connect, exchange, on_asyncio, read_reply, request, served, until_parsed
from pyattacker.cli import run_cli
from pyattacker.clock import LoopClock
from pyattacker.errors import ConfigError
from pyattacker.servers import EchoServer, EchoServerProcess
from pyattacker.testing import run_virtual

# -- bodies, statuses, overrides, protocol edges ---------------------------------------------


def test_a_request_body_is_echoed_and_an_empty_one_gets_the_payload() -> None:
    async def check(server: EchoServer) -> None:
        echoed, payload = await exchange(
            server.url, request("/x", method="PUT", body=b"hello"), request("/y")
        )
        assert (echoed.status, echoed.body) == (200, b"hello")
        assert echoed.headers["content-type"] == "application/octet-stream"
        assert payload.body == b"okoko"

    on_asyncio(lambda: served(EchoServer(body_size=5), check))


def test_failures_follow_the_seeded_dice_and_429_carries_retry_after() -> None:
    async def check(server: EchoServer) -> None:
        replies = await exchange(server.url, *[request() for _ in range(40)])
        dice = random.Random(11)
        expected = [429 if dice.random() < 0.5 else 200 for _ in range(40)]
        assert [r.status for r in replies] == expected
        assert all(r.headers["retry-after"] == "1" for r in replies if r.status == 429)
        assert server.stats()["statuses"] == {
            "200": expected.count(200),
            "429": expected.count(429),
        }

    on_asyncio(lambda: served(EchoServer(seed=11, fail={429: 0.5}), check))


def test_headers_override_status_and_retry_after_for_one_request() -> None:
    async def check(server: EchoServer) -> None:
        limited, broken, plain = await exchange(
            server.url,
            request(headers={"X-Echo-Status": "429", "x-echo-retry-after": "2"}),
            request(headers={"x-echo-status": "503"}),
            request(),
        )
        assert (limited.status, limited.headers["retry-after"]) == (429, "2")
        assert (broken.status, "retry-after" in broken.headers) == (503, False)
        assert plain.status == 200
        assert server.stats()["statuses"] == {"200": 1, "429": 1, "503": 1}

    on_asyncio(lambda: served(EchoServer(), check))


@pytest.mark.parametrize(
    ("header", "value"),
    [("x-echo-delay", "soon"), ("x-echo-status", "42"), ("x-echo-retry-after", "tomorrow")],
)
def test_a_bad_override_is_a_400_that_is_not_counted(header: str, value: str) -> None:
    async def check(server: EchoServer) -> None:
        (reply,) = await exchange(server.url, request(headers={header: value}))
        assert reply.status == 400
        assert header in reply.body.decode()
        assert server.stats()["count"] == 0

    on_asyncio(lambda: served(EchoServer(), check))


def test_connection_close_and_http_1_0_close_after_the_reply() -> None:
    async def check(server: EchoServer) -> None:
        for raw in (request(headers={"Connection": "close"}), request(version="1.0")):
            reader, writer = await connect(server.url)
            writer.write(raw)
            reply = await read_reply(reader)
            assert (reply.status, reply.headers["connection"]) == (200, "close")
            assert await reader.read() == b""  # the server closed
            writer.close()
        assert server.stats()["count"] == 2

    on_asyncio(lambda: served(EchoServer(), check))


def test_head_gets_the_headers_of_get_without_the_body() -> None:
    async def check(server: EchoServer) -> None:
        reader, writer = await connect(server.url)
        writer.write(
            request(method="HEAD") + request(method="HEAD", headers={"x-echo-status": "500"})
        )
        writer.write(request())
        for status in (200, 500):
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 %d " % status)
        assert (await read_reply(reader)).body == b"okok"  # nothing was left in between
        writer.close()
        assert server.stats()["count"] == 3

    on_asyncio(lambda: served(EchoServer(body_size=4), check))


def test_garbage_gets_a_400_and_the_connection_closes() -> None:
    async def check(server: EchoServer) -> None:
        reader, writer = await connect(server.url)
        writer.write(b"HELLO THERE\r\n\r\n")
        reply = await read_reply(reader)
        assert reply.status == 400
        assert await reader.read() == b""
        writer.close()
        assert server.stats()["count"] == 0

    on_asyncio(lambda: served(EchoServer(), check))


def test_a_request_whose_client_leaves_is_dropped_not_recorded() -> None:
    async def check(server: EchoServer) -> None:
        _, writer = await connect(server.url)
        writer.write(request(headers={"x-echo-delay": "5s"}))
        await until_parsed(server.url, 1)
        writer.close()
        await writer.wait_closed()
        for _ in range(100):  # until the server has seen the close
            if server.stats()["dropped"]:
                break
            await asyncio.sleep(0.01)
        assert (server.stats()["count"], server.stats()["dropped"]) == (0, 1)

    on_asyncio(lambda: served(EchoServer(), check))


# -- the HTTP control surface ----------------------------------------------------------------


def test_the_control_paths_answer_json_and_are_never_counted() -> None:
    async def check(server: EchoServer) -> None:
        await exchange(server.url, request(), request())
        stats, with_samples, reset, after, stall, bad, missing = await exchange(
            server.url,
            request("/stats"),
            request("/stats?samples=1"),
            request("/reset", method="POST"),
            request("/reset"),
            request("/stall?seconds=1ms", method="POST"),
            request("/stall?seconds=-1", method="POST"),
            request("/stall", method="POST"),
        )
        assert stats.json()["count"] == 2
        assert "samples" not in stats.json()
        assert len(with_samples.json()["samples"]) == 2
        assert (reset.json(), after.json()) == ({"cleared": 2}, {"cleared": 0})
        assert stall.json() == {"stall_s": 0.001}
        assert (bad.status, bad.json()["error"][:8]) == (400, "seconds:")
        assert missing.status == 400
        assert server.stats()["count"] == 0

    on_asyncio(lambda: served(EchoServer(), check))


def test_other_methods_on_control_paths_are_echo_requests() -> None:
    async def check(server: EchoServer) -> None:
        (reply,) = await exchange(server.url, request("/stats", method="POST", body=b"x"))
        assert reply.body == b"x"
        assert server.stats()["count"] == 1

    on_asyncio(lambda: served(EchoServer(), check))


def test_stopping_the_server_drops_what_it_still_holds() -> None:
    async def main() -> None:
        server = EchoServer(delay="fixed:10s")
        await server.start()
        reader, writer = await connect(server.url)
        writer.write(request())
        await until_parsed(server.url, 1)
        await server.stop()
        assert await reader.read() == b""
        writer.close()
        assert (server.stats()["count"], server.stats()["dropped"]) == (0, 1)
        await server.stop()  # idempotent

    on_asyncio(main)


def test_arguments_are_checked_when_the_server_is_built() -> None:
    with pytest.raises(ConfigError, match="delay"):
        EchoServer(delay="sometimes")
    with pytest.raises(ConfigError) as info:
        EchoServer(fail={429: 0.7, 500: 0.5})
    assert info.value.field == "fail"
    with pytest.raises(ConfigError):
        EchoServer(fail={200: 0.1})
    with pytest.raises(ConfigError):
        EchoServer(port=70000)
    with pytest.raises(RuntimeError, match="not been started"):
        _ = EchoServer().url


def test_a_port_in_use_is_a_config_error_naming_the_port() -> None:
    async def main() -> None:
        async with EchoServer() as first:
            taken = urlsplit(first.url).port
            assert taken is not None
            with pytest.raises(ConfigError, match="cannot listen") as info:
                await EchoServer(port=taken).start()
            assert info.value.field == "port"

    on_asyncio(main)


def test_the_hot_path_clock_is_the_loop_clock_on_simulated_and_real_loops() -> None:
    async def simulated() -> tuple[float, float]:
        await asyncio.sleep(12.5)
        return LoopClock().reader()(), LoopClock().now()

    assert run_virtual(simulated()) == (12.5, 12.5)
    assert LoopClock().reader() is time.monotonic


def test_the_servers_package_exports_its_names_in_sorted_order() -> None:
    names = list(pyattacker.servers.__all__)
    assert names == sorted(names)
    assert all(hasattr(pyattacker.servers, name) for name in names)


# -- the process and the CLI -----------------------------------------------------------------


def test_the_process_prints_its_url_first_and_exits_0_on_sigterm() -> None:
    server = EchoServerProcess(delay="fixed:1ms", seed=5, fail="429:0.25")
    with server:
        assert urlsplit(server.url).hostname == "127.0.0.1"
        replies = on_asyncio(lambda: exchange(server.url, *[request() for _ in range(5)]))
        assert {r.status for r in replies} <= {200, 429}
        stats = server.stats(samples=True)
        assert stats["count"] == 5
        assert min(stats["samples"]) >= 0.001
        assert (stats["delay"], stats["seed"]) == ("fixed:1ms", 5)
        server.stall(0.001)
        server.reset()
        assert server.stats()["count"] == 0
    assert server.returncode == 0
    assert "delay fixed:1ms" in server.stderr()
    server.stop()  # idempotent


def test_the_command_exits_0_on_sigint_too() -> None:
    command = [sys.executable, "-m", "pyattacker", "echo-server", "--delay", "fixed:5ms"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as child:
        assert child.stdout is not None
        assert child.stdout.readline().startswith(b"http://127.0.0.1:")
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=30)
    assert child.returncode == 0
    assert b"delay fixed:5ms (p50 5.00ms, p99 5.00ms)" in err


def test_a_bad_delay_makes_the_process_exit_2_naming_the_field() -> None:
    server = EchoServerProcess(delay="lognormal:median=20ms")
    with pytest.raises(ConfigError, match="--delay: missing sigma"):
        server.start()
    assert server.returncode == 2


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--delay", "bogus:1"], "--delay"),
        (["--fail", "429"], "--fail"),
        (["--fail", "200:0.1"], "--fail"),
        (["--fail", "429:0.8,500:0.8"], "--fail"),
        (["--port", "99999"], "--port"),
        (["--body-size", "-1"], "--body-size"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(
    args: list[str], field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["echo-server", *args]) == 2
    assert f"error: {field}" in capsys.readouterr().err


def test_the_help_shows_the_delay_forms_the_endpoints_and_examples(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_cli(["echo-server", "--help"]) == 0
    out = capsys.readouterr().out
    for text in ("lognormal:median=20ms,sigma=0.5", "/stats", "/stall", "Examples", "--fail"):
        assert text in out


def test_an_address_that_is_not_this_machines_names_the_host_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_cli(["echo-server", "--host", "256.0.0.1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --host: cannot listen on 256.0.0.1"), err
    assert "Traceback" not in err
