"""``--resolve HOST:PORT:ADDRESS``: the connection goes to ADDRESS, the request stays HOST's.

Every server here listens on 127.0.0.1; the names in the URLs (``*.pyattacker.test``) are
never looked up, since each is resolved by the plan.
"""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest
import trustme
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.attack import AttackPlan, OpenModel, attack
from pyattacker.cli import run_cli
from pyattacker.errors import ConfigError
from pyattacker.http import HttpClient, Resolve, TlsOptions
from pyattacker.servers import EchoServer, server_tls

NAME = "api.pyattacker.test"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A CA and a server certificate for NAME only (not for 127.0.0.1), as PEM files."""
    folder = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    files = {"ca": folder / "ca.pem", "server": folder / "server.pem"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    ca.issue_cert(NAME).private_key_and_cert_chain_pem.write_to_path(str(files["server"]))
    return files


def test_a_resolved_https_target_sends_the_urls_name_as_sni_and_checks_the_certificate_by_it(
    pki: dict[str, Path],
) -> None:
    async def main() -> tuple[int, list[str | None], int]:
        names: list[str | None] = []
        context = server_tls(str(pki["server"]))
        context.sni_callback = lambda _sock, name, _ctx: names.append(name)
        async with EchoServer(ssl=context) as server:
            port = int(server.url.rsplit(":", 1)[1])
            plan = AttackPlan.build(
                [f"https://{NAME}:{port}/x"],
                OpenModel(rate=200),
                requests=10,
                tls=TlsOptions(cacert=str(pki["ca"])),
                resolve=[f"{NAME}:{port}:127.0.0.1"],
            )
            result = await attack(plan)
            return result.total.by_outcome.get("ok", 0), names, int(server.stats()["count"])

    ok, names, served = asyncio.run(main())
    assert ok == 10 == served
    assert names  # one handshake or more
    assert set(names) == {NAME}


def test_the_host_header_stays_the_urls_while_the_connection_goes_to_the_address() -> None:
    async def main() -> list[bytes]:
        heads: list[bytes] = []

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            heads.append(await reader.readuntil(b"\r\n\r\n"))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server, HttpClient(connect_to={(NAME, port): "127.0.0.1"}) as client:
            response = await client.request("GET", f"http://{NAME}:{port}/path")
            assert response.status == 200
        return heads

    (head,) = asyncio.run(main())
    lines = head.split(b"\r\n")
    assert lines[0] == b"GET /path HTTP/1.1"
    assert f"host: {NAME}:".encode() in head.lower()


def test_a_refused_connection_names_the_address_it_went_to() -> None:
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    plan = AttackPlan.build(
        [f"http://{NAME}:{port}/"], OpenModel(rate=100), requests=2,
        resolve=[f"{NAME}:{port}:127.0.0.1"],
    )  # fmt: skip
    result = asyncio.run(attack(plan))
    (group,) = result.errors
    assert group.example is not None
    assert f"cannot connect to {NAME}:{port} (at 127.0.0.1)" in group.example


def test_the_cli_reports_the_resolve_in_the_json_plan_and_the_title(
    pki: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def main() -> int:
        async with EchoServer(ssl=server_tls(str(pki["server"]))) as server:
            port = int(server.url.rsplit(":", 1)[1])
            argv = ["attack", f"https://{NAME}:{port}/", "--rate", "50/s", "--requests", "5",
                    "--cacert", str(pki["ca"]), "--resolve", f"{NAME.upper()}:{port}:127.0.0.1",
                    "--json", str(tmp_path / "r.json"), "-q"]  # fmt: skip
            code = await asyncio.to_thread(run_cli, argv)
            return port if code == 0 else -code

    port = asyncio.run(main())
    assert port > 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["plan"]["resolve"] == [f"{NAME}:{port}:127.0.0.1"]  # the name lower-cased
    assert report["total"]["outcomes"] == {"ok": 5}
    out = capsys.readouterr().out
    assert f"connecting by --resolve {NAME}:{port}:127.0.0.1" in out.splitlines()[0]


@pytest.mark.parametrize(
    ("entries", "says"),
    [
        (["api.example.com:443"], "is not HOST:PORT:ADDRESS"),
        (["api.example.com:https:127.0.0.1"], "is not a port number"),
        (["api.example.com:70000:127.0.0.1"], "not between 1 and 65535"),
        (["api.example.com:443:"], "is not an address"),
        (["api.example.com:443:127.0.0.1:8443"], "is not an address"),
        (["a.test:443:127.0.0.1", "A.test:443:127.0.0.2"], "is given two addresses"),
    ],
)
def test_a_bad_resolve_exits_2_naming_the_flag_and_writes_nothing(
    entries: list[str],
    says: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["attack", "http://127.0.0.1:9/", "--requests", "1", "--rate", "1/s",
            "--json", "r.json"]  # fmt: skip
    for entry in entries:
        argv += ["--resolve", entry]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert "error: --resolve" in err, err
    assert says in err, err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_a_resolve_that_matches_no_target_is_noted_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def main() -> int:
        async with EchoServer() as server:
            argv = ["attack", server.url + "/", "--rate", "50/s", "--requests", "2", "-q",
                    "--resolve", "other.pyattacker.test:80:127.0.0.1"]  # fmt: skip
            return await asyncio.to_thread(run_cli, argv)

    assert asyncio.run(main()) == 0
    err = capsys.readouterr().err
    assert "note: --resolve other.pyattacker.test:80:127.0.0.1 matches none of the targets" in err


def test_a_plan_refuses_a_resolve_that_is_neither_text_nor_a_resolve() -> None:
    with pytest.raises(ConfigError) as info:
        AttackPlan.build(["http://127.0.0.1:9/"], OpenModel(rate=1), requests=1, resolve=[1])
    assert info.value.field == "resolve"


hosts = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?(\.[a-z0-9]{1,8}){0,3}", fullmatch=True)
addresses = st.one_of(st.ip_addresses().map(str), hosts)


@given(host=hosts, port=st.integers(1, 65535), address=addresses)
def test_the_text_form_reads_back_as_the_same_entry(host: str, port: int, address: str) -> None:
    entry = Resolve(host, port, address)
    assert Resolve.parse(str(entry)) == entry
