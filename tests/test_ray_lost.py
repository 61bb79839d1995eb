"""``bench --ray`` when Ray fails under the sweep (the cluster stopped, a node lost): one
clear line saying how far the sweep got and a plain exit 1, no traceback and no report
(a sweep reports all its runs or none), with a stand-in for Ray that fails after two
runs; no cluster needed."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pyattacker.benchmark import _ray as bench_ray
from pyattacker.cli import run_cli


class RayError(Exception):
    """Stands for ``ray.exceptions.RayError``, the base of every error Ray raises."""


class LocalRayletDiedError(RayError):
    pass


class _DyingRay:
    """Runs the first ``survives`` runs it is handed, then fails as a lost raylet does;
    cancelling fails too (there is nothing left to cancel on)."""

    exceptions = SimpleNamespace(RayError=RayError)

    def __init__(self, survives: int) -> None:
        self.survives = survives
        self.calls: dict[int, tuple[Callable[[Any], Any], Any]] = {}

    def remote(self, **options: Any) -> Callable[[Callable[[Any], Any]], Any]:
        def wrap(fn: Callable[[Any], Any]) -> Any:
            def submit(harness: Any) -> int:
                ref = len(self.calls)
                self.calls[ref] = (fn, harness)
                return ref

            return SimpleNamespace(remote=submit)

        return wrap

    def wait(self, refs: list[int], num_returns: int) -> tuple[list[int], list[int]]:
        return sorted(refs)[:num_returns], sorted(refs)[num_returns:]

    def get(self, ref: int) -> Any:
        if ref >= self.survives:
            raise LocalRayletDiedError(
                "The task's local raylet died. Check raylet.out for more information.\nmore"
            )
        fn, harness = self.calls[ref]
        return fn(harness)

    def cancel(self, ref: int, force: bool) -> None:
        raise LocalRayletDiedError("nothing to cancel on")


def test_bench_ray_when_the_cluster_is_lost_exits_1_saying_how_many_runs_were_done(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    @contextlib.contextmanager
    def session(address: str | None, *, num_cpus: int | None, field: str) -> Iterator[Any]:
        yield _DyingRay(survives=2)

    monkeypatch.setattr(bench_ray, "ray_session", session)
    report = tmp_path / "b.json"
    small = ["--algorithms", "wait", "--seeds", "3", "--jobs", "10", "--horizon", "10"]
    code = run_cli(["bench", *small, "--ray", "--json", str(report)])
    err = capsys.readouterr().err
    assert code == 1
    assert "error: the Ray cluster was lost: 2 of 3 runs done, so no report" in err
    assert "LocalRayletDiedError: The task's local raylet died." in err
    assert "ray status" in err
    assert "Traceback" not in err
    assert "bug in pyattacker" not in err
    assert not report.exists()
