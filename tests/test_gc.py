"""quiet_gc: the process's collector settings change once however the blocks nest."""

from __future__ import annotations

import gc
import threading

from pyattacker._gc import quiet_gc


def test_nested_blocks_restore_the_settings_only_when_the_last_one_ends() -> None:
    before = gc.get_threshold()
    with quiet_gc(gen0=12_345):
        with quiet_gc(gen0=99):
            assert gc.get_threshold()[0] == 12_345
        assert gc.get_threshold()[0] == 12_345
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_overlapping_blocks_in_threads_restore_the_settings_once() -> None:
    before = gc.get_threshold()
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with quiet_gc():
            inside.set()
            leave.wait(5)

    with quiet_gc():
        thread = threading.Thread(target=other)
        thread.start()
        inside.wait(5)
    assert gc.get_threshold() != before  # the other thread's block is still open
    leave.set()
    thread.join(5)
    assert gc.get_threshold() == before


def test_an_application_freeze_is_left_alone() -> None:
    gc.freeze()
    try:
        with quiet_gc():
            pass
        assert gc.get_freeze_count() > 0  # quiet_gc's exit would have unfrozen everything
    finally:
        gc.unfreeze()
