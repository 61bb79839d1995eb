"""``make demo`` installs only what the demo needs; ``make test`` adds the dev tools (and
the ray extra its Ray tests need)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _planned(target: str, venv: Path) -> str:
    """What ``make TARGET`` would run on a machine without a venv (``make -n``: runs nothing)."""
    done = subprocess.run(
        ["make", "-n", target, f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True,
        timeout=30, check=True,
    )  # fmt: skip
    return done.stdout


def test_make_demo_installs_the_runtime_without_the_dev_tools(tmp_path: Path) -> None:
    plan = _planned("demo", tmp_path / "venv")
    installs = [line for line in plan.splitlines() if "pip install" in line]
    assert installs == [line for line in installs if "-c constraints.txt -e ." in line]
    assert len(installs) == 1
    assert "[dev" not in plan
    assert "ray" not in plan
    assert "pyattacker demo" in plan


def test_make_test_adds_the_dev_tools_on_top_of_the_runtime(tmp_path: Path) -> None:
    plan = _planned("test", tmp_path / "venv")
    installs = [line for line in plan.splitlines() if "pip install" in line]
    assert len(installs) == 2
    assert installs[0].endswith("-c constraints.txt -e .")  # the runtime, as for the demo
    # the dev tools and the ray extra, so the Ray tests run in CI
    assert installs[1].endswith("-c constraints.txt -e '.[dev,ray]'")
    assert "scripts/check" in plan


def test_make_test_installs_the_system_chromium_only_where_it_is_missing(tmp_path: Path) -> None:
    plan = _planned("test", tmp_path / "venv")
    check = plan.index("[ -x /usr/bin/chromium ] || command -v chromium")
    assert check < plan.index("apt-get install -y -qq chromium") < plan.index("scripts/check")
    assert "playwright install" not in plan  # the browser is Debian's, never a download
