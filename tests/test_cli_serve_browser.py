"""The page ``pyattacker serve`` answers on ``/``, as a person sees it in Chromium: drawn,
charts painted, no console error, no request but the page's own, no markup from the data."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_helpers import Opened, browser, painted_pixels, screenshot
from serve_helpers import finished_store, served

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    yield from browser()


def _open(chromium: Any, url: str) -> Opened:
    """``url`` opened at 1280 px wide, every request recorded; only ``url`` goes through."""
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    opened = Opened(page, url)

    def on_console(message: Any) -> None:
        if message.type in ("error", "warning"):
            opened.console.append(f"{message.type}: {message.text}")

    page.on("console", on_console)
    page.on("pageerror", lambda error: opened.console.append(f"pageerror: {error}"))
    page.on("request", lambda request: opened.requests.append(request.url))
    page.route("**/*", lambda r: r.continue_() if r.request.url == url else r.abort())
    page.goto(url, wait_until="load")
    page.wait_for_selector("body[data-rendered]", timeout=30_000)
    return opened


def test_the_served_page_of_a_run_draws_its_charts_and_asks_only_the_server(
    chromium: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store, code = finished_store(tmp_path, range(1, 21))
    assert code == 1
    with served(tmp_path, store) as (url, _):
        opened = _open(chromium, f"{url}/")
        assert opened.console == []
        assert opened.requests == [f"{url}/"]
        painted = painted_pixels(opened)
        assert len(painted) >= 2
        assert all(count > 50 for count in painted.values()), painted
        assert opened.page.locator("#injected").count() == 0  # the error stayed text
        assert opened.page.get_by_text("</script><b id=injected>").count() >= 1
        screenshot(opened, "run-served")
