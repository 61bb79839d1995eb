"""``pyattacker attack --llm``: bad input refused before any traffic, a report with the LLM
figures the server agrees with, keys kept out of every output."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyattacker.cli import run_cli
from pyattacker.measure import LLM_SAMPLE_COLUMNS
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
        ([*BASE, "--model", "m", "--shape", "10:4", "--param", "temperature=NaN"], "--param"),
        ([*BASE, "--model", "m", "--shape", "999999999:10"], "--shape"),
        ([*BASE, "--model", "m", "--shape", "10:2000001"], "--shape"),
        ([*BASE, "--model", "m", "--shape", "10:4", "--body", "{}"], "--body"),
        (["{url}/v1", "--rate", "1/s", "--requests", "1", "--model", "m"], "--model"),
        (["{url}/v1", "--rate", "1/s", "--requests", "1", "--shape", "1:1"], "--shape"),
        (["--llm", "{url}/v1/completions", "--rate", "1/s", "--requests", "1",
          "--model", "m", "--shape", "1:1"], "URL"),
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
    samples = [json.loads(line) for line in rows.read_text().splitlines()]
    assert len(samples) == 10
    for row in samples:
        assert tuple(row) == LLM_SAMPLE_COLUMNS
        assert (row["chunks"], row["prompt_tokens"], row["completion_tokens"]) == (4, 30, 4)
        assert row["ttft"] == row["first_token"] - row["sent"]
        assert row["ttft_scheduled"] == row["first_token"] - row["scheduled"]
        assert row["request_id"]
        assert isinstance(row["rate_limit_headers"], dict | None)
    assert len({row["request_id"] for row in samples}) == 10


def test_llm_samples_in_csv_have_fixed_llm_columns_and_headers_as_json_text(
    llm: LlmServerProcess, tmp_path: Path
) -> None:
    llm.reset()
    rows = tmp_path / "rows.csv"
    argv = ["attack", "--llm", f"{llm.url}/v1", "--model", "m", "--shape", "5:3"]
    argv += ["--rate", "20/s", "--requests", "2", "--key", KEY, "-q", "--samples", str(rows)]
    argv += ["-H", "x-mock-fault: status:429"]  # refused: Retry-After and rate-limit headers
    assert run_cli(argv) == 1
    with rows.open() as f:
        reader = csv.DictReader(f)
        samples = list(reader)
    assert tuple(reader.fieldnames or ()) == LLM_SAMPLE_COLUMNS
    assert [row["outcome"] for row in samples] == ["throttled", "throttled"]
    for row in samples:
        assert (row["first_token"], row["ttft"], row["chunks"]) == ("", "", "0")  # asked, none
        assert float(row["retry_after"]) > 0
        headers = json.loads(row["rate_limit_headers"])
        assert "retry-after" in headers
        assert row["request_id"]


def test_streams_cut_after_their_first_tokens_have_a_ttft_and_no_end_to_end(
    llm: LlmServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    llm.reset()
    argv = ["attack", "--llm", f"{llm.url}/v1", "--model", "m", "--shape", "10:4"]
    argv += ["--rate", "20/s", "--requests", "3", "--key", KEY, "--json", "-"]
    argv += ["-H", "x-mock-fault: cut-mid-token:2"]
    assert run_cli(argv) == 1
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    section = report["llm"]
    assert report["total"]["outcomes"] == {"failed": 3}
    assert (section["streamed_requests"], section["ok_streams"]) == (3, 0)
    assert section["failed_after_first_token"] == 3
    assert section["ttft_s"]["sent"]["count"] == 3
    for figure in (section["e2e_s"]["sent"], section["e2e_s"]["scheduled"], section["tpot_s"]):
        assert figure["count"] == 0
    assert section["itl_s"]["count"] == 0
    summary = report["summary"]
    spans = (summary["elapsed_s"], summary["schedule_s"], summary["send_span_s"])
    assert section["per_minute"]["answer_span_s"] == max(spans)
    ((message, count),) = [(e["example"], e["count"]) for e in report["errors"]]
    assert count == 3
    assert "the stream broke off after 2 content chunks" in message
    assert "2 OK" not in captured.err
    assert "0 OK, failed after first token: 3." in captured.err


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
    ((message, count),) = [(e["example"], e["count"]) for e in report["errors"]]
    assert count == 3
    assert message.startswith("LlmStatusError: HTTP 401: authentication failed")


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
    assert "--duration 60s \\\n" in text  # the examples' line continuations survive click
