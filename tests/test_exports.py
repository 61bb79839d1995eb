"""The public surface is exactly what ``__all__`` says, and every name in it resolves."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import pyattacker

PUBLIC = {
    "AcquireAlgorithm",
    "AcquireRequest",
    "AcquireTimeout",
    "Adaptive",
    "Backoff",
    "Clock",
    "ConfigError",
    "ErrorClass",
    "Failover",
    "FatalError",
    "Health",
    "Immediate",
    "Lease",
    "LeaseLeakError",
    "LeastBusy",
    "LoopClock",
    "Pool",
    "PoolEvent",
    "PoolNotFound",
    "PipelineTemplate",
    "PoolStatistics",
    "PyAttackerError",
    "QuotaAware",
    "Resource",
    "ResourceSnapshot",
    "ResourceUnavailable",
    "RetryDecision",
    "RetryableError",
    "Retrying",
    "RunReport",
    "Runner",
    "Selector",
    "Sticky",
    "Task",
    "TaskContext",
    "Wait",
    "__version__",
    "error_class_of",
    "errors",
    "fanout",
    "pipeline",
    "register_algorithm",
    "register_codec",
    "resolve_algorithm",
    "resolve_retry",
    "retry_after_of",
    "task",
}


def test_all_of_pyattacker_is_exactly_the_public_names() -> None:
    assert set(pyattacker.__all__) == PUBLIC
    assert len(pyattacker.__all__) == len(PUBLIC)


def test_every_public_name_resolves_and_non_public_names_are_private_modules() -> None:
    for name in pyattacker.__all__:
        assert hasattr(pyattacker, name), name
    public_modules = {
        "clock",
        "errors",
        "pool",
        "retry",
        "testing",
        "cli",
        "http",
        "servers",
        "measure",
        "attack",
        "llm",
        "report",
        "run",
        "store",
        "benchmark",
        "world",
        "selftest",
        "config",
        "tasks",
    }
    for name in vars(pyattacker):
        if not name.startswith("_") and name not in PUBLIC:
            assert name in public_modules, f"unexpected public attribute {name!r}"


@pytest.mark.parametrize(
    "module",
    [
        "pyattacker.pool",
        "pyattacker.testing",
        "pyattacker.retry",
        "pyattacker.run",
        "pyattacker.store",
        "pyattacker.benchmark",
        "pyattacker.world",
        "pyattacker.llm",
        "pyattacker.config",
        "pyattacker.tasks",
    ],
)
def test_each_public_module_exports_names_that_exist_in_sorted_order(module: str) -> None:
    mod = importlib.import_module(module)
    names = list(mod.__all__)
    # ruff's RUF022 order: SCREAMING_CASE constants, then CamelCase classes, then the rest.
    assert names == sorted(names, key=lambda n: (not n.isupper(), not n[:1].isupper(), n))
    for name in names:
        assert hasattr(mod, name), f"{module}.{name}"


def test_importing_pyattacker_has_no_side_effects_worth_noticing() -> None:
    code = "import sys, pyattacker; print('asyncio' in sys.modules, 'rich' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # asyncio is part of the kernel; the terminal renderer is only for the CLI.
    assert out.stdout.split() == ["True", "False"]
