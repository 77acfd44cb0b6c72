"""Readers: one module per format, each ``path -> Trace``.

A reader module has ``NAME`` (str), ``sniff(path, head: bytes) -> bool`` (decides from the
content, the name only as a hint) and ``read(path) -> Trace``. :func:`load` tries them in
the order of :data:`READERS` and raises one ``TraceFormatError`` line when none fits.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path
from types import ModuleType

from traceforge import samples
from traceforge.errors import TraceFormatError
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


def _accepts_kinds(name: str) -> bool:
    return name in READERS and bool(getattr(_reader(name), "ACCEPTS_KINDS", False))


def _read_with(mod: ModuleType, p: Path, kinds: Collection[str] | None,
               use_cache: bool = False) -> Trace:
    if use_cache:
        from traceforge.formats import cache

        # The cache holds the whole table, whatever this verb needs; kinds are then
        # selected exactly as a cache hit selects them.
        k = cache.key(p)
        full: Trace = mod.read(p)
        name = mod.__name__.rsplit(".", 1)[-1]
        if cache.write(p, full, name, k) and kinds is not None:
            hit = cache.read(p, kinds, _accepts_kinds)
            if hit is not None:
                return hit
        if kinds is None:
            return full
        if getattr(mod, "ACCEPTS_KINDS", False):
            return cache.select(full, kinds)
        return replace(full, events=full.events[full.events["kind"].isin(list(kinds))])
    if kinds is not None and getattr(mod, "ACCEPTS_KINDS", False):
        trace: Trace = mod.read(p, kinds=kinds)
        return trace
    trace = mod.read(p)
    if kinds is None:
        return trace
    ev = trace.events
    return replace(trace, events=ev[ev["kind"].isin(list(kinds))])


def load(path: str | Path, *, kinds: Collection[str] | None = None,
         cache: bool | None = None) -> Trace:
    """Read any supported trace file (format sniffed from its content) into a Trace.

    ``kinds`` (values of ``traceforge.model.KINDS``) keeps only those events; readers that
    can use it build columns for those rows only, which makes a kernel table of a large
    trace faster. Times stay relative to the first event of any kind.

    ``cache`` (default: on unless ``TRACEFORGE_NO_CACHE=1``) reads and writes the columnar
    cache of :mod:`traceforge.formats.cache`: the first load of a file stores its table,
    later loads map it instead of parsing. Directories are never cached.
    """
    if isinstance(path, str) and path.startswith(samples.PREFIX):
        if path.removeprefix(samples.PREFIX) not in samples.names():
            raise TraceFormatError(path, f"no such sample (have: {', '.join(samples.names())})")
        path = samples.path(path)
    p = Path(path)
    if not p.exists():
        raise TraceFormatError(p, "no such file")
    if p.is_dir():
        for name in READERS:
            mod = _reader(name)
            if getattr(mod, "READS_DIRECTORIES", False) and mod.sniff(p, b""):
                return _read_with(mod, p, kinds)
        raise TraceFormatError(p, "is a directory, not a trace file")
    try:
        size = p.stat().st_size
    except OSError as e:
        raise TraceFormatError(p, f"cannot read ({e.strerror})") from None
    if size == 0:
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
    for name in READERS:
        mod = _reader(name)
        if mod.sniff(p, head):
            return _read_with(mod, p, kinds, use_cache)
    raise TraceFormatError(p, f"not a supported trace (supported: {SUPPORTED})")
