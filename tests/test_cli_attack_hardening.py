"""``pyattacker attack`` against what a hostile or careless input brings: keys in a URL's
query (masked in every output, ``{key}`` filled in), and the response size limits' flags."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from http_helpers import Server, keep_alive
from pyattacker.attack import AttackPlan, OpenModel, attack
from pyattacker.cli import run_cli
from pyattacker.report import attack_json, attack_markdown, attack_text
from pyattacker.servers import EchoServerProcess

SECRET, TOKEN = "sk-query-do-not-print", "tok-query-do-not-print"


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServerProcess]:
    with EchoServerProcess(delay="fixed:1ms") as server:
        yield server


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_key_in_the_query_is_masked_in_the_report_samples_errors_and_stderr(
    echo: EchoServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    query = f"?api_key={SECRET}&access_token={TOKEN}&q=1"
    refused = f"http://127.0.0.1:{_closed_port()}/{query}"  # its errors quote the URL
    out = {name: tmp_path / name for name in ("a.json", "a.md", "a.csv", "b.json", "b.jsonl")}
    common = ["--rate", "40/s", "--requests", "10", "--connect-timeout", "1s"]
    argv = ["attack", f"{echo.url}/{query}", *common, "--json", str(out["a.json"])]
    assert run_cli([*argv, "--markdown", str(out["a.md"]), "--samples", str(out["a.csv"])]) == 0
    argv = ["attack", refused, *common, "--json", str(out["b.json"])]
    assert run_cli([*argv, "--samples", str(out["b.jsonl"])]) == 1
    captured = capsys.readouterr()
    shown = captured.out + captured.err + "".join(p.read_text() for p in out.values())
    assert SECRET not in shown
    assert TOKEN not in shown
    assert f"{echo.url}/?api_key=***&access_token=***&q=1" in captured.err  # "attacking ..."
    report = json.loads(out["a.json"].read_text())
    assert list(report["targets"]) == [f"{echo.url}/?api_key=***&access_token=***&q=1"]
    refusals = json.loads(out["b.json"].read_text())["errors"]
    assert all("access_token=***" in group["example"] for group in refusals)


def test_key_flags_go_into_the_query_where_it_says_key_and_stay_out_of_every_output() -> None:
    async def main() -> tuple[list[str], str]:
        async with Server(keep_alive) as server:
            plan = AttackPlan.build(
                [server.url + "v1?key={key}"],
                OpenModel(rate=100),
                requests=4,
                keys=("sk-one/1", "sk-two"),
            )
            result = await attack(plan)
            reports = attack_text(result) + attack_json(result) + attack_markdown(result)
            return sorted({r.target for r in server.requests}), reports

    targets, reports = asyncio.run(main())
    assert targets == ["/v1?key=sk-one%2F1", "/v1?key=sk-two"]
    assert "sk-one" not in reports
    assert "sk-two" not in reports
    assert "v1?key=*** (key 2)" in reports


class _BigHeadServer:
    """Answers every request with a 200 whose head is about 4 KiB (blocking, in a thread:
    the CLI runs its own event loop)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/"
        pad = b"X-Pad: " + b"p" * 1000 + b"\r\n"
        self.answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" + pad * 4 + b"\r\nok"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while True:
                try:
                    chunk = conn.recv(65536)
                except OSError:
                    return
                if not chunk:
                    return
                data += chunk
                while b"\r\n\r\n" in data:
                    _, data = data.split(b"\r\n\r\n", 1)
                    conn.sendall(self.answer)


def test_max_head_size_ends_requests_with_a_longer_head_as_protocol_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = _BigHeadServer()
    argv = ["attack", server.url, "--rate", "50/s", "--requests", "5", "-q", "--json", "-"]
    try:
        assert run_cli([*argv, "--max-head-size", "2KiB"]) == 1
        small = json.loads(capsys.readouterr().out)
        assert run_cli(argv) == 0  # the default, 64 KiB, takes it
        default = json.loads(capsys.readouterr().out)
    finally:
        server.listener.close()
    assert small["total"]["error_classes"] == {"protocol": 5}
    assert small["errors"][0]["example"].startswith("ResponseTooLarge: response head over 2 KiB")
    assert default["total"]["error_classes"] == {}


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--max-head-size", "12"),
        ("--max-head-size", "1T"),
        ("--max-head-size", "lots"),
        ("--keep-body", "-1"),
        ("--keep-body", "2GiB"),
    ],
)
def test_a_size_flag_out_of_range_exits_2_naming_it(
    flag: str, value: str, echo: EchoServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    echo.reset()
    argv = ["attack", echo.url, "--rate", "10/s", "--requests", "1", flag, value]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert f"error: {flag}" in err, err
    assert "Traceback" not in err
    assert echo.stats()["count"] == 0


def test_urls_that_differ_only_in_a_masked_secret_stay_two_targets_with_two_names() -> None:
    async def main() -> tuple[list[str], list[str]]:
        async with Server(keep_alive) as server:
            urls = [server.url + "?sig=first-secret", server.url + "?sig=second-secret"]
            plan = AttackPlan.build(urls, OpenModel(rate=100), requests=6)
            result = await attack(plan)
            return sorted({r.target for r in server.requests}), sorted(result.by_target)

    targets, names = asyncio.run(main())
    assert targets == ["/?sig=first-secret", "/?sig=second-secret"]  # each sent as given
    assert [name.split("/", 3)[-1] for name in names] == ["?sig=*** (URL 1)", "?sig=*** (URL 2)"]
