"""Runs that finish in any order (local processes, Ray tasks), reported in plan order.

The serial sweep meets its runs in plan order; a parallel one must fail as it would: the
first failure *in plan order* is raised once every run before it has finished.
"""

from __future__ import annotations

from collections.abc import Callable

from pyattacker.benchmark._result import RunResult

__all__ = ["PlanOrder"]


class PlanOrder:
    """The outcomes of ``total`` runs, handed over by index as they finish."""

    def __init__(self, total: int, on_result: Callable[[RunResult], None] | None) -> None:
        self._total, self._on_result = total, on_result
        self._results: dict[int, RunResult] = {}
        self._failures: dict[int, BaseException] = {}

    def add(self, index: int, outcome: RunResult | BaseException) -> None:
        """Run ``index`` ended with ``outcome`` (``on_result`` sees a result at once);
        raises the first failure in plan order as soon as every run before it is in."""
        if isinstance(outcome, BaseException):
            self._failures[index] = outcome
        else:
            self._results[index] = outcome
            if self._on_result is not None:
                self._on_result(outcome)
        if self._failures:
            first = min(self._failures)
            if all(i in self._results for i in range(first)):
                raise self._failures[first]

    def results(self) -> list[RunResult]:
        """Every result, in plan order (once all ``total`` are in)."""
        return [self._results[index] for index in range(self._total)]
