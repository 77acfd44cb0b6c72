"""Reading a trace file's bytes: plain or gzip (within :mod:`~traceforge.formats.gunzip`'s
limits), with one-line errors."""

from __future__ import annotations

import gc
import gzip
import mmap
import zlib
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from traceforge.errors import TraceFormatError
from traceforge.formats import gunzip

#: How a reader says that text is not UTF-8, whichever decoder found it.
NOT_UTF8 = "not valid UTF-8 text"


def not_utf8(e: BaseException) -> bool:
    """Whether a decode error is text that is not UTF-8: Python's ``UnicodeDecodeError``
    (msgspec < 0.23 raises it) or msgspec's own ``DecodeError`` saying so (0.23 on)."""
    return isinstance(e, UnicodeDecodeError) or "utf-8" in str(e).lower()


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector paused while JSON is decoded (a trace's events, its
    args) or a writer's batch of events is built and encoded: millions of new containers
    (none can form a cycle) trigger it over and over, each time over every object the
    process holds (decoding a large trace's args: 8-11 s with it, 2.2 s without). Back
    on afterwards if it was on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_bytes(path: Path) -> bytes:
    """The whole content of ``path``, gunzipped when it is gzip."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise TraceFormatError(path, f"cannot read ({e.strerror})") from None
    if raw[:2] == b"\x1f\x8b":
        del raw
        return gunzip.to_bytes(path)
    return raw


def read_head(path: Path, n: int = 4096) -> bytes:
    """First ``n`` bytes of the file's content, gunzipped when the file is gzip."""
    with path.open("rb") as f:
        head = f.read(n)
        if head[:2] != b"\x1f\x8b":
            return head
        f.seek(0)  # the same open file: opened once
        try:
            with gzip.GzipFile(fileobj=f, mode="rb") as g:
                return g.read(n)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceFormatError(path, f"truncated or corrupt gzip ({e})") from None


@contextmanager
def content(path: Path, private: bool = False) -> Iterator[bytes | mmap.mmap]:
    """The content of ``path`` for one decode: a read-only map of a plain file, else bytes.

    Mapping saves copying a large file into a buffer first (~0.15 s per 300 MB); the map
    is closed on exit, so nothing decoded from it may keep referencing it. ``private``
    maps a plain file copy-on-write instead: bytes written to the map stay in this
    process (and are not seen by processes forked earlier); the file never changes.
    """
    try:
        f = path.open("rb")
    except OSError as e:
        raise TraceFormatError(path, f"cannot read ({e.strerror})") from None
    with f:
        gz = f.read(2) == b"\x1f\x8b"
        size = f.seek(0, 2)
        if size == 0:
            yield b""
            return
        if gz:
            # Decompressed into an unlinked temporary file and mapped, within limits.
            gm = gunzip.to_map(path, private)
            try:
                yield gm
            finally:
                if isinstance(gm, mmap.mmap):
                    _close(gm)
            return
        try:
            mm = mmap.mmap(f.fileno(), 0,
                           access=mmap.ACCESS_COPY if private else mmap.ACCESS_READ)
        except (OSError, ValueError):
            yield read_bytes(path)
            return
    try:
        yield mm
    finally:
        _close(mm)


def _close(mm: mmap.mmap) -> None:
    """Close ``mm`` unless something still references it: a run ended mid-decode (Ctrl-C,
    the memory guard) leaves views of it in the traceback's frames, and the BufferError
    would take the place of that run's own error. The map then closes with its last view.
    """
    with suppress(BufferError):
        mm.close()


def first_byte(buf: bytes | mmap.mmap) -> bytes:
    """The first non-whitespace byte of ``buf`` (b"" when there is none), without copying it."""
    i = 0
    n = len(buf)
    while i < n:
        chunk = bytes(buf[i:i + 4096]).lstrip()
        if chunk:
            return chunk[:1]
        i += 4096
    return b""


def view(path: Path) -> bytes | mmap.mmap:
    """The content of ``path`` as a read-only map (plain files) or bytes (gzip).

    For decodes whose results keep referencing the buffer (``msgspec.Raw``): the map
    stays open as long as anything references it.
    """
    try:
        with path.open("rb") as f:
            if f.read(2) != b"\x1f\x8b" and f.seek(0, 2) > 0:
                return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        pass
    return read_bytes(path)
