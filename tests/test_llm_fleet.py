"""``llm-server --processes N``: several mock LLM servers behind one port, one exact /stats."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
import urllib.request
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.cli import run_cli
from pyattacker.errors import ConfigError
from pyattacker.servers import LlmServerProcess, check_processes
from pyattacker.servers._fleet import _Stopping
from pyattacker.servers._fleet import pack as _pack
from pyattacker.servers._llm_fleet import merge_parts
from pyattacker.servers._llm_values import Values

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="SO_REUSEPORT spreading is Linux's"
)
KEY = "sk-fleet-0123456789"
_ZERO = dict.fromkeys(
    (
        "requests",
        "throttled",
        "prompt_tokens",
        "completion_tokens",
        "discarded_after_reset",
        "received",
        "in_flight",
        "queued",
        "pending",
        "before_reset",
    ),
    0,
)


@pytest.fixture(scope="module")
def fleet() -> Iterator[LlmServerProcess]:
    with LlmServerProcess(
        models="m",
        ttft="fixed:5ms",
        itl="fixed:1ms",
        output_tokens=4,
        api_keys=KEY,
        processes=2,
    ) as server:
        yield server


def _part(values: list[float], lane: int, statuses: dict[str, int]) -> dict[str, Any]:
    part: dict[str, Any] = dict(_ZERO, requests=len(values), received=len(values), lane=lane)
    part["statuses"] = statuses
    part["outcomes"] = {"ok": len(values)}
    packed = _pack(array("d", values))
    part["values"] = dict.fromkeys(("ttft", "e2e", "itl", "tpot"), packed)
    return part


finite = st.floats(min_value=0.0, max_value=100.0, allow_nan=False)


@given(
    st.lists(finite, max_size=300),
    st.lists(st.integers(min_value=0, max_value=3), max_size=300),
)
def test_merged_distributions_equal_one_process_over_the_same_values(
    values: list[float], lanes: list[int]
) -> None:
    split: list[list[float]] = [[], [], [], []]
    for index, value in enumerate(values):
        split[lanes[index] if index < len(lanes) else 0].append(value)
    parts = [_part(one, lane, {"200": len(one)}) for lane, one in enumerate(split)]
    merged = merge_parts(parts)
    whole = Values()
    whole.extend(values)
    expected = whole.summary()
    for name in ("ttft", "e2e", "itl", "tpot"):
        got = merged[name]
        for key in ("count", "min", "p50", "p90", "p95", "p99", "p99.9", "max"):
            assert got[key] == expected[key], (name, key)
        if values:
            assert got["mean"] == pytest.approx(expected["mean"], rel=1e-12, abs=1e-12)
    assert merged["requests"] == merged["received"] == len(values)
    assert merged["received_by_process"] == [len(one) for one in split]
    assert merged["statuses"] == ({"200": len(values)} if values else {"200": 0})


def test_merged_counts_add_status_by_status_in_numeric_order() -> None:
    parts = [_part([1.0], 0, {"200": 1, "429": 2}), _part([2.0, 3.0], 1, {"503": 1, "200": 4})]
    merged = merge_parts(parts)
    assert list(merged["statuses"].items()) == [("200", 5), ("429", 2), ("503", 1)]
    assert merged["ttft"]["count"] == 3


def _complete(url: str, n: int) -> None:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "a b c"}]}
    for _ in range(n):  # a new connection each: the kernel spreads them over the processes
        request = urllib.request.Request(
            url + "/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json", "Authorization": f"Bearer {KEY}"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()


def test_stats_cover_every_process_wherever_the_request_lands(fleet: LlmServerProcess) -> None:
    fleet.reset()
    _complete(fleet.url, 24)
    truth = fleet.stats()
    assert truth["processes"] == 2
    assert truth["requests"] == truth["received"] == 24
    assert sum(truth["received_by_process"]) == 24
    assert truth["completion_tokens"] == 24 * 4
    assert truth["prompt_tokens"] == 24 * 3
    assert truth["ttft"]["count"] == 24
    assert truth["itl"]["count"] == 24 * 3
    samples = fleet.stats(samples=True)["samples"]
    assert len({row["id"] for row in samples}) == 24
    ends = [row["end"] for row in samples]
    assert ends == sorted(ends)
    page = fleet.stats(samples=True, offset=20, limit=10)["samples"]
    assert [row["id"] for row in page] == [row["id"] for row in samples[20:]]
    fleet.reset()
    after = fleet.stats()
    assert after["requests"] == after["received"] == 0
    assert after["received_by_process"] == [0, 0]


def test_an_llm_attack_with_workers_counts_what_the_processes_served(
    fleet: LlmServerProcess, tmp_path: Path
) -> None:
    fleet.reset()
    out = tmp_path / "r.json"
    argv = ["attack", "--llm", f"{fleet.url}/v1", "--model", "m", "--shape", "10:4"]
    argv += ["--rate", "40/s", "--requests", "30", "--key", KEY, "--workers", "2"]
    argv += ["--json", str(out), "-q"]
    assert run_cli(argv) == 0
    truth = fleet.stats()
    report = json.loads(out.read_text())
    assert truth["outcomes"] == {"ok": 30}
    assert report["total"]["requests"] == truth["requests"] == 30
    assert report["llm"]["tokens"]["completion"] == truth["completion_tokens"] == 120
    assert report["llm"]["ttft_s"]["sent"]["count"] == truth["ttft"]["count"] == 30


def test_control_paths_need_the_key_on_every_process(fleet: LlmServerProcess) -> None:
    request = urllib.request.Request(fleet.url + "/stats")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 401
    refused.value.close()


def test_a_bad_offset_is_a_400_naming_it(fleet: LlmServerProcess) -> None:
    request = urllib.request.Request(
        fleet.url + "/stats?samples=1&offset=-1", headers={"Authorization": f"Bearer {KEY}"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 400
    assert b"offset" in refused.value.read()
    refused.value.close()


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_a_bad_processes_value_exits_2_naming_the_flag(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["llm-server", "--processes", value]) == 2
    err = capsys.readouterr().err
    assert "--processes" in err
    assert "Traceback" not in err


def test_the_library_refuses_a_bad_processes_value_before_spawning() -> None:
    with pytest.raises(ConfigError) as refused:
        LlmServerProcess(processes=0)
    assert refused.value.field == "processes"


def test_a_taken_port_is_refused_with_exit_2(fleet: LlmServerProcess) -> None:
    port = int(fleet.url.rsplit(":", 1)[1])
    with pytest.raises(ConfigError) as refused:
        LlmServerProcess(processes=2, extra_args=["--port", str(port)]).start()
    assert "port" in str(refused.value)


def test_more_than_one_process_is_refused_where_the_kernel_cannot_share_a_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    check_processes(1, "--processes")  # one process needs nothing special
    with pytest.raises(ConfigError) as refused:
        check_processes(2, "--processes")
    assert refused.value.field == "--processes"
    assert "SO_REUSEPORT" in refused.value.message


def test_a_sigterm_stops_the_supervisor_even_inside_a_librarys_except_exception() -> None:
    # Once in some twenty stops, SIGTERM came while click's stream cache ran its
    # `except Exception: pass` (in announce), which swallowed the stop: the supervisor
    # then waited for good. The stop must pass through such a block.
    stopping = _Stopping()
    swallowed = False
    with stopping:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5.0)  # real time: the handler interrupts it at once
        except Exception:
            swallowed = True
        pytest.fail("the stop did not end the supervisor's block")
    assert stopping.asked
    assert not swallowed


def test_sigterm_stops_every_process_and_frees_the_port() -> None:
    server = LlmServerProcess(processes=2)
    url = server.start()
    # A generous grace: on a machine busy with a parallel test run the members' shutdown
    # took longer than stop()'s default 5 s once, and a kill would say nothing of SIGTERM.
    server.stop(grace=60.0)
    assert server.returncode == 0
    port = int(url.rsplit(":", 1)[1])
    with socket.socket() as probe:  # nobody listens any more: the port binds again
        probe.bind(("127.0.0.1", port))
