"""Readers: one module per format, each ``path -> Trace``.

A reader module has ``NAME`` (str), ``sniff(path, head: bytes) -> bool`` (decides from the
content, the name only as a hint) and ``read(path) -> Trace``. :func:`load` tries them in
the order of :data:`READERS` and raises one ``TraceFormatError`` line when none fits.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
import stat
import zlib
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from traceforge import samples
from traceforge.errors import TraceFormatError
from traceforge.formats.source import read_head

if TYPE_CHECKING:
    from traceforge.model import Trace

#: Reader modules in the order they are tried (module names under traceforge.formats).
READERS: tuple[str, ...] = ("rocprofv3", "rocprof", "rocpd", "nsys", "perfetto", "chrome")

SUPPORTED = (
    "Kineto/Chrome trace JSON (.json, .json.gz), Nsight Systems SQLite export (.sqlite, "
    ".nsys-rep with nsys), rocprofv3 CSV/JSON/directory, legacy rocprof results.csv/.json/.db, "
    "rocpd SQLite (rocprofv3 default), Perfetto protobuf (.pftrace)"
)


def _reader(name: str) -> ModuleType:
    return importlib.import_module(f"traceforge.formats.{name}")


#: What a reader raises on damage it did not foresee. :func:`load` turns these into one
#: line naming the file (exit 2, not an internal error); ``damaged or unexpected`` in that
#: line is what tests/hostile/test_fuzz.py looks for, since each one is a reader bug to fix.
_DAMAGE: tuple[type[BaseException], ...] = (
    ValueError, KeyError, IndexError, TypeError, AttributeError, ArithmeticError,
    UnicodeError, RecursionError, EOFError, zlib.error, sqlite3.Error, OSError,
)


@contextmanager
def _guard(mod: ModuleType, p: Path) -> Iterator[None]:
    """One line naming the file for what a reader's sniff or read did not foresee."""
    try:
        yield
    except TraceFormatError:
        raise
    except _DAMAGE as e:
        if isinstance(e, OSError) and not isinstance(e, sqlite3.Error) and e.strerror:
            raise TraceFormatError(p, f"cannot read ({e.strerror})") from e
        detail = " ".join(str(e).split())[:300]
        raise TraceFormatError(
            p, f"damaged or unexpected {mod.NAME} content: {type(e).__name__} ({detail})"
        ) from e


def _sniff(mod: ModuleType, p: Path, head: bytes) -> bool:
    with _guard(mod, p):
        return bool(mod.sniff(p, head))
    return False  # unreachable: _guard re-raises (mypy cannot see that)


def _read_with(mod: ModuleType, p: Path, kinds: Collection[str] | None,
               k: tuple[Path, str] | None = None) -> Trace:
    with _guard(mod, p):
        if k is not None:
            return _read_and_cache(mod, p, kinds, k)
        return _read_kinds(mod, p, kinds)
    raise AssertionError("unreachable")


def _accepts_kinds(name: str) -> bool:
    return name in READERS and bool(getattr(_reader(name), "ACCEPTS_KINDS", False))


def _read_and_cache(mod: ModuleType, p: Path, kinds: Collection[str] | None,
                    k: tuple[Path, str]) -> Trace:
    """Read the whole table, store it in the cache under ``k``, and select ``kinds`` from
    it exactly as a later cache hit will. ``k`` was taken before parsing (when the file was
    found): a file changed meanwhile is never stored as current."""
    from traceforge.formats import cache, timestamps

    full: Trace = timestamps.noted(mod.read(p))
    name = mod.__name__.rsplit(".", 1)[-1]
    stored = cache.write(p, full, name, k)
    behind = stored and cache.writing(k[0])  # written beside the command: not read back
    if stored and kinds is not None and not behind:
        hit = cache.read(p, kinds, _accepts_kinds, k)
        if hit is not None:
            return hit
    if kinds is None:
        # The rows a cache hit gives, so derived tables are shared with later runs.
        return full.with_store(cache.store_for(k)) if stored else full
    if getattr(mod, "ACCEPTS_KINDS", False):
        sel = cache.select(full, kinds)
    else:
        sel = replace(full, events=full.events[full.events["kind"].isin(list(kinds))])
    return sel.with_store(cache.store_for(k, kinds)) if behind else sel


def _read_kinds(mod: ModuleType, p: Path, kinds: Collection[str] | None) -> Trace:
    from traceforge.formats import timestamps

    if kinds is not None and getattr(mod, "ACCEPTS_KINDS", False):
        trace: Trace = timestamps.noted(mod.read(p, kinds=kinds))
        return trace
    trace = timestamps.noted(mod.read(p))
    if kinds is None:
        return trace
    ev = trace.events
    return replace(trace, events=ev[ev["kind"].isin(list(kinds))])


def resolve(path: str | Path) -> Path:
    """The file a trace argument names: ``sample:NAME`` is a bundled sample, else a path."""
    text = str(path)
    if text.startswith(samples.PREFIX) and not Path(path).exists():
        if text.removeprefix(samples.PREFIX) not in samples.names():
            raise TraceFormatError(text, f"no such sample (have: {', '.join(samples.names())})")
        return samples.path(text)
    return Path(path)


def input_stat(p: Path, missing: str = "no such file") -> os.stat_result:
    """``p.stat()``, or one line naming ``p``: ``missing`` when it does not exist, else why
    it cannot be read (``Path.exists`` raises PermissionError under a directory that
    cannot be entered)."""
    try:
        return p.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise TraceFormatError(p, missing) from None
    except PermissionError:
        raise TraceFormatError(p, "permission denied (on the file or a directory above it)"
                               ) from None
    except OSError as e:
        raise TraceFormatError(p, f"cannot read ({e.strerror or e})") from None


