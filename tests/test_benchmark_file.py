"""Scenario files: three formats, one scenario; every mistake named by its full path."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from pyattacker.benchmark._file import load_scenario_file, scenario_from_mapping, to_mapping
from pyattacker.benchmark._scenarios import SCENARIOS
from pyattacker.errors import ConfigError, ErrorClass
from pyattacker.retry import Retrying
from pyattacker.world import LatencyProfile, LoadCycle, Outage, RateLimitProfile

TOML = """\
name = "two_keys"
summary = "two keys, one slow"
jobs = 50
retry = { max_attempts = 3, on = ["timeout"] }
unsuited = { failover = "one pool" }

[cycle]
period_s = 60
trough = 0.5

[[endpoints]]
id = "fast"
capacity = 4
latency = { median_s = 0.2 }
rate_limit = { per_window = 300, retry_after_s = 2 }

[[endpoints]]
id = "slow"
weight = 2
latency = { median_s = 1, sigma = 0.25 }

[[outages]]
start_s = 30
duration_s = 10
endpoints = ["slow"]
"""

YAML = """\
name: two_keys
summary: two keys, one slow
jobs: 50
retry: {max_attempts: 3, on: [timeout]}  # YAML 1.2: `on` is a key, not true
unsuited: {failover: one pool}
cycle: {period_s: 60, trough: 0.5}
endpoints:
  - id: fast
    capacity: 4
    latency: {median_s: 0.2}
    rate_limit: {per_window: 3e2, retry_after_s: 2}  # YAML 1.2: a float
  - id: slow
    weight: 2
    latency: {median_s: 1, sigma: 0.25}
outages:
  - {start_s: 30, duration_s: 10, endpoints: [slow]}
