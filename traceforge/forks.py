"""Work done in a forked child process while this one goes on, its result read back.

Independent work runs on two or more cores at once in children: the Kineto reader's
chunks (:mod:`traceforge.formats.kineto_chunks`), the critical path's steps, the critical
path of a report or an annotated trace, worked out beside their other analyses
(:func:`beside`), the packets of a Perfetto trace, a report's charts, and a run's rank
files (:func:`traceforge.formats.multirank.pool_map`). A thread would not do: all are
mostly Python and pandas work that holds the GIL (a first report of a 288 MB trace took
2.42 s wall with its critical path on a thread, 1.89 s with it in a child).
Children are forked, not spawned: they need this process's memory (the mapped file, the
loaded trace) and its imported modules, and a spawned interpreter would spend longer
importing numpy than the work takes.

A child's failure never becomes the user's error: callers catch :class:`ForkError` and
do the work here instead, so a result never depends on whether a child ran it. Nor can a
child hang its parent: one forked while another thread held a lock it then needs (a
progress display writing, a Dask scheduler in a notebook) waits forever, so a child that
has used no CPU time for :data:`STALL_S` seconds is killed and its work done here.
"""

from __future__ import annotations

import contextlib
import mmap
import multiprocessing
import os
import pickle
import signal
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from multiprocessing.connection import Connection
from typing import Any, Generic, TypeVar

from traceforge import background

T = TypeVar("T")


class ForkError(Exception):
    """A child could not be started, failed, died or stalled: do its work in this process.

    ``died`` is True when the child ended without a word (killed: out of memory, a
    signal), False when its work raised or it stopped making progress."""

    def __init__(self, why: str, *, died: bool = False) -> None:
        super().__init__(why)
        self.died = died


#: Seconds between looks at a child that has not answered yet.
POLL_S = 1.0
#: A child that has used no CPU time for this long while its work is not done is taken
#: as stuck (a lock another thread of this process held when it was forked, which no
#: one in the child will release): it is stopped and its work done here.
STALL_S = 30.0


def can_fork() -> bool:
    """Whether this process may fork workers: Linux (fork is unsafe on macOS, and spawning
    costs more than it saves), from the main thread of a process that is not itself a
    worker of a pool (a process pool's or Dask's), whose cores are already in use."""
    if sys.platform != "linux" or "fork" not in multiprocessing.get_all_start_methods():
        return False
    if multiprocessing.parent_process() is not None:
        return False
    return threading.current_thread() is threading.main_thread()


def cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class Child(Generic[T]):
    """``work()`` computed in a forked child, started at once; :meth:`result` waits for it.

    The child runs on memory it inherited and exits without cleanup (multiprocessing's
    ``os._exit``); its result comes back pickled through an in-memory file.
    """

    def __init__(self, work: Callable[[], T]) -> None:
        background.settle()  # no fork while a thread of this process writes
        ctx = multiprocessing.get_context("fork")
        self._proc: Any = None
        recv, send = ctx.Pipe(duplex=False)
        self._recv: Connection = recv
        self._fd = -1
        self._ticks: int | None = None
        self._since = time.monotonic()
        try:
            self._fd = memory_file()
            # What this process has buffered but not written would be written again by
            # the child when it flushes on exit.
            for stream in (sys.stdout, sys.stderr):
                if stream is not None:
                    stream.flush()
            with warnings.catch_warnings():
                # Python 3.12+ warns on fork() while other threads exist (numpy's BLAS
                # pool, a notebook's, a progress display's). The child exits without
                # cleanup, and one that still waits on a lock a thread held at the fork
                # is found stalled (:meth:`result`), stopped, and its work done here.
                warnings.simplefilter("ignore", DeprecationWarning)
                self._proc = ctx.Process(target=_run, args=(work, send, self._fd),
                                         daemon=True)
                with _default_sigterm():
                    self._proc.start()
        except BaseException:
            self.close()
            raise
        finally:
            send.close()

    def result(self) -> T:
        """The child's result; raises ForkError when it failed, died or stalled (no CPU
        time for :data:`STALL_S` seconds: then it is stopped)."""
        self._wait()
        try:
            ok, why = self._recv.recv()
        except (EOFError, OSError) as e:
            raise ForkError(f"a worker died ({e})", died=True) from None
        if not ok:
            raise ForkError(why)
        size = os.fstat(self._fd).st_size
        if size == 0:
            raise ForkError("a worker wrote no result")
        with mmap.mmap(self._fd, size, access=mmap.ACCESS_READ) as mm:
            value: T = pickle.loads(mm)
        return value

    def _wait(self) -> None:
        """Wait until the child answers or ends; a child that stalls is stopped."""
        while not self._recv.poll(POLL_S):
            if self.stalled():
                self._proc.kill()
                raise ForkError(f"a worker used no CPU time for {STALL_S:.0f} s")

    @property
    def connection(self) -> Connection:
        """What the child answers on: ready to read once it has (or has ended);
        :func:`multiprocessing.connection.wait` waits on several."""
        return self._recv

    def ready(self) -> bool:
        """Whether :meth:`result` would return (or raise) at once."""
        return self._recv.poll(0)

    def stalled(self) -> bool:
        """Whether the child has used no CPU time for :data:`STALL_S` seconds (it is
        waiting on something no one in it will release); False where /proc cannot tell.
        Called at least every few seconds while waiting."""
        now = time.monotonic()
        ticks = cpu_ticks(self._proc.pid)
        if ticks is None or ticks != self._ticks:
            self._ticks, self._since = ticks, now
            return False
        return now - self._since >= STALL_S

    def close(self) -> None:
        """Stop the child if it still runs and free what it used."""
        self._recv.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._proc is not None:
            if self._proc.is_alive():
                self._proc.terminate()
            self._proc.join(STALL_S)
            if self._proc.is_alive():  # SIGTERM blocked or handled: it cannot refuse this
                self._proc.kill()
                self._proc.join()
            self._proc = None


def cpu_ticks(pid: int) -> int | None:
    """CPU time a process has used (user + system, in clock ticks), None where /proc
    does not tell (not Linux, the process gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # Fields after the command name, which is in parentheses and may hold anything.
    fields = stat[stat.rfind(b")") + 2:].split()
    try:
        return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    except (IndexError, ValueError):
        return None


@contextlib.contextmanager
def _default_sigterm() -> Iterator[None]:
    """The child is forked with SIGTERM's default action: :meth:`Child.close` terminates a
    child that still runs, and a Python handler it inherited (the CLI turns SIGTERM into
    an exit) would raise inside the child's copy of this process's code, wherever fork()
    left it, instead of ending it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        if old is not None:  # None: a handler set outside Python, which cannot be restored
            signal.signal(signal.SIGTERM, old)


def _run(work: Callable[[], Any], conn: Connection, fd: int) -> None:
    try:
        value = work()
        # The result (tens of MB of columns) goes through an in-memory file: through the
        # pipe it would cross in 64 KiB turns between two processes, ~5x slower.
        with os.fdopen(os.dup(fd), "wb") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        result = (True, "")
    except BaseException as e:  # noqa: BLE001 -- any failure means: do it in the parent
        result = (False, f"{type(e).__name__}: {e}")
    try:
        conn.send(result)
    finally:
        conn.close()
        # No cleanup: flushing the standard streams (what multiprocessing does on the way
        # out) would take their locks, which a thread of the parent (a progress display)
        # may have held when this process was forked, and wait forever.
        os._exit(0)


