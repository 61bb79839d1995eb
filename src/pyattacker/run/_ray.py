"""A task's body on a Ray worker: ``@task(executor="ray")``.

Only the body travels. The Runner stays the one durable coordinator: it leases, times,
retries, checkpoints and records the attempt exactly as for a local body, and the Ray
worker sees nothing but the function and the value (both pickled by Ray), and sends back
the result. The attempt awaits the result's ``ObjectRef`` on the run's loop, so other
pipelines keep running while the body computes.

How an attempt on Ray ends:

- the body returns: its value, as if it had run locally;
- the body raises: the body's own exception (Ray's wrapper removed), so the task's retry
  policy classifies it as it would locally;
- the worker dies (killed, out of memory) or the node is lost: Ray's error
  (``WorkerCrashedError``, ``NodeDiedError``...), an ``unknown`` class that the task's
  policy retries only if it names it (``on=(ray.exceptions.WorkerCrashedError,)``) or retries
  unknown errors. Ray never retries on its own (``max_retries=0``): the one retry budget is
  the task's;
- the cluster itself is lost to this driver (``LocalRayletDiedError``, ``RaySystemError``:
  :func:`cluster_lost`): the attempt fails with it, and the run stops as on a signal, so
  the pipelines not done wait for a resume instead of each failing in turn;
- the attempt is cancelled (its ``timeout_s``, a stopping run): the Ray task is cancelled
  too (its worker is killed), so no orphan keeps burning a CPU.

What travels: the body's own module, when it is the user's code (a script, a file
``pyattacker run path/to/file.py:...`` loaded, a test module), goes *by value* with the
body (cloudpickle's ``register_pickle_by_value``), so a worker on another machine needs
none of the user's files; a body from an installed package (under ``site-packages``) and
pyattacker itself travel by name and must be installed on every node.

Connecting: the caller's Ray session when it has one (``ray.init(...)`` before the run),
else the cluster ``RAY_ADDRESS`` names, else a local Ray on this machine's cores, opened
once, at the first Ray attempt, off the loop (a thread that lives as long as the process),
and closed at the process's exit. ``pyattacker run`` opens a ``RAY_ADDRESS`` cluster's
session before it creates the store (:func:`check_ray_address`), so a cluster it cannot
use is refused once, exit 2, rather than in every item's attempt.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import os
import queue
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pyattacker._ray import check_address, connect, import_ray
from pyattacker.errors import ConfigError

__all__ = ["call_on_ray", "check_ray_address", "cluster_lost"]

# Ray's errors that say this driver has lost its cluster (its own raylet, or the cluster's
# control), not that one worker or one node of several died: every later attempt would
# fail the same way, so the run stops and leaves the rest to a resume.
_CLUSTER_LOST = frozenset({"LocalRayletDiedError", "RaySystemError"})

_remote: Any = None
_connecting: tuple[asyncio.AbstractEventLoop, asyncio.Lock, list[ConfigError]] | None = None
_calls: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]] | None = None
_calls_lock = threading.Lock()


async def call_on_ray(fn: Callable[[Any], Any], value: Any) -> Any:
    """``fn(value)`` on a Ray worker, awaited; see the module docstring for the outcomes."""
    ray = import_ray("executor")
    if not ray.is_initialized():
        await _connect()
    remote = _remote_body(ray)
    _ship_by_value(ray, fn)
    ref = remote.remote(fn, value)
    try:
        return await ref
    except asyncio.CancelledError:
        ray.cancel(ref, force=True)
        raise
    except ray.exceptions.RayTaskError as exc:
        raise _body_error(exc) from None


def cluster_lost(exc: BaseException) -> str | None:
    """The run's stop reason when ``exc`` (an attempt's error) says the Ray cluster is gone,
    else None. Read by name, so that a run without Ray never imports it."""
    kind = type(exc)
    if kind.__name__ not in _CLUSTER_LOST or not kind.__module__.startswith("ray"):
        return None
    return (
        f"the Ray cluster was lost ({kind.__name__}); the pipelines not done wait for "
        "--resume once it is back"
    )


def check_ray_address(
    tasks: Iterable[Any], *, open_session: bool = False, flag: str | None = None
) -> None:
    """``ConfigError`` naming ``RAY_ADDRESS`` (or the token variable to set) when one of
    ``tasks`` runs on Ray and the cluster ``RAY_ADDRESS`` names cannot be used: an address
    of another form, nobody or something else answering there, a head that refuses this
    process's token (:func:`~pyattacker._ray.check_address`). Refused before the run writes
    anything, where each Ray attempt would fail on its own (after 20 s of Ray's retries,
    for the token) and the run would record every item as failed.

    ``open_session``: open the Ray session now too (where the first Ray attempt would), so
    whatever else Ray refuses (a cluster of another Ray version, say) is refused now as
    well: the command line does, before it creates the store; the Runner, whose loop must
    not stand still for a connection, only checks. Without ``RAY_ADDRESS``, a local Ray is
    started at the first Ray attempt as before (it takes seconds a resume may not need).

    ``flag``: the command line's flag that asked for Ray (``run --ray``), named in the
    refusals instead of ``RAY_ADDRESS``; with it, a pipeline with no step on Ray is
    refused too."""
    on_ray = _any_on_ray(tasks)
    if flag is not None and not on_ray:
        raise ConfigError(
            "no step of this pipeline runs on Ray, so there is nothing to send there",
            field=flag,
            hint='mark the CPU-bound steps @task(executor="ray") (executor: ray in a config '
            f"file), or leave out {flag}",
        )
    address = os.environ.get("RAY_ADDRESS")
    if not address or not on_ray:
        return
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        return  # the caller's own session is the one used, whatever RAY_ADDRESS says
    field = flag or "RAY_ADDRESS"
    if not open_session:
        check_address(address, field)
        return
    # connect() probes the address as check_address does, once, naming the same field
    _on_ray_thread(functools.partial(connect, address, num_cpus=None, field=field)).result()


def _any_on_ray(tasks: Iterable[Any]) -> bool:
    """Whether a task, or a branch of a fanout among them at any depth, runs on Ray."""
    return any(
        getattr(t, "executor", None) == "ray" or _any_on_ray(getattr(t, "tasks", ())) for t in tasks
    )


async def _connect() -> None:
    """Open the Ray session once, whatever number of attempts wait for it; on the Ray
    thread (:func:`_on_ray_thread`), as starting a local Ray takes seconds the run's loop
    must not stand still for. A failure is kept for the run (its loop): every attempt after
    it fails with it at once, where each would have retried (20 s for a refused token)."""
    global _connecting
    loop = asyncio.get_running_loop()
    if _connecting is None or _connecting[0] is not loop:  # a lock serves one loop
        _connecting = (loop, asyncio.Lock(), [])
    _, lock, failed = _connecting
    async with lock:
        if failed:
            raise ConfigError(failed[0].message, field=failed[0].field, hint=failed[0].hint)
        opening = functools.partial(connect, None, num_cpus=None, field="executor")
        try:
            await asyncio.wrap_future(_on_ray_thread(opening))
        except ConfigError as exc:
            failed.append(exc)
            raise


def _on_ray_thread(call: Callable[[], Any]) -> concurrent.futures.Future[Any]:
    """``call`` on the one thread this process opens Ray from, a daemon thread that lives
    as long as the process. A local Ray started from a thread that then ends (as
    ``asyncio.to_thread``'s do when the run's loop closes) left its agents
    (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``) running for a minute after the
    command; started from a thread still alive, Ray's own shutdown at exit stops them."""
    global _calls
    with _calls_lock:
        if _calls is None:
            _calls = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(_calls,), name="pyattacker-ray",
                             daemon=True).start()  # fmt: skip
    done: concurrent.futures.Future[Any] = concurrent.futures.Future()
    _calls.put((call, done))
    return done


