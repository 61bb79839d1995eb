"""``pyattacker attack --llm``: bad input refused before any traffic, a report with the LLM
figures the server agrees with, keys kept out of every output."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyattacker.cli import run_cli
from pyattacker.servers import LlmServerProcess

KEY = "sk-test-0123456789"


@pytest.fixture(scope="module")
def llm() -> Iterator[LlmServerProcess]:
    with LlmServerProcess(
        models="m", ttft="fixed:5ms", itl="fixed:1ms", output_tokens=4, api_keys=KEY
    ) as server:
        yield server


BASE = ["--llm", "{url}/v1", "--rate", "20/s", "--requests", "4"]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ([*BASE, "--shape", "10:4"], "--model"),
        ([*BASE, "--model", "m"], "--shape"),
        ([*BASE, "--model", "m", "--shape", "10:4", "--prompts", "p.jsonl"], "--shape"),
        ([*BASE, "--model", "m", "--shape", "ten:4"], "--shape"),
        ([*BASE, "--model", "m", "--shape", "10:0"], "--shape"),
        ([*BASE, "--model", "m", "--prompts", "missing.jsonl"], "--prompts"),
        ([*BASE, "--model", "m", "--shape", "10:4", "--max-tokens", "9"], "--max-tokens"),
        ([*BASE, "--model", "m", "--prompts", "{bad}", "--max-tokens", "0"], "--max-tokens"),
        ([*BASE, "--model", "m", "--shape", "10:4", "--param", "novalue"], "--param"),
        ([*BASE, "--model", "m", "--shape", "10:4", "--param", "stream=false"], "--param"),
        ([*BASE, "--model", "m", "--shape", "10:4", "--body", "{}"], "body"),
        (["{url}/v1", "--rate", "1/s", "--requests", "1", "--model", "m"], "--model"),
        (["{url}/v1", "--rate", "1/s", "--requests", "1", "--shape", "1:1"], "--shape"),
        (["--llm", "{url}/v1/completions", "--rate", "1/s", "--requests", "1",
          "--model", "m", "--shape", "1:1"], "targets[0]"),
    ],
)  # fmt: skip
def test_bad_llm_input_exits_2_naming_the_flag_and_sends_nothing(
    args: list[str],
    field: str,
    llm: LlmServerProcess,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "hello"}\n')
    llm.reset()
    argv = ["attack", *(a.replace("{url}", llm.url).replace("{bad}", str(bad)) for a in args)]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert f"error: {field}" in err, err
    assert "Traceback" not in err
    assert llm.stats()["requests"] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]


def test_an_llm_attack_reports_what_the_server_counted_and_never_the_key(
    llm: LlmServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    llm.reset()
    out, md, rows = tmp_path / "r.json", tmp_path / "r.md", tmp_path / "rows.jsonl"
    argv = ["attack", "--llm", f"{llm.url}/v1", "--model", "m", "--shape", "30:4"]
    argv += ["--clients", "2", "--requests", "10", "--key", KEY, "-q"]
    argv += ["--json", str(out), "--markdown", str(md), "--samples", str(rows)]
    assert run_cli(argv) == 0
    truth = llm.stats()
    report = json.loads(out.read_text())
    assert truth["outcomes"] == {"ok": 10}
    assert report["total"]["requests"] == truth["requests"] == 10
    section = report["llm"]
    assert section["tokens"]["prompt"] == truth["prompt_tokens"] == 300
    assert section["tokens"]["completion"] == truth["completion_tokens"] == 40
    assert section["ttft_s"]["sent"]["count"] == truth["ttft"]["count"] == 10
    text = capsys.readouterr()
    for output in (out.read_text(), md.read_text(), rows.read_text(), text.out, text.err):
        assert KEY not in output
    assert "time to first token" in text.out


def test_a_key_the_server_refuses_is_a_failed_request_not_a_crash(
    llm: LlmServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    llm.reset()
    argv = ["attack", "--llm", f"{llm.url}/v1", "--model", "m", "--shape", "5:2"]
    argv += ["--rate", "10/s", "--requests", "3", "--key", "sk-wrong", "-q", "--json", "-"]
    assert run_cli(argv) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["total"]["status"] == {"401": 3}
    assert report["total"]["error_classes"] == {"fatal": 3}
    assert llm.stats()["statuses"] == {"401": 3}


def test_help_documents_the_llm_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["attack", "--help"]) == 0
    text = capsys.readouterr().out
    for option in (
        "--llm",
        "--model",
        "--shape",
        "--prompts",
        "--max-tokens",
        "--api",
        "--stream",
        "--param",
        "--azure-deployment",
        "--api-version",
    ):
        assert option in text, option
    assert "--retry none" in text
