"""Output files are replaced whole or not at all.

Every file traceforge writes for the user (reports, annotated and converted traces, table
files of ``-o DIR``, charts, peaks files) goes through :func:`replacing`: the data is
written to a temporary file in the destination's own folder (``.NAME.XXXX.tmp``), flushed
to disk, given the mode a new file would have (or the replaced file's), and then renamed
over the final name with :func:`os.replace`, which is atomic on one file system. On any
error (a full disk, a permission problem, an exception while rendering, Ctrl-C, SIGTERM,
SIGHUP)
the temporary file is removed and the final name keeps its previous content.

A process killed outright (SIGKILL, power loss) may leave a ``.NAME.*.tmp`` file behind,
never a truncated file under the final name.

A file written a piece at a time (:func:`opened`: converted and annotated traces, hundreds
of MB) is handed to the disk as it grows, so the flush before the rename has little left
to wait for.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from traceforge import libc


def _mode(path: Path) -> int:
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


#: Signals that unwind a write (the terminal closing, a polite kill); SIGINT already does.
_UNWIND = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None))
                if s is not None)


def _on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """While writing, SIGTERM and SIGHUP unwind (so the temporary file is removed) rather
    than ending the process where it stands."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old: dict[int, Any] = {}
    try:
        for sig in _UNWIND:
            # A handler already there (the CLI's, which also unwinds) is kept.
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                old[sig] = signal.signal(sig, _on_sigterm)
    except (ValueError, OSError):  # not allowed here: run without the handlers
        pass
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write; on a normal exit it replaces ``path``,
    on any exception it is removed (and the exception goes on)."""
    final = Path(path)
    fd, name = tempfile.mkstemp(prefix=f".{final.name[:100]}.", suffix=".tmp",
                                dir=final.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        with _sigterm_unwinds():
            yield tmp
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            os.chmod(tmp, _mode(final))
            os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write(path: str | Path, data: bytes | str) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` through :func:`replacing`; OSError as
    the system gave it (callers turn it into their one-line message)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with replacing(path) as tmp:
        tmp.write_bytes(raw)
    return Path(path)


#: Bytes written between requests that the disk start writing what the file holds so far.
WRITEBACK_BYTES = 32 << 20


def opened(tmp: str | Path) -> BinaryIO:
    """``tmp`` (the empty temporary file of :func:`replacing`) opened to be written a piece
    at a time. It is not truncated (on ext4 a file truncated and written again is flushed
    whole when it is closed: the close would wait for the disk), and every
    :data:`WRITEBACK_BYTES` the disk is asked to start writing what is there
    (``sync_file_range``, without waiting: the work a flush would do at the end is done
    while the rest is made; where the call is missing, the flush does it all)."""
    fd = os.open(tmp, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    return io.BufferedWriter(_Written(fd, "w"))


class _Written(io.FileIO):
    """A file whose written pages are sent to the disk every :data:`WRITEBACK_BYTES`:
    those written here, and those the kernel copied into it (its writer then moves the
    position past them: :func:`traceforge.render.shared_output.append_file`)."""

    sent = 0

    def write(self, b: Any, /) -> int:
        n: int = super().write(b)
        self._written(self.tell())
        return n

    def seek(self, pos: int, whence: int = os.SEEK_SET, /) -> int:
        at = super().seek(pos, whence)
        self._written(at)
        return at

    def _written(self, at: int) -> None:
        if at - self.sent >= WRITEBACK_BYTES:
            start_writeback(self.fileno(), self.sent, at - self.sent)
            self.sent = at


def start_writeback(fd: int, at: int, size: int) -> None:
    """Ask the disk to start writing ``size`` bytes of ``fd`` from ``at``, not waiting for
    it (Linux's ``sync_file_range(..., SYNC_FILE_RANGE_WRITE)``); nothing where the call
    is missing or fails: the flush before the rename writes them."""
    call = libc.function("sync_file_range", "c_int", "c_int64", "c_int64", "c_uint")
    if call is not None:
        call(fd, at, size, _SYNC_FILE_RANGE_WRITE)


_SYNC_FILE_RANGE_WRITE = 2
