"""Built-in tasks: the common work of a run, usable from a config file by name (``use:``).

Each entry of :data:`BUILT_IN_TASKS` is a *factory*: called with the task's ``args`` (as
keywords) it checks them (``ConfigError`` naming the argument) and returns the task's
function, ``(value)`` or ``(value, ctx)``. A factory that takes ``task_name`` is given the
task's name (the default key of its output). The config layer (``pyattacker.config``)
wraps the function in a :class:`~pyattacker.run.Task` with the step's name, pool, retry
policy and timeout, so these tasks run, retry and resume like any other.

- ``llm.chat``, ``llm.completion``: one call on an endpoint of the task's pool;
- ``http.request``, ``shell``: one request, one command;
- ``write_jsonl``: append the value to a file;
- ``echo``, ``delay``, ``flaky``, ``boom``, ``simulate_llm``: for trying a config without a
  network.

See ``docs/run.md`` ("Config files").
"""

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from pyattacker.tasks._args import RowShape, shape_of
from pyattacker.tasks._llm import llm_chat, llm_completion
from pyattacker.tasks._local import (
    Boom,
    Flaked,
    SimulatedRateLimit,
    boom,
    delay,
    echo,
    flaky,
    simulate_llm,
    write_jsonl,
)
from pyattacker.tasks._template import MissingField, Template
from pyattacker.tasks._web import CommandFailed, http_request, shell

__all__ = [
    "BUILT_IN_TASKS",
    "NEEDS_POOL",
    "NOT_ON_RAY",
    "ON_RAY",
    "Boom",
    "CommandFailed",
    "Flaked",
    "MissingField",
    "RowShape",
    "SimulatedRateLimit",
    "Template",
    "shape_of",
]

#: name -> factory, in the order the docs list them.
BUILT_IN_TASKS: Mapping[str, Callable[..., Any]] = MappingProxyType(
    {
        "llm.chat": llm_chat,
        "llm.completion": llm_completion,
        "http.request": http_request,
        "shell": shell,
        "write_jsonl": write_jsonl,
        "echo": echo,
        "delay": delay,
        "flaky": flaky,
        "boom": boom,
        "simulate_llm": simulate_llm,
    }
)

#: Built-in tasks that lease an endpoint and so need a ``resource`` (pool).
NEEDS_POOL = frozenset({"llm.chat", "llm.completion"})

#: Built-in tasks whose body can run on a Ray worker (``executor: ray``): they take the
#: row only, no ``ctx``. ``shell`` is the one with CPU to spread.
ON_RAY = ("shell", "echo", "write_jsonl", "boom")

#: Why each other built-in stays in the Runner: its body uses the attempt's ``ctx``
#: (leases, the run's clock, the attempt's number and random stream), which cannot travel.
NOT_ON_RAY: Mapping[str, str] = MappingProxyType(
    {
        "llm.chat": "it calls its endpoint holding a lease from the pool, and leases stay "
        "in the Runner",
        "llm.completion": "it calls its endpoint holding a lease from the pool, and leases "
        "stay in the Runner",
        "http.request": "it sends on the run's clock, holding a lease when it has a pool, "
        "and both stay in the Runner (a request gains nothing from another process)",
        "delay": "it waits on the run's clock (virtual time in a simulated run), which "
        "stays in the Runner",
        "flaky": "it reads the attempt's number and random stream, which stay in the Runner",
        "simulate_llm": "it waits on the run's clock and holds a lease when it has a pool, "
        "and both stay in the Runner",
    }
)
