"""Encoding request heads: what goes on the wire, and what is refused before it does."""

from __future__ import annotations

from typing import Any

import httptools
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker import __version__
from pyattacker.errors import ConfigError
from pyattacker.http import URL, check_request
from pyattacker.http._request import RequestEncoder

URL_ = URL.parse("http://127.0.0.1:8080/p?q=1")


class Parsed:
    """What a server's parser makes of the bytes."""

    def __init__(self, data: bytes) -> None:
        self.headers: list[tuple[str, str]] = []
        self.body = b""
        self.complete = False
        parser = httptools.HttpRequestParser(self)
        parser.feed_data(data)
        self.method = parser.get_method().decode()

    def on_url(self, url: bytes) -> None:
        self.target = url.decode()

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        self.complete = True


def _wire(
    encoder: RequestEncoder, method: str, headers: Any = None, body: bytes | None = None
) -> Parsed:
    head, separate, _keep_alive = encoder.encode(method, URL_, headers, body)
    return Parsed(head + (separate or b""))


def test_a_plain_get_carries_host_and_user_agent_and_nothing_else() -> None:
    parsed = _wire(RequestEncoder(), "GET")
    assert (parsed.method, parsed.target, parsed.complete) == ("GET", "/p?q=1", True)
    assert parsed.headers == [
        ("Host", "127.0.0.1:8080"),
        ("User-Agent", f"pyattacker/{__version__}"),
    ]


@pytest.mark.parametrize(
    ("method", "length"), [("POST", "0"), ("PUT", "0"), ("PATCH", "0"), ("DELETE", None)]
)
def test_body_methods_without_a_body_say_content_length_0(method: str, length: str | None) -> None:
    parsed = _wire(RequestEncoder(), method)
    assert dict(parsed.headers).get("Content-Length") == length


@pytest.mark.parametrize("size", [0, 10, 64 * 1024, 64 * 1024 + 1, 300_000])
def test_a_body_of_any_size_is_framed_by_its_length(size: int) -> None:
    body = b"b" * size
    head, separate, _ = RequestEncoder().encode("POST", URL_, None, body)
    assert (separate is None) == (size <= 64 * 1024)  # small bodies share the head's write
    parsed = Parsed(head + (separate or b""))
    assert (parsed.body, dict(parsed.headers)["Content-Length"], parsed.complete) == (
        body,
        str(size),
        True,
    )


def test_callers_headers_replace_defaults_of_the_same_name_and_may_repeat() -> None:
    encoder = RequestEncoder({"User-Agent": "mine/1", "X-Key": "k"})
    parsed = _wire(
        encoder,
        "GET",
        [("x-key", "override"), ("X-Tag", "a"), ("X-Tag", "b"), ("Host", "virtual.example")],
    )
    assert parsed.headers == [
        ("Host", "virtual.example"),
        ("User-Agent", "mine/1"),
        ("x-key", "override"),
        ("X-Tag", "a"),
        ("X-Tag", "b"),
    ]


def test_connection_close_from_the_caller_turns_keep_alive_off() -> None:
    encoder = RequestEncoder()
    assert encoder.encode("GET", URL_, None, None)[2] is True
    assert encoder.encode("GET", URL_, {"Connection": "Close"}, None)[2] is False


@pytest.mark.parametrize(
    ("headers", "field"),
    [
        ({"X-Evil": "a\r\nInjected: yes"}, "headers.X-Evil"),
        ({"X-Evil": "a\nb"}, "headers.X-Evil"),
        ({"X-Nul": "a\x00b"}, "headers.X-Nul"),
        ({"Bad Name": "v"}, "headers"),
        ({"X-Bad\r\n": "v"}, "headers"),
        ({"X-Uni": "snow ☃"}, "headers.X-Uni"),
        ({"Content-Length": "5"}, "headers.Content-Length"),
        ({"Transfer-Encoding": "chunked"}, "headers.Transfer-Encoding"),
        ([("only-one",)], "headers"),
        ({"X-Int": 5}, "headers.X-Int"),
    ],
)
def test_a_header_that_could_break_the_request_is_a_config_error_naming_it(
    headers: Any, field: str
) -> None:
    with pytest.raises(ConfigError) as info:
        RequestEncoder().encode("GET", URL_, headers, None)
    assert info.value.field == field


