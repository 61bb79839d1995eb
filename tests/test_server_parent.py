"""A server started through ``ServerProcess`` never outlives the process that started it
(:mod:`pyattacker.servers._parent`); one started by hand never stops because of its stdin.

Each test kills a small parent script with SIGKILL (nothing of ours runs in it) and polls
until the server it started is gone; a ``finally`` kills whatever is left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from pyattacker.servers._parent import PARENT_PIPE_ENV, stop_when_parent_dies

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and /proc are POSIX")

# The parent: starts SERVER, prints its pid (and, with FORK, a forked child's), then waits
# to be killed.
PARENT = """
import os, sys, time
from pyattacker.servers import EchoServerProcess, LlmServerProcess
server = {server}
server.start()
forked = os.fork() if {fork} else None
if forked == 0:
    time.sleep(120)
    os._exit(0)
print(server.pid, forked or 0, flush=True)
time.sleep(120)
"""
_WITHIN_S = 10.0  # generous for a loaded machine; the server is gone in well under 1 s


def _alive(pid: int) -> bool:
    """``pid`` exists and is not a zombie waiting for init to reap it."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # pragma: no cover - no /proc (macOS)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def _gone(pids: list[int]) -> bool:
    """Poll until every one of ``pids`` is gone; whether they all went within the bound."""
    deadline = time.monotonic() + _WITHIN_S
    while any(_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _members(pid: int) -> list[int]:
    """The children of ``pid`` (a fleet's members), from /proc; [] where it cannot tell."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            return [int(word) for word in children.read().split()]
    except OSError:  # pragma: no cover - no /proc
        return []


def _kill(pids: list[int]) -> None:
    for pid in pids:
        if pid and _alive(pid):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@contextmanager
def _parent(
    tmp_path: Path, server: str, *, fork: bool = False
) -> Iterator[tuple[int, list[int], int]]:
    """A parent script running ``server``; SIGKILLs the parent and yields the server's pid,
    its members' (``--processes``) and the pid of the child the parent forked (or 0).
    Everything it started is killed on the way out."""
    script = tmp_path / "parent.py"
    script.write_text(PARENT.format(server=server, fork=fork))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE)
    pids: list[int] = []
    try:
        assert parent.stdout is not None
        words = parent.stdout.readline().split()
        assert len(words) == 2, f"the parent printed {words!r}"
        pids = [int(word) for word in words]
        members = _members(pids[0])
        pids[1:1] = members
        parent.kill()
        parent.wait()
        yield pids[0], members, pids[-1]
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        _kill(pids)
        if parent.stdout is not None:
            parent.stdout.close()


@pytest.mark.parametrize(
    "server", ["EchoServerProcess()", "LlmServerProcess(ttft='fixed:1ms', itl='fixed:1ms')"]
)
def test_a_server_exits_when_the_process_that_started_it_is_killed(
    tmp_path: Path, server: str
) -> None:
    with _parent(tmp_path, server) as (pid, _, _):
        assert _gone([pid])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="--processes is Linux's")
def test_a_fleet_and_every_member_exit_when_the_process_that_started_it_is_killed(
    tmp_path: Path,
) -> None:
    with _parent(tmp_path, "EchoServerProcess(processes=2)") as (pid, members, _):
        assert len(members) == 2
        assert _gone([pid, *members])


def test_a_child_the_parent_forked_does_not_keep_the_server_alive(tmp_path: Path) -> None:
    with _parent(tmp_path, "EchoServerProcess()", fork=True) as (pid, _, forked):
        assert _alive(forked)
        assert _gone([pid])


def test_a_server_started_by_hand_does_not_stop_because_of_its_stdin() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop(PARENT_PIPE_ENV, None)
    command = [sys.executable, "-m", "pyattacker", "echo-server", "--port", "0"]
    servers = [  # stdin at EOF (as `echo | pyattacker echo-server` has it), and /dev/null
        subprocess.Popen(command, env=env, stdin=stdin, stdout=subprocess.PIPE)
        for stdin in (subprocess.PIPE, subprocess.DEVNULL)
    ]
    try:
        for server in servers:
            if server.stdin is not None:
                server.stdin.close()
            assert server.stdout is not None
            assert server.stdout.readline().startswith(b"http://")
        # One watching its stdin would be gone within a few tens of milliseconds.
        deadline = time.monotonic() + 1.0
        for server in servers:
            with pytest.raises(subprocess.TimeoutExpired):
                server.wait(max(0.0, deadline - time.monotonic()))
    finally:
        for server in servers:
            server.terminate()
            server.wait()
            if server.stdout is not None:
                server.stdout.close()
    assert [server.returncode for server in servers] == [0, 0]


def test_without_the_variable_nothing_watches_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PARENT_PIPE_ENV, raising=False)
    before = threading.active_count()
    assert stop_when_parent_dies() is False
    assert threading.active_count() == before


def test_the_variable_is_not_passed_on_to_what_the_server_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(PARENT_PIPE_ENV, "not stdin")  # any other value: not watched either
    assert stop_when_parent_dies() is False
    assert PARENT_PIPE_ENV not in os.environ
