"""pyattacker: drive large workloads against rate-limited API providers.

The names here are the public API; everything else lives in a submodule whose name says
what it holds (``pyattacker.pool``, ``pyattacker.retry``, ``pyattacker.errors``,
``pyattacker.clock``, ``pyattacker.testing``).
"""

from pyattacker import errors
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
    "Selector",
    "Sticky",
    "TaskContext",
    "Wait",
    "__version__",
    "error_class_of",
    "errors",
    "register_algorithm",
    "resolve_algorithm",
    "resolve_retry",
    "retry_after_of",
]
