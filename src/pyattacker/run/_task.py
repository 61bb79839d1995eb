"""``Task`` and the ``@task`` decorator: a unary function with a name and an identity.

A task is ``value -> value``, sync or async, taking ``(value)`` or ``(value, ctx)`` where
``ctx`` is the attempt's :class:`~pyattacker.pool.TaskContext`. Everything else
(no parameter, three required ones, ``*args`` only, a required keyword-only parameter, a
class, a generator, a method's ``self``, something not callable) is refused with a
``ConfigError`` when the decorator runs, not when the run reaches the task.

**Identity.** ``Task.fingerprint`` names what the task computes, so the store can tell a
checkpoint of *this* task from one of yesterday's code. It is a digest of:

- the ``name``;
- the **code digest**: the function's source parsed with :mod:`ast`, with decorators,
  docstrings and the function's own name removed, so that comments, blank lines,
  formatting and docstring edits keep the identity while any change to the code (nested
  functions included, since they are in the source) makes a new one. Without source
  (a lambda, ``exec``, a REPL) it is the bytecode: instructions, names and constants
  recursively, which is stable for one Python version;
- the **factory parameters**: the values a closure captured (``fn.__closure__``) and the
  defaults (``__defaults__``, ``__kwdefaults__``), as JSON where they are JSON-able, a
  task's fingerprint or a function's code digest where they are those, else their type's
  name. So ``make_judge(model="a")`` and ``make_judge(model="b")`` share a code digest but
  not a fingerprint;
- ``retry`` (its ``repr``), the algorithm's name, the ``resource`` (pool) it leases from,
  ``config`` (canonical JSON) and ``version``.

Not covered: module globals the function reads and helpers it calls. Bump ``version``
when one of those changes what the task returns.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import typing
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, overload

from pyattacker._checks import check_number
from pyattacker._ray import check_installed
from pyattacker.errors import ConfigError
from pyattacker.pool import AcquireAlgorithm, AlgorithmSpec, TaskContext, resolve_algorithm
from pyattacker.retry import Retrying, resolve_retry
from pyattacker.run._codecs import canonical_json, digest, json_problem
from pyattacker.run._identity import code_identity, factory_parameters
from pyattacker.run._pipeline import PipelineTemplate, pipeline
from pyattacker.run._ray import call_on_ray
from pyattacker.run._step import Step

__all__ = ["RetrySpec", "Task", "task"]

RetrySpec = Retrying | Mapping[str, Any] | str | None
_SHAPE_HINT = "a task takes (value) or (value, ctx), sync or async, and returns one value"


class Task(Step):
    """One step of a pipeline: ``fn`` plus how to run it, and its identity.

    Treat a task as immutable: its ``fingerprint`` is computed once, when it is built.
    ``call`` runs the function for the Runner; calling the task itself (``judge(row)``)
    calls the plain function, for unit tests. ``timeout_s`` and ``retry`` are applied by
    whoever runs the task (the Runner, or :func:`~pyattacker.run.fanout` for its
    branches), never by ``call``.
    """

    __slots__ = (
        "algorithm",
        "code_digest",
        "config",
        "executor",
        "fingerprint",
        "fn",
        "input_type",
        "is_async",
        "name",
        "output_type",
        "resource",
        "retry",
        "takes_ctx",
        "timeout_s",
        "version",
    )

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        resource: str | None = None,
        algorithm: AlgorithmSpec | None = None,
        retry: RetrySpec = None,
        timeout_s: float | None = None,
        config: Mapping[str, Any] | None = None,
        version: str | int | None = None,
        identity: Any = None,
        executor: str = "local",
    ) -> None:
        """Build a task; ``ConfigError`` for anything :func:`task` refuses.

        ``identity`` (JSON-able) replaces the code digest and factory parameters: for
        tasks built by the library (``fanout``), whose code is ours and whose identity is
        what they were built from.
        """
        value_param, self.takes_ctx = _shape_of(fn)
        self.fn = fn
        self.name = _checked_name(name if name is not None else _default_name(fn))
        self.is_async = inspect.iscoroutinefunction(_call_target(fn))
        with _naming(self.name):
            self.resource = _checked_resource(resource)
            self.algorithm: AcquireAlgorithm | None = (
                None if algorithm is None else resolve_algorithm(algorithm)
            )
            self.retry = resolve_retry(retry)
            self.timeout_s = (
                None if timeout_s is None else check_number(timeout_s, "timeout_s", above=0)
            )
            self.config = _frozen_config(config)
            self.version = _checked_version(version)
        self.executor = _checked_executor(executor, self.name, self.takes_ctx)
        self.input_type, self.output_type = _types_of(fn, value_param)
        self.code_digest, factory = _code_parts(fn, identity)
        self.fingerprint = digest(canonical_json(["task", self._identity(factory)]))

    def _identity(self, factory: Any) -> dict[str, Any]:
        return {
            "name": self.name,
            "code": self.code_digest,
            "factory": factory,
            "retry": repr(self.retry),
            "algorithm": None if self.algorithm is None else self.algorithm.name,
            "resource": self.resource,
            "config": _thaw(self.config),
            "version": self.version,
        }

    async def call(self, value: Any, ctx: TaskContext) -> Any:
        """Run the function on ``value`` (with ``ctx`` if it takes one) and return its result.

        A sync function runs inline on the calling thread: that keeps a run deterministic
        under virtual time and spares a thread hop on the hot path, so a sync task must not
        block for long (wrap blocking calls in ``asyncio.to_thread`` inside an async task).
        An awaitable result (an async function's coroutine, or one a sync function
        returned) is awaited. With ``executor="ray"`` the function runs on a Ray worker
        instead, and the call awaits its result without blocking the loop (``run/_ray.py``).
        """
        if self.executor == "ray":
            return await call_on_ray(self.fn, value)
        result = self.fn(value, ctx) if self.takes_ctx else self.fn(value)
        if inspect.isawaitable(result):
            result = await result
        return result

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The plain function, called directly: ``judge(row)`` in a unit test."""
        return self.fn(*args, **kwargs)

    def __or__(self, other: object) -> PipelineTemplate:
        if not isinstance(other, Task | PipelineTemplate):
            return NotImplemented
        return pipeline(f"{self.name}|{other.name}", self, other)

    def describe(self) -> dict[str, Any]:
        """The task's settings and identity as JSON-able values (for the store and reports)."""
        return {
            "name": self.name,
            "fingerprint": self.fingerprint,
            "code_digest": self.code_digest,
            "resource": self.resource,
            "algorithm": None if self.algorithm is None else self.algorithm.name,
            "retry": repr(self.retry),
            "timeout_s": self.timeout_s,
            "config": _thaw(self.config),
            "version": self.version,
            "executor": self.executor,
        }

    def __repr__(self) -> str:
        parts = [f"{self.name!r}", f"fingerprint={self.fingerprint[:12]}"]
        if self.resource is not None:
            parts.append(f"resource={self.resource!r}")
        if self.retry.max_attempts > 1:
            parts.append(f"retry={self.retry!r}")
        if self.timeout_s is not None:
            parts.append(f"timeout_s={self.timeout_s:g}")
        if self.executor != "local":
            parts.append(f"executor={self.executor!r}")
        return f"<Task {' '.join(parts)}>"


