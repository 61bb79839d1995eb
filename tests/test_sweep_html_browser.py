"""The sweep page (``attack --sweep --html``) in headless Chromium: a row per level with the
JSON report's figures, every figure charted against the level, nothing from the network;
and an LLM attack page that leads with its headline and says what the warmup left out."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_helpers import (
    browser,
    check_values_match,
    cli,
    embedded,
    open_report,
    painted_pixels,
    screenshot,
    shown_values,
)
from pyattacker.servers import LlmServerProcess

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    yield from browser()


def test_a_sweep_page_shows_a_row_per_level_and_charts_each_figure_against_the_level(
    chromium: Any, tmp_path: Path
) -> None:
    with LlmServerProcess(ttft="fixed:20ms", itl="fixed:2ms", output_tokens=6, seed=1) as server:
        args = ["attack", "--llm", server.url, "--model", "mock-llm", "--shape", "20:6"]
        args += ["--sweep", "concurrency=1,4,8", "--duration", "1s", "--warmup", "0.2s", "-q"]
        args += ["--json", str(tmp_path / "s.json"), "--html", str(tmp_path / "s.html")]
        assert cli(args) == 0
        served = server.stats()["requests"]
    report = json.loads((tmp_path / "s.json").read_text())
    opened = open_report(chromium, tmp_path / "s.html")
    assert opened.console == []
    assert opened.requests == [opened.url], "the page asked the network for something"
    painted = painted_pixels(opened)
    assert {"Throughput", "Time to first token", "End to end", "Output tokens per second"} <= set(
        painted
    )
    assert all(painted[t] > 50 for t in ("Throughput", "Time to first token", "End to end"))
    assert check_values_match(opened, report, embedded(tmp_path / "s.html")["extra"]) >= 3 * 16
    rows = opened.page.locator("[data-sweep-table] tbody tr").all_text_contents()
    assert [r.split("concurrency")[1][:2].strip() for r in rows] == ["1", "4", "8"]
    shown = {tuple(v["path"]) for v in shown_values(opened)}
    assert ("rows", 2, "ttft_p99_s") in shown
    verdict = opened.page.locator("[data-saturation]").text_content() or ""
    assert verdict.startswith("Saturates at:")
    reason = report["sweep"]["saturation_reason"]
    assert reason is None or f"({reason})" in verdict
    # the warmups of every level, in all, and the level of the highest output
    page = opened.page.locator("body").text_content() or ""
    warm = [row["warmup"] for row in report["rows"]]
    measured = sum(row["requests"] for row in report["rows"])
    assert sum(w["sent_attempts"] for w in warm) + measured == served
    assert f"attempts for {sum(w['sent'] for w in warm):,} requests over 3 levels" in page
    assert "Highest output: " in page
    screenshot(opened, "attack-sweep")


def test_an_llm_attack_page_leads_with_the_headline_and_says_what_the_warmup_left_out(
    chromium: Any, tmp_path: Path
) -> None:
    with LlmServerProcess(ttft="fixed:20ms", itl="fixed:2ms", output_tokens=6, seed=1) as server:
        args = ["attack", "--llm", server.url, "--model", "mock-llm", "--shape", "20:6"]
        args += ["--rate", "20/s", "--duration", "1.5s", "--warmup", "0.5s", "-q"]
        args += ["--json", str(tmp_path / "l.json"), "--html", str(tmp_path / "l.html")]
        assert cli(args) == 0
        served = server.stats()["requests"]
    report = json.loads((tmp_path / "l.json").read_text())
    assert report["warmup"]["sent_attempts"] + report["total"]["sent_attempts"] == served
    opened = open_report(chromium, tmp_path / "l.html")
    assert opened.console == []
    check_values_match(opened, report, embedded(tmp_path / "l.html")["extra"])
    shown = {tuple(v["path"]) for v in shown_values(opened)}
    assert {("headline", "output_tokens_per_s"), ("headline", "ttft_p99_s")} <= shown
    warm = opened.page.locator("[data-warmup]").text_content() or ""
    assert f"Warmup: {report['warmup']['scheduled']} requests in the first 0.5 s" in warm
    screenshot(opened, "attack-llm-headline-warmup")
