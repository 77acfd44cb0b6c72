"""An output made of consecutive batches, written by several processes at once: this one
writes batches from the front as it makes them, while forked helpers
(:class:`traceforge.forks.Child`) take batches from the back into temporary files, each
the next as it finishes one, until the two meet; the helpers' batches are then added in
order (by the kernel where it can: :func:`append_file`). The Perfetto and Chrome JSON
writers encode their events so (:mod:`traceforge.render.pftrace_chunks`,
:mod:`traceforge.render.document`). A batch whose helper could not start, failed, died or
stalled is made here, so the output never depends on where a batch was made.
"""

from __future__ import annotations

import contextlib
import os
import struct
import tempfile
from collections.abc import Callable
from functools import partial
from typing import Any, BinaryIO

from traceforge import forks


def helpers_for(n: int, least: int) -> int:
    """How many forked helpers :func:`write_shared` should start for ``n`` items: one per
    core but this process's, none where a process would get fewer than ``least`` items
    or this process may not fork."""
    return max(1, min(forks.cores(), n // least)) - 1 if forks.can_fork() else 0


class Claims:
    """Batches ``0 .. count - 1`` shared out between this process, which takes them from the
    front, and forked helpers, which take them from the back, until the two meet. The two
    ends are 16 bytes of an in-memory file, read and changed under a POSIX lock on it: a
    lock belongs to one process (a child does not inherit it) and the kernel releases it
    when its holder dies, so a helper that is killed cannot leave the others waiting."""

    def __init__(self, count: int) -> None:
        self.fd = forks.memory_file()
        try:
            os.pwrite(self.fd, struct.pack("<qq", 1, count), 0)  # batch 0: this process's
        except OSError:
            self.close()
            raise

    def take(self, front: bool) -> int | None:
        """The next batch from the front (or the back); None once every batch is taken,
        or where the lock cannot be had (then no process takes more: the batches no
        helper made are made by this process, :func:`write_shared`)."""
        import fcntl  # (POSIX only: claims are made where this process forks, on Linux)

        try:
            fcntl.lockf(self.fd, fcntl.LOCK_EX)
        except OSError:
            return None
        try:
            lo, hi = struct.unpack("<qq", os.pread(self.fd, 16, 0))
            if lo >= hi:
                return None
            k: int = lo if front else hi - 1
            lo, hi = (lo + 1, hi) if front else (lo, hi - 1)
            os.pwrite(self.fd, struct.pack("<qq", lo, hi), 0)
            return k
        except (OSError, struct.error):
            return None
        finally:
            with contextlib.suppress(OSError):
                fcntl.lockf(self.fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _helping(claims: Claims, child: Callable[[int, BinaryIO], None], f: BinaryIO
             ) -> list[tuple[int, int, int]]:
    """A helper's work (in a child): batches from the back, each written at the end of
    ``f``; (batch, offset, size) of each."""
    done = []
    fd = f.fileno()
    while (k := claims.take(front=False)) is not None:
        at = os.lseek(fd, 0, os.SEEK_CUR)
        child(k, f)
        done.append((k, at, os.lseek(fd, 0, os.SEEK_CUR) - at))
    return done


def write_shared(count: int, helpers: int, here: Callable[[int], None],
                 child: Callable[[int, BinaryIO], None],
                 copy: Callable[[bytes], Any], piece: int = 8 << 20,
                 copy_range: Callable[[BinaryIO, int, int], None] | None = None) -> None:
    """An output of ``count`` consecutive batches, made on several cores: this process
    writes them from the front (``here(k)``, in order, batch 0 first) while ``helpers``
    forked children take them from the back (``child(k, f)`` writes batch ``k`` at the
    end of the child's temporary file ``f``, gone once closed), each taking the next
    batch as it finishes one, until the two meet: no process waits on a slower one for
    more than a batch. The children's batches are then copied in order (``copy``, a
    ``piece`` of bytes at a time: a batch is never whole in memory; or ``copy_range(f,
    offset, size)`` where the caller can: :func:`append_file`). A batch whose child
    could not start, failed, died or stalled is written here (``here(k)``) in its turn,
    so the output never depends on where a batch was made; ``here`` may thus be asked
    for a batch after one it did not write."""
    claims = None
    if helpers >= 1 and count >= 2:
        with contextlib.suppress(OSError):  # (no file to share them through: all here)
            claims = Claims(count)
    if claims is None:
        for k in range(count):
            here(k)
        return
    kids: list[tuple[forks.Child[list[tuple[int, int, int]]], BinaryIO]] = []
    with contextlib.ExitStack() as stack:
        stack.callback(claims.close)
        for _ in range(helpers):
            try:
                f: BinaryIO = stack.enter_context(tempfile.TemporaryFile())
                kid = forks.Child(partial(_helping, claims, child, f))
            except OSError:  # no temporary file or no child: fewer helpers
                continue
            stack.callback(kid.close)
            kids.append((kid, f))
        here(0)
        taken = 1
        while (nxt := claims.take(front=True)) is not None:
            here(nxt)
            taken = nxt + 1
        # Every batch is taken; those after this process's are in the children's files.
        made: dict[int, tuple[BinaryIO, int, int]] = {}
        for kid, file in kids:
            with contextlib.suppress(forks.ForkError):
                made.update((k, (file, at, size)) for k, at, size in kid.result())
        for k in range(taken, count):
            if k not in made:
                here(k)
                continue
            file, at, size = made[k]
            if copy_range is not None:
                copy_range(file, at, size)
                continue
            file.seek(at)
            while size > 0 and (data := file.read(min(piece, size))):
                copy(data)
                size -= len(data)


def append_file(src: BinaryIO, out: BinaryIO, copy: Callable[[bytes], Any],
                piece: int = 8 << 20, at: int = 0, size: int | None = None) -> None:
    """The content of ``src`` (``size`` bytes from offset ``at``; all from there when
    None) added at the end of what was written to ``out``: copied by the kernel
    (``copy_file_range``: no pass through this process's memory, ~3x faster than
    reading and writing 100 MB here), else, or for what it did not copy, a ``piece`` at
    a time through ``copy`` (``out``'s writer)."""
    done = 0
    try:
        end = os.fstat(src.fileno()).st_size
        size = end - at if size is None else min(size, end - at)
        out.flush()
        to = out.tell()
        fd = out.fileno()
        while done < size:
            n = os.copy_file_range(src.fileno(), fd, size - done, at + done, to + done)
            if n <= 0:
                break
            done += n
    except (OSError, AttributeError, ValueError):  # no such call, other file systems
        pass
    if done:
        out.seek(to + done)
    src.seek(at + done)
    left = None if size is None else size - done
    while left is None or left > 0:
        data = src.read(piece if left is None else min(piece, left))
        if not data:
            break
        copy(data)
        if left is not None:
            left -= len(data)
