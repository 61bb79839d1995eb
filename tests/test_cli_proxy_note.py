"""A proxy named in the environment, which the attack never uses, is said on stderr."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pyattacker.cli import _attack, run_cli
from pyattacker.cli._proxy_note import proxy_note
from pyattacker.servers import EchoServerProcess


@pytest.mark.parametrize(
    ("environ", "urls", "named"),
    [
        ({"HTTPS_PROXY": "http://p:3128"}, ["https://api.example.com/"], "HTTPS_PROXY"),
        ({"http_proxy": "http://p:3128", "ALL_PROXY": "x"}, ["http://h/"], "HTTP_PROXY, ALL"),
        ({"HTTPS_PROXY": "p", "NO_PROXY": "other.org"}, ["http://a.example.com/"], "HTTPS"),
        ({"HTTPS_PROXY": "p"}, ["http://127.0.0.1:8080/", "http://b.example/"], "b.example"),
    ],
)
def test_a_proxy_variable_is_named_when_a_target_would_have_gone_through_it(
    environ: dict[str, str], urls: list[str], named: str
) -> None:
    note = proxy_note(urls, environ)
    assert note is not None
    assert named in note
    assert "not used" in note


@pytest.mark.parametrize(
    ("environ", "urls"),
    [
        ({}, ["https://api.example.com/"]),
        ({"HTTPS_PROXY": "p"}, ["http://127.0.0.1:8080/", "http://[::1]:8080/"]),
        ({"HTTPS_PROXY": "p"}, ["http://localhost:8080/"]),
        ({"HTTPS_PROXY": "p", "no_proxy": ".example.com"}, ["http://a.example.com/"]),
        ({"HTTPS_PROXY": "p", "NO_PROXY": "*"}, ["http://anything/"]),
        ({"HTTPS_PROXY": ""}, ["http://h/"]),
    ],
)
def test_no_note_when_no_proxy_would_have_been_used(
    environ: dict[str, str], urls: list[str]
) -> None:
    assert proxy_note(urls, environ) is None


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServerProcess]:
    with EchoServerProcess(delay="fixed:1ms") as server:
        yield server


def test_the_attack_prints_the_note_on_stderr_and_connects_directly(
    echo: EchoServerProcess, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # a proxy that would refuse
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    argv = ["attack", echo.url + "/", "--rate", "20/s", "--requests", "2", "-q"]
    echo.reset()
    assert run_cli(argv) == 0  # loopback: no note, and straight to the server
    assert "not used" not in capsys.readouterr().err
    assert echo.stats()["count"] == 2
    # what the command does with a note (the targets' hosts must stay on loopback here)
    seen: list[list[str]] = []
    monkeypatch.setattr(_attack, "proxy_note", lambda urls: seen.append(list(urls)) or "note: X")
    echo.reset()
    assert run_cli(argv) == 0
    assert "note: X" in capsys.readouterr().err
    assert seen == [[echo.url + "/"]]
    assert echo.stats()["count"] == 2
