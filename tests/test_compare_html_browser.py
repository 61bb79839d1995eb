"""``pyattacker compare --html`` as a person sees it, in Chromium, from real reports.

Two attacks by the real engine on virtual time (a server holding each request 2 ms, then
6 ms, at the median: ``simulated_reports``, so a busy machine cannot blur the difference)
and two bench sweeps are compared with ``--json`` and ``--html``: the page renders with no console
error, asks the network for nothing, paints its charts, shows every figure as the compare
JSON has it, and marks exactly the JSON's regressions. A screenshot is kept under
``test-artifacts/html-reports/compare.png``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from browser_helpers import (
    NONE,
    browser,
    check_values_match,
    cli,
    embedded,
    open_report,
    painted_pixels,
    screenshot,
)
from simulated_reports import simulated_attack_report

pytestmark = [pytest.mark.browser, pytest.mark.slow]

_VERDICTS = {(None, None): "n/a", (False, None): "noise", (True, True): "regression",
             (True, False): "improvement"}  # fmt: skip


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    yield from browser()


def _simulated(median_s: float, seed: int, path: Path) -> Path:
    """``simulated_attack_report`` on a thread of its own: Playwright keeps an event loop
    running on this one, and the virtual loop will not start inside another."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(simulated_attack_report, median_s, seed, path).result()


def _compare(a: Path, b: Path, where: Path) -> tuple[dict[str, Any], Path]:
    out, html = where / "compare.json", where / "compare.html"
    argv = ["compare", str(a), str(b), "--json", str(out), "--html", str(html)]
    assert cli(argv) == 0
    return json.loads(out.read_text()), html


def _assert_the_page_is_the_comparison(opened: Any, data: dict[str, Any], html: Path) -> None:
    """No console error, no request, charts painted, each value as in the JSON, each
    verdict the row's, and the marked rows exactly the JSON's regressions."""
    assert opened.console == []
    assert opened.requests == [opened.url], "the page asked the network for something"
    painted = painted_pixels(opened)
    assert painted
    assert all(count > 50 for count in painted.values()), painted
    payload = embedded(html)
    assert payload["report"] == data  # the page's JSON report is the --json document
    assert check_values_match(opened, data, payload["extra"]) >= 3 * len(data["rows"])
    page = opened.page
    verdicts = page.locator("table[data-figures] td.verdict").evaluate_all(
        "cells => cells.map(c => c.dataset.verdict)"
    )
    assert verdicts == [_VERDICTS[(r["significant"], r["worse"])] for r in data["rows"]]
    marked = page.locator("table[data-figures] tr.regression td:first-child")
    assert marked.all_text_contents() == data["regressions"]
    percents = page.locator("[data-derived]").evaluate_all(
        "cells => cells.map(c => [c.dataset.derived, c.textContent])"
    )
    for row, (derived, text) in zip(data["rows"], percents, strict=True):
        if row["change"] is None or not row["a"]:
            assert text == NONE
        else:
            assert float(derived) == pytest.approx(row["change"] / row["a"] * 100)
            assert text == f"{float(derived):+.1f}%"


def test_a_slower_server_shows_as_marked_regressions_in_the_compare_page(
    chromium: Any, tmp_path: Path
) -> None:
    fast = _simulated(0.002, 1, tmp_path / "fast.json")
    slow = _simulated(0.006, 2, tmp_path / "slow.json")
    data, html = _compare(fast, slow, tmp_path)
    latency = {f"{s}({n})" for s in ("mean", "p50") for n in ("latency", "service_time")}
    assert latency <= set(data["regressions"]), data["regressions"]
    opened = open_report(chromium, html)
    _assert_the_page_is_the_comparison(opened, data, html)
    painted = painted_pixels(opened)
    assert "Latency by percentile, A vs B (scheduled clock)" in painted
    runs = opened.page.locator("table[data-runs]").text_content() or ""
    assert str(fast) in runs
    assert str(slow) in runs
    screenshot(opened, "compare")


def test_two_bench_sweeps_compare_in_a_page_with_a_chart_per_metric(
    chromium: Any, tmp_path: Path
) -> None:
    small = ["bench", "--algorithms", "wait,immediate", "--seeds", "2", "--jobs", "40"]
    small += ["--horizon", "30", "--jobs-parallel", "1", "-q"]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert cli([*small, "--concurrency", "4", "--json", str(a)]) == 0
    assert cli([*small, "--concurrency", "2", "--json", str(b)]) == 0
    data, html = _compare(a, b, tmp_path)
    assert data["kind"] == "bench"
    opened = open_report(chromium, html)
    _assert_the_page_is_the_comparison(opened, data, html)
    assert "jobs_done: A vs B by algorithm" in painted_pixels(opened)
    legends = opened.page.eval_on_selector_all(
        'figure.chart[data-chart$="A vs B by algorithm"]',
        """figures => figures.map(f => [...f.querySelectorAll(".u-legend .u-series")]
            .filter(row => row.offsetParent !== null)
            .map(row => row.querySelector(".u-label").textContent))""",
    )
    assert legends
    for legend in legends:  # one entry per algorithm, however many seeds
        assert legend == ["wait", "immediate"]
    screenshot(opened, "compare-bench")
