"""HTTPS: a self-signed certificate made by the ``openssl`` CLI, a TLS server on loopback."""

from __future__ import annotations

import asyncio
import functools
import shutil
import ssl
import subprocess
from pathlib import Path

import pytest

from http_helpers import LOOPS, Server, keep_alive, run
from pyattacker.errors import ConfigError, ConnectError, TlsError, error_class_of
from pyattacker.http import HttpClient, Response, TlsOptions

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


class TlsServer(Server):
    """The scripted server behind TLS; records the SNI names clients sent."""

    def __init__(self, certificate: tuple[Path, Path]) -> None:
        super().__init__(keep_alive)
        self.names: list[str | None] = []
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(*certificate)
        self.context.sni_callback = lambda _sock, name, _ctx: self.names.append(name)  # type: ignore[assignment,func-returns-value]

    async def __aenter__(self) -> TlsServer:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0, ssl=self.context)
        self.port = self._server.sockets[0].getsockname()[1]
        return self


@pytest.mark.parametrize("loop", LOOPS)
def test_https_verifies_the_certificate_sends_sni_and_reuses_the_connection(
    certificate: tuple[Path, Path], loop: str
) -> None:
    async def main() -> tuple[list[Response], list[str | None], int]:
        async with TlsServer(certificate) as server:
            context = ssl.create_default_context(cafile=str(certificate[0]))
            async with HttpClient(ssl=context) as client:
                url = f"https://localhost:{server.port}/secure"
                responses = [await client.request("GET", url) for _ in range(2)]
            return responses, server.names, server.accepted

    responses, names, accepted = run(main, loop)
    assert [(r.status, r.body) for r in responses] == [(200, b"ok"), (200, b"ok")]
    assert responses[1].timing.reused
    assert accepted == 1
    assert names == ["localhost"]


def test_an_untrusted_certificate_is_a_tls_error_caused_by_ssl_that_names_the_fix(
    certificate: tuple[Path, Path],
) -> None:
    async def main() -> ConnectError:
        async with TlsServer(certificate) as server, HttpClient() as client:  # default trust store
            with pytest.raises(ConnectError) as info:
                await client.request("GET", f"https://localhost:{server.port}/")
            return info.value

    error = run(main)
    assert isinstance(error.__cause__, ssl.SSLError)
    assert isinstance(error, TlsError)  # a ConnectError still, of its own class
    assert "TLS with localhost" in str(error)
    assert "--cacert FILE" in str(error)
    assert "--insecure" in str(error)
    assert error_class_of(error) == "tls"


@pytest.mark.parametrize("together", [False, True])
def test_an_encrypted_client_key_is_refused_saying_so_and_how_to_decrypt_it(
    tmp_path: Path, certificate: tuple[Path, Path], together: bool
) -> None:
    cert, key = certificate
    encrypted = tmp_path / "encrypted.pem"
    subprocess.run(
        ["openssl", "pkey", "-in", str(key), "-out", str(encrypted), "-aes256",
         "-passout", "pass:secret"],
        check=True, capture_output=True,
    )  # fmt: skip
    if together:  # the certificate and its key in one file, given as --cert
        both = tmp_path / "both.pem"
        both.write_bytes(cert.read_bytes() + encrypted.read_bytes())
        build = functools.partial(TlsOptions, cert=str(both))
    else:
        build = functools.partial(TlsOptions, cert=str(cert), key=str(encrypted))
    with pytest.raises(ConfigError, match="is encrypted") as info:
        build()
    assert info.value.field == ("cert" if together else "key")
    assert info.value.hint is not None
    assert "openssl pkey -in" in info.value.hint
