"""``run --ray [ADDRESS]``: the cluster for a run's Ray steps, as ``bench`` and ``attack``
take it; checked before the store is created, its refusals naming ``--ray``, and the
caller's ``RAY_ADDRESS`` as it was afterwards (no cluster is started here)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pyattacker.cli import run_cli
from test_ray_missing import _http_server, _ray_config, listening

LOCAL_ONLY = """
from pyattacker import pipeline, task


@task
def length(row: dict) -> int:
    return len(str(row))


job = pipeline("job", length)
"""


@pytest.fixture(autouse=True)
def no_ray_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)


def test_run_ray_at_an_address_of_another_form_exits_2_naming_the_flag_writing_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("ray")
    config, store = _ray_config(tmp_path)
    assert run_cli(["run", "-c", str(config), "--ray", "bogus"]) == 2
    err = capsys.readouterr().err
    assert "--ray: 'bogus' is not a Ray cluster's address" in err
    assert not store.exists()
    assert "RAY_ADDRESS" not in os.environ  # the command's, not the caller's


def test_run_ray_at_a_web_server_exits_2_naming_the_flag(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("ray")
    config, store = _ray_config(tmp_path)
    with listening(_http_server) as address:
        code = run_cli(["run", "-c", str(config), "--ray", address])
    assert code == 2
    assert f"--ray: something answers at {address}, but not a Ray cluster" in (
        capsys.readouterr().err
    )
    assert not store.exists()


def test_run_ray_for_a_pipeline_with_no_step_on_ray_exits_2_saying_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.py").write_text(LOCAL_ONLY)
    (tmp_path / "items.jsonl").write_text('{"id": 1}\n')
    argv = ["run", "job.py:job", "--input", "items.jsonl", "--store", "s.db"]
    for ray in (["--ray"], ["--ray", "127.0.0.1:1"]):
        assert run_cli([*argv, *ray]) == 2
        err = capsys.readouterr().err
        assert "--ray: no step of this pipeline runs on Ray" in err
        assert "executor" in err
    assert not (tmp_path / "s.db").exists()


def test_run_help_lists_ray(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["run", "--help"]) == 0
    assert "--ray [ADDRESS]" in capsys.readouterr().out
