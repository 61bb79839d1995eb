"""The page ``pyattacker serve`` answers on ``/``, as a person sees it in Chromium: drawn,
charts painted, no console error, no request but to its own server, no markup from the
data; and while a run is live, redrawn in place (no reload) as the store gains rows."""

from __future__ import annotations

import asyncio
import json
import queue
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from browser_helpers import Opened, browser, check_values_match, painted_pixels, screenshot
from pyattacker.report._http import RouteServer
from pyattacker.report._serve_store import StorePages
from pyattacker.store import open_store
from serve_helpers import child, fetch, finished_store, run_arguments, served

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    yield from browser()


def _open(chromium: Any, url: str) -> Opened:
    """``url/`` opened at 1280 px wide, every request recorded; requests to anything but
    ``url``'s server are aborted (and stay recorded, for the test to see)."""
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    opened = Opened(page, url)

    def on_console(message: Any) -> None:
        if message.type in ("error", "warning"):
            opened.console.append(f"{message.type}: {message.text}")

    page.on("console", on_console)
    page.on("pageerror", lambda error: opened.console.append(f"pageerror: {error}"))
    page.on("request", lambda request: opened.requests.append(request.url))
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(url) else r.abort())
    page.goto(f"{url}/", wait_until="load")
    page.wait_for_selector("body[data-rendered]", timeout=60_000)
    return opened


def _strangers(opened: Opened) -> list[str]:
    return [u for u in opened.requests if not u.startswith(opened.url + "/")]


def test_the_served_page_of_a_run_draws_its_charts_and_asks_only_the_server(
    chromium: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store, code = finished_store(tmp_path, range(1, 21))
    assert code == 1
    with served(tmp_path, store) as (url, _):
        opened = _open(chromium, url)
        opened.page.wait_for_selector("body[data-done]", timeout=60_000)
        assert opened.console == []
        assert url.startswith("http://127.0.0.1:")
        assert _strangers(opened) == []
        assert f"{url}/report.json" in opened.requests
        painted = painted_pixels(opened)
        assert len(painted) >= 2
        assert all(count > 50 for count in painted.values()), painted
        assert opened.page.locator("#injected").count() == 0  # the error stayed text
        assert opened.page.get_by_text("</script><b id=injected>").count() >= 1
        payload = json.loads(fetch(f"{url}/report.json")[2])
        assert check_values_match(opened, payload["report"], payload["extra"]) > 10
        status = opened.page.text_content("#live-status") or ""
        assert "finished" in status
        screenshot(opened, "run-served")


def _state(opened: Opened) -> dict[str, Any]:
    """What the page drew last: attempts so far, its draws, and the progress chart's pixels
    (None while the store has no attempt to chart)."""
    state: dict[str, Any] = opened.page.evaluate(
        """() => {
            const f = document.querySelector('figure.chart[data-chart="Attempts per window"]');
            return {attempts: pyattackerKit.R.attempts.total,
                    draws: Number(document.body.dataset.draws),
                    chart: f ? f.querySelector("canvas").toDataURL() : null,
                    marker: window.keptAcrossRedraws || null};
        }"""
    )
    return state


def test_a_live_runs_page_redraws_in_place_as_the_store_gains_rows_then_stops(
    chromium: Any, tmp_path: Path
) -> None:
    run = child(tmp_path, *run_arguments(tmp_path, range(1, 13), gated=True))
    try:
        while not (tmp_path / "eval.db").exists():
            assert run.poll() is None, run.communicate()
            time.sleep(0.05)
        with served(tmp_path, tmp_path / "eval.db", "--refresh", "1") as (url, _):
            opened = _open(chromium, url)
            for _ in range(600):  # drawn, then drawn again while live
                if _state(opened)["draws"] >= 2:
                    break
                opened.page.wait_for_timeout(100)
            assert opened.page.query_selector("body[data-done]") is None  # still live
            assert "live" in (opened.page.text_content("#live-status") or "")
            before = _state(opened)
            opened.page.evaluate("() => { window.keptAcrossRedraws = 'same page'; }")
            (tmp_path / "go").touch()  # the gated items go on: the store gains rows
            assert run.wait(timeout=120) == 1  # some items fail on purpose
            opened.page.wait_for_selector("body[data-done]", timeout=120_000)
            after = _state(opened)
            final = json.loads(fetch(f"{url}/report.json")[2])
            shown = check_values_match(opened, final["report"], final["extra"])
            painted = painted_pixels(opened)
            screenshot(opened, "run-served-live")
            draws = after["draws"]
            opened.page.wait_for_timeout(2500)  # two more periods: a finished page asks no more
            assert _state(opened)["draws"] == draws
    finally:
        if run.poll() is None:
            run.kill()
        run.communicate()
    assert shown > 30  # the last draw shows the final /report.json's figures
    # the gated items held k1's two leases past a heartbeat: the run recorded it
    assert max(final["extra"]["leases"]["in_use"]["llm/k1"]) == 2
    assert final["extra"]["leases"]["limit"] == {"llm/k1": 2}
    assert painted["Leases in use per resource"] > 50
    assert final["extra"]["errors_by_task"] == {"ask": {"retryable": 4, "fatal": 2}}
    assert after["marker"] == "same page"  # redrawn by the script, never reloaded
    assert after["draws"] > before["draws"]
    assert before["attempts"] < after["attempts"] == final["report"]["attempts"]["total"]
    assert after["chart"] is not None
    assert after["chart"] != before["chart"]  # the chart was drawn again with new data
    assert opened.console == []
    assert _strangers(opened) == []
    assert {u.removeprefix(url) for u in opened.requests} >= {"/", "/report.json"}


def test_an_error_answer_keeps_the_last_figures_and_the_page_asks_again(
    chromium: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store, _ = finished_store(tmp_path, range(1, 6))
    pages = StorePages(partial(open_store, str(store), read_only=True), refresh_s=1)
    calls: list[int] = []

    def flaky(query: str) -> tuple[int, str, bytes]:
        """Live, then a 500 (a store busy), then the run's final figures."""
        calls.append(len(calls) + 1)
        if len(calls) == 2:
            return 500, "text/plain; charset=utf-8", b"could not read the store\n"
        payload = json.loads(pages.report(query)[2])
        payload["live"]["done"] = len(calls) >= 3
        return 200, "application/json", json.dumps(payload).encode()

    server = RouteServer({**pages.routes, "/report.json": flaky}, blocking=True)
    urls: queue.Queue[str] = queue.Queue()
    stop = threading.Event()

    async def serve() -> None:  # on a thread of its own: Playwright holds this one's loop
        urls.put(await server.start())
        await asyncio.to_thread(stop.wait)
        await server.close()

    thread = threading.Thread(target=asyncio.run, args=(serve(),))
    thread.start()
    try:
        opened = _open(chromium, urls.get(timeout=60).rstrip("/"))
        opened.page.wait_for_selector("body[data-done]", timeout=60_000)
        draws = opened.page.get_attribute("body", "data-draws")
    finally:
        stop.set()
        thread.join(60)
    assert calls == [1, 2, 3]  # it asked again after the error, and stopped once done
    assert draws == "2"  # the error drew nothing: the first figures stayed until the third
    assert [m for m in opened.console if "500" not in m] == []  # the browser logs the 500
    assert _strangers(opened) == []
