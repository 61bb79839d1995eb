"""Plugins by entry point: `examples/plugin_package` installed and used from a config file
(its task by `use:`, its algorithm by name), listed by `pyattacker plugins`; a broken
plugin is listed with its error and never stops a run that does not name it."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyattacker import _plugins
from pyattacker.cli import run_cli
from pyattacker.store import SQLiteStore, results

PACKAGE = Path(__file__).parent.parent / "examples" / "plugin_package"


def install(package: Path, target: Path) -> None:
    """What `pip install --target` leaves for a pure-Python package: its modules and a
    `.dist-info` with the entry points of its pyproject.toml. Done by hand because pip
    needs `wheel` (or setuptools >= 70.1) to build, which a fresh offline machine may lack;
    `test_pip_installs_the_example_plugin` checks pip itself where it can build."""
    project = tomllib.loads((package / "pyproject.toml").read_text())["project"]
    shutil.copytree(package / "src", target, dirs_exist_ok=True)
    name = project["name"].replace("-", "_")
    info = target / f"{name}-{project['version']}.dist-info"
    info.mkdir()
    info.joinpath("METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
    )
    lines = []
    for group, points in project.get("entry-points", {}).items():
        lines.append(f"[{group}]")
        lines += [f"{key} = {value}" for key, value in points.items()]
    info.joinpath("entry_points.txt").write_text("\n".join(lines) + "\n")


def _broken(target: Path) -> None:
    info = target / "broken_plugin-1.0.dist-info"
    info.mkdir()
    info.joinpath("METADATA").write_text(
        "Metadata-Version: 2.1\nName: broken-plugin\nVersion: 1.0\n"
    )
    info.joinpath("entry_points.txt").write_text(
        "[pyattacker.tasks]\nbroken.task = no_such_module_here:task\n"
    )


def _store_plugin(target: Path) -> None:
    """A distribution whose store plugin keeps the record in memory (``mem://NAME``)."""
    (target / "memstore_plugin.py").write_text(
        "from pyattacker.store import MemoryStore\n\n\n"
        "def open_memory(location, *, read_only=False):\n"
        "    return MemoryStore(read_only=read_only)\n"
    )
    info = target / "memstore_plugin-2.0.dist-info"
    info.mkdir()
    info.joinpath("METADATA").write_text(
        "Metadata-Version: 2.1\nName: memstore-plugin\nVersion: 2.0\n"
    )
    info.joinpath("entry_points.txt").write_text(
        "[pyattacker.stores]\nmem = memstore_plugin:open_memory\n"
    )


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    target = tmp_path / "site"
    target.mkdir()
    install(PACKAGE, target)
    _broken(target)
    _store_plugin(target)
    monkeypatch.syspath_prepend(str(target))
    importlib.invalidate_caches()
    monkeypatch.setattr(_plugins, "_LOADED", {})
    monkeypatch.setattr(_plugins, "_FAILED", {})
    monkeypatch.chdir(tmp_path)
    yield target
    sys.modules.pop("pyattacker_example_plugin", None)


def test_plugins_lists_the_installed_entry_points_with_their_distribution(
    installed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["plugins", "--json"]) == 0  # nothing imported: nothing failed yet
    listed = json.loads(capsys.readouterr().out)["plugins"]
    found = {(p["group"], p["name"]): p for p in listed}
    assert found["pyattacker.tasks", "example.shout"]["distribution"] == (
        "pyattacker-example-plugin"
    )
    assert found["pyattacker.algorithms", "example_first"]["version"] == "0.1.0"
    assert "pyattacker_example_plugin" not in sys.modules  # listing imports nothing


def test_plugins_check_shows_the_broken_plugin_and_its_error(
    installed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["plugins", "--check"]) == 1
    out = capsys.readouterr().out
    assert "broken.task" in out
    assert "FAILED: ModuleNotFoundError" in out
    assert "example.shout" in out


def test_a_config_uses_the_plugins_task_and_algorithm_and_ignores_the_broken_one(
    installed: Path,
) -> None:
    code = run_cli(["run", "-c", str(PACKAGE / "shout.yaml"), "--store", "s.db"])
    assert code == 0
    with SQLiteStore("s.db", read_only=True) as store:
        outputs = sorted(item["output"] for item in results(store))
    assert outputs == [f"{n}!!" for n in range(5)]


def test_a_config_naming_the_broken_plugin_exits_2_with_its_field(
    installed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("b.yaml").write_text(
        "pipeline: {name: b, tasks: [{use: echo}, {use: broken.task}]}\nsource: {range: 2}\n"
    )
    assert run_cli(["run", "-c", "b.yaml", "--store", "b.db"]) == 2
    err = capsys.readouterr().err
    assert "pipeline.tasks[1].use" in err
    assert "failed to load" in err
    assert not Path("b.db").exists()


def test_a_plugin_name_that_is_not_installed_exits_2_naming_the_field(
    installed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("n.yaml").write_text(
        "pipeline: {name: n, tasks: [{use: example.shoot}]}\nsource: {range: 2}\n"
    )
    assert run_cli(["validate", "-c", "n.yaml"]) == 2
    err = capsys.readouterr().err
    assert "pipeline.tasks[0].use" in err
    assert "did you mean 'example.shout'" in err


def _pip_can_build() -> bool:
    try:
        importlib.import_module("wheel")
    except ImportError:
        import setuptools

        return tuple(int(p) for p in setuptools.__version__.split(".")[:2]) >= (70, 1)
    return True


@pytest.mark.skipif(not _pip_can_build(), reason="pip needs wheel or setuptools>=70.1 offline")
def test_pip_installs_the_example_plugin(tmp_path: Path) -> None:
    target, source = tmp_path / "site", tmp_path / "plugin_package"
    shutil.copytree(PACKAGE, source)  # pip builds in place: not in the repository
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(target), str(source)],
        check=True, capture_output=True,
    )  # fmt: skip
    points = list(target.glob("pyattacker_example_plugin-*.dist-info/entry_points.txt"))
    assert points
    assert "example.tagged" in points[0].read_text()


def test_an_attack_sends_with_the_plugin_sender_it_names(
    installed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pyattacker.servers import EchoServerProcess

    with EchoServerProcess(delay="fixed:1ms") as echo:
        argv = ["attack", echo.url, "--sender", "example.tagged", "--rate", "100/s"]
        assert run_cli([*argv, "--requests", "20", "--json", "r.json", "-q"]) == 0
        assert echo.stats()["statuses"] == {"299": 20}  # only the plugin's sender asks for it
    report = json.loads((installed.parent / "r.json").read_text())
    assert report["plan"]["sender"] == "example.tagged"
    assert report["total"]["status"] == {"299": 20}


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--sender", "example.taged"], "did you mean 'example.tagged'"),
        (["--sender", "example.tagged", "--targets", "mix.jsonl"], "--targets"),
    ],
)
def test_a_sender_that_is_not_installed_or_cannot_apply_exits_2(
    installed: Path, capsys: pytest.CaptureFixture[str], extra: list[str], words: str
) -> None:
    (installed.parent / "mix.jsonl").write_text('{"url": "/a"}\n')
    argv = ["attack", "http://127.0.0.1:9/", "--rate", "10/s", "--requests", "1", *extra]
    assert run_cli([*argv, "-q"]) == 2
    err = capsys.readouterr().err
    assert "--sender" in err
    assert words in err


def test_a_store_plugin_opens_its_scheme_and_an_unknown_scheme_is_refused(
    installed: Path,
) -> None:
    from pyattacker.errors import ConfigError
    from pyattacker.run import Runner, pipeline, task
    from pyattacker.store import MemoryStore, open_store

    @task
    def twice(x: int) -> int:
        return 2 * x

    store = open_store("mem://anything")
    assert isinstance(store, MemoryStore)
    with Runner(store) as runner:
        assert runner.run(pipeline("t", twice).map([1, 2])).exit_code == 0
    with pytest.raises(ConfigError) as caught:
        open_store("nosuch://x")
    assert caught.value.field == "store"
