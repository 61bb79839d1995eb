"""A worker's pipe to its driver: a snapshot larger than the socket's buffer still goes
through when the worker's loop has made the socket non-blocking (as ``add_reader`` does),
and a driver killed outright leaves its workers an end of file that stops them."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from pyattacker.attack._processes import blocking_sender
from pyattacker.clock import wall_time
from pyattacker.servers import EchoServerProcess

BIG = b"x" * (8 * 1024 * 1024)  # far more than a socket buffer holds


def test_a_plain_send_of_a_large_message_fails_on_a_non_blocking_pipe() -> None:
    _, worker = multiprocessing.Pipe()
    os.set_blocking(worker.fileno(), False)
    with pytest.raises(BlockingIOError):  # what a worker with a big snapshot met
        worker.send(BIG)


def test_a_large_message_waits_for_room_in_a_non_blocking_pipe() -> None:
    driver, worker = multiprocessing.Pipe()
    os.set_blocking(worker.fileno(), False)
    received: list[object] = []
    reader = threading.Thread(target=lambda: received.extend([driver.recv(), driver.recv()]))
    reader.start()
    send = blocking_sender(worker)
    send(("snapshot", BIG))
    send(("done", 1))
    reader.join(timeout=60)
    assert received == [("snapshot", BIG), ("done", 1)]


def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, name) of each live process whose parent is ``pid``, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii") as stat:
                    text = stat.read()
            except OSError:
                continue
            name, rest = text[text.index("(") + 1 : text.rindex(")")], text.rsplit(")", 1)[1]
            state, ppid = rest.split()[:2]
            if int(ppid) == pid and state not in "ZX":
                found.append((int(entry), name))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in "ZX"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_workers_stop_when_their_driver_is_killed_outright() -> None:
    with EchoServerProcess(delay="fixed:1ms") as echo:
        command = [sys.executable, "-m", "pyattacker", "attack", echo.url + "/", "--rate",
                   "50/s", "--duration", "60s", "--workers", "2", "-q"]  # fmt: skip
        driver = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        workers: list[tuple[int, str]] = []
        try:
            deadline = wall_time() + 60
            while len(workers := _children(driver.pid)) < 2 or echo.stats()["count"] < 10:
                assert driver.poll() is None, "the driver ended early"
                assert wall_time() < deadline, "the workers never began"
                time.sleep(0.05)  # real time: other processes are at work
            assert sorted(name for _, name in workers) == ["pyattacker-w0", "pyattacker-w1"]
            driver.kill()  # SIGKILL: no chance to tell its workers
            driver.wait()
            deadline = wall_time() + 30
            while any(_alive(pid) for pid, _ in workers):
                assert wall_time() < deadline, "a worker attacks on without its driver"
                time.sleep(0.05)
        finally:  # (a worker that outlived its driver is no longer its child)
            driver.kill()
            for pid, _ in workers:
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)
