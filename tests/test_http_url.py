"""URL parsing (strict, with ConfigError naming the field) and the small value types."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.errors import ConfigError
from pyattacker.http import URL, Headers, Timeouts


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("http://127.0.0.1:8080/v1/x?y=1&z", ("http", "127.0.0.1", 8080, "/v1/x?y=1&z")),
        ("HTTPS://Example.COM", ("https", "example.com", 443, "/")),
        ("http://example.com?q", ("http", "example.com", 80, "/?q")),
        ("http://[::1]:9/a#fragment", ("http", "::1", 9, "/a")),
        ("https://h.example:443/%20space", ("https", "h.example", 443, "/%20space")),
    ],
)
def test_a_url_parses_into_scheme_host_port_and_target(
    text: str, parts: tuple[str, str, int, str]
) -> None:
    url = URL.parse(text)
    assert (url.scheme, url.host, url.port, url.target) == parts
    assert url.origin == parts[:3]


@pytest.mark.parametrize(
    "text",
    [
        "127.0.0.1:8080/x",  # no scheme
        "ftp://example.com/",
        "http:///path",  # no host
        "http://example.com:99999/",
        "http://example.com:0/",
        "http://example.com:port/",
        "http://exa mple.com/",
        "http://example.com/a b",
        "http://example.com/\r\nX: 1",
        "http://user:secret@example.com/",
        "http://[::zz]/",
        "http://exämple.com/",
        "",
    ],
)
def test_an_unusable_url_is_a_config_error_naming_the_field_with_a_hint(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        URL.parse(text, field="targets.0")
    assert info.value.field == "targets.0"
    assert info.value.hint
    assert "secret" not in str(info.value)  # credentials are never echoed


def test_a_non_string_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        URL.parse(b"http://x/")  # type: ignore[arg-type]


_label = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8)
_segment = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-._~%", max_size=8)


@given(
    scheme=st.sampled_from(["http", "https"]),
    host=st.lists(_label, min_size=1, max_size=3).map(".".join),
    port=st.one_of(st.none(), st.integers(1, 65535)),
    path=st.lists(_segment, max_size=4).map(lambda parts: "".join("/" + p for p in parts)),
    query=st.one_of(st.none(), st.text(alphabet="abc=&%0123", min_size=1, max_size=10)),
)
def test_str_of_a_parsed_url_gives_the_url_back(
    scheme: str, host: str, port: int | None, path: str, query: str | None
) -> None:
    authority = host if port is None else f"{host}:{port}"
    text = f"{scheme}://{authority}{path}{'' if query is None else '?' + query}"
    url = URL.parse(text)
    default = {"http": 80, "https": 443}[scheme]
    expected_port = "" if port in (None, default) else f":{port}"
    expected = (
        f"{scheme}://{host}{expected_port}{path or '/'}{'' if query is None else '?' + query}"
    )
    assert str(url) == expected
    assert URL.parse(str(url)) == url


def test_join_keeps_the_origin_and_refuses_what_is_not_a_path() -> None:
    base = URL.parse("http://[::1]:8080/a")
    joined = base.join("/v1/models?x=1")
    assert (joined.origin, joined.target, str(joined)) == (
        base.origin,
        "/v1/models?x=1",
        "http://[::1]:8080/v1/models?x=1",
    )
    assert joined.authority == "[::1]:8080"
    for bad in ("relative", "/with space", "//\n"):
        with pytest.raises(ConfigError) as info:
            base.join(bad)
        assert info.value.field == "target"


def test_timeouts_accept_positive_seconds_or_none_and_name_a_bad_field() -> None:
    assert Timeouts() == Timeouts(connect=10.0, read=30.0, total=None)
    assert Timeouts(connect=None, read=1, total=2.5).read == 1.0
    for field, value in (
        ("connect", 0),
        ("read", -1.0),
        ("total", float("nan")),
        ("read", "5"),
        ("connect", True),
    ):
        with pytest.raises(ConfigError) as info:
            Timeouts(**{field: value})  # type: ignore[arg-type]
        assert info.value.field == f"timeouts.{field}"


def test_headers_are_case_insensitive_and_keep_order_and_repeats() -> None:
    headers = Headers.from_pairs([("Set-Cookie", "a=1"), ("X-Id", "7"), ("set-cookie", "b=2")])
    assert headers.get("SET-COOKIE") == "a=1"
    assert headers.get_all("set-cookie") == ["a=1", "b=2"]
    assert headers.get("missing") is None
    assert headers.get("missing", "d") == "d"
    assert "x-id" in headers
    assert "nope" not in headers
    assert 3 not in headers
    assert headers.items() == [("Set-Cookie", "a=1"), ("X-Id", "7"), ("set-cookie", "b=2")]
    assert list(headers) == ["Set-Cookie", "X-Id", "set-cookie"]
    assert len(headers) == 3
    assert headers == Headers.from_pairs(headers.items())
    assert "X-Id" in repr(headers)


def test_pyattacker_http_exports_exactly_the_public_names_in_sorted_order() -> None:
    import pyattacker.http

    names = [
        "HEAD_SIZE_RANGE",
        "KEEP_BODY_RANGE",
        "URL",
        "Headers",
        "HttpClient",
        "Limits",
        "Resolve",
        "Response",
        "Timeouts",
        "Timing",
        "TlsOptions",
        "Waiter",
        "check_request",
        "connect_map",
        "parse_size",
    ]
    assert pyattacker.http.__all__ == names
    assert sorted(names, key=lambda n: (not n.isupper(), n)) == names  # ruff's RUF022 order
    assert all(hasattr(pyattacker.http, name) for name in names)
