"""The HTML reports without a browser: the embedded data, the warnings, the run timeline,
the package data and the ``--html`` option's refusals (the browser tests are in
``test_report_html_browser.py``)."""

from __future__ import annotations

import json
import math
import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.cli import run_cli
from pyattacker.report import attack_html
from pyattacker.report._html import bench_notes, embeddable, machine, page
from pyattacker.report._html_run import MAX_WINDOWS, Attempt, Finished, timeline, window_width
from pyattacker.report._html_words import SHORT_RATE, attack_warnings

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_embedded_json_parses_back_to_the_same_value_and_holds_no_markup_characters(
    value: Any,
) -> None:
    text = embeddable(json.dumps(value))
    assert not set(text) & {"<", ">", "&", "\u2028", "\u2029"}
    assert json.loads(text) == value


def test_a_page_holds_exactly_its_three_scripts_and_asks_the_network_for_nothing() -> None:
    html = page("attack", "t", {"errors": [{"key": "</script><script>alert(1)</script>"}]}, {})
    assert html.count("</script>") == 3  # the data, uPlot, the page's own script
    assert "alert(1)</script>" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "default-src 'none'" in html  # and the browser is told to refuse any load


def test_the_charting_library_and_its_licence_ship_as_package_data() -> None:
    assets = resources.files("pyattacker.report") / "assets"
    names = {"uPlot.iife.min.js", "uPlot.min.css", "uPlot.LICENSE", "page_kit.js", "page.css"}
    names |= {"page_attack.js", "page_run.js", "page_bench.js", "page_compare.js"}
    assert names <= {item.name for item in assets.iterdir()}
    assert "MIT License" in (assets / "uPlot.LICENSE").read_text(encoding="utf-8")
    pyproject = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()
    assert '"report/assets/*"' in pyproject


def test_the_machine_is_described_by_name_os_cores_and_versions() -> None:
    described = machine()
    assert set(described) == {"host", "os", "cpu", "cores", "cores_usable", "python", "pyattacker"}


def _report(totals: dict[str, Any] | None = None, **summary: Any) -> dict[str, Any]:
    """The least of an attack report the warnings read: a clean run unless told."""
    base = {
        "late": 0, "scheduled": 100, "late_after_s": 0.01, "dropped": 0, "planned_rate": 10.0,
        "achieved_rate": 10.0, "stop_reason": None,
        "loop_lag_s": {"count": 5, "p99": 0.001},
    }  # fmt: skip
    total = {
        "requests": 100, "outcomes": {"ok": 100}, "error_classes": {}, "early_sends": 0,
        "throttled_requests": 0, "throttled_attempts": 0,
    }  # fmt: skip
    return {
        "summary": {**base, **summary},
        "total": {**total, **(totals or {})},
        "plan": {"load": {"max_in_flight": 50}},
    }


def _timed(sent_p50: float, dispatch_p99: float) -> dict[str, Any]:
    """The figures the delay warnings weigh: the sent clock's median, the dispatch p99."""
    return {
        "latency_s": {"sent": {"count": 100, "p50": sent_p50}},
        "dispatch_delay_s": {"count": 100, "p99": dispatch_p99},
    }


def test_a_clean_attack_has_no_warnings() -> None:
    assert attack_warnings(_report()) == []


def test_a_generator_that_fell_behind_is_said_in_words_with_its_figures() -> None:
    (line,) = attack_warnings(_report(_timed(0.02, 0.015), late=7))
    assert line.startswith("The load generator fell behind: 7 of 100 requests were sent more")
    assert "10 ms after" in line
    assert "dispatch delay p99 15.00 ms" in line


def test_late_sends_are_not_a_warning_while_the_dispatch_delay_is_small_against_latency() -> None:
    # 7 sends past 10 ms, but the dispatch p99 (15 ms) is under a tenth of a 200 ms median.
    assert attack_warnings(_report(_timed(0.2, 0.015), late=7)) == []
    # and under the plan's late_after floor, whatever the latency
    assert attack_warnings(_report(_timed(0.001, 0.0099), late=7)) == []


def test_the_loop_lag_warning_weighs_the_lag_against_the_median_latency() -> None:
    lag = {"count": 500, "p99": 0.008}
    assert attack_warnings(_report(_timed(0.2, 0.0), loop_lag_s=lag)) == []
    (line,) = attack_warnings(_report(_timed(0.03, 0.0), loop_lag_s=lag))
    assert line.startswith("The generator itself fell behind (loop lag p99 8.00 ms")
    assert "median latency of 30.00 ms" in line
    assert "upper percentiles include our own delay" in line


