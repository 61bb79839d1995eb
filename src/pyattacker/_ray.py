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
import tempfile
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
    "start_hint",
]

INSTALL_HINT = "pip install 'pyattacker[ray]'"
#: Where a connection's address comes from when no flag gave one.
ADDRESS_VARIABLE = "RAY_ADDRESS"


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
    reached is a ``ConfigError`` on ``field``, or on ``RAY_ADDRESS`` when the address came
    from there (the user fixes the variable, not the flag).
    """
    ray = import_ray(field)
    if ray.is_initialized():
        return False
    from_variable = not address and bool(os.environ.get(ADDRESS_VARIABLE))
    target = address or os.environ.get(ADDRESS_VARIABLE) or "local"
    named = ADDRESS_VARIABLE if from_variable else field
    options: dict[str, Any] = {
        # The dashboard is a web server per cluster: no use to a sweep, and slow to start.
        "include_dashboard": False,
        # Worker output is the task body's own; its errors come back as exceptions.
        "log_to_driver": False,
        "configure_logging": False,
    }
    if target == "local" and num_cpus is not None:
        options["num_cpus"] = num_cpus
    check_address(target, named)
    _quiet_driver()
    refused = getattr(ray.exceptions, "AuthenticationError", ())
    try:
        ray.init(address=target, **options)
    except refused as exc:  # RAY_AUTH_MODE=token and no token here, or "auto"'s cluster
        raise _token_refused(target, named, str(getattr(exc, "message", exc))) from None
    # RuntimeError: Ray's refusal of a cluster of another Ray or Python version
    except (ConnectionError, TimeoutError, ValueError, RuntimeError) as exc:
        if target == "local":
            raise ConfigError(f"cannot start a local Ray: {exc}", field=field) from None
        raise ConfigError(
            f"cannot connect to the Ray cluster at {target!r}: {exc}",
            field=named,
            hint=start_hint(named),
        ) from None
    return True


def start_hint(field: str) -> str:
    """How to give a cluster's address through ``field`` (a flag, or ``RAY_ADDRESS``)."""
    if field == ADDRESS_VARIABLE:
        return (
            "start a cluster with `ray start --head` and export RAY_ADDRESS=HOST:PORT as it "
            "prints (6379 unless its --port said otherwise), or unset RAY_ADDRESS for a local Ray"
        )
    return f"start a cluster with `ray start --head` and give {field} the address it prints"


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
    """``ConfigError`` unless a Ray cluster's head may be at ``target`` and would let this
    process in; ``field`` names where the address came from (``--ray``, ``RAY_ADDRESS``).

    Ray itself, given a ``host:port`` where no Ray listens, retries for minutes, filling
    stderr with warnings. So nobody listening, and something listening that is not a Ray
    head (a web server, the attack's own target), are refused here in seconds: a head's
    GCS port speaks gRPC, so it must answer an HTTP/2 greeting as HTTP/2 does
    (:func:`_not_grpc`). A head that wants a token this process does not send is refused
    too (:func:`_check_token`), where Ray retries for 20 s and then blames the address.
    ``auto``, ``local`` and Ray Client's ``ray://...`` are Ray's to resolve; any other form
    than ``HOST:PORT`` is refused, as Ray would refuse it.
    """
    if target in ("auto", "local") or target.startswith("ray://"):
        return
    host, port = _host_port(target, field)
    try:
        sock = socket.create_connection((host, port), timeout=5)
    except OSError as exc:
        raise ConfigError(
            f"no Ray cluster answers at {target} ({exc.strerror or exc})",
            field=field,
            hint=start_hint(field),
        ) from None
    with sock:
        # a head with RAY_USE_TLS speaks TLS first: the greeting would prove nothing
        problem = None if _tls_only() else _not_grpc(sock)
    if problem is not None:
        raise ConfigError(
            f"something answers at {target}, but not a Ray cluster: {problem}",
            field=field,
            hint="give the address `ray start --head` printed (the head's GCS port, "
            "6379 unless its --port said otherwise), not a web server's",
        )
    _check_token(target, field)


