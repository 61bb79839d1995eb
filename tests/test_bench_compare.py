"""``benchmarks/compare.py``'s pure parts: reading each tool's printed output, and the
open model's truth of the stall case. (The comparison itself is a measurement: run it.)"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "compare.py"


def load_compare() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_compare", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


compare = load_compare()

WRK = """\
Running 5s test @ http://127.0.0.1:1/
  Latency Distribution
     50%  820.00us
     75%   20.44ms
     90%   20.54ms
     99%    1.02s
  1017 requests in 5.01s, 17.23KB read
"""

HEY = """\
Latency distribution:
  10% in 0.0204 secs
  50% in 0.0207 secs
  90% in 0.0212 secs
  99% in 0.0232 secs

Status code distribution:
  [200]\t192 responses
  [503]\t3 responses

Error distribution:
  [5]\tGet "http://127.0.0.1:1/": EOF
"""

LOCUST = """\
Type     Name          # reqs      # fails |    Avg     Min     Max    Med |   req/s
         Aggregated       550     0(0.00%) |     22      20      62     22 |  200.98
Type     Name     50%    66%    75%    80%    90%    95%    98%    99%  99.9% 99.99%   100% # reqs
GET      /         22     22     23     23     25     26     27     54     63     63     63    550
         Aggregated 22    22     23     23     25     26     27     54     63     63     63    550
"""


def test_wrk_figures_read_every_unit_and_the_request_count() -> None:
    figures, count = compare.wrk_figures(WRK)
    assert figures == pytest.approx({"p50": 820e-6, "p90": 0.02054, "p99": 1.02})
    assert count == 1017


def test_hey_counts_every_status_and_every_error() -> None:
    figures, count = compare.hey_figures(HEY)
    assert figures == pytest.approx({"p50": 0.0207, "p90": 0.0212, "p99": 0.0232})
    assert count == 192 + 3 + 5


def test_locust_figures_come_from_the_aggregated_row_of_its_printed_summary() -> None:
    figures, count = compare.locust_figures(LOCUST)
    assert figures == pytest.approx({"p50": 0.022, "p90": 0.025, "p99": 0.054})
    assert count == 550


def test_output_a_tool_did_not_print_is_unknown_not_zero() -> None:
    for parse in (compare.wrk_figures, compare.hey_figures, compare.locust_figures):
        figures, count = parse("connection refused\n")
        assert figures == {"p50": None, "p90": None, "p99": None}
        assert count is None


def test_the_stall_truth_holds_arrivals_during_the_stall_until_it_ends() -> None:
    case = compare.Case("stall", "fixed:10ms", rate=200, duration=5, stall=1)
    truth = compare.stalled_truth(case)
    # A fifth of the arrivals land in the 1 s stall, waiting up to its end: p90 is half
    # way through it, p99 near its start; the rest are held their 10 ms.
    assert truth["p50"] == pytest.approx(0.010)
    assert truth["p90"] == pytest.approx(0.5, abs=0.02)
    assert truth["p99"] == pytest.approx(0.95, abs=0.02)


def test_a_tool_that_is_not_installed_is_reported_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compare.shutil, "which", lambda name: None)
    table = compare.runners(None)
    assert {tool: table[tool] for tool in compare.TOOLS if tool != "ours"} == dict.fromkeys(
        ("wrk", "hey", "locust", "k6", "vegeta", "siege"), "not installed"
    )
    assert callable(table["ours"])


def test_closed_tools_get_the_connections_littles_law_gives() -> None:
    assert compare.closed_n(compare.Case("c", "fixed:20ms", rate=200, duration=1)) == 4
    assert compare.closed_n(compare.Case("c", "fixed:1ms", rate=10, duration=1)) == 1
