"""A task's identity in code: what its fingerprint covers besides its settings.

``code_identity`` is the function's source as an AST dump, without docstrings, comments or
formatting (so editing those keeps every pipeline id), falling back to the bytecode when
there is no source; ``factory_parameters`` are the values a factory closed over or bound
(closure cells, defaults, ``functools.partial`` arguments, a bound method's instance), so
``make_judge(model="a")`` and ``make_judge(model="b")`` differ. The code of helpers a task
calls is not covered: bump the task's ``version`` when such a change matters.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from collections.abc import Callable
from types import CodeType, MethodType
from typing import Any

from pyattacker.run._codecs import canonical_json, digest, is_jsonable
from pyattacker.run._step import Step

__all__ = ["code_identity", "factory_parameters"]


def code_identity(fn: Callable[..., Any]) -> Any:
    """What the code of ``fn`` is, as JSON-able data (see the module docstring)."""
    if isinstance(fn, functools.partial):
        return code_identity(fn.func)
    if isinstance(fn, MethodType):
        return code_identity(fn.__func__)
    code = getattr(fn, "__code__", None)
    if not isinstance(code, CodeType):
        return _source_identity(type(fn)) or ["class", _qualified(type(fn))]
    if getattr(fn, "__name__", None) != "<lambda>":
        # A lambda's "source" is its whole line, neighbours included: use its bytecode.
        found = _source_identity(fn)
        if found is not None:
            return found
    return ["bytecode", _bytecode_identity(code, getattr(fn, "__doc__", None))]


def _source_identity(obj: object) -> list[str] | None:
    """``ast.dump`` of the definition without decorators, docstrings or its own name."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(obj)))  # type: ignore[arg-type]
    except (OSError, TypeError, SyntaxError):
        return None
    node = tree.body[0] if tree.body else None
    if not isinstance(node, _DEFINITIONS):
        return None
    node.decorator_list = []
    node.name = "_"
    for inner in ast.walk(node):
        if isinstance(inner, _DEFINITIONS) and _is_docstring(inner.body[0]):
            inner.body = inner.body[1:] or [ast.Pass()]
    return ["ast", ast.dump(node)]


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _bytecode_identity(code: CodeType, doc: object) -> list[Any]:
    consts = list(code.co_consts)
    if doc is not None and consts and consts[0] == doc:
        consts = consts[1:]  # the docstring: editing it must not change the identity
    return [
        code.co_code.hex(),
        code.co_exceptiontable.hex(),
        list(code.co_names),
        list(code.co_varnames),
        list(code.co_freevars),
        [_const_identity(const) for const in consts],
    ]


def _const_identity(const: object) -> Any:
    if isinstance(const, CodeType):
        return _bytecode_identity(const, None)
    if isinstance(const, tuple):
        return [_const_identity(item) for item in const]
    if isinstance(const, frozenset):
        return sorted(repr(item) for item in const)  # repr order would follow the hash seed
    return repr(const)


def factory_parameters(fn: Callable[..., Any]) -> dict[str, Any]:
    """The values ``fn`` was built with: closure cells, defaults, partial arguments, and
    the attributes of a callable instance or a bound method's object."""
    if isinstance(fn, functools.partial):
        return {
            "args": [_parameter(arg) for arg in fn.args],
            "keywords": {key: _parameter(arg) for key, arg in fn.keywords.items()},
            "of": factory_parameters(fn.func),
        }
    if isinstance(fn, MethodType):
        return {"self": _instance_state(fn.__self__), "of": factory_parameters(fn.__func__)}
    code = getattr(fn, "__code__", None)
    if not isinstance(code, CodeType):
        return {"self": _instance_state(fn)}
    cells = zip(code.co_freevars, getattr(fn, "__closure__", None) or (), strict=False)
    return {
        "closure": {name: _cell_value(cell) for name, cell in cells},
        "defaults": [_parameter(v) for v in getattr(fn, "__defaults__", None) or ()],
        "kwdefaults": {
            k: _parameter(v) for k, v in (getattr(fn, "__kwdefaults__", None) or {}).items()
        },
    }


def _cell_value(cell: Any) -> Any:
    try:
        return _parameter(cell.cell_contents)
    except ValueError:
        return {"empty": True}  # a cell whose variable was never assigned


def _instance_state(obj: object) -> dict[str, Any]:
    state = getattr(obj, "__dict__", None)
    if not isinstance(state, dict):
        return {"type": _qualified(type(obj))}
    return {"type": _qualified(type(obj)), "state": {k: _parameter(v) for k, v in state.items()}}


def _parameter(value: object) -> Any:
    """A factory parameter as JSON: itself, a task's fingerprint, a function's code digest,
    a class's name, or the name of its type."""
    if is_jsonable(value):
        return value
    if isinstance(value, set | frozenset) and is_jsonable(list(value)):
        return {"set": sorted(value, key=canonical_json)}  # not in hash-seed order
    if isinstance(value, Step):  # a task
        return {"task": value.fingerprint}
    if isinstance(value, type):
        return {"class": _qualified(value)}
    if inspect.isfunction(value) or inspect.ismethod(value):
        return {"function": digest(canonical_json(code_identity(value)))}
    return {"type": _qualified(type(value))}


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
