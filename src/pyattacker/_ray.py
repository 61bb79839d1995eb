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
import importlib
import importlib.util
import logging
import os
import socket
import sys
from collections.abc import Iterator
from typing import Any

from pyattacker.clock import LoopClock
from pyattacker.errors import ConfigError

__all__ = [
    "INSTALL_HINT",
    "by_value",
    "check_address",
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
    check_address(target, field if address else "RAY_ADDRESS")
    _quiet_driver()
    try:
        ray.init(address=target, **options)
    except (ConnectionError, TimeoutError, ValueError) as exc:
        raise ConfigError(
            f"cannot connect to the Ray cluster at {target!r}: {exc}", field=field, hint=START_HINT
        ) from None
    return True


class _NoSigtermNote(logging.Filter):
    """Drops Ray's note that ``ray.init`` off the main thread sets no SIGTERM handler: a
    run connects from a thread (its loop must not wait), and the Runner handles SIGTERM
    itself, so the note said nothing the user could act on, on every run."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()


def _quiet_driver() -> None:
    """Keep Ray's driver-side chatter off pyattacker's output (see :func:`_errors_to_stderr`)."""
    worker_log = logging.getLogger("ray._private.worker")
    if not any(isinstance(f, _NoSigtermNote) for f in worker_log.filters):
        worker_log.addFilter(_NoSigtermNote())
    _errors_to_stderr()


def _errors_to_stderr() -> None:
    """Ray's driver prints the cluster's error messages ("(raylet) A worker died...") on
    stdout, in colour, whatever ``log_to_driver`` says (a thread of its own calls
    ``ray._private.worker.print_to_stdstream``). pyattacker's stdout is the report, piped
    or parsed, and the attempt that failed records the error already: they go to stderr,
    plain. Ray's private function is replaced only where it is found as expected."""
    module: Any = importlib.import_module("ray._private.worker")
    if callable(getattr(module, "print_to_stdstream", None)):
        module.print_to_stdstream = _plain_on_stderr


def _plain_on_stderr(data: dict[str, Any], ignore_prefix: bool = False) -> None:
    source = data.get("pid", "ray")
    for line in data.get("lines", ()):
        print(f"({source}) {line}", file=sys.stderr)


def check_address(target: str, field: str) -> None:
    """``ConfigError`` on ``field`` unless a Ray cluster's head may be at ``target``.

    Ray itself, given a ``host:port`` where no Ray listens, retries for minutes, filling
    stderr with warnings. So nobody listening, and something listening that is not a Ray
    head (a web server, the attack's own target), are refused here in seconds: a head's
    GCS port speaks gRPC, so it must answer an HTTP/2 greeting as HTTP/2 does
    (:func:`_not_grpc`). Other forms ("auto", "ray://...") are Ray's to resolve.
    """
    host, colon, port = target.rpartition(":")
    if not colon or not host or "/" in target or not port.isdigit():
        return
    try:
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=5)
    except OSError as exc:
        raise ConfigError(
            f"no Ray cluster answers at {target} ({exc.strerror or exc})",
            field=field,
            hint=START_HINT,
        ) from None
    with sock:
        if _tls_only():
            return  # a head with RAY_USE_TLS speaks TLS first: the greeting proves nothing
        problem = _not_grpc(sock)
    if problem is not None:
        raise ConfigError(
            f"something answers at {target}, but not a Ray cluster: {problem}",
            field=field,
            hint="give the address `ray start --head` printed (the head's GCS port, "
            "6379 unless its --port said otherwise), not a web server's",
        )


#: How long a Ray head may take to answer the HTTP/2 greeting (it answers at once).
PROBE_TIMEOUT_S = 2.0
# What an HTTP/2 client sends first: the connection preface, then its SETTINGS frame
# (empty: length 0, type 4, no flags, stream 0).
_H2_GREETING = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_FRAME_HEADER = 9
_SETTINGS = 4


def _not_grpc(sock: socket.socket, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None when the peer answers the HTTP/2 greeting as an HTTP/2 server must (its first
    frame a SETTINGS frame on stream 0); else what it did instead, in words."""
    try:
        sock.settimeout(timeout)
        sock.sendall(_H2_GREETING)
        head = _read(sock, _FRAME_HEADER, timeout)
    except TimeoutError:
        return f"it said nothing within {timeout:g}s of an HTTP/2 greeting"
    except OSError as exc:
        return f"it closed the connection after an HTTP/2 greeting ({exc.strerror or exc})"
    if len(head) < _FRAME_HEADER:
        said = f": {_first_line(head)}" if head else ""
        return f"it closed the connection after an HTTP/2 greeting{said}"
    length = int.from_bytes(head[:3], "big")
    if head[3] == _SETTINGS and length % 6 == 0 and head[5:9] == b"\0\0\0\0":
        return None
    with contextlib.suppress(OSError):  # the rest of its first line, for the message
        sock.settimeout(0.2)
        head += sock.recv(200)
    return f"it does not speak HTTP/2 (gRPC), as a Ray head does; it answered {_first_line(head)}"


def _read(sock: socket.socket, n: int, timeout: float) -> bytes:
    """Up to ``n`` bytes (fewer if the peer closes), all within ``timeout`` seconds."""
    now = LoopClock().now  # monotonic: called off any loop
    give_up = now() + timeout
    data = b""
    while len(data) < n:
        left = give_up - now()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _first_line(data: bytes) -> str:
    """What a peer said, for a message: its first line if it is text (``HTTP/1.1 400``)."""
    line = data.split(b"\r\n")[0].split(b"\n")[0][:60]
    return repr(line.decode("latin-1"))


def _tls_only() -> bool:
    return os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true")


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
