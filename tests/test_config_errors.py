"""Bad config files: each kind exits 2 from `validate`, `run -c` and `resume -c`, names
its field path, and creates nothing on disk (no store, no folder, no bytecode)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.cli import run_cli
from pyattacker.config._schema import RUN, checked
from pyattacker.errors import ConfigError
from pyattacker.tasks import BUILT_IN_TASKS, NOT_ON_RAY, ON_RAY

GOOD = {
    "run": "run:\n  store: out.db\n  concurrency: 4\n",
    "pools": (
        "pools:\n  llm:\n    algorithm: least_busy\n    resources:\n"
        "      - {id: k1, capacity: 2}\n      - {id: k2, capacity: 2}\n"
    ),
    "pipeline": (
        "pipeline:\n  name: demo\n  tasks:\n"
        "    - {use: simulate_llm, name: ask, resource: llm, args: {ttft_s: 0}}\n"
        "    - {use: echo}\n"
    ),
    "source": "source:\n  path: rows.jsonl\n",
}


def config(**sections: str) -> str:
    """The good config with some sections replaced (an empty string drops one)."""
    return "".join(sections.get(name, text) for name, text in GOOD.items())


def task(line: str) -> str:
    return f"pipeline:\n  name: demo\n  tasks:\n    - {{use: echo}}\n    - {line}\n"


def resource(line: str) -> str:
    return f"pools:\n  llm:\n    resources:\n      - {line}\n"


# (what is wrong, file text or (suffix, text), the field path the message must name)
BAD: list[tuple[str, str | tuple[str, str], str]] = [
    ("unknown top-level section", config() + "sorce:\n  path: x\n", "sorce"),
    ("unknown run field, did you mean", config(run="run:\n  stor: x.db\n"), "run.stor"),
    ("concurrency of the wrong type", config(run="run:\n  concurrency: many\n"), "run.concurrency"),
    ("concurrency out of range", config(run="run:\n  concurrency: 0\n"), "run.concurrency"),
    (
        "admission below concurrency",
        config(run="run:\n  concurrency: 8\n  admission: 2\n"),
        "admission",
    ),
    (
        "a stop_after that is no duration",
        config(run="run:\n  stop_after: soon\n"),
        "run.stop_after",
    ),
    (
        "write_behind not a boolean",
        config(run="run:\n  write_behind: sometimes\n"),
        "run.write_behind",
    ),
    ("a pools section that is a list", config(pools="pools:\n  - llm\n"), "pools"),
    (
        "a pool without resources",
        config(pools="pools:\n  llm:\n    algorithm: wait\n"),
        "pools.llm.resources",
    ),
    (
        "an unknown algorithm",
        config(pools="pools:\n  llm:\n    algorithm: fastest\n    resources: [{id: a}]\n"),
        "pools.llm.algorithm",
    ),
    (
        "an algorithm parameter unknown",
        config(
            pools="pools:\n  llm:\n    algorithm: {name: backoff, bogus: 1}\n"
            "    resources: [{id: a}]\n"
        ),
        "pools.llm.algorithm",
    ),
    (
        "a resource without an id",
        config(pools=resource("{capacity: 2}")),
        "pools.llm.resources[0].id",
    ),
    (
        "a resource field unknown",
        config(pools=resource("{id: a, capacty: 2}")),
        "pools.llm.resources[0].capacty",
    ),
    (
        "a capacity below 1",
        config(pools=resource("{id: a, capacity: -1}")),
        "pools.llm.resources[0].capacity",
    ),
    ("a negative rpm", config(pools=resource("{id: a, rpm: -5}")), "pools.llm.resources[0].rpm"),
    (
        "two resources with one id",
        config(pools="pools:\n  llm:\n    resources: [{id: a}, {id: a}]\n"),
        "pools.llm.resources[1].id",
    ),
    ("no pipeline", config(pipeline=""), "pipeline"),
    (
        "a pipeline without a name",
        config(pipeline="pipeline:\n  tasks: [{use: echo}]\n"),
        "pipeline.name",
    ),
    (
        "a pipeline without tasks",
        config(pipeline="pipeline:\n  name: p\n  tasks: []\n"),
        "pipeline",
    ),
    ("a task without use", config(pipeline=task("{name: x}")), "pipeline.tasks[1].use"),
    (
        "an unknown built-in task",
        config(pipeline=task("{use: llm.chta, resource: llm}")),
        "pipeline.tasks[1].use",
    ),
    (
        "a task field unknown",
        config(pipeline=task("{use: echo, name: e2, retries: 3}")),
        "pipeline.tasks[1].retries",
    ),
    (
        "a task naming a pool that is not there",
        config(pipeline=task("{use: delay, resource: lm}")),
        "pipeline.tasks[1].resource",
    ),
    (
        "llm.chat without a pool",
        config(pipeline=task("{use: llm.chat, args: {prompt: '{q}'}}")),
        "pipeline.tasks[1].resource",
    ),
    (
        "an unknown executor",
        config(pipeline=task("{use: delay, executor: rey}")),
        "pipeline.tasks[1].executor",
    ),
    (
        "a built-in that needs the Runner, on Ray",
        config(pipeline=task("{use: delay, executor: ray}")),
        "pipeline.tasks[1].executor",
    ),
    (
        "a retry setting out of range",
        config(pipeline=task("{use: flaky, retry: {max_attempts: 0}}")),
        "pipeline.tasks[1].retry.max_attempts",
    ),
    (
        "a retry setting unknown",
        config(pipeline=task("{use: flaky, retry: {max_atempts: 3}}")),
        "pipeline.tasks[1].retry.max_atempts",
    ),
    (
        "an unknown retry preset",
        config(pipeline=task("{use: flaky, retry: forever}")),
        "pipeline.tasks[1].retry",
    ),
    (
        "a timeout of zero",
        config(pipeline=task("{use: delay, timeout_s: 0}")),
        "pipeline.tasks[1].timeout_s",
    ),
    (
        "an argument the task does not take",
        config(pipeline=task("{use: delay, args: {second: 1}}")),
        "pipeline.tasks[1].args.second",
    ),
    (
        "an argument of the wrong kind",
        config(pipeline=task("{use: delay, args: {seconds: -1}}")),
        "pipeline.tasks[1].args.seconds",
    ),
    (
        "a template with a bad slot",
        config(pipeline=task("{use: simulate_llm, args: {prompt: 'say {x y}'}}")),
        "pipeline.tasks[1].args.prompt",
    ),
    (
        "a required argument missing",
        config(pipeline=task("{use: shell}")),
        "pipeline.tasks[1].args.command",
    ),
    (
        "a use: module that does not import",
        config(pipeline=task("{use: 'no_such_module_xyz:judge'}")),
        "pipeline.tasks[1].use",
    ),
    (
        "a use: file without the attribute",
        config(pipeline=task("{use: 'mytasks.py:judg'}")),
        "pipeline.tasks[1].use",
    ),
    (
        "a use: target that is not callable",
        config(pipeline=task("{use: 'mytasks.py:NUMBER'}")),
        "pipeline.tasks[1].use",
    ),
    (
        "llm.chat on a pool whose resource has no base_url",
        config(pipeline=task("{use: llm.chat, resource: llm, args: {prompt: '{q}'}}")),
        "pools.llm.resources[0].options.base_url",
    ),
    (
        "your task leasing from a pool the config lacks",
        config(pipeline=task("{use: 'mytasks.py:judged'}")),
        "pipeline.tasks[1].resource",
    ),
    ("two tasks with one name", config(pipeline=task("{use: echo}")), "pipeline.tasks[1].name"),
    (
        "a source with both path and range",
        config(source="source:\n  path: rows.jsonl\n  range: 3\n"),
        "source",
    ),
    (
        "a source of an unknown format",
        config(source="source:\n  path: rows.jsonl\n  format: xml\n"),
        "source.format",
    ),
    (
        "a source file that is not there",
        config(source="source:\n  path: nope.jsonl\n"),
        "source.path",
    ),
    (
        "a source key that a row lacks",
        config(source="source:\n  path: rows.jsonl\n  key: nope\n"),
        "source.key",
    ),
    ("YAML 1.1 reads on: as true", config(run="run:\n  on: x\n"), "run.true"),
    ("a section given twice", config() + "run:\n  concurrency: 2\n", "-c"),
    ("a YAML syntax error", config() + "run: [\n", "-c"),
    ("a TOML syntax error", ("toml", "[run\nstore = 1\n"), "-c"),
    ("a JSON file that is a list", ("json", "[1, 2]"), "-c"),
    ("an unknown suffix", ("ini", "[run]\n"), "-c"),
    ("a malformed ${...}", config(run="run:\n  store: '${1BAD}'\n"), "run.store"),
    ("a top level that is a list", "- run\n", "-c"),
]

USER_TASKS = (
    "from pyattacker import task\n\nNUMBER = 3\n\n"
    "def judg_helper(value):\n    return value\n\n"
    "@task(resource='judges')\ndef judged(value):\n    return value\n"
)


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rows.jsonl").write_text('{"id": 1}\n{"id": 2}\n', encoding="utf-8")
    (tmp_path / "mytasks.py").write_text(USER_TASKS, encoding="utf-8")
    return tmp_path


def _write(folder: Path, text: str | tuple[str, str]) -> str:
    suffix, body = text if isinstance(text, tuple) else ("yaml", text)
    path = folder / f"bad.{suffix}"
    path.write_text(body, encoding="utf-8")
    return path.name


def _tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def test_there_are_at_least_25_kinds_of_bad_config() -> None:
    assert len(BAD) >= 25
    assert len({why for why, _, _ in BAD}) == len(BAD)


@pytest.mark.parametrize(("why", "text", "field"), BAD, ids=[why for why, _, _ in BAD])
@pytest.mark.parametrize("command", ["validate", "run", "resume"])
def test_a_bad_config_exits_2_names_its_field_and_creates_nothing(
    folder: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    why: str,
    text: str | tuple[str, str],
    field: str,
) -> None:
    name = _write(folder, text)
    before = _tree(folder)
    code = run_cli([command, "-c", name])
    err = capsys.readouterr().err
    assert code == 2, (why, err)
    if command != "resume" or not field.startswith("source."):  # resume: no store comes first
        assert f"{field}:" in err or f"{field}." in err or f"{field} (" in err, (why, err)
    assert "Traceback" not in err
    assert _tree(folder) == before, why


def test_a_missing_store_on_resume_exits_2_and_creates_nothing(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = _write(folder, config())
    assert run_cli(["resume", "-c", name]) == 2
    assert "there is no store at out.db to resume" in capsys.readouterr().err
    assert not (folder / "out.db").exists()
    name = _write(folder, config(run=""))
    assert run_cli(["resume", "-c", name]) == 2
    assert "run.store: which run should it continue?" in capsys.readouterr().err
    assert not (folder / "runs").exists()


def test_unknown_fields_are_answered_with_the_closest_known_one(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_cli(["validate", "-c", _write(folder, config(run="run:\n  concurency: 3\n"))])
    assert "did you mean 'concurrency'?" in capsys.readouterr().err
    run_cli(["validate", "-c", _write(folder, config(pipeline=task("{use: write_jsonl2}")))])
    assert "did you mean 'write_jsonl'?" in capsys.readouterr().err


def test_the_yaml_boolean_key_trap_is_explained(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_cli(["validate", "-c", _write(folder, config() + "yes: 1\n")])
    err = capsys.readouterr().err
    assert "read as the boolean true" in err
    assert "quote the key" in err


def test_a_boolean_where_a_string_belongs_says_why(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = config(pipeline="pipeline:\n  name: no\n  tasks: [{use: echo}]\n")
    assert run_cli(["validate", "-c", _write(folder, text)]) == 2
    err = capsys.readouterr().err
    assert "pipeline.name" in err
    assert "yes/no/on/off" in err


def test_strict_env_refuses_an_unset_variable_naming_its_field(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYA_TEST_UNSET", raising=False)
    text = config(pools=resource("{id: a, secrets: {api_key: '${PYA_TEST_UNSET}'}}"))
    name = _write(folder, text)
    before = _tree(folder)
    assert run_cli(["run", "-c", name, "--strict-env"]) == 2
    err = capsys.readouterr().err
    assert "pools.llm.resources[0].secrets.api_key" in err
    assert "PYA_TEST_UNSET" in err
    assert _tree(folder) == before
    assert run_cli(["validate", "-c", name]) == 0  # without --strict-env: a warning
    assert "warning: pools.llm.resources[0].secrets.api_key" in capsys.readouterr().err


def test_a_target_beside_c_is_refused(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = _write(folder, config())
    assert run_cli(["run", "mytasks.py:judg_helper", "-c", name]) == 2
    assert "TARGET" in capsys.readouterr().err
    assert not (folder / "out.db").exists()


def test_validating_a_config_that_imports_your_file_writes_no_bytecode(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.dont_write_bytecode", False)
    (folder / "fresh_tasks.py").write_text("def double(x):\n    return 2 * x\n")
    text = config(pipeline=task("{use: 'fresh_tasks.py:double'}"))
    before = _tree(folder)
    assert run_cli(["validate", "-c", _write(folder, text)]) == 0, capsys.readouterr().err
    assert _tree(folder) == before | {"bad.yaml"}


KNOWN = st.sampled_from(sorted(RUN))


@given(
    st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12).filter(lambda k: k not in RUN)
)
def test_any_unknown_run_field_is_refused_by_its_path(name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        checked({name: 1}, RUN, "run")
    assert caught.value.field == f"run.{name}"


@given(KNOWN, st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5)))
def test_a_known_run_field_is_kept_or_refused_by_its_path(name: str, value: object) -> None:
    refused: ConfigError | None = None
    try:
        out = checked({name: value}, RUN, "run")
    except ConfigError as exc:
        refused = exc
    if refused is not None:
        assert refused.field == f"run.{name}"
    else:
        assert out.get(name) == (value if value is not None else RUN[name].default)


@pytest.mark.parametrize("use", sorted(NOT_ON_RAY))
def test_a_built_in_that_needs_the_runner_is_refused_on_ray_naming_those_that_can_run_there(
    folder: Path, capsys: pytest.CaptureFixture[str], use: str
) -> None:
    name = _write(folder, config(pipeline=task(f"{{use: {use}, executor: ray}}")))
    assert run_cli(["validate", "-c", name]) == 2
    err = capsys.readouterr().err
    assert f"pipeline.tasks[1].executor: {use} cannot run on Ray: it " in err
    assert "built-ins that run on Ray: shell, echo, write_jsonl, boom" in err
    assert "ctx" not in err  # a word for Python users, not for a config file's


def test_every_built_in_either_runs_on_ray_or_says_why_not() -> None:
    assert set(ON_RAY) | set(NOT_ON_RAY) == set(BUILT_IN_TASKS)
    assert not set(ON_RAY) & set(NOT_ON_RAY)


def test_the_built_ins_said_to_run_on_ray_build_as_ray_tasks(folder: Path) -> None:
    pytest.importorskip("ray")  # a Ray task is refused when decorated without Ray
    args = {"shell": "{command: 'echo {input}'}", "write_jsonl": "{path: out.jsonl}"}
    steps = "".join(
        f"    - {{use: {use}, executor: ray, args: {args.get(use, '{}')}}}\n" for use in ON_RAY
    )
    name = _write(folder, config(pipeline=f"pipeline:\n  name: demo\n  tasks:\n{steps}"))
    assert run_cli(["validate", "-c", name]) == 0