@overload
def task(
    fn: Callable[..., Any],
    /,
    *,
    name: str | None = None,
    resource: str | None = None,
    algorithm: AlgorithmSpec | None = None,
    retry: RetrySpec = None,
    timeout_s: float | None = None,
    config: Mapping[str, Any] | None = None,
    version: str | int | None = None,
    executor: str = "local",
) -> Task: ...


@overload
def task(
    target: str | None = None,
    /,
    *,
    name: str | None = None,
    resource: str | None = None,
    algorithm: AlgorithmSpec | None = None,
    retry: RetrySpec = None,
    timeout_s: float | None = None,
    config: Mapping[str, Any] | None = None,
    version: str | int | None = None,
    executor: str = "local",
) -> Callable[[Callable[..., Any]], Task]: ...


def task(
    target: Callable[..., Any] | str | None = None,
    /,
    *,
    name: str | None = None,
    resource: str | None = None,
    algorithm: AlgorithmSpec | None = None,
    retry: RetrySpec = None,
    timeout_s: float | None = None,
    config: Mapping[str, Any] | None = None,
    version: str | int | None = None,
    executor: str = "local",
) -> Task | Callable[[Callable[..., Any]], Task]:
    """Make a :class:`Task` of a function: ``@task``, ``@task("name")`` or ``@task(...)``.

    - ``name``: identifies the task's rows in the store (default: the function's name);
    - ``resource``: the pool ``ctx.acquire()`` uses by default (``None``: the only pool);
    - ``algorithm``: how to acquire from it (a name, a dict or an instance; ``None``: the
      pool's own default);
    - ``retry``: a :class:`~pyattacker.retry.Retrying` or a spec; default one attempt;
    - ``timeout_s``: seconds per attempt (``> 0``), or ``None`` for no limit;
    - ``config``: JSON-able settings, frozen, part of the identity;
    - ``version``: bump it to make a new identity when nothing in the code shows a change;
    - ``executor``: where the body runs: ``"local"`` (the run's loop) or ``"ray"`` (a Ray
      worker, for CPU-bound bodies; ``pyattacker[ray]``). Not part of the identity: moving a
      task to Ray keeps its checkpoints. A Ray task takes ``(value)`` only (no ``ctx``:
      leases, pools and the store stay in the Runner).

    Raises ``ConfigError`` (when decorating) for a function of the wrong shape or a bad
    option. ``task(fn, name=...)`` works as a plain call too.
    """
    if isinstance(target, str):
        if name is not None:
            raise ConfigError("the task name is given twice", field="name", hint="give it once")
        name, target = target, None

    def decorate(fn: Callable[..., Any]) -> Task:
        return Task(
            fn,
            name=name,
            resource=resource,
            algorithm=algorithm,
            retry=retry,
            timeout_s=timeout_s,
            config=config,
            version=version,
            executor=executor,
        )

    return decorate if target is None else decorate(target)