def _serve(
    calls: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]],
) -> None:
    while True:
        call, done = calls.get()
        if done.set_running_or_notify_cancel():
            try:
                done.set_result(call())
            except BaseException as exc:  # handed to the caller, as a thread pool does
                done.set_exception(exc)


def _remote_body(ray: Any) -> Any:
    global _remote
    if _remote is None:
        # One CPU per body (the unit Ray places by); no retries of Ray's own (see above).
        _remote = ray.remote(num_cpus=1, max_retries=0, retry_exceptions=False)(_run_body)
    return _remote


_SHIPPED: set[str] = set()
_INSTALLED = frozenset({"site-packages", "dist-packages"})


def _ship_by_value(ray: Any, fn: Callable[[Any], Any]) -> None:
    """Have the body's module pickled by value when it is the user's own code (see the
    module docstring); once per module."""
    name = getattr(fn, "__module__", None) or type(fn).__module__
    if name in _SHIPPED:
        return
    _SHIPPED.add(name)
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    if module is None or path is None or name == "__main__" or name.startswith("pyattacker."):
        return  # __main__ travels by value already; pyattacker is installed on the nodes
    if _INSTALLED.isdisjoint(Path(path).parts):
        ray.cloudpickle.register_pickle_by_value(module)


def _run_body(fn: Callable[[Any], Any], value: Any) -> Any:
    """On the Ray worker: the body, and its awaitable result awaited on a loop of its own."""
    result = fn(value)
    if inspect.isawaitable(result):
        result = asyncio.run(_awaited(result))
    return result


async def _awaited(result: Any) -> Any:
    return await result


def _body_error(exc: Any) -> BaseException:
    """The exception the body raised, out of Ray's wrapper (which is a subclass of both,
    named ``RayTaskError(ValueError)``: the records would show that name)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        cause.add_note("raised by the task body on a Ray worker")
        return cause
    assert isinstance(exc, BaseException)
    return exc  # a cause Ray could not unpickle: its wrapper says what it was
