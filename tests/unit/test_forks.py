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


@pytest.mark.parametrize("kernel", ["copies all", "copies part", "cannot copy", "a pipe"])
def test_append_file_adds_the_whole_file_after_what_was_written(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch, kernel: str) -> None:
    """A part a child wrote to its file goes after what the output holds, by the kernel
    or, for what it did not copy, read and written here; what is written after it
    follows it (the output's position is where the kernel left off)."""
    import tempfile

    part = os.urandom(300_000) + b"end"
    real = os.copy_file_range

    def partly(src: int, dst: int, count: int, *offsets: Any) -> int:
        if partly.calls:  # type: ignore[attr-defined]
            raise OSError(18, "Invalid cross-device link")
        partly.calls += 1  # type: ignore[attr-defined]
        return real(src, dst, min(count, 70_001), *offsets)

    partly.calls = 0  # type: ignore[attr-defined]
    if kernel == "copies part":
        monkeypatch.setattr(os, "copy_file_range", partly)
    elif kernel == "cannot copy":
        monkeypatch.delattr(os, "copy_file_range")
    with tempfile.TemporaryFile() as src:
        src.write(part)
        src.seek(123)  # (a child's file: wherever its offset was left)
        if kernel == "a pipe":
            r, w = os.pipe()
            with open(r, "rb") as rf, open(w, "wb") as out:
                reader = threading.Thread(target=lambda: got.append(rf.read()))
                got: list[bytes] = []
                reader.start()
                out.write(b"head")
                forks.append_file(src, out, out.write, 4096)
                out.write(b"tail")
                out.close()
                reader.join()
            assert got == [b"head" + part + b"tail"]
            return
        dst = tmp_path / "out.bin"
        with open(dst, "wb") as out:
            out.write(b"head")
            forks.append_file(src, out, out.write, 4096)
            out.write(b"tail")
        assert dst.read_bytes() == b"head" + part + b"tail"


def _shared(tmp_path: Any, count: int, helpers: int, *, die_after: int | None = None,
            kernel_copy: bool = True, wait: bool = True) -> tuple[bytes, list[int]]:
    """``write_shared`` of ``count`` batches, each ``b"<k>:here;"`` or ``b"<k>:child;"``:
    the output, and which batches this process wrote. Its second batch waits (up to 10 s;
    unless not ``wait``) until a helper has begun one, so both make some. ``die_after``:
    a helper ends without a word after that many batches."""
    parent = os.getpid()
    mine: list[int] = []
    done: list[int] = []  # (in each helper: its own copy)
    dst = tmp_path / "out.bin"
    begun = tmp_path / "begun"

    with open(dst, "wb") as out:
        def here(k: int) -> None:
            mine.append(k)
            waited = 0.0
            while wait and k == 1 and not begun.exists() and waited < 10:
                time.sleep(0.01)
                waited += 0.01
            time.sleep(0.002)
            out.write(f"{k}:here;".encode())

        def child(k: int, f: Any) -> None:
            assert os.getpid() != parent
            begun.touch()
            if die_after is not None and len(done) == die_after:
                os._exit(1)
            time.sleep(0.003)
            with open(f.fileno(), "wb", closefd=False) as w:
                w.write(f"{k}:child;".encode())
            done.append(k)

        def copy_range(f: Any, at: int, size: int) -> None:
            forks.append_file(f, out, out.write, 7, at, size)

        forks.write_shared(count, helpers, here, child, out.write, 5,
                           copy_range if kernel_copy else None)
    return dst.read_bytes(), mine


@pytest.mark.parametrize("kernel_copy", [True, False])
@pytest.mark.parametrize("helpers", [1, 2])
def test_shared_batches_are_all_written_once_in_order(tmp_path: Any, helpers: int,
                                                      kernel_copy: bool) -> None:
    """This process writes from the front and the helpers take from the back, each the
    next batch as it finishes one: every batch once, in order, some made here (batch 0
    always) and some by the helpers, copied by the kernel or read and written here."""
    data, mine = _shared(tmp_path, 60, helpers, kernel_copy=kernel_copy)
    got = [p.split(b":") for p in data.split(b";")[:-1]]
    assert [int(k) for k, _ in got] == list(range(60))
    assert mine[0] == 0 and mine == sorted(mine)
    where = [w for _, w in got]
    assert where[0] == b"here" and b"child" in where
    # Once a helper's batch comes, the rest are the helpers' (they took from the back).
    assert where == sorted(where, key=lambda w: w == b"child")


def test_shared_batches_of_a_helper_that_dies_are_made_here(tmp_path: Any) -> None:
    """A helper that ends after two batches without a word: the batches it had written
    and the one it took when it died are all made here, in their turn."""
    data, mine = _shared(tmp_path, 40, 1, die_after=2)
    assert data == b"".join(f"{k}:here;".encode() for k in range(40))
    assert mine == list(range(40))


def test_shared_batches_alone_or_without_helpers_are_made_here(tmp_path: Any) -> None:
    assert _shared(tmp_path, 1, 1)[1] == [0]
    assert _shared(tmp_path, 5, 0) == (b"".join(f"{k}:here;".encode() for k in range(5)),
                                       list(range(5)))


def test_a_claim_is_not_held_by_a_helper_that_died_holding_it() -> None:
    """The batches' ends are changed under a POSIX lock, which the kernel releases when
    its holder dies: a helper killed while it held it leaves nobody waiting."""
    import fcntl

    claims = forks.Claims(4)

    def die_holding() -> None:
        fcntl.lockf(claims.fd, fcntl.LOCK_EX)
        os._exit(1)

    kid = forks.Child(die_holding)
    with pytest.raises(forks.ForkError):
        kid.result()
    kid.close()
    assert [claims.take(front=True), claims.take(front=False),
            claims.take(front=True), claims.take(front=False)] == [1, 3, 2, None]
    claims.close()


def test_shared_batches_where_no_lock_can_be_had_are_made_here(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file system that refuses the lock: no process takes a batch after its first
    try, and this process makes them all, in order."""
    import fcntl

    def refused(*a: Any) -> None:
        raise OSError(37, "No locks available")

    monkeypatch.setattr(fcntl, "lockf", refused)
    data, mine = _shared(tmp_path, 12, 1, wait=False)
    assert data == b"".join(f"{k}:here;".encode() for k in range(12))
    assert mine == list(range(12))
