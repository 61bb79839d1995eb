"""Open a pyattacker HTML report in headless Chromium and read it as a person would.

Debian's ``chromium`` package, driven by Playwright (no browser download: the tests use
the system's). :func:`open_report` records every console message, page error and network
request; :func:`shown_values` reads each figure the page shows with the JSON path it
claims to show; :func:`painted_pixels` counts the coloured pixels of each chart's canvas.
Screenshots go to ``test-artifacts/html-reports/`` (gitignored), printed by the tests.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

#: where the browser tests keep their screenshots (gitignored)
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts" / "html-reports"

#: what the page shows for a value the report does not have (an en dash)
NONE = "\u2013"

_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def cli(args: list[str]) -> int:
    """``pyattacker ARGS`` in-process, on a thread of its own: Playwright's sync API keeps
    an event loop running on the test's thread, and the attack refuses to nest in one."""
    from pyattacker.cli import run_cli

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run_cli, args).result()


def chromium_path() -> str | None:
    """The system Chromium (``make test`` installs Debian's where it is missing)."""
    for candidate in ("/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if Path(candidate).is_file():
            return candidate
    return shutil.which("chromium") or shutil.which("chromium-browser")


def browser() -> Iterator[Any]:
    """A headless Chromium for a module's tests; skipped only when none is installed."""
    executable = chromium_path()
    if executable is None:
        pytest.skip("no chromium on this machine (make test installs it: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class Opened:
    """A report open in a page, with everything it said and asked for."""

    page: Any
    url: str
    console: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


def open_report(chromium: Any, path: Path, *, drawn: bool = True) -> Opened:
    """``path`` opened from disk at 1280 px wide, every request routed: the file itself
    goes through, anything else is recorded and aborted. With ``drawn``, waits until the
    page's script has drawn it."""
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    opened = Opened(page, path.resolve().as_uri())

    def on_console(message: Any) -> None:
        if message.type in ("error", "warning"):
            opened.console.append(f"{message.type}: {message.text}")

    def on_route(route: Any) -> None:
        if route.request.url == opened.url:
            route.continue_()
        else:
            route.abort()

    page.on("console", on_console)
    page.on("pageerror", lambda error: opened.console.append(f"pageerror: {error}"))
    page.on("request", lambda request: opened.requests.append(request.url))
    page.route("**/*", on_route)
    page.goto(opened.url, wait_until="load")
    if drawn:
        page.wait_for_selector("body[data-rendered]", timeout=30_000)
    return opened


def embedded(path: Path) -> dict[str, Any]:
    """The payload a page embeds (its JSON element), parsed."""
    text = path.read_text(encoding="utf-8")
    found = re.search(
        r'<script type="application/json" id="report-data">(.*?)</script>', text, re.S
    )
    assert found is not None, "the page embeds no report"
    payload: dict[str, Any] = json.loads(found.group(1))
    return payload


def shown_values(opened: Opened) -> list[dict[str, Any]]:
    """Every element that shows a report value: its JSON path, raw value, scale and text."""
    values: list[dict[str, Any]] = opened.page.eval_on_selector_all(
        "[data-scale]",
        """nodes => nodes.map(n => ({path: JSON.parse(n.dataset.path),
            value: JSON.parse(n.dataset.value), scale: Number(n.dataset.scale),
            zero: n.dataset.zero === "true", text: n.textContent}))""",
    )
    return values


def lookup(report: Mapping[str, Any], extra: Mapping[str, Any], path: list[Any]) -> Any:
    """The value at ``path`` (``["extra", ...]`` reads the page's extras); missing: None."""
    value: Any = extra if path[0] == "extra" else report
    for key in path[1:] if path[0] == "extra" else path:
        if isinstance(value, list):
            value = value[key]
        elif isinstance(value, Mapping):
            value = value.get(str(key))
        if value is None:
            return None
    return value


def assert_shows(value: Any, scale: float, text: str, *, zero: bool = False) -> None:
    """``text`` is ``value`` times ``scale``, rounded to the decimals it shows; for none, an
    en dash, or 0 where the report leaves zero counts out (``zero``)."""
    if value is None:
        assert text == ("0" if zero else NONE)
        return
    number = re.search(r"-?[\d,]+(?:\.(\d+))?", text)
    assert number is not None, text
    decimals = len(number.group(1) or "")
    shown = float(number.group(0).replace(",", ""))
    assert abs(shown - value * scale) <= 0.5 * 10**-decimals * (1 + 1e-9) + 1e-9, (text, value)


def check_values_match(opened: Opened, report: Mapping[str, Any], extra: Mapping[str, Any]) -> int:
    """Assert each shown value equals the JSON report's at its path; return how many."""
    values = shown_values(opened)
    for item in values:
        expected = lookup(report, extra, item["path"])
        assert item["value"] == expected, item["path"]
        assert_shows(expected, item["scale"], item["text"], zero=item["zero"])
    return len(values)


def painted_pixels(opened: Opened) -> dict[str, int]:
    """Per chart (by title), the canvas pixels painted in colour: series, not the grey
    grid and black axes uPlot also draws."""
    counts: dict[str, int] = opened.page.eval_on_selector_all(
        "figure.chart",
        """figures => Object.fromEntries(figures.map(f => {
            const c = f.querySelector("canvas");
            const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
            let n = 0;
            for (let i = 0; i < d.length; i += 4) {
                const [r, g, b, a] = [d[i], d[i + 1], d[i + 2], d[i + 3]];
                if (a > 0 && Math.max(r, g, b) - Math.min(r, g, b) > 40) n++;
            }
            return [f.dataset.chart, n];
        }))""",
    )
    return counts


def screenshot(opened: Opened, name: str) -> Path:
    """A full-page screenshot kept as a test artifact; its path is printed."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    target = ARTIFACTS / f"{name}.png"
    opened.page.screenshot(path=str(target), full_page=True)
    print(f"screenshot: {target}")
    return target
