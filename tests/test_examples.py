"""Every example under ``examples/`` works as its README says: the README's commands are run,
in order, in a fresh copy of the example's folder, and what they leave behind is checked."""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from pyattacker.cli import run_cli
from pyattacker.servers import LlmServerProcess
from pyattacker.store import RowKind, SQLiteStore

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
_CONSOLE = re.compile(r"```console\n(.*?)```", re.DOTALL)


def commands(readme: Path) -> list[str]:
    """The ``$ ...`` lines of the README's console blocks, in order."""
    blocks = _CONSOLE.findall(readme.read_text(encoding="utf-8"))
    return [line[2:] for block in blocks for line in block.splitlines() if line.startswith("$ ")]


def _env() -> dict[str, str]:
    """The environment a subprocess needs to import this checkout's pyattacker."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return env


def run_command(command: str, folder: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run one README command in ``folder``: ``pyattacker`` in-process, ``python`` as a child;
    return its exit code and what it printed."""
    words = shlex.split(command)
    if words[0] == "pyattacker":
        capsys.readouterr()
        code = run_cli(words[1:])
        out = capsys.readouterr()
        return code, out.out + out.err
    assert words[0] == "python", f"a README command this test cannot run: {command}"
    done = subprocess.run(
        [sys.executable, *words[1:]], cwd=folder, env=_env(), capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


@pytest.fixture
def copy_of(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Path]:
    def copy(name: str) -> Path:
        folder = tmp_path / name
        shutil.copytree(
            EXAMPLES / name, folder, ignore=shutil.ignore_patterns("*.db*", "results.*")
        )
        monkeypatch.chdir(folder)
        return folder

    return copy


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_every_example_has_a_readme_with_commands() -> None:
    folders = sorted(p for p in EXAMPLES.iterdir() if p.is_dir())
    assert [p.name for p in folders] == ["eval", "llm-eval", "plugin_package", "python-api"]
    for folder in folders:
        assert commands(folder / "README.md"), folder


def test_the_eval_example_runs_resumes_reports_and_exports_results_by_key(
    copy_of: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder = copy_of("eval")
    said = []
    for command in commands(folder / "README.md"):
        code, out = run_command(command, folder, capsys)
        # `run` exits 1: one item fails on purpose, as the README says
        assert code == (1 if command.startswith("pyattacker run") else 0), (command, out)
        said.append(out)
    assert "key q17" in said[0]  # the report at the end of the run names the failed item
    ids = [line.split('"')[3] for line in (folder / "items.jsonl").read_text().splitlines()]
    results = _csv(folder / "results.csv")
    assert [row["key"] for row in results] == ids
    by_key = {row["key"]: row for row in results}
    failed = by_key.pop("q17")
    assert (failed["state"], failed["step"], failed["error_class"]) == (
        "failed",
        "prepare",
        "invalid",
    )
    assert {row["state"] for row in by_key.values()} == {"succeeded"}
    assert all('"correct"' in row["output"] and int(row["tokens"]) > 0 for row in by_key.values())


def test_the_eval_example_interrupted_then_resumed_runs_no_step_twice(
    copy_of: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder = copy_of("eval")
    first, resume = commands(folder / "README.md")[:2]
    with subprocess.Popen(
        [sys.executable, "-m", "pyattacker", *shlex.split(first)[1:]],
        cwd=folder, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    ) as child:  # fmt: skip
        try:
            while _succeeded(folder / "eval.db") < 3:  # real I/O: wait for a few items to end
                try:
                    child.wait(timeout=0.05)
                except subprocess.TimeoutExpired:
                    continue
                pytest.fail("the run ended before it could be interrupted")
            child.send_signal(signal.SIGINT)  # what Ctrl-C sends
            _, err = child.communicate(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
    assert child.returncode == 130, err
    assert "--resume" in err
    assert _succeeded(folder / "eval.db") < 49  # it did stop early
    code, _ = run_command(resume, folder, capsys)
    assert code == 1  # q17 fails again; everything else is done
    with SQLiteStore(folder / "eval.db", read_only=True) as store:
        states = store.count_by_state()
        ok = Counter(
            (a["pipeline_id"], a["seq"])
            for a in store.rows(RowKind.ATTEMPTS)
            if a["outcome"] == "ok"
        )
    assert states == {"succeeded": 49, "failed": 1}
    assert len(ok) == 49 * 3
    assert set(ok.values()) == {1}  # no step succeeded twice


def _succeeded(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            found = conn.execute("SELECT count(*) FROM pipelines WHERE state = 'succeeded'")
            return int(found.fetchone()[0])
    except sqlite3.Error:  # not created yet, or its schema not yet committed
        return 0


def test_the_python_api_example_runs_resumes_and_writes_results(
    copy_of: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder = copy_of("python-api")
    said = []
    for command in commands(folder / "README.md"):
        code, out = run_command(command, folder, capsys)
        assert code == 0, (command, out)
        said.append(out)
    assert said[0].splitlines()[0] == "succeeded: {'succeeded': 30}"
    assert said[1] == said[0]  # the second run resumed: nothing new, the same answer
    tickets = [row["ticket"] for row in _csv(folder / "tickets.csv")]
    results = _csv(folder / "results.csv")
    assert [row["key"] for row in results] == tickets
    assert {row["state"] for row in results} == {"succeeded"}
    assert all(row["attempts"] == "2" and int(row["tokens"]) > 0 for row in results)


def test_the_config_only_llm_eval_answers_judges_and_exports_every_prompt(
    copy_of: Callable[[str], Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = copy_of("llm-eval")
    keys = ("sk-test-first", "sk-test-second")  # not the README's: none may be on disk
    with LlmServerProcess(
        models="mock-llm", ttft="fixed:5ms", itl="fixed:1ms", output_tokens=6, api_keys=keys
    ) as server:
        monkeypatch.setenv("LLM_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("LLM_KEY_1", keys[0])
        monkeypatch.setenv("LLM_KEY_2", keys[1])
        said = []
        for command in commands(folder / "README.md"):
            code, out = run_command(command, folder, capsys)
            assert code == 0, (command, out)
            said.append(out)
        served = server.stats()["requests"]
    assert "***" in said[0]
    assert keys[0] not in said[0]
    ids = [json.loads(line)["id"] for line in (folder / "prompts.jsonl").read_text().splitlines()]
    results = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    assert [row["key"] for row in results] == ids
    assert {row["state"] for row in results} == {"succeeded"}
    for row in results:
        answer, judge = row["output"]["answer"], row["output"]["judge"]
        assert answer["text"].strip()
        assert judge["text"].strip()
        assert answer["ttft_s"] > 0
        assert answer["e2e_s"] >= answer["ttft_s"]
        assert judge["usage"]["prompt_tokens"] > answer["usage"]["prompt_tokens"]  # it saw both
    assert {r["output"][step]["resource"] for r in results for step in ("answer", "judge")} == {
        "key-1",
        "key-2",
    }
    assert served == 2 * len(ids)  # the resume ran nothing again
    assert not any(key.encode() in p.read_bytes() for p in folder.iterdir() for key in keys)
