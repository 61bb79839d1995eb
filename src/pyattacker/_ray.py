"""Ray, the optional engine that spreads work over processes and machines (``pyattacker[ray]``).

Ray is imported here and only when a Ray path is used (``bench --ray``, a task with
``executor="ray"``), so pyattacker without the extra loads and runs as before; a Ray path
without Ray installed is a ``ConfigError`` (exit 2) naming the flag and the install command.

One rule for connecting, used by every Ray path: a Ray session the caller already opened
(``ray.init(...)`` in their script, or a test's fixture) is used as it is and left open;
otherwise an ``address`` connects to that cluster, and no address starts a local Ray on this
machine. A session opened here is closed by whoever opened it (:func:`ray_session`), or at
the process's exit (Ray's own exit hook) for the lazy connection of a run's tasks.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
from collections.abc import Iterator
from typing import Any

from pyattacker.errors import ConfigError

__all__ = [
    "INSTALL_HINT",
    "by_value",
    "check_installed",
    "connect",
    "import_ray",
    "ray_session",
]

INSTALL_HINT = "pip install 'pyattacker[ray]'"
START_HINT = "start a cluster with `ray start --head` and pass the address it prints"


def import_ray(field: str) -> Any:
    """The ``ray`` module, or ``ConfigError`` on ``field`` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "needs Ray, which is not installed", field=field, hint=INSTALL_HINT
        ) from None
    return ray


def check_installed(field: str) -> None:
    """``ConfigError`` on ``field`` unless Ray can be imported; Ray itself is not loaded."""
    try:
        found = importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):  # a ``ray`` entry of None in sys.modules, say
        found = False
    if not found:
        raise ConfigError("needs Ray, which is not installed", field=field, hint=INSTALL_HINT)


def connect(address: str | None, *, num_cpus: int | None, field: str) -> bool:
    """Make sure this process has a Ray session; True when this call opened it.

    ``address`` connects to a running cluster (``host:port``, ``auto``, ``ray://...``);
    ``None`` starts a local Ray with ``num_cpus`` CPUs (``None``: every core), unless
    ``RAY_ADDRESS`` names a cluster (Ray's own convention). A cluster that cannot be
    reached is a ``ConfigError`` on ``field``.
    """
    ray = import_ray(field)
    if ray.is_initialized():
        return False
    target = address or os.environ.get("RAY_ADDRESS") or "local"
    options: dict[str, Any] = {
        # The dashboard is a web server per cluster: no use to a sweep, and slow to start.
        "include_dashboard": False,
        # Worker output is the task body's own; its errors come back as exceptions.
        "log_to_driver": False,
        "configure_logging": False,
    }
    if target == "local" and num_cpus is not None:
        options["num_cpus"] = num_cpus
    _check_reachable(target, field)
    try:
        ray.init(address=target, **options)
    except (ConnectionError, TimeoutError, ValueError) as exc:
        raise ConfigError(
            f"cannot connect to the Ray cluster at {target!r}: {exc}", field=field, hint=START_HINT
        ) from None
    return True


def _check_reachable(target: str, field: str) -> None:
    """A ``host:port`` nobody listens on is refused now: Ray itself would retry for minutes."""
    host, colon, port = target.rpartition(":")
    if not colon or not host or "/" in target or not port.isdigit():
        return  # "local", "auto", "ray://...": Ray's to resolve
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        raise ConfigError(
            f"no Ray cluster answers at {target} ({exc.strerror or exc})",
            field=field,
            hint=START_HINT,
        ) from None


@contextlib.contextmanager
def ray_session(address: str | None, *, num_cpus: int | None, field: str) -> Iterator[Any]:
    """The ``ray`` module, connected for the block (see :func:`connect`); a session opened
    here is shut down on exit (a cluster's nodes keep running: only this driver leaves)."""
    opened = connect(address, num_cpus=num_cpus, field=field)
    ray = import_ray(field)
    try:
        yield ray
    finally:
        if opened:
            ray.shutdown()


@contextlib.contextmanager
def by_value(module_name: str | None) -> Iterator[None]:
    """For the block, Ray pickles what module ``module_name`` defines by value (its code
    travels with the task or actor) rather than by name: for a module loaded from a
    user's file (an attack's scenario), which no node can import. None: nothing to do."""
    import importlib
    import sys

    cloudpickle: Any = importlib.import_module("ray.cloudpickle")
    module = None if module_name is None else sys.modules.get(module_name)
    if module is None:
        yield
        return
    cloudpickle.register_pickle_by_value(module)
    try:
        yield
    finally:
        cloudpickle.unregister_pickle_by_value(module)
