"""A worker's pipe to its driver: a snapshot larger than the socket's buffer still goes
through when the worker's loop has made the socket non-blocking (as ``add_reader`` does)."""

from __future__ import annotations

import multiprocessing
import os
import threading

import pytest

from pyattacker.attack._processes import blocking_sender

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