@dataclass(frozen=True)
class SourceFile:
    """A trace input as run discovery found it, handed on to :func:`load` so that nothing
    is worked out twice: ``path`` (``sample:NAME`` resolved, otherwise as given: it is the
    trace's ``meta.path``), its ``st`` (one stat), its ``real`` path (the cache key's
    basis; None when it cannot be resolved) and ``reader``, the format's reader when
    discovery had to sniff it (a profiler's output folder), else None. A path-like: it
    stands for ``path`` wherever a path is taken."""

    path: Path
    st: os.stat_result
    real: Path | None
    reader: str | None = None

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    @property
    def is_dir(self) -> bool:
        """Whether it is a folder (read whole by a reader that reads folders)."""
        return stat.S_ISDIR(self.st.st_mode)

    def cache_key(self) -> tuple[Path, str] | None:
        """The cache entry and key of this file as found (None for a folder)."""
        from traceforge.formats import cache

        return None if self.real is None or self.is_dir else cache.key_of(self.real, self.st)


def identify(path: str | Path | SourceFile, missing: str = "no such file",
             reader: str | None = None) -> SourceFile:
    """A :class:`SourceFile` for a trace argument: resolved and stat'ed once, nothing read
    (one line naming it when it cannot be stat'ed, ``missing`` when it does not exist).
    A SourceFile is returned as is."""
    if isinstance(path, SourceFile):
        return path
    p = resolve(path)
    st = input_stat(p, missing)
    try:
        real: Path | None = p.resolve(strict=True)
    except (OSError, RuntimeError):
        real = None
    return SourceFile(p, st, real, reader)


def load(path: str | Path | SourceFile, *, kinds: Collection[str] | None = None,
         cache: bool | None = None) -> Trace:
    """Read any supported trace file (format sniffed from its content) into a Trace.

    ``path`` may be ``sample:NAME`` (a bundled sample), or a :class:`SourceFile` from run
    discovery (:func:`identify`): what it learned (the resolved path, its stat and cache
    key, the reader of a profiler's folder) is used as is, so a file is resolved, stat'ed
    and sniffed once on its way from the command line to its reader. A folder is read
    only when it is a profiler's own output folder (rocprofv3); any other folder is an
    error that says how many traces it holds, since merging them would mix unrelated runs
    (``load_run`` reads a folder of one run's ranks). ``kinds`` (values of
    ``traceforge.model.KINDS``) keeps only those events; readers that can use it build
    columns for those rows only, which makes a kernel table of a large trace faster.
    Times stay relative to the first event of any kind.

    ``cache`` (default: on unless ``TRACEFORGE_NO_CACHE=1``) reads and writes the columnar
    cache of :mod:`traceforge.formats.cache`: the first load of a file stores its table,
    later loads map it instead of parsing. Directories are never cached. The trace gets a
    memory provider (:mod:`traceforge.formats.memory`) that reads its allocator events
    only when ``Trace.memory()`` is called.
    """
    from traceforge.formats import cache as cache_mod
    from traceforge.formats import memory

    src = identify(path)
    k = src.cache_key() if cache_mod.enabled(cache) else None
    trace = _load(src, k, kinds=kinds)
    entry, key = k if k is not None else (None, None)
    return memory.attach(trace, src.path, kinds is None, partial(load, src.path, cache=cache),
                         entry, key)


def _load(src: SourceFile, k: tuple[Path, str] | None, *,
          kinds: Collection[str] | None = None) -> Trace:
    """:func:`load` without the memory provider; ``k``: the cache entry and key of
    ``src`` (None: the cache is off, or a folder)."""
    p, st = src.path, src.st
    if stat.S_ISDIR(st.st_mode):
        if src.reader is not None:  # discovery sniffed this folder already
            return _read_with(_reader(src.reader), p, kinds)
        for name in READERS:
            mod = _reader(name)
            if getattr(mod, "READS_DIRECTORIES", False) and _sniff(mod, p, b""):
                return _read_with(mod, p, kinds)
        from traceforge.formats.folder import scan

        n = len(scan(p).files)
        raise TraceFormatError(
            p, f"is a directory with {n} trace file{'s' if n != 1 else ''} at its top level, "
            "not one trace: name a file (overlap, breakdown, idle, top-kernels, critical-path "
            "and report read a directory of one run's ranks)" if n
            else "is a directory without trace files at its top level")
    if not stat.S_ISREG(st.st_mode):
        raise TraceFormatError(p, "not a regular file (a FIFO, device or socket): name a "
                               "trace file")
    if st.st_size == 0:
        raise TraceFormatError(p, "empty file")
    if k is not None:
        from traceforge.formats import cache

        hit = cache.read(p, kinds, _accepts_kinds, k)
        if hit is not None:
            return hit
    try:
        head = read_head(p)
    except PermissionError:
        raise TraceFormatError(p, "permission denied") from None
    if not head.strip():
        raise TraceFormatError(p, "empty file")
    from traceforge.formats.folder import non_trace

    what = non_trace(p.name)
    for name in READERS:
        mod = _reader(name)
        if _sniff(mod, p, head):
            try:
                return _read_with(mod, p, kinds, k)
            except TraceFormatError:
                if what is None or p.suffix.lower() == ".csv":
                    raise  # the rocprof reader already names its own summaries
                # A companion file (run summary, latency table): say what it is.
                raise TraceFormatError(p, f"{what}, not a trace") from None
    if what is not None:
        raise TraceFormatError(p, f"{what}, not a trace")
    raise TraceFormatError(p, f"not a supported trace (supported: {SUPPORTED})")
