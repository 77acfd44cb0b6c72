"""Gzip inputs, decompressed in a stream with bounds, into private temporary files.

A gzip file can expand a thousandfold (5 MB of gzip holding 5 GB of spaces), so nothing is
decompressed whole in memory: the stream is read 1 MiB at a time and stopped with one line
once it passes a limit on size (``TRACEFORGE_GUNZIP_MAX_BYTES``, default 32 GiB) or, past
256 MiB, on ratio to the file's own size (``TRACEFORGE_GUNZIP_MAX_RATIO``, default 200;
traces compress 5-30x). Decompressed content goes to a private temporary directory (mode
0700), never beside the input: :func:`to_map` unlinks its file as soon as it is mapped, so
nothing is left whatever ends the process; :func:`to_scratch` (SQLite needs a path) keeps
its file until exit, removed by an ``atexit`` hook, which the CLI also runs on SIGTERM.
"""

from __future__ import annotations

import atexit
import gzip
import mmap
import os
import shutil
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import cast

from traceforge.errors import TraceFormatError

#: Defaults of the two limits (see the module docstring).
MAX_BYTES = 32 * 2**30
MAX_RATIO = 200.0
#: Output below this size is never refused for its ratio (small files compress well).
RATIO_FLOOR = 256 * 2**20
CHUNK = 1 << 20

_scratch: Path | None = None


def scratch() -> Path:
    """This process's private temporary directory, removed at exit."""
    global _scratch
    if _scratch is None or not _scratch.is_dir():
        _scratch = Path(tempfile.mkdtemp(prefix="traceforge-"))
        atexit.register(_remove, _scratch, os.getpid())
    return _scratch


def cleanup() -> None:
    """Remove the private temporary directory now (a process about to ``os._exit``)."""
    if _scratch is not None:
        shutil.rmtree(_scratch, True)


def _remove(d: Path, owner: int) -> None:
    """Remove ``d`` at exit of the process that made it (a forked worker leaves it)."""
    if os.getpid() == owner:
        shutil.rmtree(d, True)


def _limit(name: str, default: float) -> float:
    text = os.environ.get(name, "").strip()
    try:
        return float(text) if text else default
    except ValueError:
        return default


def chunks(path: Path) -> Iterator[bytes]:
    """The decompressed content of ``path`` in pieces of at most 1 MiB, within the limits."""
    max_bytes = _limit("TRACEFORGE_GUNZIP_MAX_BYTES", MAX_BYTES)
    max_ratio = _limit("TRACEFORGE_GUNZIP_MAX_RATIO", MAX_RATIO)
    size = max(path.stat().st_size, 1)
    out = 0
    damaged: tuple[type[Exception], ...] = (OSError, EOFError, zlib.error, *_inflate_errors())
    try:
        with _open(path) as g:
            while chunk := g.read(CHUNK):
                out += len(chunk)
                if out > max_bytes:
                    raise TraceFormatError(
                        path, f"gzip content is larger than {max_bytes / 2**30:g} GiB; "
                        "TRACEFORGE_GUNZIP_MAX_BYTES raises the limit")
                if out > RATIO_FLOOR and out > max_ratio * size:
                    raise TraceFormatError(
                        path, f"gzip content expands more than {max_ratio:g}x (a gzip bomb?); "
                        "TRACEFORGE_GUNZIP_MAX_RATIO raises the limit")
                yield chunk
    except damaged as e:
        raise TraceFormatError(path, f"truncated or corrupt gzip ({e})") from None


def _open(path: Path) -> gzip.GzipFile:
    """``gzip.open(path, "rb")``, inflated by ISA-L (python-isal's ``igzip``, the same
    API) where it is installed: 3-6x faster than zlib (a 20 MB gzip of a 288 MB trace:
    0.33 -> 0.09 s)."""
    try:
        from isal import igzip
    except ImportError:
        return gzip.open(path, "rb")
    return cast(gzip.GzipFile, igzip.open(path, "rb"))  # type: ignore[no-untyped-call]


def _inflate_errors() -> tuple[type[Exception], ...]:
    """ISA-L's own error for damaged deflate data (zlib's is ``zlib.error``)."""
    try:
        from isal import isal_zlib
    except ImportError:
        return ()
    return (cast(type[Exception], isal_zlib.error),)


def to_bytes(path: Path) -> bytes:
    """The decompressed content of ``path`` as bytes (for formats read whole)."""
    return b"".join(chunks(path))


def to_scratch(path: Path, name: str) -> Path:
    """The decompressed content of ``path`` as a file named ``name`` in :func:`scratch`
    (removed at exit; removed at once if decompression fails)."""
    d = scratch()
    out = d / f"{len(list(d.iterdir()))}-{name}"
    try:
        with out.open("wb") as dst:
            for chunk in chunks(path):
                dst.write(chunk)
    except BaseException:
        out.unlink(missing_ok=True)
        raise
    return out


def to_map(path: Path, private: bool = False) -> mmap.mmap | bytes:
    """The decompressed content of ``path`` as a read-only map (``private``: copy-on-write)
    of an already unlinked file in :func:`scratch`: the pages live on disk, not in this
    process's memory, and the file is gone whatever ends the process."""
    fd, name = tempfile.mkstemp(dir=scratch(), prefix="gunzip-")
    os.unlink(name)
    with os.fdopen(fd, "wb") as f:
        for chunk in chunks(path):
            f.write(chunk)
        f.flush()
        if f.tell() == 0:
            return b""
        return mmap.mmap(f.fileno(), 0,
                         access=mmap.ACCESS_COPY if private else mmap.ACCESS_READ)
