"""A large Kineto file's chunks decoded while the command is still importing.

A cold command on a large trace spends its first ~0.3 s on one core importing pandas,
pyarrow and the verb's modules, and only then does the reader fork its chunk workers
(:mod:`traceforge.formats.kineto_chunks`). The CLI calls :func:`start` before those
imports for the one trace file a command names, where the command will parse it: no
cache entry for it yet, cache on, a plain (not gzipped) JSON file large enough for
several workers. Children forked from this still-light process plan the cut, lay the
chunks' numbers out in a pipe and begin taking them, one each, as the reader's workers
do (:func:`traceforge.forks.taking_map`). When the reader gets to the file it
:func:`claim`s them and takes the remaining numbers in this process; the children then
hand back their chunks' columns.

Nothing depends on it. The columns are those of the chunks the reader's own cut gives
(a child's work is used only where its cut is the reader's, for the same file, unchanged);
a chunk that no one did (a child that failed, died or stalled, a cut that differs) is
done by the reader, its own workers taking the chunks as without a prefetch. A prefetch
that no reader claims (the command read the file some other way, failed first, or read
only some kinds of rows) is stopped by :func:`discard`, which the CLI calls at its end.
"""

from __future__ import annotations

import gc
import mmap
import os
import select
import stat
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from traceforge.formats import cache_settings

T = TypeVar("T")

#: Seconds between looks at the children while this process waits for a chunk number.
POLL_S = 1.0


class Prefetch:
    """Children decoding the chunks of the file at ``real`` (stat ``ident``), forked by
    process ``owner``; numbers are taken from ``fd``, the read end of their pipe."""

    def __init__(self, real: Path, ident: tuple[int, int, int], kids: list[Any],
                 fd: int) -> None:
        self.real, self.ident, self.kids, self.fd = real, ident, kids, fd
        self.owner = os.getpid()

    def take(self, work: Callable[[int], T], chunks: int, cut: tuple[int, list[int]],
             rest: Callable[[Callable[[int], T], int], list[T]]) -> list[T]:
        """``[work(0), ..., work(chunks - 1)]`` for the reader's cut ``cut`` (start,
        cuts): the chunks this process takes from the pipe, the children's where their cut
        is ``cut``, and what is left by ``rest(work', count)`` (the reader's workers).
        ``work``'s failure propagates; the children are stopped either way."""
        from traceforge.forks import ForkError

        done: dict[int, T] = {}
        try:
            while (i := self._next()) is not None:
                if i < chunks:
                    done[i] = work(i)
            for kid in self.kids:
                try:
                    got = kid.result()
                except ForkError:
                    continue
                if got is not None and (got[0], got[1]) == cut:
                    for i, value in got[2]:
                        done.setdefault(i, value)
        finally:
            self.close()
        missing = [i for i in range(chunks) if i not in done]
        if missing:
            for i, value in zip(missing, rest(lambda j: work(missing[j]), len(missing)),
                                strict=True):
                done[i] = value
        return [done[i] for i in range(chunks)]

    def _next(self) -> int | None:
        """The next chunk number from the pipe, None once they are all taken (or the
        children are gone, or one stalled: they are stopped then)."""
        while True:
            ready, _, _ = select.select([self.fd], [], [], POLL_S)
            if ready:
                from traceforge.forks import take

                return take(self.fd)
            if any(k.stalled() for k in self.kids):
                self.close()
                return None

    def close(self) -> None:
        """Stop the children (where they still run) and close the pipe."""
        for kid in self.kids:
            kid.close()
        self.kids = []
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


_running: Prefetch | None = None


def start(arg: str) -> bool:
    """Start decoding the trace file ``arg`` names in children, where a command will
    parse it on several cores; whether it started. Cheap when it does not (a few stat
    calls): the reader's modules are imported only for a file it will start on."""
    global _running
    if _running is not None or not cache_settings.enabled():
        return False
    try:
        real = Path(arg).resolve(strict=True)
        st = real.stat()
        if not stat.S_ISREG(st.st_mode) or not real.name.lower().endswith(".json"):
            return False
        if cache_settings.entry_file(real).exists():
            return False  # cached (or stale: then the reader finds out, as ever)
        with real.open("rb") as f:
            head = f.read(4096)  # (a gzip is not sniffed as JSON: decompressed in one piece)
    except (OSError, RuntimeError, ValueError):
        return False
    from traceforge.formats import kineto_chunks as chunks
    from traceforge.formats.kineto_schema import sniff

    n = chunks.workers()
    if not sniff(head) or chunks.forks_for(st.st_size, n) < 2:
        return False
    from traceforge.forks import Child

    ident = (st.st_size, st.st_mtime_ns, st.st_ino)
    r, w = os.pipe()
    kids: list[Any] = []
    try:
        for k in range(n - 1):
            kids.append(Child(partial(_decode, real, ident, r, w, k == 0, n)))
    except OSError:
        for kid in kids:
            kid.close()
        os.close(r)
        return False
    finally:
        os.close(w)  # the planning child holds the pipe's only write end now
    _running = Prefetch(real, ident, kids, r)
    return True


def pending() -> Prefetch | None:
    """The prefetch started and not yet claimed or stopped, if any."""
    return _running


def claim(path: Path) -> Prefetch | None:
    """The prefetch of the file ``path`` names, as it is now, taken over by the reader;
    None where there is none (or it was started by another process: a forked worker
    inherits it, but its children are not the worker's). A prefetch of the file as it
    was before a change is stopped."""
    global _running
    p = _running
    if p is None or p.owner != os.getpid():
        return None
    try:
        real = path.resolve(strict=True)
        st = real.stat()
    except (OSError, RuntimeError):
        return None
    if real != p.real:
        return None  # another file: it may still be read
    _running = None
    if p.ident != (st.st_size, st.st_mtime_ns, st.st_ino):
        p.close()
        return None
    return p


def discard() -> None:
    """Stop a prefetch no reader claimed."""
    global _running
    p = _running
    if p is not None and p.owner == os.getpid():
        _running = None
        p.close()


def _decode(real: Path, ident: tuple[int, int, int], r: int, w: int, plans: bool,
            n: int) -> tuple[int, list[int], list[tuple[int, Any]]] | None:
    """In a child: the cut (start, cuts) and ``(number, (columns, tail))`` of each chunk
    it took; the planning child (``plans``) first lays every chunk's number out in the
    pipe. None: no cut (the file changed, is not a trace the chunked reader reads, or has
    more chunks than the pipe holds numbers)."""
    from traceforge.forks import deal, pipe_bytes, take
    from traceforge.formats import kineto_chunks as chunks
    from traceforge.formats.kineto_columns import columns

    gc.disable()  # (as the reader decodes: millions of new containers, no cycles)
    if not plans:
        os.close(w)
    try:
        with real.open("rb") as f:
            st = os.fstat(f.fileno())
            if (st.st_size, st.st_mtime_ns, st.st_ino) != ident:
                return None
            raw = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        plan = chunks.plan(raw, n)
        if plans:
            if plan is None or 4 * plan.chunks > pipe_bytes(w):
                return None
            deal(w, plan.chunks)
    finally:
        if plans:
            os.close(w)
    if plan is None:
        return None
    got = []
    for i in iter(partial(take, r), None):
        events, tail = chunks.decode(raw, plan, i)
        got.append((i, (columns(events, None), tail)))
        del events
    return plan.start, plan.cuts, got
