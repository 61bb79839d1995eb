"""One of our servers as N processes behind one port (``--processes N``).

The parent (the supervisor) reserves the port with ``SO_REUSEPORT`` (Linux: the kernel
spreads new connections over every socket listening on the port), forks N members, each
running the server on its own loop on that port, waits until every one listens, prints the
URL, and then only watches: SIGINT or SIGTERM stops them all (exit 0); a member that dies
stops the others (exit 1); started by ``ServerProcess``, the death of that parent stops
them all as SIGTERM does (:mod:`._parent`), and a member whose supervisor died gets
SIGTERM from Linux (``PR_SET_PDEATHSIG``). Each member also listens on a private Unix socket,
``DIRECTORY/LANE.sock``, through which a sibling that received a control request
(``/stats``, ``/reset``) asks for the member's raw figures or passes the reset on, so the
answer covers every process wherever it lands (see :mod:`pyattacker.servers._llm_fleet`).
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
from array import array
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection, wait
from typing import Any

from pyattacker.errors import ConfigError, PyAttackerError
from pyattacker.servers._listening import ListeningServer, listen_error
from pyattacker.servers._loops import fastest_loop, serve_until
from pyattacker.servers._parent import stop_when_parent_dies

__all__ = [
    "Asking",
    "Member",
    "call",
    "check_processes",
    "member_path",
    "pack",
    "run_member",
    "serve_fleet",
    "unpack",
]

#: A member's body: ``(lane, lanes, directory, port, ready)``; it calls ``ready(url)`` once
#: it listens and returns when it is told to stop.
Member = Callable[[int, int, str, int, Callable[[str], None]], None]

_START_S = 30.0  # the longest a member may take to listen


def check_processes(processes: int, field: str) -> None:
    """``ConfigError`` naming ``field`` unless ``processes`` >= 1 and, above 1, this system
    has ``SO_REUSEPORT`` with the kernel spreading connections (Linux)."""
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
        raise ConfigError(f"must be a whole number >= 1, got {processes!r}", field=field)
    if processes > 1 and (not sys.platform.startswith("linux") or not _has_reuse_port()):
        raise ConfigError(
            f"{processes} processes behind one port need SO_REUSEPORT as Linux has it",
            field=field,
            hint="leave it out (one process) on this system",
        )


def _has_reuse_port() -> bool:
    return hasattr(socket, "SO_REUSEPORT")


def member_path(directory: str, lane: int) -> str:
    """The private control socket of member ``lane``."""
    return os.path.join(directory, f"{lane}.sock")


def serve_fleet(
    member: Member, processes: int, host: str, port: int, announce: Callable[[str], None]
) -> None:
    """Run ``processes`` members of ``member`` on ``host:port`` until SIGINT/SIGTERM.

    ``announce(url)`` once all of them listen. Raises ``ConfigError`` when a member refused
    its settings or the address (exit 2), ``PyAttackerError`` when one died.
    """
    check_processes(processes, "processes")
    reserved = _reserve(host, port)
    directory = tempfile.mkdtemp(prefix="pyattacker-fleet-")
    context = multiprocessing.get_context("fork")  # Linux only, checked above
    children: list[Any] = []
    stopping = _Stopping()
    try:
        with stopping:  # from here on a signal stops the members, starting or running
            bound = reserved.getsockname()[1]
            pipes = []
            for lane in range(processes):
                ours, theirs = context.Pipe(duplex=False)
                child = context.Process(
                    target=_member_main,
                    args=(member, lane, processes, directory, bound, theirs),
                    daemon=True,
                )
                child.start()
                theirs.close()
                children.append(child)
                pipes.append(ours)
            # After the forks: no member inherits the watching thread (nor, on Pythons
            # that warn of it, forks a process with threads).
            stop_when_parent_dies()
            urls = [_ready(pipe, lane) for lane, pipe in enumerate(pipes)]
            announce(urls[0])
            dead = wait([child.sentinel for child in children])
            lane = next(i for i, c in enumerate(children) if c.sentinel in dead)
            code = children[lane].exitcode
            raise PyAttackerError(f"server process {lane} exited with code {code}")
    finally:
        _stop(children)
        reserved.close()
        shutil.rmtree(directory, ignore_errors=True)


class _Stopping:
    """While entered, SIGINT and SIGTERM end the wait (``asked`` says one came)."""

    def __init__(self) -> None:
        self.asked = False
        self._before: dict[int, Any] = {}

    def _handle(self, signum: int, frame: object) -> None:
        self.asked = True
        raise _Stop

    def __enter__(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._before[signum] = signal.signal(signum, self._handle)

    def __exit__(self, kind: object, exc: object, traceback: object) -> bool:
        for signum, handler in self._before.items():
            signal.signal(signum, handler)
        return isinstance(exc, _Stop)


class _Stop(BaseException):
    """Raised by the signal handler to end the supervisor's wait. A ``BaseException``, as
    ``KeyboardInterrupt`` is: the signal can come while a library runs an ``except
    Exception`` (click's stream cache, in ``announce``), which would swallow it and
    leave the supervisor waiting for good."""


def _reserve(host: str, port: int) -> socket.socket:
    """A socket bound (not listening) to ``host:port`` with SO_REUSEPORT: the port is ours
    (port 0: the one the system picked) and the members bind it too. A port somebody
    listens on is refused, even if they set SO_REUSEPORT too (another fleet of ours)."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        raise listen_error(host, port, exc) from None
    try:
        if port:  # taken by anyone, ours included? SO_REUSEPORT alone would share it
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.bind((host, port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise listen_error(host, port, exc) from None
    return sock


def _member_main(
    member: Member, lane: int, lanes: int, directory: str, port: int, pipe: Connection
) -> None:
    """A member process: run ``member``, telling the parent it listens, or why it cannot."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the supervisor's handlers
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _die_with_parent()
    try:
        member(lane, lanes, directory, port, lambda url: pipe.send(("ok", url)))
    except ConfigError as exc:
        pipe.send(("config", exc.message, exc.field, exc.hint))
        os._exit(2)
    except BaseException as exc:
        pipe.send(("error", f"{type(exc).__name__}: {exc}"))
        os._exit(1)


def _die_with_parent() -> None:
    """Ask Linux for a SIGTERM when the supervisor dies, even by SIGKILL: no member is
    left serving a port nobody watches."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux, or no libc
        pass


def _ready(pipe: Connection, lane: int) -> str:
    """The URL member ``lane`` listens on, or the error it died of."""
    if not pipe.poll(_START_S):
        raise PyAttackerError(f"server process {lane} did not listen within {_START_S:g} s")
    try:
        message = pipe.recv()
    except EOFError:
        raise PyAttackerError(f"server process {lane} exited before it listened") from None
    if message[0] == "ok":
        return str(message[1])
    if message[0] == "config":
        raise ConfigError(message[1], field=message[2], hint=message[3])
    raise PyAttackerError(f"server process {lane} failed: {message[1]}")


def _stop(children: list[Any]) -> None:
    """SIGTERM every member still running, then SIGKILL what has not stopped in 5 s."""
    for child in children:
        if child.is_alive():
            child.terminate()
    for child in children:
        child.join(5.0)
        if child.is_alive():
            child.kill()
            child.join()


def run_member(server: ListeningServer, path: str, ready: Callable[[str], None]) -> None:
    """Run ``server`` (``reuse_port`` set) and its private control socket at ``path`` on
    the fastest loop until SIGINT or SIGTERM; ``ready(url)`` once both listen."""
    server.reuse_port = True
    with asyncio.Runner(loop_factory=fastest_loop()) as runner:
        runner.run(_serve(server, path, ready))


async def _serve(server: ListeningServer, path: str, ready: Callable[[str], None]) -> None:
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopped.set)
    async with server:
        private = await loop.create_unix_server(server._protocol, path)
        ready(server.url)
        try:
            await serve_until(stopped)
        finally:
            private.close()


class Asking(threading.Thread):
    """Asks every sibling (their private sockets, ``paths``) ``method target`` in a thread,
    so that the loop of the member that asks keeps turning; :meth:`answers` once
    :meth:`done`."""

    def __init__(
        self,
        paths: list[str],
        method: str,
        target: str,
        headers: Mapping[str, str],
        *,
        start: bool = True,
    ) -> None:
        super().__init__(daemon=True)
        self.paths, self.method, self.target, self.headers = paths, method, target, headers
        self._answers: list[Any] = [None] * len(paths)
        self.on_done: Callable[[], None] | None = None  # set it before start()
        if start:
            self.start()

    def run(self) -> None:
        for index, path in enumerate(self.paths):
            try:
                self._answers[index] = call(path, self.method, self.target, self.headers)
            except (OSError, ValueError, http.client.HTTPException) as exc:
                self._answers[index] = exc
        if self.on_done is not None:
            self.on_done()

    def done(self) -> bool:
        return not self.is_alive()

    def answers(self) -> list[dict[str, Any]]:
        """Every sibling's JSON answer; ``RuntimeError`` naming one that gave none."""
        for path, answer in zip(self.paths, self._answers, strict=True):
            if isinstance(answer, Exception):
                raise RuntimeError(f"server process at {path} did not answer: {answer!r}")
        return list(self._answers)


def pack(values: array[float]) -> str:
    """``values`` as base64 of little-endian doubles (8 bytes a value, exact)."""
    if sys.byteorder != "little":  # pragma: no cover - every platform we run on
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode("ascii")


def unpack(text: str) -> array[float]:
    """The values :func:`pack` packed."""
    values = array("d", base64.b64decode(text))
    if sys.byteorder != "little":  # pragma: no cover
        values.byteswap()
    return values


class _UnixConnection(http.client.HTTPConnection):
    """HTTP/1.1 over a Unix socket (a sibling's private control socket)."""

    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=60)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


def call(path: str, method: str, target: str, headers: Mapping[str, str]) -> dict[str, Any]:
    connection = _UnixConnection(path)
    try:
        connection.request(
            method, target, body=b"" if method == "POST" else None, headers=dict(headers)
        )
        response = connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise ValueError(f"HTTP {response.status}: {body[:200]!r}")
        answer: dict[str, Any] = json.loads(body)
        return answer
    finally:
        connection.close()
