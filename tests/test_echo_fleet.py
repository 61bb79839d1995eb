"""``echo-server --processes N``: several echo servers behind one port, one exact /stats."""

from __future__ import annotations

import json
import sys
import urllib.error
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.cli import run_cli
from pyattacker.errors import ConfigError
from pyattacker.servers import EchoServerProcess
from pyattacker.servers._echo_fleet import merge_echo_parts
from pyattacker.servers._fleet import pack
from pyattacker.servers._llm_values import Values

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="SO_REUSEPORT spreading is Linux's"
)


@pytest.fixture(scope="module")
def fleet() -> Iterator[EchoServerProcess]:
    with EchoServerProcess(delay="fixed:2ms", fail="500:0.2", processes=2) as server:
        yield server


def _part(holds: list[float], lane: int, failed: int) -> dict[str, Any]:
    return {
        "lane": lane,
        "holds": pack(array("d", holds)),
        "failed": {"500": failed} if failed else {},
        "dropped": lane,
        "in_flight": 1,
        "samples": True,
    }


@given(
    st.lists(st.floats(min_value=0.0, max_value=10.0), max_size=200),
    st.lists(st.integers(min_value=0, max_value=2), max_size=200),
)
def test_merged_hold_times_equal_one_process_over_the_same_holds(
    holds: list[float], lanes: list[int]
) -> None:
    split: list[list[float]] = [[], [], []]
    for index, hold in enumerate(holds):
        split[lanes[index] if index < len(lanes) else 0].append(hold)
    parts = [_part(one, lane, len(one) // 2) for lane, one in enumerate(split)]
    merged = merge_echo_parts(list(reversed(parts)))  # whatever order the answers come in
    whole = Values()
    whole.extend(holds)
    expected = whole.summary()
    for key in ("count", "min", "p50", "p90", "p95", "p99", "p99.9", "max"):
        assert merged[key] == expected[key], key
    failed = sum(len(one) // 2 for one in split)
    assert merged["statuses"].get("500", 0) == failed
    assert merged["statuses"].get("200", 0) == len(holds) - failed
    assert merged["dropped"] == 0 + 1 + 2
    assert merged["in_flight"] == 3
    assert merged["count_by_process"] == [len(one) for one in split]
    assert merged["samples"] == [hold for one in split for hold in one]


def test_an_attack_with_workers_counts_what_every_process_served(
    fleet: EchoServerProcess, tmp_path: Path
) -> None:
    fleet.reset()
    out = tmp_path / "r.json"
    argv = ["attack", fleet.url + "/", "--rate", "200/s", "--requests", "200"]
    argv += ["--workers", "2", "--json", str(out), "-q"]
    assert run_cli(argv) in (0, 1)  # 1: the failures the server was told to answer
    truth = fleet.stats()
    report = json.loads(out.read_text())
    assert truth["processes"] == 2
    assert truth["count"] == report["total"]["requests"] == 200
    assert sum(truth["count_by_process"]) == 200
    assert sum(truth["statuses"].values()) == 200
    assert truth["min"] >= 0.002  # no hold shorter than the delay, in either process
    assert len(fleet.stats(samples=True)["samples"]) == 200


def test_reset_and_stall_reach_every_process(fleet: EchoServerProcess) -> None:
    fleet.stall(0.0)
    fleet.reset()
    after = fleet.stats()
    assert after["count"] == 0
    assert after["count_by_process"] == [0, 0]


def test_a_bad_stall_is_a_400_from_whichever_process(fleet: EchoServerProcess) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        fleet._call("POST", "/stall")
    assert refused.value.code == 400
    assert b"seconds" in refused.value.read()
    refused.value.close()


@pytest.mark.parametrize("value", ["0", "x"])
def test_a_bad_processes_value_exits_2_naming_the_flag(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["echo-server", "--processes", value]) == 2
    err = capsys.readouterr().err
    assert "--processes" in err
    assert "Traceback" not in err


def test_the_library_refuses_a_bad_processes_value() -> None:
    with pytest.raises(ConfigError) as refused:
        EchoServerProcess(processes=-1)
    assert refused.value.field == "processes"
