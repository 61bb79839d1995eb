"""A Ray path refuses what cannot work at once, exit 2 and nothing written: Ray not
installed (``pyattacker[ray]`` not taken: the install command), a cluster address nobody
answers at, a task shape that cannot leave the Runner; and nothing else ever loads Ray."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pyattacker.cli import run_cli
from pyattacker.errors import ConfigError
from pyattacker.run import task


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError


def square(x: int) -> int:
    return x * x


@pytest.mark.usefixtures("no_ray")
def test_a_ray_task_without_ray_is_refused_when_decorated_with_the_install_command() -> None:
    with pytest.raises(ConfigError, match=r"needs Ray") as caught:
        task(square, executor="ray")
    assert caught.value.hint == "pip install 'pyattacker[ray]'"
    assert task(square).executor == "local"  # the default never asks for Ray


@pytest.mark.usefixtures("no_ray")
def test_bench_ray_without_ray_exits_2_naming_the_flag_and_the_install_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    small = ["--algorithms", "wait", "--seeds", "1", "--jobs", "10", "--horizon", "10"]
    code = run_cli(["bench", *small, "--ray", "--json", str(report)])
    err = capsys.readouterr().err
    assert code == 2
    assert "--ray" in err
    assert "pip install 'pyattacker[ray]'" in err
    assert not report.exists()


def test_an_unknown_executor_is_refused_naming_the_choices() -> None:
    with pytest.raises(ConfigError, match="unknown executor 'dask'") as caught:
        task(square, executor="dask")
    assert caught.value.hint == "one of: local, ray"


def test_a_ray_task_that_takes_ctx_is_refused_as_ctx_stays_in_the_runner() -> None:
    pytest.importorskip("ray")

    def leases(x: int, ctx: object) -> int:
        return x

    with pytest.raises(ConfigError, match="takes a ctx"):
        task(leases, executor="ray")


def test_importing_pyattacker_and_running_bench_never_loads_ray() -> None:
    code = (
        "import sys, pyattacker.run, pyattacker.benchmark, pyattacker.cli; "
        "from pyattacker.run import task; task(len); "
        "print('ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_bench_ray_at_an_address_nobody_listens_on_exits_2_at_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("ray")
    small = ["--algorithms", "wait", "--seeds", "1", "--jobs", "10", "--horizon", "10"]
    code = run_cli(["bench", *small, "--ray", "127.0.0.1:1"])
    err = capsys.readouterr().err
    assert code == 2
    assert "no Ray cluster answers at 127.0.0.1:1" in err
    assert "ray start --head" in err


@pytest.mark.usefixtures("no_ray")
def test_attack_ray_without_ray_exits_2_naming_the_flag_and_the_install_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    args = ["attack", "http://127.0.0.1:9/", "--rate", "10/s", "--requests", "4", "--quiet"]
    code = run_cli([*args, "--workers", "2", "--json", str(report), "--ray"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--ray" in err
    assert "pip install 'pyattacker[ray]'" in err
    assert not report.exists()
