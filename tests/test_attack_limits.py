"""Every number of an attack has a sane range, checked once; file flags read a bounded
size; messages name the flag the user typed. In-process, against a port nobody answers:
a refusal sends nothing (and on a build without the check, ``--requests 1`` ends the
attack at once)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pyattacker.attack import AttackPlan, OpenModel
from pyattacker.attack._limits import LIMITS, MAX_RATE, flag_of
from pyattacker.cli import run_cli
from pyattacker.errors import ConfigError

URL = "http://127.0.0.1:9/"
ONE = ["--requests", "1", "-q"]


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--rate", "1e12/s", *ONE], "--rate"),
        (["--rate", "10/s", "--duration", "1e300s", *ONE], "--duration"),
        (["--rate", "10/s", "--requests", str(10**23)], "--requests"),
        (["--rate", "10/s", "--max-in-flight", str(10**12), *ONE], "--max-in-flight"),
        (["--rate", "10/s", "--max-in-flight", "0", *ONE], "--max-in-flight"),
        (["--rate", "10/s", "--connections", str(10**8), *ONE], "--connections"),
        (["--rate", "10/s", "--window", "1us", *ONE], "--window"),
        (["--rate", "10/s", "--duration", "168h", "--window", "10ms", *ONE], "--window"),
        (["--rate", "10/s", "--timeout", "1e300s", *ONE], "--timeout"),
        (["--rate", "10/s", "--connect-timeout", "1e300s", *ONE], "--connect-timeout"),
        (["--rate", "10/s", "--seed", "-1", *ONE], "--seed"),
        (["--clients", str(10**8), *ONE], "--clients"),
        (["--clients", "1", "--think", "1e300s", *ONE], "--think"),
        (["--stages", "1e300s:10/s", *ONE], "--stages"),
        (["--stages", "1s:1e300/s", *ONE], "--stages"),
    ],
)
def test_a_number_out_of_its_range_exits_2_naming_the_flag(
    args: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["attack", URL, *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {flag}:"), err
    assert "_" not in err.split(":")[1], err  # a flag, not a library field (max_in_flight)


def test_the_library_refuses_what_the_cli_refuses_from_the_same_table() -> None:
    with pytest.raises(ConfigError) as caught:
        OpenModel(rate=MAX_RATE * 2)
    assert caught.value.field == "rate"
    with pytest.raises(ConfigError) as caught:
        AttackPlan.build([URL], OpenModel(rate=10), duration=1.0, connections=10**6)
    assert caught.value.field == "connections"
    assert flag_of("connections") == "--connections"
    assert all(flag_of(name) for name in LIMITS)


@pytest.mark.parametrize(
    ("flag", "size", "limit"),
    [
        ("--body", 64 << 20, "64 MiB"),
        ("--keys-file", 1 << 20, "1 MiB"),
        ("--prompts", 256 << 20, "256 MiB"),
    ],
)
def test_a_file_flag_refuses_a_file_larger_than_its_limit_naming_both(
    flag: str, size: int, limit: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = tmp_path / "big"
    with big.open("wb") as file:  # sparse: no disk used
        file.truncate(size + 1)
    value = f"@{big}" if flag == "--body" else str(big)
    extra = {
        "--body": ["--rate", "10/s"],
        "--keys-file": ["--rate", "10/s", "-H", "A: {key}"],
        "--prompts": ["--llm", "--model", "m", "--rate", "10/s"],
    }[flag]
    assert run_cli(["attack", URL, *extra, flag, value, *ONE]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {flag}:"), err
    assert limit in err
    assert "Traceback" not in err


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_file_that_never_ends_is_refused_after_the_limit() -> None:
    # After this branch's check only: before it, /dev/zero was read until memory ran out.
    assert run_cli(["attack", URL, "--rate", "10/s", "--body", "@/dev/zero", *ONE]) == 2
    assert run_cli(["attack", URL, "--rate", "10/s", "--keys-file", "/dev/zero", *ONE]) == 2


@pytest.mark.parametrize("flag", ["--body", "--keys-file"])
def test_a_directory_given_for_a_file_says_it_is_a_directory(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    value = f"@{tmp_path}" if flag == "--body" else str(tmp_path)
    assert run_cli(["attack", URL, "--rate", "10/s", flag, value, *ONE]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_json_nested_100000_deep_is_a_clear_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    prompts = tmp_path / "deep.jsonl"
    prompts.write_text('{"prompt": ' + deep + "}\n")
    llm = ["--llm", "--model", "m", "--rate", "10/s", *ONE]
    assert run_cli(["attack", URL, *llm, "--prompts", str(prompts)]) == 2
    assert "nested too deeply" in capsys.readouterr().err
    assert run_cli(["attack", URL, "--rate", "10/s", "--retry", '{"a": ' + deep + "}", *ONE]) == 2
    assert "nested too deeply" in capsys.readouterr().err
    assert run_cli(["attack", URL, *llm, "--shape", "1:1", "--param", f"x={deep}"]) == 2
    assert "nested too deeply" in capsys.readouterr().err


@pytest.mark.parametrize(
    "policy", ['{"max_attempts": 100000000000}', '{"base": 1e300}', '{"factor": 1e300}']
)
def test_a_retry_policy_out_of_range_names_the_key_the_user_typed(
    policy: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["attack", URL, "--rate", "10/s", "--retry", policy, *ONE]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --retry"), err
    assert "Traceback" not in err