# ------------------------------------------------------------------------------ the shape


def _label(fn: object) -> str:
    return str(getattr(fn, "__qualname__", None) or repr(fn))


def _call_target(fn: Callable[..., Any]) -> Any:
    """What actually runs: ``fn`` itself, or the ``__call__`` of a callable instance."""
    if inspect.isroutine(fn) or isinstance(fn, functools.partial):
        return fn
    return getattr(fn, "__call__", fn)  # noqa: B004 - we want the method itself


def _shape_of(fn: object) -> tuple[str | None, bool]:
    """``(name of the value parameter, takes_ctx)``, or ``ConfigError`` for a bad shape."""
    _check_callable(fn)
    assert callable(fn)
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None, False  # a builtin without a signature: assume (value)
    positional = [p for p in params if p.kind in _POSITIONAL]
    problem = _shape_problem(params, positional)
    if problem is not None:
        raise ConfigError(f"{_label(fn)} {problem}", field="task", hint=_SHAPE_HINT)
    takes_ctx = len(positional) >= 2 and _is_ctx(positional[1])
    return positional[0].name, takes_ctx


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _shape_problem(
    params: list[inspect.Parameter], positional: list[inspect.Parameter]
) -> str | None:
    keyword_only = [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    required = [p for p in positional if p.default is p.empty]
    if keyword_only:
        return f"has the required keyword-only parameter {keyword_only[0]!r}"
    if positional and positional[0].name == "self":
        return "is a method (its first parameter is self); pass the bound method obj.method"
    if not positional:
        varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
        return "takes only *args" if varargs else "takes no parameters"
    if len(required) > 2:
        return f"takes {len(required)} required parameters"
    return None


def _is_ctx(param: inspect.Parameter) -> bool:
    """A second positional parameter takes the context when it is required, or named or
    annotated as one; an optional ``(value, model="a")`` keeps its default."""
    return (
        param.default is param.empty
        or param.name in ("ctx", "context")
        or param.annotation in (TaskContext, "TaskContext")
    )


def _check_callable(fn: object) -> None:
    if isinstance(fn, Task):
        raise ConfigError(f"{fn!r} is already a task", field="task", hint="decorate it once")
    if isinstance(fn, type):
        hint = "decorate a function, or pass an instance whose __call__ takes (value)"
        raise ConfigError(f"{_label(fn)} is a class", field="task", hint=hint)
    if not callable(fn):
        raise ConfigError(f"{fn!r} is not callable", field="task", hint=_SHAPE_HINT)
    target = _call_target(fn)
    if inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target):
        hint = "a task returns one value: collect the items into a list and return it"
        raise ConfigError(f"{_label(fn)} is a generator function", field="task", hint=hint)


