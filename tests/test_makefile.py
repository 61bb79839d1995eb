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


def test_make_demo_installs_the_runtime_and_compiles_its_load_path_without_the_dev_tools(
    tmp_path: Path,
) -> None:
    plan = _planned("demo", tmp_path / "venv")
    runtime = plan.index("pip install -q -c constraints.txt -e .")
    # compiled where a C compiler is at hand, in the venv, over what the runtime installed
    compiled = plan.index("PYATTACKER_COMPILE=1")
    assert runtime < plan.index("setuptools wheel mypy") < compiled < plan.index("pyattacker demo")
    assert "--no-build-isolation --no-deps" in plan[compiled:]
    assert "no C compiler" in plan  # and said so where there is none
    assert "[dev" not in plan
    assert "dev-requirements" not in plan
    assert "ray" not in plan


def test_make_test_adds_the_dev_tools_on_top_of_the_compiled_runtime(tmp_path: Path) -> None:
    plan = _planned("test", tmp_path / "venv")
    compiled = plan.index("PYATTACKER_COMPILE=1")
    # the dev tools and the ray extra (so the Ray tests run in CI), as requirements: pip
    # does not build the package again, pure, over the compiled one
    extras = plan.index('extras["dev"] + extras["ray"]')
    dev = plan.index("pip install -q -c constraints.txt -r")
    assert compiled < extras < dev < plan.index("scripts/check")
    assert plan.count("-e .") == 2  # the runtime, then compiled; never '.[dev,ray]'


def test_make_test_installs_the_system_chromium_only_where_it_is_missing(tmp_path: Path) -> None:
    plan = _planned("test", tmp_path / "venv")
    check = plan.index("[ -x /usr/bin/chromium ] || command -v chromium")
    assert check < plan.index("apt-get install -y -qq chromium") < plan.index("scripts/check")
    assert "playwright install" not in plan  # the browser is Debian's, never a download