def memory_file() -> int:
    """A file descriptor of an anonymous in-memory file (a temporary file elsewhere)."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create("traceforge-child", os.MFD_CLOEXEC)
    fd, name = tempfile.mkstemp(prefix="traceforge-child-")
    os.unlink(name)
    return fd


def forked_map(work: Callable[[int], T], n: int) -> list[T]:
    """``[work(0), ..., work(n - 1)]``: 0 in this process, the others in forked children.

    Raises ForkError when a child fails or dies, OSError when one cannot be started; this
    process's own failure propagates.
    """
    kids: list[Child[T]] = []
    try:
        for i in range(1, n):
            kids.append(Child(partial(work, i)))
        return [work(0), *(k.result() for k in kids)]
    finally:
        for k in kids:
            k.close()


def taking_map(work: Callable[[int], T], count: int, n: int) -> list[T]:
    """``[work(0), ..., work(count - 1)]`` by this process and ``n - 1`` forked children,
    each taking the next item no process has taken yet, so that all finish together:
    items dealt out in advance as runs leave one process waiting for another where items
    cost unequal time or a child runs slower than this process (it also sends its
    results back). The items' numbers wait in a pipe, read four bytes at a time by
    whichever process is free (a read from a pipe is whole); where they do not all fit in
    it, items go out as consecutive runs (:func:`forked_map`). A process takes items in
    increasing order. Raises ForkError when a child fails or dies, OSError when one
    cannot be started; this process's own failure propagates."""
    n = max(1, min(n, count))
    if n == 1:
        return [work(i) for i in range(count)]
    r, w = os.pipe()
    try:
        if 4 * count > pipe_bytes(w):
            at = [count * k // n for k in range(n + 1)]
            runs = forked_map(lambda k: [work(i) for i in range(at[k], at[k + 1])], n)
            return [v for run in runs for v in run]
        deal(w, count)
        os.close(w)
        w = -1

        def part(_: int) -> list[tuple[int, T]]:
            return [(i, work(i)) for i in iter(partial(take, r), None)]

        out: list[Any] = [None] * count
        for got in forked_map(part, n):
            for i, value in got:
                out[i] = value
        return out
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def deal(fd: int, count: int) -> None:
    """Lay the item numbers ``0 .. count - 1`` out in the pipe ``fd`` (one write: it must
    hold them, :func:`pipe_bytes`), for processes to :func:`take` one at a time."""
    os.write(fd, b"".join(i.to_bytes(4, "little") for i in range(count)))


def take(fd: int) -> int | None:
    """The next item number from the pipe ``fd`` (each to one process: a read of four
    bytes from a pipe is whole), None once it is empty and no one can write to it."""
    token = os.read(fd, 4)
    return int.from_bytes(token, "little") if len(token) == 4 else None


def pipe_bytes(fd: int) -> int:
    """What the pipe ``fd`` holds before a write blocks (one page where the OS won't say)."""
    try:
        import fcntl

        return int(fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ))
    except (ImportError, AttributeError, OSError):
        return 4096


class _Raised:
    """An error of the work done beside (:func:`beside`), sent back to be raised where its
    result is read."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _caught(work: Callable[[], T], catch: tuple[type[BaseException], ...]) -> T | _Raised:
    try:
        return work()
    except catch as e:
        return _Raised(e)


@contextlib.contextmanager
def beside(work: Callable[[], T], catch: tuple[type[BaseException], ...] = ()
           ) -> Iterator[Callable[[], T]]:
    """``work()`` done beside what the ``with`` block does, on another core: yields the
    call that returns its result (waiting for it). In a forked child where this process
    may fork (:func:`can_fork`), else on a thread; on one core, when that call is made.
    An error of ``catch`` that ``work`` raises is raised by that call, as if ``work`` ran
    there; a child that cannot start, fails otherwise or dies has ``work`` done here.
    Whatever ``work`` reads should be built before the block (the child gets a copy)."""
    if cores() < 2:
        yield work
        return
    child: Child[T | _Raised] | None = None
    if can_fork():
        with contextlib.suppress(OSError):  # no fork or in-memory file here: a thread
            child = Child(partial(_caught, work, catch))
    if child is None:
        with ThreadPoolExecutor(1, thread_name_prefix="traceforge-beside") as pool:
            yield pool.submit(work).result
        return
    kid = child

    def result() -> T:
        try:
            got = kid.result()
        except ForkError:
            return work()
        if isinstance(got, _Raised):
            raise got.error
        return got

    try:
        yield result
    finally:
        kid.close()
