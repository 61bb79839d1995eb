"""What a task's ``use:`` names, as a function: a built-in task (``llm.chat``), or your own
``module:attr`` / ``path/to/file.py:attr``.

Your ``attr`` is a task (``@task``), a plain task function, or, when the config gives
``args``, a factory called with them (its result is the task or the function). A built-in
is always a factory (``pyattacker.tasks``). Each ``ConfigError`` names the field path.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pyattacker import _plugins
from pyattacker.config._schema import did_you_mean
from pyattacker.errors import ConfigError
from pyattacker.tasks import BUILT_IN_TASKS

__all__ = ["at", "resolve_use"]


@contextlib.contextmanager
def at(path: str) -> Iterator[None]:
    """Re-raise a ``ConfigError`` with ``path`` in front of its field."""
    try:
        yield
    except ConfigError as exc:
        field = f"{path}.{exc.field}" if exc.field else path
        if exc.field and exc.field.startswith(path):
            field = exc.field
        raise ConfigError(exc.message, field=field, hint=exc.hint) from None


def resolve_use(use: str, args: Mapping[str, Any] | None, path: str, name: str) -> tuple[Any, Any]:
    """``(task or function, identity)``: identity (JSON-able) for a built-in, else None."""
    if ":" not in use and use not in BUILT_IN_TASKS:
        return _plugin(use, args, path)
    if ":" not in use:
        factory = BUILT_IN_TASKS[use]
        given = dict(args or {})
        _check_args(factory, given, f"{path}.args")
        if "task_name" in inspect.signature(factory).parameters:
            given["task_name"] = name
        with at(f"{path}.args"):
            return factory(**given), {"use": use, "args": dict(args or {})}
    return _called(_attribute(use, f"{path}.use"), use, args, path)


def _plugin(use: str, args: Mapping[str, Any] | None, path: str) -> tuple[Any, Any]:
    """A task an installed plugin declares (entry point group ``pyattacker.tasks``): it is
    taken as ``module:attr`` is (a task, a function, or a factory called with ``args``)."""
    found = _plugins.load("pyattacker.tasks", use, field=f"{path}.use")
    if found is None:
        known = [*BUILT_IN_TASKS, *_plugins.names("pyattacker.tasks")]
        raise ConfigError(
            f"no built-in task or installed plugin {use!r}{did_you_mean(use, known)}",
            field=f"{path}.use",
            hint="built-ins: " + ", ".join(BUILT_IN_TASKS) + "; or module:attr for yours "
            "(`pyattacker plugins` lists the installed ones)",
        )
    return _called(found, use, args, path)


def _called(found: Any, use: str, args: Mapping[str, Any] | None, path: str) -> tuple[Any, Any]:
    """``found`` itself without ``args``; else the factory's result for them."""
    if args is None:
        return found, None
    if not callable(found):
        raise ConfigError(f"{use} is not callable: it takes no args", field=f"{path}.args")
    _check_args(found, dict(args), f"{path}.args")
    with at(f"{path}.args"):
        try:
            return found(**args), None
        except ConfigError:
            raise
        except Exception as exc:
            raise ConfigError(
                f"the factory {use} failed: {type(exc).__name__}: {exc}", field=""
            ) from exc


def _check_args(factory: Callable[..., Any], args: dict[str, Any], path: str) -> None:
    """Every arg is a parameter of ``factory``; every required one is given."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    known = [n for n, p in params.items() if p.kind is not p.VAR_POSITIONAL and n != "task_name"]
    for given in args:
        if given not in known:
            raise ConfigError(
                f"unknown argument {given!r}{did_you_mean(given, known)}",
                field=f"{path}.{given}",
                hint="arguments: " + (", ".join(known) or "none"),
            )
    for n, p in params.items():
        required = p.default is p.empty and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
        if required and n not in args and n != "task_name":
            raise ConfigError(f"argument {n!r} is required", field=f"{path}.{n}")


def _attribute(use: str, field: str) -> Any:
    where, _, name = use.rpartition(":")
    if not where or not name:
        raise ConfigError(f"{use!r} is not module:attr", field=field, hint="e.g. mytasks:judge")
    module = _module(where, field)
    found: Any = module
    for part in name.split("."):
        if not hasattr(found, part):
            public = [n for n in dir(found) if not n.startswith("_")]
            raise ConfigError(f"{where} has no {name!r}{did_you_mean(part, public)}", field=field)
        found = getattr(found, part)
    return found


def _module(where: str, field: str) -> Any:
    try:
        if where.endswith(".py") or "/" in where:
            return _from_file(Path(where), field)
        if str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))
        return importlib.import_module(where)
    except ConfigError:
        raise
    except Exception as exc:  # the module failed or is not there: name it, not a traceback
        raise ConfigError(
            f"cannot import {where}: {type(exc).__name__}: {exc}",
            field=field,
            hint="check the name (module:attr, or path/to/file.py:attr from the folder you run in)",
        ) from exc


def _from_file(path: Path, field: str) -> Any:
    resolved = path.resolve()
    if not resolved.is_file():
        raise ConfigError(f"{path} does not exist", field=field, hint="check the path")
    name = f"pyattacker_user_{resolved.stem}"
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(resolved):
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot import {path}", field=field)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and codecs look modules up by name
    if str(resolved.parent) not in sys.path:
        sys.path.insert(0, str(resolved.parent))
    writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # validate creates nothing
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = writes
    return module
