"""The built-in acquire algorithms, registered in one place.

:data:`~pyattacker.pool.ALGORITHMS` (name -> class) is the one registry: ``resolve_algorithm``
looks names up in it, and the benchmark's default sweep and name checks, the scenario
files' ``unsuited`` check and the CLI's ``--list`` and ``--algorithm`` help read it. Its
order is the order reports and ``--list`` show. The built-ins are entered here, when the
package loads (``pyattacker.pool`` imports this module), rather than by a decorator in each
module: the list is visible in one place, and the modules that define algorithms need not
import one another to be registered, which had made them an import ring.
"""

from __future__ import annotations

from pyattacker.pool._adaptive import Adaptive
from pyattacker.pool._algorithms import (
    AcquireAlgorithm,
    Immediate,
    Wait,
    register_algorithm,
)
from pyattacker.pool._strategies import Backoff, Failover, LeastBusy, QuotaAware, Sticky

__all__ = ["BUILT_IN"]

#: Every algorithm pyattacker ships, in registry order.
BUILT_IN: tuple[type[AcquireAlgorithm], ...] = (
    Immediate,
    Wait,
    Backoff,
    LeastBusy,
    Failover,
    Sticky,
    QuotaAware,
    Adaptive,
)

for _algorithm in BUILT_IN:
    register_algorithm(_algorithm)
