"""Resources, pools, leases, health and the acquire algorithms.

See ``docs/kernel.md`` for the model; each private module's docstring states its contract.
"""

# The built-in algorithms enter ALGORITHMS here, in one place (see _registry).
from pyattacker.pool import _registry as _registry
from pyattacker.pool._adaptive import Adaptive
from pyattacker.pool._algorithms import (
    ALGORITHMS,
    AcquireAlgorithm,
    AcquireRequest,
    AlgorithmSpec,
    Immediate,
    Wait,
    register_algorithm,
    resolve_algorithm,
)
from pyattacker.pool._context import TaskContext
from pyattacker.pool._events import PoolEvent
from pyattacker.pool._health import Health, HealthEvent, HealthPolicy, HealthState, transition
from pyattacker.pool._lease import AcquireCall, Lease
from pyattacker.pool._pool import Pool, Score
from pyattacker.pool._resource import Resource
from pyattacker.pool._selector import ANY, Selector
from pyattacker.pool._stats import PoolStatistics, ResourceSnapshot
from pyattacker.pool._strategies import Backoff, Failover, LeastBusy, QuotaAware, Sticky

__all__ = [
    "ALGORITHMS",
    "ANY",
    "AcquireAlgorithm",
    "AcquireCall",
    "AcquireRequest",
    "Adaptive",
    "AlgorithmSpec",
    "Backoff",
    "Failover",
    "Health",
    "HealthEvent",
    "HealthPolicy",
    "HealthState",
    "Immediate",
    "Lease",
    "LeastBusy",
    "Pool",
    "PoolEvent",
    "PoolStatistics",
    "QuotaAware",
    "Resource",
    "ResourceSnapshot",
    "Score",
    "Selector",
    "Sticky",
    "TaskContext",
    "Wait",
    "register_algorithm",
    "resolve_algorithm",
    "transition",
]
