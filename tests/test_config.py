"""Config files: read in three formats, ${VAR} filled, flags override, the effective config
printed and recorded with secrets masked, and a config built into the run's own objects."""

from __future__ import annotations

import json
import sqlite3
import string
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.cli import run_cli
from pyattacker.config import load_config
from pyattacker.config._read import substitute
from pyattacker.pool import Pool
from pyattacker.run import Task
from pyattacker.store import RowKind, SQLiteStore

SECRET = "sk-very-secret-0123"

YAML = """\
run:
  store: out.db
  concurrency: 4
  label: nightly
pools:
  llm:
    algorithm: least_busy
    cooldown_s: 1
    resources:
      - {id: k1, capacity: 2, rpm: 600, secrets: {api_key: "${PYA_KEY}"}}
      - {id: k2, capacity: 2, options: {base_url: "${PYA_URL:-http://127.0.0.1:9/v1}"}}
pipeline:
  name: demo
  tasks:
    - use: simulate_llm
      name: ask
      resource: llm
      retry: {max_attempts: 3, base: 0.01}
      args: {prompt: "Q: {input}", ttft_s: 0.001, itl_s: 0, tokens: 3}
    - use: flaky
      retry: {max_attempts: 2, base: 0.001}
    - {use: echo, version: 2}
source:
  range: 5
"""

