"""pyattacker: drive large workloads against rate-limited API providers.

The names here are the public API; everything else lives in a submodule whose name says
what it holds (``pyattacker.pool``, ``pyattacker.retry``, ``pyattacker.errors``,
``pyattacker.clock``, ``pyattacker.run``, ``pyattacker.store``, ``pyattacker.attack``,
``pyattacker.testing``).

Only the kernel's leaves (``errors``, ``clock``) load with the package. The names from
``pool``, ``retry`` and ``run`` load on first use (:func:`__getattr__`, PEP 562), so
``import pyattacker.clock`` or ``import pyattacker.world`` does not drag the whole library in
(see "Layers" in ``docs/architecture.md``). Type checkers read the ``TYPE_CHECKING`` imports.
"""

import importlib as _importlib
import typing as _typing

from pyattacker import _native, errors
from pyattacker._version import __version__
from pyattacker.clock import Clock, LoopClock
from pyattacker.errors import (
    AcquireTimeout,
    ConfigError,
    ErrorClass,
    FatalError,
    LeaseLeakError,
    PoolNotFound,
    PyAttackerError,
    ResourceUnavailable,
    RetryableError,
    error_class_of,
    retry_after_of,
)

# Before any compiled module loads (none of the above is one): a source edited since the
# build is never shadowed by its old compiled module.
_native.guard()

if _typing.TYPE_CHECKING:
    from pyattacker.pool import (
        AcquireAlgorithm,
        AcquireRequest,
        Adaptive,
        Backoff,
        Failover,
        Health,
        Immediate,
        Lease,
        LeastBusy,
        Pool,
        PoolEvent,
        PoolStatistics,
        QuotaAware,
        Resource,
        ResourceSnapshot,
        Selector,
        Sticky,
        TaskContext,
        Wait,
        register_algorithm,
        resolve_algorithm,
    )
    from pyattacker.retry import RetryDecision, Retrying, resolve_retry
    from pyattacker.run import (
        PipelineTemplate,
        Runner,
        RunReport,
        Task,
        fanout,
        pipeline,
        register_codec,
        task,
    )

# Which submodule each lazily loaded public name comes from.
_LAZY: dict[str, str] = {
    **dict.fromkeys(
        (
            "AcquireAlgorithm",
            "AcquireRequest",
            "Adaptive",
            "Backoff",
            "Failover",
            "Health",
            "Immediate",
            "Lease",
            "LeastBusy",
            "Pool",
            "PoolEvent",
            "PoolStatistics",
            "QuotaAware",
            "Resource",
            "ResourceSnapshot",
            "Selector",
            "Sticky",
            "TaskContext",
            "Wait",
            "register_algorithm",
            "resolve_algorithm",
        ),
        "pyattacker.pool",
    ),
    **dict.fromkeys(("RetryDecision", "Retrying", "resolve_retry"), "pyattacker.retry"),
    **dict.fromkeys(
        (
            "PipelineTemplate",
            "Runner",
            "RunReport",
            "Task",
            "fanout",
            "pipeline",
            "register_codec",
            "task",
        ),
        "pyattacker.run",
    ),
}


# Subpackages that ``import pyattacker`` used to load with it: ``pyattacker.run.Runner``
# after a bare ``import pyattacker`` keeps working.
_SUBPACKAGES = frozenset({"pool", "retry", "run", "store"})


def __getattr__(name: str) -> object:
    """Load a public name (or one of ``_SUBPACKAGES``) on first use, then keep it here."""
    if name in _SUBPACKAGES:
        return _importlib.import_module(f"pyattacker.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pyattacker' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | _SUBPACKAGES)


__all__ = [
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
    "PipelineTemplate",
    "Pool",
    "PoolEvent",
    "PoolNotFound",
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
]
