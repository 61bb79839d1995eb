"""The live page of ``attack --serve`` as a person sees it, in Chromium, while a real attack
runs: it draws every chart, redraws until the attack ends, logs no console error, and asks
nothing of anyone but its own server. A screenshot is kept under ``test-artifacts/``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_helpers import Opened, browser, painted_pixels, screenshot
from live_helpers import served_attack
from pyattacker.servers import EchoServerProcess

pytestmark = [pytest.mark.browser, pytest.mark.slow]

#: a target URL part that would be markup if the page ever inserted text as HTML
HOSTILE = "/a?q=</script><b%20id=injected>bold</b>"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    yield from browser()


def open_live(chromium: Any, url: str) -> Opened:
    """``url`` in a page whose requests to anything but ``url``'s server are recorded and
    aborted."""
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    opened = Opened(page, url)

    def on_route(route: Any) -> None:
        if route.request.url.startswith(url):
            route.continue_()
        else:
            route.abort()

    def on_console(message: Any) -> None:
        if message.type in ("error", "warning"):
            opened.console.append(f"{message.type}: {message.text}")

    page.on("console", on_console)
    page.on("pageerror", lambda error: opened.console.append(f"pageerror: {error}"))
    page.on("request", lambda request: opened.requests.append(request.url))
    page.route("**/*", on_route)
    page.goto(url, wait_until="load")
    return opened


def test_the_live_page_draws_the_attack_as_it_runs_and_asks_only_its_server(
    chromium: Any, tmp_path: Path
) -> None:
    with EchoServerProcess(delay="fixed:2ms", fail="500:0.1") as echo:
        target = echo.url + HOSTILE
        with served_attack(target, tmp_path, "--rate", "50/s", "--duration", "4s") as served:
            opened = open_live(chromium, served.url)
            opened.page.wait_for_selector("body[data-rendered]", timeout=60_000)
            assert opened.page.query_selector("body[data-done]") is None  # drawn while live
            opened.page.wait_for_selector("body[data-done]", timeout=120_000)
            report = served.wait_for_report()
            status = opened.page.text_content("#status")
            shown_targets = opened.page.text_content("#targets")
            injected = opened.page.query_selector("#injected")
            painted = painted_pixels(opened)
            screenshot(opened, "live-attack")
            progress = json.loads(served.get("/progress.json")[2])
    assert opened.console == []
    assert opened.requests, "the page asked for nothing"
    strangers = [u for u in opened.requests if not u.startswith(served.url)]
    assert strangers == []
    assert {u.removeprefix(served.url) for u in opened.requests} >= {"", "progress.json"}
    assert set(painted) == {
        "Finished requests per second",
        "In flight",
        "Latency so far, both clocks (ms)",
        "Failed, throttled and dropped requests (cumulative)",
    }
    assert all(count > 50 for count in painted.values()), painted
    assert status is not None
    assert status.startswith("Attack finished")
    assert f"{report['total']['requests']:,} requests finished" in status
    assert injected is None
    assert shown_targets == "Targets: " + ", ".join(progress["targets"])
