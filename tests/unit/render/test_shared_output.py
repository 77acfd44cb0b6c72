"""An output made in batches by this process and forked helpers
(:mod:`traceforge.render.shared_output`): every batch once and in order whoever made it,
the batches of a helper that dies made here, a lock its dead holder cannot keep, and the
helpers' files added after what was written, by the kernel or not."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from traceforge import forks
from traceforge.render import shared_output

pytestmark = pytest.mark.skipif(not forks.can_fork(), reason="forks only on Linux")


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
                shared_output.append_file(src, out, out.write, 4096)
                out.write(b"tail")
                out.close()
                reader.join()
            assert got == [b"head" + part + b"tail"]
            return
        dst = tmp_path / "out.bin"
        with open(dst, "wb") as out:
            out.write(b"head")
            shared_output.append_file(src, out, out.write, 4096)
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
            shared_output.append_file(f, out, out.write, 7, at, size)

        shared_output.write_shared(count, helpers, here, child, out.write, 5,
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

    claims = shared_output.Claims(4)

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