def _host_port(target: str, field: str) -> tuple[str, int]:
    """``target``'s host and port, or ``ConfigError`` on ``field`` for another shape (Ray's
    own refusal would name neither the variable nor the form it wants)."""
    host, colon, port = target.rpartition(":")
    bare = host.strip("[]")
    bracketed = host.startswith("[") and host.endswith("]")
    if colon and bare and port.isdigit() and "/" not in target and (":" not in bare or bracketed):
        return bare, int(port)
    unset = " (or unset RAY_ADDRESS for a local Ray)" if field == ADDRESS_VARIABLE else ""
    raise ConfigError(
        f"{target!r} is not a Ray cluster's address",
        field=field,
        hint="give HOST:PORT as `ray start --head` prints it (e.g. 10.0.0.5:6379), or auto "
        f"for the cluster started on this machine{unset}",
    )


#: How long the head may take to answer the token check (it answers in milliseconds).
TOKEN_PROBE_MS = 3000
_TOKEN_VARIABLE = "RAY_AUTH_MODE"
_TOKEN_SETUP = "ray._private.authentication.authentication_token_setup"


def _check_token(target: str, field: str) -> None:
    """``ConfigError`` when the head at ``target`` refuses this process's credentials.

    Ray 2.60's ``ray start --head`` turns token authentication on whenever its machine has
    a token (``~/.ray/auth_token``, which any local ``ray.init()`` creates), while a driver
    given an address sends a token only with ``RAY_AUTH_MODE=token``. Asked to connect
    without it, ``ray.init`` retries for 20 s, then says the cluster cannot be reached.
    Ray's own GCS client, asked for the cluster's id, is refused in milliseconds with
    ``AuthenticationError``; only that answer is acted on: anything else (Ray's private
    API moved, a slow head) is left to ``ray.init`` to report.
    """
    try:
        raylet: Any = importlib.import_module("ray._raylet")
        refused: Any = importlib.import_module("ray.exceptions").AuthenticationError
        setup: Any = importlib.import_module(_TOKEN_SETUP)
        has_token = setup.ensure_token_if_auth_enabled
        standalone = raylet.InnerGcsClient.standalone
    except (ImportError, AttributeError):
        return
    try:
        # Token mode with no token anywhere is Ray's refusal here (as in ray.init); asked to
        # connect so, Ray's client aborts the process (a failed CHECK in its C++).
        has_token(None, create_token_if_missing=False)
        with _logs_held(dropped_on=refused):
            standalone(target, None, TOKEN_PROBE_MS)
    except refused as exc:
        raise _token_refused(target, field, str(getattr(exc, "message", exc))) from None
    except Exception:  # not ours to judge: ray.init says what it is
        return


@contextlib.contextmanager
def _logs_held(dropped_on: type[BaseException]) -> Iterator[None]:
    """Hold what is written to file descriptor 2 while the block runs (Ray's C++ logs
    there, beneath ``sys.stderr``), and write it out after, unless the block ends with
    ``dropped_on``: a refusal Ray has already logged as a warning, which our own message
    explains (two lines for one mistake, the first of them Ray's C++ log format)."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no descriptor 2 (a daemon): nothing to hold
        yield
        return
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        keep = True
        try:
            yield
        except dropped_on:
            keep = False
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if keep and held.seek(0, os.SEEK_END):
                held.seek(0)
                os.write(2, held.read())


def _token_refused(target: str, field: str, said: str) -> ConfigError:
    """The refusal of a head that wants a token, naming the variable that fixes it."""
    elsewhere = (
        "on another machine than the head, also export RAY_AUTH_TOKEN=TOKEN, where TOKEN is "
        "what `ray get-auth-token` prints on the head"
    )
    if os.environ.get(_TOKEN_VARIABLE, "").lower() != "token":
        return ConfigError(
            f"the Ray cluster at {target} ({field}) requires Ray's token authentication, "
            f"and this process sends no token as RAY_AUTH_MODE is not 'token' (Ray: {said})",
            field=_TOKEN_VARIABLE,
            hint=f"export RAY_AUTH_MODE=token, which reads the token from ~/.ray/auth_token; "
            f"{elsewhere}",
        )
    return ConfigError(
        f"the Ray cluster at {target} ({field}) wants its token, and this process has "
        f"another one or none (Ray: {said})",
        field="RAY_AUTH_TOKEN",
        hint="export RAY_AUTH_TOKEN=TOKEN, where TOKEN is what `ray get-auth-token` prints "
        "on the head (or RAY_AUTH_TOKEN_PATH=FILE holding it)",
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
