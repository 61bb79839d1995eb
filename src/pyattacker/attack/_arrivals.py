"""The arrivals of a constant rate, one worker's share: the generator an open model at a
constant rate draws every arrival from, compiled with the load path (see "The compiled load
path" in ``docs/architecture.md``), while the load models that check what a user gives them
(``_load``) are not."""

from __future__ import annotations

import math
from collections.abc import Iterator

__all__ = ["constant_share"]


def constant_share(
    rate: float, end: float, requests: int | None, index: int, n: int
) -> Iterator[tuple[int, float]]:
    """What ``arrivals`` gives a constant rate (arrival k at ``k / rate``), worker
    ``index`` of ``n``'s share only, numbered."""
    stop = math.inf if requests is None else requests
    k = index
    while k < stop:
        t = k / rate if k > 0 else 0.0
        if t >= end:
            return
        yield k, t
        k += n
