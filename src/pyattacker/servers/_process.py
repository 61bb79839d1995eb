"""Our servers as their own processes, driven over their HTTP control paths.

Benchmarks need a server out of the load generator's process (one core each, no shared
GIL or loop), and scripts need to find it: ``pyattacker echo-server`` (and
``llm-server``) print their URL as the first line on stdout. :class:`ServerProcess`
spawns such a command, waits for the line, and talks to ``/stats``, ``/reset`` (and the
echo server's ``/stall``) with ``urllib`` (never through a proxy: the server is on
loopback). Synchronous on purpose: it is called from benchmark scripts and tests, outside
any event loop.

**A server never outlives its parent.** The child gets a pipe on stdin that the parent
keeps open and never writes, and ``PYATTACKER_PARENT_PIPE=stdin`` in its environment; when
the parent dies without calling :meth:`ServerProcess.stop` (SIGKILL, a CI timeout, ``pkill``),
the kernel closes the pipe, and the server stops as on SIGTERM (:mod:`._parent` says why
this and not ``PR_SET_PDEATHSIG``). A process this one forks closes its copy of the pipe
(``os.register_at_fork``), so only this process's life counts. A ``ServerProcess`` that is
garbage-collected unstopped closes the pipe as well: keep a reference while the server is
needed.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import urllib.request
import weakref
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import IO, Any, Self

from pyattacker.errors import ConfigError, PyAttackerError
from pyattacker.servers._fleet import check_processes
from pyattacker.servers._parent import PARENT_PIPE_ENV

__all__ = ["EchoServerProcess", "ServerProcess"]

# A server with no proxy handler: environment proxies must never see loopback traffic.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# The child's own controls (/stats, /reset) over TLS: a server we started on loopback with
# a throwaway certificate, so its certificate is not checked.
_TLS_OPENER = urllib.request.build_opener(
    urllib.request.ProxyHandler({}),
    urllib.request.HTTPSHandler(context=ssl._create_unverified_context()),
)

# The started, unstopped servers whose pipe a forked child must close (see the docstring).
_RUNNING: weakref.WeakSet[ServerProcess] = weakref.WeakSet()
_AT_FORK: list[bool] = []  # one registration, on the first start(): no import side effect


class ServerProcess:
    """One of our server commands (``command``) in a child process: start, control, stop.

    ``what`` names the server in messages. Not thread-safe. ``stop()`` is idempotent and
    also runs on ``__exit__``.
    """

    what = "server"

    def __init__(self, command: list[str], env: Mapping[str, str | None] | None = None) -> None:
        self.command = command
        # Set in (None: removed from) the child's environment: secrets stay off its
        # command line, and a variable of ours the parent happens to have never leaks in.
        self._env = env
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._said = ""  # the child's stderr, kept when stop() closes the file
        self._url: str | None = None
        self.returncode: int | None = None

    @property
    def url(self) -> str:
        """The URL the child printed; ``RuntimeError`` before :meth:`start`."""
        if self._url is None:
            raise RuntimeError(f"the {self.what} process has not been started")
        return self._url

    @property
    def pid(self) -> int:
        """The child's process id; ``RuntimeError`` before :meth:`start`."""
        if self._process is None:
            raise RuntimeError(f"the {self.what} process has not been started")
        return self._process.pid

    def start(self, timeout: float = 10.0) -> str:
        """Spawn the server and return the URL it prints first.

        Raises ``ConfigError`` when the child refused its arguments (exit code 2) and
        ``PyAttackerError`` when it died or printed no URL within ``timeout`` seconds;
        both carry the child's stderr. The child is stopped in either case.
        """
        if self._process is not None:
            raise RuntimeError(f"the {self.what} process is already started")
        # Lives as long as the child (closed by stop()); a file, so a chatty child never blocks.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115
        _close_pipes_in_forks()
        self._process = subprocess.Popen(
            self.command,
            stdin=subprocess.PIPE,  # never written: its EOF tells the child we are gone
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=_environment({**(self._env or {}), PARENT_PIPE_ENV: "stdin"}),
        )
        _RUNNING.add(self)
        assert self._process.stdout is not None
        line = _first_line(self._process.stdout, timeout)
        if line is None or not line.startswith("http://"):
            self.stop(grace=1.0)
            said = repr(line) if line else "nothing"
            raise self._failure(f"printed {said} within {timeout:g} s instead of its URL")
        self._url = line.strip()
        return self._url

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM, wait up to ``grace`` seconds, then SIGKILL. Safe to call again."""
        process = self._process
        if process is None or self.returncode is not None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.returncode = process.returncode
        _RUNNING.discard(self)
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()
        self._said = self.stderr()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def stderr(self) -> str:
        """Everything the child wrote on stderr so far (all of it, after :meth:`stop`)."""
        if self._stderr is None:
            return self._said
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def stats(self, *, samples: bool = False) -> dict[str, Any]:
        """``GET /stats`` (``?samples=1`` with ``samples=True``) as a dict."""
        return self._call("GET", "/stats?samples=1" if samples else "/stats")

    def reset(self) -> None:
        """``POST /reset``: the server forgets what it recorded."""
        self._call("POST", "/reset")

    def _headers(self) -> dict[str, str]:
        """Headers every control request carries (none; a server needing a key adds it)."""
        return {}

    def _call(self, method: str, path: str) -> dict[str, Any]:
        request = urllib.request.Request(
            self.url + path, method=method, data=b"", headers=self._headers()
        )
        if method == "GET":
            request.data = None
        opener = _OPENER if not self.url.startswith("https:") else _TLS_OPENER
        with opener.open(request, timeout=60) as response:
            body: dict[str, Any] = json.loads(response.read())
        return body

    def _failure(self, what: str) -> PyAttackerError:
        code = self.returncode
        text = f"{self.what} ({' '.join(self.command)}) exited with code {code}: {what}"
        stderr = self.stderr().strip()
        if stderr:
            text += "\n" + stderr
        return ConfigError(text) if code == 2 else PyAttackerError(text)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class EchoServerProcess(ServerProcess):
    """``python -m pyattacker echo-server ...`` in a child process.

    ``fail`` is the CLI's text (``"429:0.1,500:0.01"``); ``command_prefix`` goes before the
    Python executable (``["taskset", "-c", "0"]`` pins the server to a core).
    ``processes``: that many server processes behind the one port (``--processes``;
    Linux), ``stats()``, ``reset()`` and ``stall()`` covering them all.
    Not thread-safe. ``stop()`` is idempotent and also runs on ``__exit__``.
    """

    what = "echo server"

    def __init__(
        self,
        *,
        delay: str = "0",
        seed: int = 0,
        host: str = "127.0.0.1",
        body_size: int = 2,
        fail: str | None = None,
        processes: int = 1,
        extra_args: Sequence[str] = (),
        command_prefix: Sequence[str] = (),
    ) -> None:
        check_processes(processes, "processes")
        self.processes = processes
        fails = [part for part in (fail or "").split(",") if part.strip()]
        super().__init__(
            [
                *command_prefix,
                sys.executable,
                "-m",
                "pyattacker",
                "echo-server",
                *("--host", host, "--port", "0", "--delay", delay),
                *("--seed", str(seed), "--body-size", str(body_size)),
                *(arg for part in fails for arg in ("--fail", part.strip())),
                *(("--processes", str(processes)) if processes > 1 else ()),
                *extra_args,
            ]
        )
        self.delay = delay

    def stall(self, seconds: float) -> None:
        """``POST /stall?seconds=S``: no echo response is written for ``seconds``."""
        self._call("POST", f"/stall?seconds={seconds!r}")

    def __repr__(self) -> str:
        return f"<EchoServerProcess {self._url or 'not started'} delay={self.delay!r}>"


def _environment(changes: Mapping[str, str | None]) -> dict[str, str]:
    """This process's environment with ``changes`` (``None``: the variable removed)."""
    env = dict(os.environ)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def _close_pipes_in_forks() -> None:
    """Once per process: a forked child closes its copy of every running server's stdin
    pipe, so that the server's life hangs on this process alone (not on a worker it
    forked, which may outlive it)."""
    if not _AT_FORK and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_close_inherited_pipes)
        _AT_FORK.append(True)


def _close_inherited_pipes() -> None:
    for server in list(_RUNNING):
        process = server._process
        if process is not None and process.stdin is not None:
            process.stdin.close()


def _first_line(stream: IO[bytes], timeout: float) -> str | None:
    """The first line of ``stream`` (``""`` at EOF), or ``None`` after ``timeout`` seconds."""
    lines: queue.Queue[bytes] = queue.Queue(maxsize=1)
    # readline() cannot time out; a daemon thread ends at EOF, when we stop the child.
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout).decode(errors="replace")
    except queue.Empty:
        return None
