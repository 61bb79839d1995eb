"""The built-in acquire algorithms are registered in one place, in the order reports use."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pyattacker.pool
from pyattacker.pool import ALGORITHMS, AcquireAlgorithm
from pyattacker.pool._registry import BUILT_IN


def _algorithm_classes_defined_in_the_pool() -> set[type[AcquireAlgorithm]]:
    found = set()
    for info in pkgutil.iter_modules(pyattacker.pool.__path__, "pyattacker.pool."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(cls, AcquireAlgorithm)
                and cls.__module__ == module.__name__
                and not inspect.isabstract(cls)
            ):
                found.add(cls)
    return found


def test_every_algorithm_the_pool_defines_is_in_the_one_built_in_list() -> None:
    assert _algorithm_classes_defined_in_the_pool() == set(BUILT_IN)


def test_the_registry_lists_the_built_ins_first_in_their_order() -> None:
    names = [cls.name for cls in BUILT_IN]
    assert names == [
        "immediate",
        "wait",
        "backoff",
        "least_busy",
        "failover",
        "sticky",
        "quota_aware",
        "adaptive",
    ]
    assert list(ALGORITHMS)[: len(names)] == names
    assert all(ALGORITHMS[cls.name] is cls for cls in BUILT_IN)
