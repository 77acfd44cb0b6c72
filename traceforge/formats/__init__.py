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
from dataclasses import replace
from functools import partial
from pathlib import Path
from types import ModuleType

from traceforge import samples
from traceforge.errors import TraceFormatError
from traceforge.formats import timestamps
from traceforge.formats.source import read_head
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
               use_cache: bool = False) -> Trace:
    with _guard(mod, p):
        if use_cache:
            return _read_and_cache(mod, p, kinds)
        return _read_kinds(mod, p, kinds)
    raise AssertionError("unreachable")


def _accepts_kinds(name: str) -> bool:
    return name in READERS and bool(getattr(_reader(name), "ACCEPTS_KINDS", False))


def _read_and_cache(mod: ModuleType, p: Path, kinds: Collection[str] | None) -> Trace:
    """Read the whole table, store it in the cache, and select ``kinds`` from it exactly
    as a later cache hit will."""
    from traceforge.formats import cache

    k = cache.key(p)  # taken before parsing: a file changed meanwhile is never stored as current
    full: Trace = timestamps.noted(mod.read(p))
    name = mod.__name__.rsplit(".", 1)[-1]
    stored = cache.write(p, full, name, k)
    if stored and kinds is not None:
        hit = cache.read(p, kinds, _accepts_kinds)
        if hit is not None:
            return hit
    if kinds is None:
        # The rows a cache hit gives, so derived tables are shared with later runs.
        return full.with_store(cache.store_for(k)) if stored and k is not None else full
    if getattr(mod, "ACCEPTS_KINDS", False):
        return cache.select(full, kinds)
    return replace(full, events=full.events[full.events["kind"].isin(list(kinds))])


def _read_kinds(mod: ModuleType, p: Path, kinds: Collection[str] | None) -> Trace:
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


def load(path: str | Path, *, kinds: Collection[str] | None = None,
         cache: bool | None = None) -> Trace:
    """Read any supported trace file (format sniffed from its content) into a Trace.

    See :func:`_load`; the trace gets a memory provider (:mod:`traceforge.formats.memory`)
    that reads its allocator events only when ``Trace.memory()`` is called.
    """
    from traceforge.formats import cache as cache_mod
    from traceforge.formats import memory

    trace = _load(path, kinds=kinds, cache=cache)
    p = resolve(path)
    k = cache_mod.key(p) if cache_mod.enabled(cache) and not p.is_dir() else None
    entry, key = k if k is not None else (None, None)
    return memory.attach(trace, p, kinds is None, partial(load, p, cache=cache), entry, key)


def _load(path: str | Path, *, kinds: Collection[str] | None = None,
          cache: bool | None = None) -> Trace:
    """Read any supported trace file (format sniffed from its content) into a Trace.

    ``path`` may be ``sample:NAME`` (a bundled sample). A folder is read only when it is a
    profiler's own output folder (rocprofv3); any other folder is an error that says how
    many traces it holds, since merging them would mix unrelated runs (``load_run`` reads
    a folder of one run's ranks). ``kinds`` (values of ``traceforge.model.KINDS``) keeps
    only those events; readers that can use it build columns for those rows only, which
    makes a kernel table of a large trace faster. Times stay relative to the first event
    of any kind.

    ``cache`` (default: on unless ``TRACEFORGE_NO_CACHE=1``) reads and writes the columnar
    cache of :mod:`traceforge.formats.cache`: the first load of a file stores its table,
    later loads map it instead of parsing. Directories are never cached.
    """
    p = resolve(path)
    st = input_stat(p)
    if stat.S_ISDIR(st.st_mode):
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
    from traceforge.formats import cache as cache_mod

    use_cache = cache_mod.enabled(cache)
    if use_cache:
        hit = cache_mod.read(p, kinds, _accepts_kinds)
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
                return _read_with(mod, p, kinds, use_cache)
            except TraceFormatError:
                if what is None or p.suffix.lower() == ".csv":
                    raise  # the rocprof reader already names its own summaries
                # A companion file (run summary, latency table): say what it is.
                raise TraceFormatError(p, f"{what}, not a trace") from None
    if what is not None:
        raise TraceFormatError(p, f"{what}, not a trace")
    raise TraceFormatError(p, f"not a supported trace (supported: {SUPPORTED})")
