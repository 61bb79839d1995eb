"""A scenario's attack page in Chromium: the flows section shows the JSON report's figures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_helpers import browser, check_values_match, cli, embedded, open_report
from pyattacker.servers import EchoServerProcess

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    yield from browser()


def test_a_flows_page_shows_the_flows_and_each_step_as_the_json_report_has_them(
    chromium: Any, tmp_path: Path
) -> None:
    example = ROOT / "examples" / "flows.py"
    with EchoServerProcess(delay="fixed:2ms") as echo:
        args = ["attack", echo.url, "--scenario", f"{example}:checkout", "--rate", "20/s"]
        args += ["--requests", "10", "-q"]
        args += ["--json", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html")]
        assert cli(args) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    opened = open_report(chromium, tmp_path / "r.html")
    assert opened.console == []
    assert check_values_match(opened, report, embedded(tmp_path / "r.html")["extra"]) > 40
    shown = {json.dumps(path) for path in _paths(opened)}
    assert json.dumps(["flows", "completed"]) in shown
    assert json.dumps(["flows", "duration_s", "p99"]) in shown
    assert opened.page.locator("h2", has_text="Flows").count() == 1
    assert opened.page.locator("table").filter(has_text="add to cart").count() >= 1


def _paths(opened: Any) -> list[list[Any]]:
    nodes = opened.page.locator("[data-path]").evaluate_all(
        "nodes => nodes.map(n => n.getAttribute('data-path'))"
    )
    return [json.loads(text) for text in nodes]