"""

MINIMAL: dict[str, Any] = {"name": "tiny", "endpoints": [{"id": "a"}, {"id": "b"}]}


def _with(**changes: Any) -> dict[str, Any]:
    return {**json.loads(json.dumps(MINIMAL)), **changes}


def _toml(mapping: dict[str, Any]) -> str:
    """A TOML document of ``mapping`` (inline values only: enough to prove TOML holds it)."""

    def value(v: Any) -> str:
        if isinstance(v, dict):
            return "{" + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return json.dumps(v)
        assert isinstance(v, int | float), f"TOML cannot hold {v!r}"
        return repr(v)

    return "\n".join(f"{json.dumps(k)} = {value(v)}" for k, v in mapping.items()) + "\n"


def test_toml_json_and_yaml_files_describe_the_same_scenario(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(TOML)
    (tmp_path / "s.yaml").write_text(YAML)
    from_toml = load_scenario_file(tmp_path / "s.toml")
    (tmp_path / "s.json").write_text(json.dumps(tomllib.loads(TOML)))
    assert load_scenario_file(tmp_path / "s.json") == from_toml
    assert load_scenario_file(str(tmp_path / "s.yaml")) == from_toml
    (tmp_path / "s.yml").write_text(YAML)
    assert load_scenario_file(tmp_path / "s.yml") == from_toml


def test_a_file_reads_as_the_dataclasses_with_their_defaults(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(TOML)
    scenario = load_scenario_file(tmp_path / "s.toml")
    fast, slow = scenario.endpoints
    assert scenario.jobs == 50
    assert scenario.cycle == LoadCycle(period_s=60.0, trough=0.5)
    assert fast.latency == LatencyProfile(median_s=0.2)
    assert fast.rate_limit == RateLimitProfile(per_window=300.0, retry_after_s=2.0)
    assert slow.rate_limit is None
    assert slow.weight == 2.0
    assert isinstance(slow.weight, float)  # a whole number where a float is wanted
    assert scenario.outages == (Outage(start_s=30.0, duration_s=10.0, endpoints=("slow",)),)
    assert scenario.unsuited == {"failover": "one pool"}
    # a retry table changes the scenario's default policy, not Retrying()'s
    assert scenario.retry == Retrying(
        max_attempts=3, base=0.5, factor=2.0, cap=8.0, jitter="full", on=(ErrorClass.TIMEOUT,)
    )


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_shipped_scenario_survives_a_round_trip_through_json_and_toml(name: str) -> None:
    scenario = SCENARIOS[name]
    mapping = to_mapping(scenario)
    assert scenario_from_mapping(json.loads(json.dumps(mapping, allow_nan=False))) == scenario
    assert scenario_from_mapping(tomllib.loads(_toml(mapping))) == scenario


def test_null_is_kept_where_it_is_not_the_default() -> None:
    data = _with(endpoints=[{"id": "a", "rate_limit": {"retry_after_s": None}}])
    scenario = scenario_from_mapping(data)
    rate_limit = scenario.endpoints[0].rate_limit
    assert rate_limit is not None
    assert rate_limit.retry_after_s is None
    assert to_mapping(scenario)["endpoints"][0]["rate_limit"]["retry_after_s"] is None
    assert "quota_units" not in to_mapping(scenario)["endpoints"][0]  # None by default: left out
    assert scenario_from_mapping(to_mapping(scenario)) == scenario


def test_a_retry_policy_naming_an_exception_type_cannot_be_written() -> None:
    scenario = scenario_from_mapping(MINIMAL).with_overrides(
        retry=Retrying(max_attempts=2, on=(ValueError, "timeout"))
    )
    with pytest.raises(ConfigError) as caught:
        to_mapping(scenario)
    assert caught.value.field == "retry.on[0]"


def test_a_retry_preset_name_is_a_policy() -> None:
    scenario = scenario_from_mapping(_with(retry="exponential"))
    assert scenario.retry.max_attempts == 5
    assert scenario.retry.cap == 30.0


@pytest.mark.parametrize(
    ("data", "field", "says"),
    [
        (
            _with(endpoints=[{"id": "a"}, {"id": "b", "latency": {"median_s": -1}}]),
            "endpoints[1].latency.median_s",
            "must be a number > 0",
        ),
        (
            _with(endpoints=[{"id": "a"}, {"id": "b", "latency": {"median": 1}}]),
            "endpoints[1].latency.median",
            "unknown key 'median'",
        ),
        (
            _with(endpoints=[{"id": "a", "latency": {"median_s": "fast"}}]),
            "endpoints[0].latency.median_s",
            "must be a number, got a string 'fast'",
        ),
        (
            _with(endpoints=[{"id": "a", "capacity": 2.5}]),
            "endpoints[0].capacity",
            "must be a whole number",
        ),
        (
            _with(endpoints=[{"id": "a", "rate_limit": {"tightening": 2}}]),
            "endpoints[0].rate_limit.tightening",
            "<= 1",
        ),
        (
            _with(endpoints=[{"id": "a", "cache": {"entries": True}}]),
            "endpoints[0].cache.entries",
            "must be a whole number, got true/false",
        ),
        (_with(endpoints=[{"id": "a", "failures": 0.5}]), "endpoints[0].failures", "a table"),
        (_with(endpoints={"id": "a"}), "endpoints", "must be a list, got a table"),
        (_with(endpoints=[]), "endpoints", "at least one endpoint"),
        (_with(endpoints=[{"id": "a"}, {"id": "a"}]), "endpoints[1].id", "two endpoints"),
        (_with(endpoints=[{"id": "a", "vendor": 7}]), "endpoints[0].vendor", "a string"),
        (
            _with(outages=[{"start_s": 0, "duration_s": 5, "every_s": 2}]),
            "outages[0].every_s",
            "must be a number > 5",
        ),
        (
            _with(outages=[{"start_s": 0, "duration_s": 5, "endpoints": ["c"]}]),
            "outages[0].endpoints",
            "names no endpoint",
        ),
        (_with(outages=[{"start_s": 0}]), "outages[0].duration_s", "missing"),
        (
            _with(outages=[{"start_s": 0, "duration_s": 5, "endpoints": "a"}]),
            "outages[0].endpoints",
            "list",
        ),
        (_with(cycle={"period_s": 0}), "cycle.period_s", "> 0"),
        (_with(retry={"cap": 0.1}), "retry.cap", "bad value 0.1"),
        (_with(retry={"caps": 1}), "retry.caps", "unknown key 'caps'"),
        (_with(retry={"on": ["fatal"]}), "retry.on", "never retried"),
        (_with(retry="forever"), "retry", "unknown retry policy"),
        (_with(retry=3), "retry", "a table of Retrying settings"),
        (_with(unsuited={"wait": 3}), "unsuited.wait", "a string"),
        (_with(jobs=0), "jobs", ">= 1"),
        (_with(jobz=10), "jobz", "unknown key"),
        (_with(seed="x"), "seed", "a whole number"),
        ({"endpoints": [{"id": "a"}]}, "name", "missing"),
        ({"name": "x"}, "endpoints", "missing"),
        (_with(endpoints=[{"id": "a"}, {"capacity": 2}]), "endpoints[1].id", "missing"),
        (_with(base="nowhere"), "base", "no scenario called 'nowhere'"),
        (_with(base=["bursty_provider"]), "base", "must be the name of a shipped scenario"),
    ],
)
def test_a_mistake_is_named_by_its_full_path(data: dict[str, Any], field: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        scenario_from_mapping(data, source="my.toml")
    assert caught.value.field == field
    assert says in str(caught.value)
    assert "(in my.toml)" in caught.value.message


def test_the_message_from_a_file_names_the_file_and_the_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(YAML.replace("median_s: 1,", "median_s: -1,"))
    with pytest.raises(ConfigError) as caught:
        load_scenario_file(path)
    text = str(caught.value)
    assert text.startswith("endpoints[1].latency.median_s: must be a number > 0, got -1")
    assert str(path) in text
    assert "\n" not in text


def test_a_base_scenario_is_overridden_only_where_the_data_says() -> None:
    base = SCENARIOS["bursty_provider"]
    data = {"base": "bursty_provider", "jobs": 40, "cycle": {"period_s": 60}}
    data["retry"] = {"max_attempts": 2}
    scenario = scenario_from_mapping(data)
    assert scenario.name == base.name
    assert scenario.endpoints == base.endpoints
    assert scenario.unsuited == base.unsuited
    assert scenario.jobs == 40
    assert scenario.cycle == LoadCycle(
        period_s=60.0, trough=base.cycle.trough, peak=base.cycle.peak
    )
    assert scenario.retry == Retrying(
        max_attempts=2, base=base.retry.base, cap=base.retry.cap, jitter=base.retry.jitter
    )
    assert SCENARIOS["bursty_provider"] is base  # the registry is left alone


def test_a_list_in_the_data_replaces_the_base_list() -> None:
    scenario = scenario_from_mapping(
        {"name": "mine", "endpoints": [{"id": "solo", "capacity": 3}]},
        base=SCENARIOS["thundering_herd"],
    )
    assert [e.id for e in scenario.endpoints] == ["solo"]
    assert scenario.endpoints[0].latency == LatencyProfile()  # a new item starts from defaults
    assert scenario.outages == SCENARIOS["thundering_herd"].outages
    assert scenario.concurrency == 16


def test_a_base_key_in_the_data_wins_over_the_base_argument() -> None:
    scenario = scenario_from_mapping(
        {"base": "multi_vendor", "name": "mine"}, base=SCENARIOS["bursty_provider"]
    )
    assert scenario.endpoints == SCENARIOS["multi_vendor"].endpoints


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("s.txt", "name = 'x'", "cannot tell the format of"),
        ("s", "name = 'x'", "suffix '(none)'"),
        ("s.toml", "name = ", "is not valid TOML"),
        ("s.json", '{"name": "x",\n "jobs": }', "is not valid JSON: Expecting value (at line 2"),
        ("s.yaml", "name: x\n  jobs: [1", "is not valid YAML"),
        ("s.yaml", "", "must hold one table of Scenario fields, got null"),
        ("s.json", "[1, 2]", "must hold one table of Scenario fields, got a list"),
        ("s.toml", b"name = '\xff'", "is not UTF-8"),
    ],
)
def test_a_file_that_cannot_be_read_is_refused_naming_it_and_nothing_is_written(
    tmp_path: Path, name: str, content: str | bytes, says: str
) -> None:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(ConfigError) as caught:
        load_scenario_file(path)
    assert caught.value.field is None
    assert says in caught.value.message
    assert str(path) in caught.value.message
    assert caught.value.hint
    assert "\n" not in str(caught.value)
    assert list(tmp_path.iterdir()) == [path]


def test_a_missing_file_is_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_scenario_file(tmp_path / "nope.toml")
    assert "cannot read" in caught.value.message
    assert caught.value.hint == "check the path"
    assert list(tmp_path.iterdir()) == []


# -- duplicate keys, YAML 1.2 scalars, nesting ------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "field", "line"),
    [
        ("s.json", '{"name": "x", "jobs": 5, "jobs": 6, "endpoints": [{"id": "a"}]}', "jobs", ""),
        (
            "s.json",
            '{"name": "x", "endpoints": [{"id": "a", "capacity": 2, "capacity": 3}]}',
            "endpoints[0].capacity",
            "",
        ),
        ("s.yaml", "name: x\njobs: 5\njobs: 6\nendpoints: [{id: a}]\n", "jobs", ", line 3"),
        (
            "s.yaml",
            "name: x\nendpoints:\n  - id: a\n    latency: {median_s: 1, median_s: 2}\n",
            "endpoints[0].latency.median_s",
            ", line 4",
        ),
    ],
)
def test_a_key_given_twice_is_refused_naming_its_path_in_json_and_yaml(
    tmp_path: Path, name: str, content: str, field: str, line: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ConfigError) as caught:
        load_scenario_file(path)
    assert caught.value.field == field
    key = field.rsplit(".", 1)[-1]
    assert caught.value.message == f"duplicate key {key!r} (in {path}{line})"


def test_a_yaml_merge_may_still_override_a_merged_key(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: x\n"
        "endpoints:\n"
        "  - &a {id: a, capacity: 2, weight: 3}\n"
        "  - {<<: *a, id: b, capacity: 5}\n"
    )
    first, second = load_scenario_file(path).endpoints
    assert (first.id, first.capacity, first.weight) == ("a", 2, 3.0)
    assert (second.id, second.capacity, second.weight) == ("b", 5, 3.0)


def test_yaml_integers_follow_yaml_1_2_leading_zeros_are_decimal(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("name: x\nseed: 010\njobs: 0o17\nconcurrency: 0x10\nendpoints: [{id: a}]\n")
    scenario = load_scenario_file(path)
    assert (scenario.seed, scenario.jobs, scenario.concurrency) == (10, 15, 16)


@pytest.mark.parametrize(
    ("line", "field", "says"),
    [
        ("horizon_s: 1:30", "horizon_s", "must be a number, got a string '1:30'"),
        ("seed: 1_000", "seed", "must be a whole number, got a string '1_000'"),
        ("summary: 2024-01-01", None, None),  # a string in YAML 1.2, not a date
    ],
)
def test_yaml_1_1_only_scalars_are_plain_strings(
    tmp_path: Path, line: str, field: str | None, says: str | None
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(f"name: x\n{line}\nendpoints: [{{id: a}}]\n")
    if field is None:
        assert load_scenario_file(path).summary == "2024-01-01"
        return
    with pytest.raises(ConfigError) as caught:
        load_scenario_file(path)
    assert caught.value.field == field
    assert says is not None
    assert says in caught.value.message


@pytest.mark.parametrize(
    ("name", "content"),
    [("s.json", "[" * 200_000), ("s.yaml", "[" * 200_000), ("s.toml", "a = " + "[" * 200_000)],
)
def test_input_nested_too_deeply_is_a_config_error_naming_the_file(
    tmp_path: Path, name: str, content: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ConfigError) as caught:
        load_scenario_file(path)
    assert caught.value.field is None
    assert caught.value.message == f"{path} is nested too deeply to read"


# -- naming, and reading a report back --------------------------------------------------------


def test_a_file_with_a_base_and_no_name_is_named_after_itself_and_its_base(
    tmp_path: Path,
) -> None:
    path = tmp_path / "my_provider.toml"
    path.write_text('base = "bursty_provider"\n\n[[endpoints]]\nid = "mine"\n')
    scenario = load_scenario_file(path)
    assert scenario.name == "my_provider (from bursty_provider)"
    path.write_text('base = "bursty_provider"\nname = "mine"\n')
    assert load_scenario_file(path).name == "mine"


def test_a_bench_report_is_read_back_as_the_scenario_it_ran(tmp_path: Path) -> None:
    scenario = SCENARIOS["thundering_herd"].with_overrides(jobs=77)
    report = {"scenario": {"name": scenario.name, "definition": to_mapping(scenario)}, "runs": []}
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    assert load_scenario_file(path) == scenario


def test_a_mistake_in_a_report_definition_names_the_definition(tmp_path: Path) -> None:
    definition = {**to_mapping(SCENARIOS["bursty_provider"]), "jobs": 0}
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"scenario": {"definition": definition}}))
    with pytest.raises(ConfigError) as caught:
        load_scenario_file(path)
    assert caught.value.field == "jobs"
    assert f"(in {path}, scenario.definition)" in caught.value.message


def test_a_report_without_a_definition_is_refused_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"scenario": {"name": "x", "definition": None}}))
    with pytest.raises(ConfigError) as caught:
        load_scenario_file(path)
    assert caught.value.field is None
    assert "has no scenario definition" in caught.value.message
