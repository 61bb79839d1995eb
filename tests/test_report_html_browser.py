"""The HTML reports as a person sees them: each page kind from a real run, in Chromium.

For an HTTP attack (echo server), an LLM attack (mock LLM server), a run's store and a
bench sweep: the page renders with no console error, asks the network for nothing, draws
every chart, and each figure it shows equals the JSON report's (the same command wrote
both). A screenshot of each is kept under ``test-artifacts/html-reports/``.
"""

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
from pyattacker.report._html import page
from pyattacker.servers import EchoServerProcess, LlmServerProcess
from pyattacker.store import open_store, results

pytestmark = [pytest.mark.browser, pytest.mark.slow]

#: an error message that would be markup if the page ever inserted text as HTML
HOSTILE = "</script><b id=injected>bold</b>&amp;"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    yield from browser()


def _assert_a_clean_page(opened: Any, charts: int) -> dict[str, int]:
    assert opened.console == []
    assert opened.requests == [opened.url], "the page asked the network for something"
    painted = painted_pixels(opened)
    assert len(painted) >= charts
    assert all(count > 50 for count in painted.values()), painted
    return painted


def test_an_http_attack_page_draws_both_clocks_and_shows_the_json_reports_figures(
    chromium: Any, tmp_path: Path
) -> None:
    with EchoServerProcess(delay="fixed:2ms", fail="500:0.05,429:0.03") as echo:
        args = ["attack", f"{echo.url}/a", f"{echo.url}/b", "--rate", "100/s"]
        args += ["--duration", "2s", "--window", "500ms", "-q"]
        args += ["--json", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html")]
        assert cli(args) == 1  # some requests failed, on purpose
    report = json.loads((tmp_path / "r.json").read_text())
    opened = open_report(chromium, tmp_path / "r.html")
    painted = _assert_a_clean_page(opened, charts=7)
    assert {
        "Latency by percentile (HDR style)", "Offered vs achieved rate", "Status codes over time",
        "p99 latency over time by target (scheduled clock)",
    } <= set(painted)  # fmt: skip
    per_window = sum(sum(w["statuses"].values()) for w in report["windows"])
    assert per_window == sum(report["total"]["status"].values())
    assert check_values_match(opened, report, embedded(tmp_path / "r.html")["extra"]) > 60
    warnings = opened.page.locator("li.warning").all_text_contents()
    assert any("requests failed" in line for line in warnings)
    assert opened.page.locator("table").filter(has_text=f"{echo.url}/a").count() >= 1
    screenshot(opened, "attack-http")


def test_a_workers_attack_page_says_what_ran_it(chromium: Any, tmp_path: Path) -> None:
    with EchoServerProcess(delay="fixed:2ms") as echo:
        args = ["attack", f"{echo.url}/", "--rate", "100/s", "--requests", "40", "-q"]
        args += ["--workers", "2", "--html", str(tmp_path / "w.html")]
        assert cli(args) == 0
    opened = open_report(chromium, tmp_path / "w.html")
    assert opened.console == []
    shown = opened.page.locator("[data-workers]").text_content() or ""
    assert shown == "Workers: 2 processes on this machine, their figures merged."


def test_an_llm_attack_page_shows_ttft_itl_tpot_and_tokens_as_the_json_report_has_them(
    chromium: Any, tmp_path: Path
) -> None:
    server = LlmServerProcess(ttft="fixed:30ms", itl="fixed:3ms", output_tokens=12, seed=1)
    with server:
        args = ["attack", "--llm", server.url, "--model", "mock-llm", "--shape", "50:12"]
        args += ["--rate", "8/s", "--duration", "2s", "--window", "500ms", "-q"]
        args += ["--json", str(tmp_path / "l.json"), "--html", str(tmp_path / "l.html")]
        args += ["--threshold", "p99(ttft) < 2s", "--threshold", "error_rate < 1%"]
        args += ["--goodput", "ttft<500ms,e2e<10s"]
        assert cli(args) == 0  # both thresholds pass
    report = json.loads((tmp_path / "l.json").read_text())
    opened = open_report(chromium, tmp_path / "l.html")
    painted = _assert_a_clean_page(opened, charts=9)
    assert {
        "TTFT and end to end by percentile",
        "Tokens per second, in and out",
        "ITL and TPOT over time",
    } <= set(painted)
    assert check_values_match(opened, report, embedded(tmp_path / "l.html")["extra"]) > 100
    shown = {tuple(v["path"]) for v in shown_values(opened)}
    assert ("llm", "ttft_s", "sent", "p99") in shown
    assert ("llm", "tpot_s", "p50") in shown
    assert ("llm", "tokens", "completion") in shown
    assert {("thresholds", "results", 0, "value"), ("thresholds", "results", 1, "value")} <= shown
    assert {("goodput", "good"), ("goodput", "share"), ("goodput", "rate_per_s")} <= shown
    assert opened.page.locator("tr.fail").count() == 0
    screenshot(opened, "attack-llm")


_RUN_MODULE = f"""
from pyattacker import FatalError, Pool, Resource, RetryableError, TaskContext, pipeline, task

SEEN = {{}}


@task
def prepare(row: dict) -> dict:
    return row


@task("ask", resource="llm", retry={{"max_attempts": 3, "base": 0.01}})
async def ask(row: dict, ctx: TaskContext) -> dict:
    async with ctx.acquire():
        SEEN[row["id"]] = SEEN.get(row["id"], 0) + 1
        if row["id"] % 5 == 0:
            raise FatalError({HOSTILE!r})
        if row["id"] % 3 == 0 and SEEN[row["id"]] == 1:
            raise RetryableError("busy, try again")
        return {{"answer": 42}}


evaluation = pipeline("eval", prepare, ask)


def pools():
    return [Pool("llm", [Resource.create("openai", id="k1", capacity=4)])]
"""


def test_a_run_page_shows_progress_failed_items_by_key_and_no_markup_from_the_data(
    chromium: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evals.py").write_text(_RUN_MODULE)
    rows = [{"id": i, "name": f"item-{i}"} for i in range(1, 21)]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["run", "evals.py:evaluation", "--pools", "evals.py:pools", "--input", "items.jsonl"]
    assert cli([*args, "--key", "name", "--store", "eval.db"]) == 1  # 4 fail on purpose
    assert cli(["report", "eval.db", "--html", "run.html"]) == 0
    capsys.readouterr()
    assert cli(["report", "eval.db", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    opened = open_report(chromium, tmp_path / "run.html")
    _assert_a_clean_page(opened, charts=2)
    extra = embedded(tmp_path / "run.html")["extra"]
    assert check_values_match(opened, summary, extra) > 30
    with open_store(str(tmp_path / "eval.db"), read_only=True) as store:
        failed = sorted(r["key"] for r in results(store) if r["state"] != "succeeded")
    assert failed == ["item-10", "item-15", "item-20", "item-5"]
    assert sorted(item["key"] for item in extra["failed_items"]["shown"]) == failed
    page = opened.page
    assert page.locator("#injected").count() == 0  # the message stayed text
    assert page.get_by_text(HOSTILE).count() >= 1
    screenshot(opened, "run")


def test_a_bench_page_shows_each_algorithms_spread_and_the_winners_with_their_reasons(
    chromium: Any, tmp_path: Path
) -> None:
    args = ["bench", "--algorithms", "wait,immediate,backoff", "--seeds", "2", "--jobs", "200"]
    args += ["--jobs-parallel", "1", "-q"]
    args += ["--json", str(tmp_path / "b.json"), "--html", str(tmp_path / "b.html")]
    assert cli(args) == 0
    report = json.loads((tmp_path / "b.json").read_text())
    opened = open_report(chromium, tmp_path / "b.html")
    _assert_a_clean_page(opened, charts=3)
    assert check_values_match(opened, report, {}) > 200
    page = opened.page
    for metric in ("jobs_done", "throughput_rps"):
        rows = page.locator(f'table[data-metric="{metric}"] tr.winner td:first-child')
        assert sorted(rows.all_text_contents()) == sorted(report["winners"][metric])
    leader = report["paired_differences"]["jobs_done"]["leader"]
    why = page.locator("table[data-winners] tr", has_text="jobs_done").first.text_content()
    assert f"{leader} leads" in (why or "")
    shown = {tuple(v["path"]) for v in shown_values(opened)}
    assert ("aggregates", "throughput_rps", "wait", "ci95_low") in shown
    assert ("aggregates", "throughput_rps", "wait", "ci95_high") in shown
    legends = page.eval_on_selector_all(
        'figure.chart[data-chart$=" by algorithm"]',
        """figures => figures.map(f => [...f.querySelectorAll(".u-legend .u-series")]
            .filter(row => row.offsetParent !== null)
            .map(row => row.querySelector(".u-label").textContent))""",
    )
    assert legends
    for legend in legends:  # the seeds share one entry, however many there are
        assert legend == ["one run per seed", "mean"]
    screenshot(opened, "bench")


def test_the_checks_catch_a_page_that_would_reach_the_network(
    chromium: Any, tmp_path: Path
) -> None:
    # The negative control of the checks above: a page that tries to load an image from
    # the network is refused by its own policy, and the refusal reaches the console.
    text = page("run", "t", {}, {}).replace(
        "<main id=", '<img src="http://127.0.0.1:9/pixel.png"><main id='
    )
    (tmp_path / "leaky.html").write_text(text)
    opened = open_report(chromium, tmp_path / "leaky.html", drawn=False)
    said = [*opened.console, *opened.requests]
    assert any("127.0.0.1:9/pixel.png" in line for line in said), said
