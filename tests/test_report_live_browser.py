"""The live pages of ``attack --serve`` as a person sees them, in Chromium, while a real
attack runs: the whole report page (``/``) and the light progress page (``/progress``) draw
every chart, redraw until the attack ends, log no console error, and ask nothing of anyone
but their own server. Screenshots are kept under ``test-artifacts/``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_helpers import Opened, browser, check_values_match, painted_pixels, screenshot
from live_helpers import served_attack
from pyattacker.servers import EchoServerProcess

pytestmark = [pytest.mark.browser, pytest.mark.slow]

#: a target URL part that would be markup if the page ever inserted text as HTML
HOSTILE = "/a?q=</script><b%20id=injected>bold</b>"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    yield from browser()


def open_live(chromium: Any, url: str, path: str = "") -> Opened:
    """``url + path`` in a page whose requests to anything but ``url``'s server are
    recorded and aborted."""
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
    page.goto(url + path, wait_until="load")
    return opened


def test_the_live_page_draws_the_attack_as_it_runs_and_asks_only_its_server(
    chromium: Any, tmp_path: Path
) -> None:
    with EchoServerProcess(delay="fixed:2ms", fail="500:0.1") as echo:
        target = echo.url + HOSTILE
        with served_attack(target, tmp_path, "--rate", "50/s", "--duration", "4s") as served:
            opened = open_live(chromium, served.url, "progress")
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
    assert {u.removeprefix(served.url) for u in opened.requests} >= {"progress", "progress.json"}
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


def wait_for_windows(opened: Opened, windows: int) -> None:
    """Until the page has drawn a report of ``windows`` windows (polled from here: the
    page's CSP forbids the string evaluation ``wait_for_function`` needs)."""
    check = "document.body.dataset.draws ? pyattackerKit.payload.report.windows.length : 0"
    for _ in range(600):
        if opened.page.evaluate(check) >= windows:
            return
        opened.page.wait_for_timeout(100)
    raise AssertionError(f"the page never drew {windows} windows")


def shown_now(opened: Opened) -> tuple[dict[str, Any], int]:
    """The payload the page drew last (fetched again, as the page would, between two
    draws) and how many values it shows equal to it: the draw count is read before and
    after, so a redraw in between makes it try again."""
    for _ in range(20):
        draws = opened.page.get_attribute("body", "data-draws")
        payload = opened.page.evaluate("pyattackerKit.payload")
        count = check_values_match(opened, payload["report"], payload["extra"])
        if opened.page.get_attribute("body", "data-draws") == draws:
            return payload, count
    raise AssertionError("the page never held still between two draws")


def test_the_live_report_page_draws_the_whole_report_while_it_runs_and_at_the_end(
    chromium: Any, tmp_path: Path
) -> None:
    with EchoServerProcess(delay="fixed:2ms", fail="500:0.1") as echo:
        target = echo.url + HOSTILE
        flags = ("--rate", "50/s", "--duration", "8s")
        with served_attack(target, tmp_path, *flags) as served:
            opened = open_live(chromium, served.url)
            # a draw with a few windows, so each time series has a line to paint
            wait_for_windows(opened, 3)
            live = opened.page.query_selector("body[data-done]") is None
            live_status = opened.page.text_content("#live-status")
            live_painted = painted_pixels(opened)
            live_payload, live_shown = shown_now(opened)
            screenshot(opened, "live-report-running")
            opened.page.wait_for_selector("body[data-done]", timeout=120_000)
            report = served.wait_for_report()
            final_status = opened.page.text_content("#live-status")
            final_payload, final_shown = shown_now(opened)
            final_painted = painted_pixels(opened)
            injected = opened.page.query_selector("#injected")
            screenshot(opened, "live-report-finished")
    assert opened.console == []
    strangers = [u for u in opened.requests if not u.startswith(served.url)]
    assert strangers == []
    assert {u.removeprefix(served.url) for u in opened.requests} >= {"", "report.json"}
    assert live, "the first draw came after the attack had ended"
    assert live_status == "live \u2014 updated every 2 s"
    assert live_payload["live"]["done"] is False
    assert live_shown > 20
    assert "Latency percentiles over time, both clocks" in live_painted
    assert all(count > 0 for count in live_painted.values()), live_painted
    assert final_status is not None
    assert final_status.startswith("finished")
    assert final_payload["report"] == report
    assert final_shown >= live_shown
    assert set(final_painted) >= set(live_painted)
    assert sum(count > 50 for count in final_painted.values()) >= 4, final_painted
    assert injected is None
