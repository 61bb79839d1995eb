"""The HTTP error tree: one mapping boundary, and classification the retry policy can trust."""

from __future__ import annotations

import errno
import socket
import ssl

import pytest
from httptools import HttpParserError, HttpParserUpgrade

from http_helpers import Peer, Server, run
from pyattacker.errors import (
    ConnectError,
    HttpError,
    HttpStatusError,
    PyAttackerError,
    RemoteProtocolError,
    RequestTimeout,
    TlsError,
    error_class_of,
    retry_after_of,
)
from pyattacker.http import URL, Headers, HttpClient, Response, Timing
from pyattacker.http._errors import Stage, mapped, translate

URL_ = URL.parse("http://127.0.0.1:8080/x")


def _translate(exc: BaseException | None, stage: Stage, reused: bool = False) -> BaseException:
    return translate(exc, url=URL_, timing=Timing(1.0), stage=stage, reused=reused)


@pytest.mark.parametrize(
    ("exc", "stage", "kind", "error_class"),
    [
        (
            ConnectionRefusedError(errno.ECONNREFUSED, "refused"),
            Stage.CONNECT,
            ConnectError,
            "connection",
        ),
        (
            socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
            Stage.CONNECT,
            ConnectError,
            "connection",
        ),
        (
            ssl.SSLCertVerificationError("certificate verify failed"),
            Stage.CONNECT,
            TlsError,
            "tls",
        ),
        (TimeoutError(errno.ETIMEDOUT, "timed out"), Stage.CONNECT, RequestTimeout, "timeout"),
        (OSError(errno.ENETUNREACH, "unreachable"), Stage.CONNECT, ConnectError, "connection"),
        (None, Stage.AWAITING, ConnectError, "connection"),
        (
            ConnectionResetError(errno.ECONNRESET, "reset"),
            Stage.AWAITING,
            ConnectError,
            "connection",
        ),
        (None, Stage.RESPONSE, RemoteProtocolError, "upstream"),
        (
            ConnectionResetError(errno.ECONNRESET, "reset"),
            Stage.RESPONSE,
            RemoteProtocolError,
            "upstream",
        ),
        (
            HttpParserError("invalid constant string"),
            Stage.RESPONSE,
            RemoteProtocolError,
            "upstream",
        ),
        (HttpParserUpgrade(12), Stage.RESPONSE, RemoteProtocolError, "upstream"),
    ],
)
def test_each_foreign_error_maps_to_one_of_ours_with_the_right_class(
    exc: BaseException | None, stage: Stage, kind: type[HttpError], error_class: str
) -> None:
    error = _translate(exc, stage)
    assert type(error) is kind
    assert error_class_of(error) == error_class
    assert error.url is URL_
    assert error.timing.started == 1.0
    assert "127.0.0.1:8080" in str(error)


def test_a_timeout_error_names_its_phase() -> None:
    error = _translate(TimeoutError(errno.ETIMEDOUT, "timed out"), Stage.CONNECT)
    assert isinstance(error, RequestTimeout)
    assert error.phase == "connect"


def test_errors_the_mapping_does_not_know_pass_through_unchanged() -> None:
    bug = RuntimeError("a bug of ours")
    assert _translate(bug, Stage.RESPONSE) is bug


def test_mapped_raises_ours_from_the_foreign_error() -> None:
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "refused")
    with (
        pytest.raises(ConnectError) as info,
        mapped(url=URL_, timing=Timing(0.0), stage=Stage.CONNECT),
    ):
        raise refused
    assert info.value.__cause__ is refused


def test_the_http_errors_hang_under_one_base() -> None:
    for kind in (ConnectError, RequestTimeout, RemoteProtocolError, HttpStatusError):
        assert issubclass(kind, HttpError)
        assert issubclass(kind, PyAttackerError)
        assert kind.exit_code == 1


@pytest.mark.parametrize(
    ("status", "error_class"),
    [
        (429, "rate_limit"),
        (503, "upstream"),
        (500, "upstream"),
        (504, "timeout"),
        (404, "fatal"),
        (418, "unknown"),
    ],
)
def test_a_status_error_is_classified_by_its_status(status: int, error_class: str) -> None:
    error = HttpStatusError(f"HTTP {status}", status=status, url=URL_)
    assert error_class_of(error) == error_class


def _response(status: int, headers: list[tuple[str, str]]) -> Response:
    response = Response(URL_, Timing(0.0))
    response.status = status
    response.headers = Headers.from_pairs(headers)
    return response


def test_raise_for_status_on_429_carries_retry_after_and_prefers_milliseconds() -> None:
    response = _response(429, [("Retry-After", "7")])
    assert response.retry_after == 7.0
    with pytest.raises(HttpStatusError) as info:
        response.raise_for_status()
    error = info.value
    assert (error.status, error.retry_after, error.headers) == (429, 7.0, response.headers)
    assert error.timing is response.timing
    assert error_class_of(error) == "rate_limit"
    assert retry_after_of(error) == 7.0
    both = _response(429, [("retry-after", "7"), ("Retry-After-Ms", "250")])
    assert both.retry_after == 0.25


def test_raise_for_status_is_silent_below_400() -> None:
    for status in (200, 204, 301, 399):
        _response(status, []).raise_for_status()
    assert _response(200, []).retry_after is None


def test_a_real_429_reads_retry_after_from_the_wire() -> None:
    async def throttled(peer: Peer) -> None:
        await peer.read_request()
        await peer.respond(429, b"slow down", "Retry-After: 3\r\n")

    async def main() -> Response:
        async with Server(throttled) as server, HttpClient() as client:
            return await client.request("GET", server.url)

    response = run(main)  # a status is not an exception until asked
    with pytest.raises(HttpStatusError) as info:
        response.raise_for_status()
    assert retry_after_of(info.value) == 3.0
    assert error_class_of(info.value) == "rate_limit"
