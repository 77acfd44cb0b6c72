"""Work a command leaves running beside it (traceforge.background)."""

from __future__ import annotations

import threading
import time

from traceforge import background, forks


def test_outside_a_block_the_caller_does_the_work() -> None:
    assert not background.later(lambda: None)


def test_inside_a_block_work_runs_on_a_thread_and_is_waited_for_at_its_end() -> None:
    done: list[str] = []

    def work() -> None:
        time.sleep(0.2)
        done.append(threading.current_thread().name)

    with background.settling():
        assert background.later(work)
        assert done == []  # the block goes on meanwhile
    assert done == ["traceforge-later"]


def test_not_from_another_thread() -> None:
    got: list[bool] = []
    with background.settling():
        t = threading.Thread(target=lambda: got.append(background.later(lambda: None)))
        t.start()
        t.join()
    assert got == [False]


def test_a_fork_waits_for_the_work_first() -> None:
    """No child is forked while a thread of this process writes (it would inherit the
    locks that thread holds)."""
    done: list[int] = []
    with background.settling():
        background.later(lambda: (time.sleep(0.2), done.append(1)))
        child = forks.Child(lambda: len(done))
        try:
            assert done == [1]
            if forks.can_fork():
                assert child.result() == 1  # the child's copy saw the work done
        finally:
            child.close()


def test_work_is_pending_by_its_tag_until_waited_for() -> None:
    """What the cache asks to know whether an entry is still being written beside the
    command (``cache.writing``): pending from ``later`` until ``settle``, even once the
    thread is done; other tags and no block at all are never pending."""
    assert not background.pending("a")
    with background.settling():
        background.later(lambda: None, tag="a")
        time.sleep(0.05)
        assert background.pending("a")
        assert not background.pending("b")
        background.settle()
        assert not background.pending("a")
    assert not background.pending("a")