def _types_of(fn: Callable[..., Any], value_param: str | None) -> tuple[Any, Any]:
    """The annotated input and output types, ``None`` where unannotated or unresolvable."""
    target = fn.func if isinstance(fn, functools.partial) else _call_target(fn)
    try:
        hints = typing.get_type_hints(target)
    except Exception:
        return None, None  # an annotation that names something not importable: no check
    return hints.get(value_param) if value_param else None, hints.get("return")


def _default_name(fn: object) -> str:
    if isinstance(fn, functools.partial):
        return _default_name(fn.func)
    return str(getattr(fn, "__name__", None) or type(fn).__name__)


# -------------------------------------------------------------------------- the settings


@contextlib.contextmanager
def _naming(name: str) -> Iterator[None]:
    """Re-raise a ``ConfigError`` about a setting with the task's name in front."""
    try:
        yield
    except ConfigError as exc:
        raise ConfigError(
            f"task {name!r}: {exc.message}", field=exc.field, hint=exc.hint, **exc.context
        ) from exc


def _checked_name(name: object) -> str:
    if not isinstance(name, str) or not name or name != name.strip():
        raise ConfigError(
            f"a task name must be a non-empty str without outer spaces, got {name!r}",
            field="name",
        )
    return name


def _checked_resource(resource: object) -> str | None:
    if resource is not None and (not isinstance(resource, str) or not resource):
        raise ConfigError(f"must be a pool name or None, got {resource!r}", field="resource")
    return resource


EXECUTORS = ("local", "ray")


def _checked_executor(executor: object, name: str, takes_ctx: bool) -> str:
    if executor not in EXECUTORS:
        raise ConfigError(
            f"task {name!r}: unknown executor {executor!r}",
            field="executor",
            hint=f"one of: {', '.join(EXECUTORS)}",
        )
    if executor == "ray" and takes_ctx:
        raise ConfigError(
            f"task {name!r} takes a ctx, which cannot leave the Runner for a Ray worker",
            field="executor",
            hint="give the Ray task (value) only; acquire leases in a local task around it",
        )
    if executor == "ray":  # refused now, not at the first attempt of a long run
        with _naming(name):
            check_installed("executor")
    assert isinstance(executor, str)
    return executor


def _checked_version(version: object) -> str | None:
    if version is None or isinstance(version, str):
        return version
    if isinstance(version, int) and not isinstance(version, bool):
        return str(version)
    raise ConfigError(f"must be a str, an int or None, got {version!r}", field="version")


def _frozen_config(config: object) -> Mapping[str, Any]:
    """A deep, read-only copy of ``config``: mappings become ``MappingProxyType``, lists
    tuples. Raises ``ConfigError`` unless it is a ``str``-keyed JSON-able mapping."""
    if config is None:
        return MappingProxyType({})
    if not isinstance(config, Mapping):
        raise ConfigError(f"must be a mapping, got {type(config).__name__}", field="config")
    problem = json_problem(dict(config), "config")
    if problem is not None:
        raise ConfigError(problem, field="config", hint="config must be JSON-able")
    frozen = _freeze(json.loads(canonical_json(dict(config))))
    assert isinstance(frozen, Mapping)
    return frozen


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return MappingProxyType({key: _freeze(item) for key, item in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(item) for item in value)
    return value


def _thaw(value: Any) -> Any:
    """A frozen config (or any mapping/tuple nest) as plain ``dict``/``list`` values."""
    if isinstance(value, Mapping):
        return {key: _thaw(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [_thaw(item) for item in value]
    return value


def _code_parts(fn: Callable[..., Any], identity: Any) -> tuple[str, Any]:
    """``(code digest, factory parameters)``; an explicit ``identity`` replaces both."""
    if identity is not None:
        return digest(canonical_json(["identity", identity])), None
    return digest(canonical_json(code_identity(fn))), factory_parameters(fn)