def test_bad_defaults_and_bad_methods_are_config_errors() -> None:
    for defaults in ({"X": "a\rb"}, {"Host": "h"}, {"Content-Length": "1"}):
        with pytest.raises(ConfigError):
            RequestEncoder(defaults)
    for method in ("GE T", "", "GET\r\n"):
        with pytest.raises(ConfigError) as info:
            RequestEncoder().encode(method, URL_, None, None)
        assert info.value.field == "method"


_name = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_",
    min_size=1,
    max_size=12,
)
_value = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"),
    max_size=20,
)


@given(
    pairs=st.lists(st.tuples(_name.map(lambda n: "X-" + n), _value), max_size=6),
    body=st.binary(max_size=50),
)
def test_any_legal_header_reaches_the_server_as_sent(
    pairs: list[tuple[str, str]], body: bytes
) -> None:
    parsed = _wire(RequestEncoder(), "POST", pairs, body)
    sent = [(n, v.strip(" \t")) for n, v in pairs]
    assert parsed.headers[2:-1] == sent  # after Host and User-Agent, before Content-Length
    assert (parsed.body, parsed.complete) == (body, True)


@given(
    name=_name, before=_value, after=_value, breaker=st.sampled_from(["\r", "\n", "\r\n", "\x00"])
)
def test_any_value_with_cr_lf_or_nul_is_refused(
    name: str, before: str, after: str, breaker: str
) -> None:
    with pytest.raises(ConfigError) as info:
        RequestEncoder().encode("GET", URL_, {name: before + breaker + after}, None)
    assert info.value.field == f"headers.{name}"


def test_check_request_refuses_what_the_client_would_and_sends_nothing() -> None:
    url = URL.parse("http://127.0.0.1:1/")
    check_request("POST", url, headers={"X-Fine": "yes"}, body=b"{}")
    with pytest.raises(ConfigError, match="Content-Length"):
        check_request("GET", url, headers={"Content-Length": "3"})
    with pytest.raises(ConfigError, match="Latin-1"):
        check_request("GET", url, headers={"X-A": "\u20ac"})


def test_the_same_immutable_request_is_encoded_once_and_given_again() -> None:
    encoder = RequestEncoder()
    headers = (("X-Key", "k1"),)
    first = encoder.encode("POST", URL_, headers, b"{}")
    assert encoder.encode("POST", URL_, headers, b"{}") is first  # the very same result
    other = encoder.encode("PUT", URL_, headers, b"{}")  # another method: encoded afresh
    assert other is not first
    assert other[0].startswith(b"PUT ")


def test_headers_that_can_change_are_encoded_afresh_every_time() -> None:
    encoder = RequestEncoder()
    headers = [("X-Key", "k1")]
    assert b"X-Key: k1\r\n" in encoder.encode("GET", URL_, headers, None)[0]
    headers[0] = ("X-Key", "k2")
    assert b"X-Key: k2\r\n" in encoder.encode("GET", URL_, headers, None)[0]
    # a tuple holding a list can change too
    pairs = (["X-Key", "k1"],)
    assert b"X-Key: k1\r\n" in encoder.encode("GET", URL_, pairs, None)[0]  # type: ignore[arg-type]
    pairs[0][1] = "k2"
    assert b"X-Key: k2\r\n" in encoder.encode("GET", URL_, pairs, None)[0]  # type: ignore[arg-type]


def test_large_bodies_and_requests_to_new_url_objects_are_not_kept_alive() -> None:
    encoder = RequestEncoder()
    for i in range(200):  # a fresh URL object per request, as a string URL gives
        encoder.encode("PUT", URL.parse(f"http://example.com/{i}"), None, bytes(5000))
        encoder.encode("POST", URL.parse(f"http://example.com/{i}"), None, b"{}")
    memo = encoder._memo
    assert 0 < len(memo) <= 64
    assert all(body is None or len(body) <= 4096 for _, _, _, body, _ in memo.values())  # type: ignore[arg-type]