TOML = """\
[run]
store = "out.db"
concurrency = 4
label = "nightly"

[pools.llm]
algorithm = "least_busy"
cooldown_s = 1
resources = [
  {id = "k1", capacity = 2, rpm = 600, secrets = {api_key = "${PYA_KEY}"}},
  {id = "k2", capacity = 2, options = {base_url = "${PYA_URL:-http://127.0.0.1:9/v1}"}},
]

[pipeline]
name = "demo"

[[pipeline.tasks]]
use = "simulate_llm"
name = "ask"
resource = "llm"
retry = {max_attempts = 3, base = 0.01}
args = {prompt = "Q: {input}", ttft_s = 0.001, itl_s = 0, tokens = 3}

[[pipeline.tasks]]
use = "flaky"
retry = {max_attempts = 2, base = 0.001}

[[pipeline.tasks]]
use = "echo"
version = 2

[source]
range = 5
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYA_KEY", SECRET)
    monkeypatch.delenv("PYA_URL", raising=False)
    (tmp_path / "c.yaml").write_text(YAML, encoding="utf-8")
    return tmp_path


def test_yaml_toml_and_json_files_give_the_same_effective_config(folder: Path) -> None:
    from_yaml = load_config("c.yaml")
    (folder / "c.toml").write_text(TOML, encoding="utf-8")
    (folder / "c.json").write_text(json.dumps(_yaml(YAML)), encoding="utf-8")
    assert load_config("c.toml").effective == from_yaml.effective
    assert load_config("c.json").effective == from_yaml.effective


def _yaml(text: str) -> object:
    import yaml

    return yaml.safe_load(text)


def test_a_config_builds_the_run_packages_own_objects(folder: Path) -> None:
    loaded = load_config("c.yaml")
    [pool] = loaded.pools
    assert isinstance(pool, Pool)
    assert pool.algorithm is not None
    assert (pool.name, pool.algorithm.name) == ("llm", "least_busy")
    k1, k2 = pool.resources
    assert (k1.capacity, k1.rpm, k1.health.cooldown_s) == (2, 600, 1)
    assert k1.options["secrets"] == {"api_key": SECRET}  # the task reads the real key
    assert k2.options["base_url"] == "http://127.0.0.1:9/v1"  # the ${VAR:-default}
    assert all(isinstance(t, Task) for t in loaded.template.tasks)
    assert [t.name for t in loaded.template.tasks] == ["ask", "flaky", "echo"]
    assert loaded.template.tasks[0].retry.max_attempts == 3
    assert loaded.runner["concurrency"] == 4
    assert loaded.runner["grace_s"] == 10.0
    assert loaded.store == "out.db"


def test_a_built_in_tasks_arguments_are_part_of_its_identity(folder: Path) -> None:
    first = load_config("c.yaml").template.tasks[0].fingerprint
    (folder / "c.yaml").write_text(YAML.replace("Q: {input}", "Question: {input}"))
    assert load_config("c.yaml").template.tasks[0].fingerprint != first


def test_validate_prints_the_effective_config_with_secrets_masked_and_creates_nothing(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["validate", "-c", "c.yaml"]) == 0
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    assert "secrets: '***'" in out
    assert "grace_s: 10.0" in out  # defaults are filled in
    assert "c.yaml: OK. Pipeline 'demo' (3 tasks), 1 pools (2 resources), 5 rows" in err
    assert sorted(p.name for p in folder.iterdir()) == ["c.yaml"]
    assert run_cli(["validate", "-c", "c.yaml", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run"]["concurrency"] == 4


def test_run_c_records_the_effective_config_with_overrides_and_no_secret_anywhere(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["run", "-c", "c.yaml", "--concurrency", "3", "--store", "o.db"]) == 0
    assert not (folder / "out.db").exists()  # --store overrides run.store
    with SQLiteStore(folder / "o.db", read_only=True) as store:
        [run] = store.rows(RowKind.RUNS)
        assert store.count_by_state() == {"succeeded": 5}
    config = json.loads(run["config"]) if isinstance(run["config"], str) else run["config"]
    assert config["concurrency"] == 3
    assert config["file"]["run"]["concurrency"] == 3
    assert config["file"]["run"]["label"] == "nightly"
    assert config["file"]["pools"]["llm"]["resources"][0]["secrets"] == "***"
    for path in folder.iterdir():  # not in the store, its WAL, nor anything else written
        assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in capsys.readouterr().err


def test_a_flag_given_on_the_command_line_overrides_the_source(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "rows.jsonl").write_text('{"id": "a"}\n{"id": "b"}\n', encoding="utf-8")
    argv = ["run", "-c", "c.yaml", "--input", "rows.jsonl", "--key", "id", "--limit", "1"]
    assert run_cli(argv) == 0
    with SQLiteStore(folder / "out.db", read_only=True) as store:
        keys = [p["key"] for p in store.rows(RowKind.PIPELINES)]
    assert keys == ["a"]


def test_resume_c_continues_a_run_and_reuses_the_steps_that_did_not_change(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = YAML.replace("{use: echo, version: 2}", "{use: boom, name: echo}")
    (folder / "c.yaml").write_text(broken, encoding="utf-8")
    assert run_cli(["run", "-c", "c.yaml"]) == 1
    assert "pyattacker run -c c.yaml --store out.db --resume" in capsys.readouterr().err
    (folder / "c.yaml").write_text(YAML, encoding="utf-8")  # the last step fixed
    assert run_cli(["resume", "-c", "c.yaml"]) == 0
    with SQLiteStore(folder / "out.db", read_only=True) as store:
        assert store.count_by_state() == {"succeeded": 5}
        ok = [a for a in store.rows(RowKind.ATTEMPTS) if a["outcome"] == "ok"]
    assert sorted({a["task"] for a in ok}) == ["ask", "echo", "flaky"]
    assert sum(a["task"] == "ask" for a in ok) == 5  # the paid step never ran twice


def test_a_users_task_by_module_attr_and_a_factory_called_with_args(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "mine.py").write_text(
        "from pyattacker import task\n\n"
        "@task(retry='exponential')\n"
        "def double(x):\n    return x * 2\n\n"
        "def add(*, n):\n    def adding(x):\n        return x + n\n    return adding\n",
        encoding="utf-8",
    )
    (folder / "u.yaml").write_text(
        "pipeline:\n  name: mine\n  tasks:\n"
        "    - {use: 'mine.py:double', retry: none}\n"
        "    - {use: 'mine.py:add', args: {n: 10}}\n"
        "source: {range: 3}\nrun: {store: u.db}\n",
        encoding="utf-8",
    )
    loaded = load_config("u.yaml")
    double, add = loaded.template.tasks
    assert (double.name, double.retry.max_attempts, add.name) == ("double", 1, "add")
    assert run_cli(["run", "-c", "u.yaml", "--json"]) == 0
    with SQLiteStore(folder / "u.db", read_only=True) as store:
        outputs = sorted(r["output"] for r in _results(store))
    assert outputs == [10, 12, 14]


def _results(store: SQLiteStore) -> list[dict[str, object]]:
    from pyattacker.store import export_rows

    path = Path("results.jsonl")
    export_rows(store, path, kind="results", fmt="jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_run_row_remembers_the_command_that_resumes_it(folder: Path) -> None:
    assert run_cli(["run", "-c", "c.yaml"]) == 0
    with sqlite3.connect(folder / "out.db") as conn:
        [(config,)] = conn.execute("SELECT config FROM runs").fetchall()
    assert "run -c c.yaml --store out.db --resume" in json.loads(config)["command"]


NAMES = st.text(string.ascii_uppercase + "_", min_size=1, max_size=8)
PLAIN = st.text(st.characters(blacklist_characters="${}"), max_size=20)


@given(st.dictionaries(NAMES, PLAIN.filter(bool), max_size=4), PLAIN, PLAIN)
def test_variables_are_filled_exactly_and_other_text_is_kept(
    environ: dict[str, str], before: str, after: str
) -> None:
    for name, value in environ.items():
        found = substitute({"f": f"{before}${{{name}}}{after}"}, environ, strict_env=True)
        assert found.data == {"f": before + value + after}
    assert substitute({"f": before + after}, environ, strict_env=True).data == {"f": before + after}


def test_defaults_literal_dollars_and_unset_variables() -> None:
    environ = {"SET": "v", "EMPTY": ""}
    found = substitute(
        {"a": "${SET:-d}", "b": ["${UNSET:-d}", "${EMPTY:-d}"], "c": "$${SET}", "d": "${UNSET}"},
        environ,
        strict_env=False,
    )
    assert found.data == {"a": "v", "b": ["d", "d"], "c": "${SET}", "d": ""}
    assert found.unset == [("d", "UNSET")]


DOCS = Path(__file__).resolve().parent.parent / "docs" / "run.md"
MYCHECKS = (
    "def grader(*, threshold):\n"
    "    def grade(row):\n"
    "        return {**row, 'pass': len(row['answer']['text']) > threshold}\n"
    "    return grade\n"
)


def _config_section() -> str:
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("## Config files")
    return text[start : text.index("\n## ", start + 1)]


def test_every_config_in_the_docs_validates_and_the_first_runs_as_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import re

    monkeypatch.chdir(tmp_path)
    section = _config_section()
    yamls = re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert len(yamls) >= 2
    (tmp_path / "mychecks.py").write_text(MYCHECKS, encoding="utf-8")
    for n, text in enumerate(yamls):
        (tmp_path / f"doc{n}.yaml").write_text(text, encoding="utf-8")
        assert run_cli(["validate", "-c", f"doc{n}.yaml"]) == 0, capsys.readouterr().err
    (tmp_path / "try.yaml").write_text(yamls[0], encoding="utf-8")
    console = re.search(r"```console\n(.*?)```", section, re.DOTALL)
    assert console is not None
    for line in console.group(1).splitlines():
        words = line.split("#")[0].split()[1:]  # "$ pyattacker ..." without the comment
        assert words[0] == "pyattacker"
        assert run_cli(words[1:]) == 0, (line, capsys.readouterr().err)
    with SQLiteStore(tmp_path / "try.db", read_only=True) as store:
        assert store.count_by_state() == {"succeeded": 20}
    bad = yamls[0].replace("max_attempts: 4", "max_attempts: 0")
    (tmp_path / "bad.yaml").write_text(bad, encoding="utf-8")
    capsys.readouterr()
    assert run_cli(["validate", "-c", "bad.yaml"]) == 2
    shown = re.search(r"validate -c bad.yaml.*\n(error: .*)\n", section)
    assert shown is not None
    assert capsys.readouterr().err.strip() == shown.group(1)


def test_source_repeats_and_the_run_sections_stop_condition_reach_the_run(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "s.yaml").write_text(
        "run: {store: s.db, stop_after_failures: 2, concurrency: 1}\n"
        "pipeline: {name: s, tasks: [{use: boom}]}\n"
        "source: {range: 3, repeats: 2}\n",
        encoding="utf-8",
    )
    assert run_cli(["run", "-c", "s.yaml"]) == 130  # stopped after 2 failures, like --stop-...
    assert "stop_after_failures" in capsys.readouterr().err
    with SQLiteStore(folder / "s.db", read_only=True) as store:
        assert store.count_by_state().get("failed") == 2
    (folder / "s.yaml").write_text(
        "run: {store: r.db}\npipeline: {name: r, tasks: [{use: echo}]}\n"
        "source: {range: 3, repeats: 2}\n",
        encoding="utf-8",
    )
    assert run_cli(["run", "-c", "s.yaml"]) == 0
    with SQLiteStore(folder / "r.db", read_only=True) as store:
        repeats = sorted(p["repeat"] for p in store.rows(RowKind.PIPELINES))
    assert repeats == [0, 0, 0, 1, 1, 1]


def test_a_template_field_the_first_row_lacks_is_warned_about_by_its_path(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "rows.jsonl").write_text('{"id": 1, "question": "q?"}\n', encoding="utf-8")
    (folder / "t.yaml").write_text(
        "pipeline:\n  name: t\n  tasks:\n"
        "    - {use: simulate_llm, name: answer, args: {prompt: '{question}', ttft_s: 0}}\n"
        "    - {use: simulate_llm, name: judge, args: {prompt: '{answr.text} {question}'}}\n"
        "source: {path: rows.jsonl}\n",
        encoding="utf-8",
    )
    assert run_cli(["validate", "-c", "t.yaml"]) == 0
    err = capsys.readouterr().err
    assert (
        "warning: pipeline.tasks[1].args: judge reads {answr}, which the first row lacks "
        "(it has id, question; the steps before it add answer)"
    ) in err
    assert "tasks[0]" not in err


def test_missing_fields_stops_at_a_step_whose_output_it_cannot_know(folder: Path) -> None:
    from pyattacker.config import missing_fields

    (folder / "mine.py").write_text("def own(x):\n    return x\n", encoding="utf-8")
    (folder / "m.yaml").write_text(
        "pipeline:\n  name: m\n  tasks:\n"
        "    - {use: 'mine.py:own'}\n"
        "    - {use: simulate_llm, args: {prompt: '{anything}'}}\n",
        encoding="utf-8",
    )
    assert missing_fields(load_config("m.yaml").template.tasks, {"a": 1}) == []
    assert missing_fields(load_config("c.yaml").template.tasks, 3) == []  # {input} only