def test_the_rate_warning_starts_just_below_its_share_of_the_plan() -> None:
    assert attack_warnings(_report(achieved_rate=10.0 * SHORT_RATE)) == []
    (line,) = attack_warnings(_report(achieved_rate=10.0 * SHORT_RATE - 0.01))
    assert "fell short of the planned 10.0/s" in line


def test_a_scenarios_rates_are_not_compared_flows_against_requests() -> None:
    # 5 flows/s planned, 15 steps/s sent: a flow of three steps, not a shortfall or a gain
    flows = {**_report(planned_rate=5.0, achieved_rate=3.0), "flows": {"started": 10}}
    assert attack_warnings(flows) == []


def test_failures_and_throttles_are_counted_with_their_share() -> None:
    report = _report()
    report["total"].update(
        outcomes={"ok": 90, "failed": 6, "throttled": 4},
        error_classes={"upstream": 6, "rate_limit": 4},
        throttled_requests=5,
        throttled_attempts=9,
    )
    failed, throttled = attack_warnings(report)
    assert failed == "6 of 100 requests failed (6.0%); by class: upstream 6, rate_limit 4."
    assert throttled.startswith("4 of 100 requests ended throttled (4.0%); 5 were throttled")


def test_an_attack_page_embeds_its_report_and_warnings_unchanged() -> None:
    report = _report(late=3)
    html = attack_html(report, machine_info={"host": "h"})
    found = re.search(r'id="report-data">(.*?)</script>', html, re.S)
    assert found is not None
    payload = json.loads(found.group(1))
    assert payload["report"] == report
    assert payload["extra"] == {"warnings": attack_warnings(report), "machine": {"host": "h"}}


@given(st.floats(min_value=0, max_value=1e7))
def test_a_timeline_never_has_more_windows_than_its_cap(span: float) -> None:
    width = window_width(span)
    assert span / width <= MAX_WINDOWS
    mantissa = width / 10 ** math.floor(math.log10(width) + 1e-9)
    assert any(math.isclose(mantissa, m) for m in (1, 2, 5, 10))


def test_a_timeline_counts_each_attempt_and_finished_pipeline_once() -> None:
    attempts: list[Attempt] = [
        (100.0, "ok", None, False),
        (100.4, "failed", 0.5, True),  # throttled, and retried after 0.5 s
        (101.2, "ok", None, False),
    ]
    finished: list[Finished] = [(100.5, "succeeded"), (101.3, "failed")]
    drawn = timeline(lambda: iter(attempts), lambda: iter(finished))
    windows = drawn["windows"]
    assert drawn["start"] == 100.0
    assert sum(w["ok"] for w in windows) == 2
    assert sum(w["failed"] for w in windows) == 1
    assert sum(w["retries"] for w in windows) == 1
    assert sum(w["throttled"] for w in windows) == 1
    assert sum(w["succeeded"] for w in windows) == 1
    assert sum(w["pipelines_failed"] for w in windows) == 1


def test_an_empty_store_has_an_empty_timeline() -> None:
    assert timeline(lambda: iter(()), lambda: iter(())) == {
        "start": None,
        "width_s": None,
        "windows": [],
    }


def test_the_bench_notes_are_the_lines_under_its_table() -> None:
    table = "metric  a  best\nrow     1  a\n\n* ranked only among ...\nbest: the leader ...\n"
    assert bench_notes(table) == ["* ranked only among ...", "best: the leader ..."]


@pytest.mark.parametrize(
    "command",
    [
        ["attack", "http://127.0.0.1:9/", "--rate", "1/s", "--duration", "1s"],
        ["bench", "--seeds", "1"],
        ["report", "missing.db"],
    ],
)
@pytest.mark.parametrize(("html", "says"), [("-", "needs a file"), ("no/such/x.html", "folder")])
def test_an_html_path_that_cannot_be_written_exits_2_naming_html_before_any_work(
    command: list[str],
    html: str,
    says: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_cli([*command, "--html", html]) == 2
    err = capsys.readouterr().err
    assert "--html" in err
    assert says in err
    assert list(tmp_path.iterdir()) == []


def test_each_command_documents_html_in_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("attack", "report", "bench"):
        assert run_cli([command, "--help"]) == 0
        assert "--html PATH" in capsys.readouterr().out
