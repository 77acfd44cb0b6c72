"""Forked children never hang their parent (the CI run of stop 23 hung for an hour in the
lowest-versions suite): a child that waits on a lock a thread held at the fork is found
stalled, stopped, and its work done in the parent; a pool item whose child failed is
done again here, so the error is the parent's own; one whose child died is one line."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from traceforge import forks
from traceforge.errors import AnalysisError, TraceFormatError
from traceforge.formats.multirank import pool_map

pytestmark = pytest.mark.skipif(not forks.can_fork(), reason="forks only on Linux")


@pytest.fixture
def held() -> Iterator[threading.Lock]:
    """A lock another thread holds for 3 s: a child forked meanwhile inherits it held,
    with nobody in the child to release it."""
    lock, taken, go = threading.Lock(), threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            taken.set()
            go.wait(3)

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    taken.wait()
    yield lock
    go.set()
    t.join()


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forks, "POLL_S", 0.1)
    monkeypatch.setattr(forks, "STALL_S", 1.0)


def _under_lock(lock: threading.Lock, value: int) -> int:
    with lock:
        return value


@pytest.mark.usefixtures("quick")
def test_a_child_stuck_on_an_inherited_lock_is_stopped(held: threading.Lock) -> None:
    kid = forks.Child(lambda: _under_lock(held, 7))
    t0 = time.monotonic()
    with pytest.raises(forks.ForkError, match="no CPU time") as e:
        kid.result()
    assert not e.value.died and time.monotonic() - t0 < 10
    kid.close()


@pytest.mark.usefixtures("quick")
def test_pool_items_whose_child_stalls_are_done_here(held: threading.Lock) -> None:
    got = pool_map(lambda v: _under_lock(held, v), [1, 2, 3], 2, files=["a", "b", "c"],
                   hint="h")
    assert got == [1, 2, 3]


@pytest.mark.usefixtures("quick")
def test_a_working_child_is_not_taken_for_stalled() -> None:
    def busy() -> int:
        end, n = time.monotonic() + 3.0, 0
        while time.monotonic() < end:
            n += 1
        return 42

    kid = forks.Child(busy)
    try:
        assert kid.result() == 42
    finally:
        kid.close()


def _bad(v: int) -> int:
    if v == 2:
        raise TraceFormatError("b.json", f"item {v} is broken")
    return v


def test_a_failing_item_raises_the_parents_own_error() -> None:
    with pytest.raises(TraceFormatError, match="^b.json: item 2 is broken$"):
        pool_map(_bad, [1, 2, 3], 2, files=["a", "b", "c"], hint="h")
    assert pool_map(_bad, [1, 3, 5, 7], 3, files=["a"] * 4, hint="h") == [1, 3, 5, 7]


def _die(_: object) -> None:
    os._exit(3)


def test_a_dying_child_is_the_hint_naming_the_files() -> None:
    with pytest.raises(AnalysisError, match=r"^a\.json, b\.json: worker died$"):
        pool_map(_die, [1, 2], 2, files=["a.json", "b.json"], hint="worker died")


def test_a_child_does_not_flush_the_inherited_standard_streams(
        capfd: pytest.CaptureFixture[str]) -> None:
    """What the parent had buffered is written once, by the parent."""
    sys.stdout.write("buffered once")
    kid = forks.Child(lambda: 1)
    try:
        assert kid.result() == 1
    finally:
        kid.close()
    sys.stdout.flush()
    assert capfd.readouterr().out.count("buffered once") == 1


def test_cpu_ticks_of_this_process_and_of_none() -> None:
    assert (forks.cpu_ticks(os.getpid()) or 0) >= 0
    assert forks.cpu_ticks(2**31 - 1) is None


def test_a_free_slot_takes_the_next_item_while_a_slow_one_runs(tmp_path: Any) -> None:
    """At most n children at once, and a slot is refilled as soon as its child answers,
    not in item order; results still come back in item order."""
    log = tmp_path / "log"

    def work(i: int) -> int:
        with open(log, "a") as f:
            f.write(f"start {i} {time.monotonic()}\n")
        if i == 0:
            time.sleep(2.0)
        with open(log, "a") as f:
            f.write(f"end {i} {time.monotonic()}\n")
        return i * 10

    assert pool_map(work, [0, 1, 2, 3], 2, files=["f"] * 4, hint="h") == [0, 10, 20, 30]
    at = {(w, int(i)): float(t) for w, i, t in (line.split() for line in
                                                   log.read_text().splitlines())}
    assert at[("start", 2)] < at[("end", 0)] and at[("start", 3)] < at[("end", 0)]


def test_beside_runs_in_a_child_and_raises_its_errors_where_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``beside``: the work runs in a child while the block goes on; an error it is told
    to catch is raised where the result is read; one it is not (a bug in the child, or a
    child that dies) has the work done here, so the error, if any, is this process's."""
    monkeypatch.setattr(forks, "cores", lambda: 2)
    here = os.getpid()
    with forks.beside(os.getpid) as pid:
        assert pid() != here
    with forks.beside(lambda: (_ for _ in ()).throw(AnalysisError("no steps")),
                      (AnalysisError,)) as got, pytest.raises(AnalysisError, match="no steps"):
        got()

    def only_here() -> int:
        if os.getpid() != here:
            os._exit(3)  # the child dies without a word
        return 7

    with forks.beside(only_here) as got:
        assert got() == 7
    # One core: done when read, here; a process that may not fork: on a thread.
    monkeypatch.setattr(forks, "cores", lambda: 1)
    with forks.beside(os.getpid) as pid:
        assert pid() == here
    monkeypatch.setattr(forks, "cores", lambda: 2)
    monkeypatch.setattr(forks, "can_fork", lambda: False)
    with forks.beside(threading.current_thread) as thread:
        assert thread() is not threading.main_thread()


def _stamped(i: int) -> tuple[int, int, int]:
    time.sleep(0.002 * (i % 3))  # items of unequal cost
    return i, os.getpid(), time.monotonic_ns()


@pytest.mark.skipif(not forks.can_fork(), reason="forks children on Linux only")
@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("count", [0, 1, 5, 40])
def test_taking_map_gives_every_item_in_order(n: int, count: int) -> None:
    got = forks.taking_map(_stamped, count, n)
    assert [i for i, _, _ in got] == list(range(count))
    by_process: dict[int, list[int]] = {}
    for _, pid, at in got:
        by_process.setdefault(pid, []).append(at)
    assert all(times == sorted(times) for times in by_process.values())  # in order each
    assert len(by_process) <= max(1, min(n, count))
    if n > 1 and count == 40:
        assert len(by_process) > 1  # every process took items


@pytest.mark.skipif(not forks.can_fork(), reason="forks children on Linux only")
def test_taking_map_in_runs_where_the_numbers_do_not_fit_the_pipe(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forks, "pipe_bytes", lambda fd: 8)
    got = forks.taking_map(_stamped, 9, 3)
    assert [i for i, _, _ in got] == list(range(9))
    pids = [pid for _, pid, _ in got]
    assert [pids[0]] * 3 == pids[:3] and len(set(pids)) == 3  # consecutive runs


@pytest.mark.skipif(not forks.can_fork(), reason="forks children on Linux only")
def test_taking_map_a_dying_child_is_a_fork_error() -> None:
    parent = os.getpid()

    def work(i: int) -> int:
        if os.getpid() != parent:
            os._exit(3)
        time.sleep(0.01)
        return i

    with pytest.raises(forks.ForkError):
        forks.taking_map(work, 20, 2)
