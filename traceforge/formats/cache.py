"""A columnar cache of normalized traces: parse a file once, memory-map it afterwards.

The first :func:`traceforge.load` of a trace writes its normalized event table (every
column of ``EVENT_COLUMNS``, categoricals as Arrow dictionaries), its flows and its meta as
one Arrow IPC file under :func:`cache_dir`. Later loads, by any verb or process, map that
file and build only the rows and columns they need, instead of parsing the source again.

Why Arrow IPC and not Parquet: an uncompressed IPC file is memory-mapped and its int64
columns are used in place (no decode step), so a warm load costs about the copy of the rows
a verb keeps; Parquet needs a decode pass over every column read and measured slower
(``benchmarks/bench_cache.py`` prints both).

One entry per source file, named by a hash of its real path; the entry records the key it
was built for (size, mtime_ns, cache format version and a fingerprint of the trace model
and the reader code), and an entry whose key differs is stale: it is rebuilt in place.
Writes go to a temporary file in the same directory and are published with ``os.replace``,
so concurrent runs never see a partial entry; a damaged entry (truncated, not Arrow,
unexpected columns) reads as a miss and is rebuilt. Nothing here raises for cache trouble:
an unwritable directory means no cache, noted once on the ``traceforge`` logger.

Lazy ``args`` keep working: :mod:`traceforge.formats.cache_args` stores what rebuilds a
trace's args provider, in columns that are only read when args are asked for. Columns go
to and from Arrow through :mod:`traceforge.formats.arrow_frames`, the meta through
:mod:`traceforge.formats.cache_meta`.

A trace read from (or just written to) the cache carries a
:class:`~traceforge.formats.derived.DiskStore`: analyses keep their derived tables (the
timeline, the critical-path graph) beside the entry, and housekeeping here treats those
files as part of it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np
import pandas as pd

from traceforge import background, model
from traceforge.args_provider import no_args
from traceforge.formats import arrow_frames, cache_meta
from traceforge.formats.cache_args import (
    ARGS_PREFIX,
    CachedArgs,
    Provider,
    Rebuild,
    args_columns,
)
from traceforge.formats.derived import SUFFIX as DERIVED_SUFFIX
from traceforge.formats.derived import DiskStore
from traceforge.formats.memory import SUFFIX as MEMORY_SUFFIX
from traceforge.model import (
    EVENT_COLUMNS,
    FLOW_COLUMNS,
    KINDS,
    Trace,
    TraceMeta,
    empty_frame,
)

if TYPE_CHECKING:
    import pyarrow as pa

#: Bump when the layout of an entry changes (also when readers start producing different
#: tables from the same file and the code fingerprint below would not notice).
CACHE_FORMAT = 1
#: Default cap on the cache directory; least recently used entries go first.
DEFAULT_MAX_BYTES = 5 * 10**9
SUFFIX = ".arrow"

_META_KEY = b"traceforge.meta"
_FLOWS_KEY = b"traceforge.flows"

log = logging.getLogger("traceforge")
_noted: set[str] = set()


def _note_once(what: str, msg: str) -> None:
    if what not in _noted:
        _noted.add(what)
        log.warning("traceforge: note: %s", msg)


# -- settings ------------------------------------------------------------------------------
def cache_dir() -> Path:
    """``$TRACEFORGE_CACHE``, else the platform's user cache directory + ``traceforge``.

    Written out here rather than adding platformdirs for three lines: XDG on Linux and
    other Unixes, ``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows.
    """
    env = os.environ.get("TRACEFORGE_CACHE")
    if env:
        return Path(env).expanduser()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "traceforge"


def enabled(cache: bool | None = None) -> bool:
    """Whether loads use the cache: ``cache`` when given, else not ``TRACEFORGE_NO_CACHE``."""
    if cache is not None:
        return cache
    return os.environ.get("TRACEFORGE_NO_CACHE", "").strip().lower() in ("", "0", "false", "no")


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
          "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}


def parse_size(text: str) -> int:
    """``"5GB"``, ``"500MiB"``, ``"0"`` or plain bytes -> bytes; ValueError otherwise."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"not a size: {text!r} (examples: 5GB, 500MB, 0)")
    unit = (m.group(2) or "").lower().removesuffix("b")
    return int(float(m.group(1)) * _UNITS[unit])


def max_bytes() -> int:
    """The size cap: ``$TRACEFORGE_CACHE_SIZE`` (a size such as ``5GB``), default 5 GB."""
    env = os.environ.get("TRACEFORGE_CACHE_SIZE")
    if env:
        try:
            return parse_size(env)
        except ValueError:
            _note_once("size", f"ignoring TRACEFORGE_CACHE_SIZE={env!r} (examples: 5GB, 500MB)")
    return DEFAULT_MAX_BYTES


# -- keys ----------------------------------------------------------------------------------
def _code_fingerprint() -> str:
    """The trace model's shape plus the size and mtime of the modules that build tables.

    A new TraceMeta field, a new kind or an edited reader then invalidates old entries by
    itself; released versions change only with the package.
    """
    from traceforge.version import __version__

    parts: list[object] = [
        CACHE_FORMAT, __version__, list(EVENT_COLUMNS.items()), list(KINDS),
        list(FLOW_COLUMNS.items()),
        [f.name for f in dataclasses.fields(TraceMeta)],
        [f.name for f in dataclasses.fields(model.Device)],
    ]
    here = Path(__file__).resolve().parent
    for f in sorted(here.glob("*.py")) + [Path(model.__file__)]:
        with contextlib.suppress(OSError):
            st = f.stat()
            parts.append((f.name, st.st_size, st.st_mtime_ns))
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:16]


_fingerprint: str | None = None


def _key(path: Path) -> tuple[Path, str] | None:
    """(entry file, key) for a source file, or None when it cannot be stat'ed."""
    try:
        real = path.resolve(strict=True)
        st = real.stat()
    except (OSError, RuntimeError):
        return None
    return key_of(real, st)


def key_of(real: Path, st: os.stat_result) -> tuple[Path, str]:
    """(entry file, key) for a source file at its real path ``real`` with stat ``st``
    (taken once, when the file was found: :func:`traceforge.formats.identify`)."""
    global _fingerprint
    if _fingerprint is None:
        _fingerprint = _code_fingerprint()
    name = hashlib.sha1(str(real).encode()).hexdigest()[:24] + SUFFIX
    # The inode too: a file replaced by rename within one tick of the coarse file clock
    # can keep size and mtime; contents are never hashed (that would cost a full read).
    key = f"{real}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}|{_fingerprint}"
    return cache_dir() / name, key


# -- read ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """One cache file and what it says about itself (for ``traceforge cache info``)."""

    path: Path
    size: int
    used_ns: int
    source: str
    rows: int
    valid: bool


def _open(entry: Path) -> tuple[pa.Table, dict[str, Any]] | None:
    """The table and header of an entry, or None when it is missing or damaged."""
    import pyarrow as pa

    try:
        mm = pa.memory_map(str(entry), "r")
        t = pa.ipc.open_file(mm).read_all()
        t.validate()  # buffer sizes against lengths (cheap; not a scan of the values)
        head = msgspec.json.decode((t.schema.metadata or {})[_META_KEY])
    except (OSError, KeyError, ValueError, TypeError, msgspec.DecodeError, pa.ArrowException):
        return None
    if not isinstance(head, dict) or t.num_rows != head.get("rows"):
        return None
    return t, head


def read(path: Path, kinds: Collection[str] | None, accepts_kinds: Callable[[str], bool],
         k: tuple[Path, str] | None = None) -> Trace | None:
    """The cached trace of ``path`` (only rows of ``kinds``), or None on a miss. ``k``: its
    entry and key when the caller has them (:func:`key_of`), else taken here."""
    k = k or _key(path)
    opened = _current(k)
    if k is None or opened is None:
        return None
    entry, key = k
    t, head = opened
    try:
        trace = _trace(t, head, path, kinds, accepts_kinds(head.get("reader", "")))
    except (KeyError, ValueError, TypeError, IndexError, AttributeError, ImportError,
            msgspec.DecodeError) as e:
        _note_once(f"bad:{entry}", f"ignoring damaged cache entry {entry} ({e})")
        return None
    with contextlib.suppress(OSError):
        os.utime(entry)  # the entry's mtime is its last use, for LRU eviction
    return trace.with_store(DiskStore(entry, key, kinds))


def kind_names(path: Path, kinds: Collection[str]) -> list[str] | None:
    """The distinct names of the rows of ``kinds`` in the current cache entry of ``path``,
    read from its columns (no table of those rows is built); None where there is no such
    entry (or the cache is off): the caller then reads the rows to know."""
    import pyarrow as pa
    import pyarrow.compute as pc

    opened = _current(_key(path)) if enabled() else None
    if opened is None:
        return None
    t = opened[0]
    try:
        rows = pa.array(_kind_rows(t, kinds))
        names = pc.unique(t.column("name").combine_chunks().take(rows))
        return [str(x) for x in names.to_pylist() if x is not None]
    except (KeyError, ValueError, TypeError, AttributeError, pa.ArrowException):
        return None


def _current(k: tuple[Path, str] | None) -> tuple[pa.Table, dict[str, Any]] | None:
    """The table and header of the entry ``k`` names (:func:`key_of`) when it is there,
    whole and of that key; None otherwise."""
    _settle()
    if k is None or not k[0].exists():
        return None
    opened = _open(k[0])
    if opened is None or opened[1].get("key") != k[1]:
        return None
    return opened


def _kind_rows(t: pa.Table, kinds: Collection[str]) -> np.ndarray:
    """The rows of an entry's table whose kind is one of ``kinds``; ValueError where its
    kinds are not the model's."""
    kcol = t.column("kind").combine_chunks()
    if list(kcol.dictionary.to_pylist()) != list(KINDS):
        raise ValueError("kind categories differ from the model")
    codes = kcol.indices.to_numpy(zero_copy_only=False)
    return np.flatnonzero(np.isin(codes, [KINDS.index(x) for x in kinds if x in KINDS]))


def _trace(t: pa.Table, head: dict[str, Any], path: Path, kinds: Collection[str] | None,
           reindex: bool) -> Trace:
    cols = list(head["columns"])
    if t.column_names[:len(cols)] != cols or not set(EVENT_COLUMNS) <= set(cols):
        raise ValueError("unexpected columns")
    rows: np.ndarray | None = None
    index: pd.Index | None = None
    if kinds is not None:
        rows = _kind_rows(t, kinds)
        if not reindex:
            index = pd.Index(rows)
    data: dict[str, Any] = {}
    for c in cols:
        arr = t.column(c)
        if c == "name" and reindex and rows is not None:
            data[c] = arrow_frames.categorical(arr, rows, first_seen=True)
        else:
            data[c] = arrow_frames.column(arr, rows)
    ev = pd.DataFrame(data, index=index)
    if ev.index.dtype != np.int64 and index is not None:
        ev.index = ev.index.astype(np.int64)
    meta = cache_meta.decode(head["meta"])
    if not isinstance(meta, TraceMeta):
        raise TypeError("meta is not a TraceMeta")
    meta = replace(meta, path=head.get("meta_path", meta.path))
    flows_b = (t.schema.metadata or {}).get(_FLOWS_KEY)
    flows = (arrow_frames.table_frame(arrow_frames.read_ipc(flows_b)) if flows_b
             else empty_frame(model.FLOW_COLUMNS))
    for c, dt in FLOW_COLUMNS.items():
        if c in flows and dt == "category" and not isinstance(flows[c].dtype, pd.CategoricalDtype):
            flows[c] = flows[c].astype("category")
    arg_cols = {c: t.column(c) for c in t.column_names if c.startswith(ARGS_PREFIX)}
    provider: Callable[[np.ndarray], list[dict[str, Any]]] = no_args
    if arg_cols:
        source = Path(str(head.get("source", path)))
        rebuild = Rebuild(head.get("args"), source, arg_cols)
        provider = CachedArgs(rebuild, rows if reindex else None)
    return Trace(ev, meta, flows, provider)


# -- write ---------------------------------------------------------------------------------
def key(path: Path) -> tuple[Path, str] | None:
    """The entry file and key of ``path`` now: take it *before* parsing and pass it to
    :func:`write`, so that a file changed during the parse is never stored as current."""
    return _key(path)


def store_for(k: tuple[Path, str], kinds: Collection[str] | None = None) -> DiskStore:
    """The derived-table store of the table stored under ``k`` (:func:`key`), or of its
    rows of ``kinds``."""
    return DiskStore(k[0], k[1], kinds)


def write(path: Path, trace: Trace, reader: str, k: tuple[Path, str] | None = None) -> bool:
    """Store ``trace`` (the full table a reader produced for ``path``); never raises.

    Returns whether the entry is now in place.
    """
    k = k or _key(path)
    if k is None:
        return False
    entry, key = k
    ev = trace.events
    if not isinstance(ev.index, pd.RangeIndex) or ev.index.start != 0 or ev.index.step != 1:
        return False  # only whole tables as a reader made them
    try:
        table, header = _entry_table(trace, key, reader, path)
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError) as e:
        log.debug("not caching %s: %s", path, e)
        return False
    d = entry.parent
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        _unwritable(d, e)
        return False
    _settle()  # an earlier entry of this command being written: one writer at a time
    if background.later(partial(_store, d, entry, table, header)):
        _writing.add(entry)
        return True
    return _store(d, entry, table, header)


#: Entries being written on a thread beside the command (:func:`traceforge.background.later`)
#: since this process last waited for them.
_writing: set[Path] = set()


def writing(entry: Path) -> bool:
    """Whether ``entry`` is being written beside the command that stored it: the caller
    then selects rows from the table it holds, as a cache hit on the entry would."""
    return entry in _writing


def _settle() -> None:
    """Wait for the entries being written beside the command (before the cache is read,
    listed or cleared, and before another entry is written)."""
    if _writing:
        background.settle()
        _writing.clear()


def _store(d: Path, entry: Path, table: pa.Table, header: dict[bytes, bytes]) -> bool:
    """Write the entry, then keep the cache within its size; never raises (it may run on
    a thread of its own, where an error would end in a traceback): an unwritable
    directory is noted once, anything else leaves the entry unwritten."""
    try:
        _publish(d, entry, table, header)
    except OSError as e:
        _unwritable(d, e)
        return False
    except Exception as e:  # noqa: BLE001 - Arrow's own errors, memory: no entry, no cache
        log.debug("not caching %s: %s", entry, e)
        return False
    with contextlib.suppress(OSError):
        evict(max_bytes(), keep=entry)
    return entry.exists()


def _unwritable(d: Path, e: OSError) -> None:
    _note_once("dir", f"cache directory {d} is not writable ({e.strerror or e}); "
               "running without a cache")


def select(trace: Trace, kinds: Collection[str]) -> Trace:
    """Rows of ``kinds`` renumbered from 0, as a reader that accepts ``kinds`` builds them.

    Used when a full table is in memory but could not be cached; a cache hit selects the
    same way from the mapped file.
    """
    ev = trace.events
    rows = np.flatnonzero(ev["kind"].isin(list(kinds)).to_numpy())
    sel = ev.iloc[rows].reset_index(drop=True)
    sel["name"] = arrow_frames.first_seen_categorical(np.asarray(sel["name"].cat.codes),
                                         sel["name"].cat.categories)
    return Trace(sel, trace.meta, trace.flows, CachedArgs(Provider(trace.args_provider), rows))


def _entry_table(trace: Trace, key: str, reader: str, path: Path
                 ) -> tuple[pa.Table, dict[bytes, bytes]]:
    import pyarrow as pa

    ev = trace.events
    meta_enc = cache_meta.encode(trace.meta)
    if not cache_meta.same(cache_meta.decode(meta_enc), trace.meta):
        raise TypeError("meta does not round-trip")
    arrays = {str(c): arrow_frames.column_array(ev[c]) for c in ev.columns}
    args_mod, arg_arrays = args_columns(trace)
    arrays.update(arg_arrays)
    head = {
        "key": key, "rows": len(ev), "columns": [str(c) for c in ev.columns],
        "reader": reader, "args": args_mod, "source": str(path.resolve()),
        "meta_path": trace.meta.path, "meta": meta_enc,
    }
    md = {_META_KEY: msgspec.json.encode(head)}
    if not trace.flows.empty:
        md[_FLOWS_KEY] = arrow_frames.ipc_bytes(arrow_frames.frame_table(trace.flows))
    table = pa.table(arrays)
    return table.replace_schema_metadata(md), md


def _publish(d: Path, entry: Path, table: pa.Table, md: dict[bytes, bytes]) -> None:
    import pyarrow as pa

    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=SUFFIX, dir=d)
    try:
        os.close(fd)
        # Arrow's own file, not a Python one: written beside the command (background.later),
        # the write then never waits for the GIL.
        with pa.OSFile(tmp, "wb") as f, pa.ipc.new_file(f, table.schema) as w:
            # One record batch: every column is then one contiguous buffer to map.
            w.write_table(table.combine_chunks(), max_chunksize=max(1, table.num_rows))
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)  # a directory where the entry belongs: heal, not "unwritable"
        os.replace(tmp, entry)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# -- housekeeping --------------------------------------------------------------------------
def _files(d: Path) -> Iterator[Path]:
    """Entries, their derived and memory tables and stray temporary files of them."""
    try:
        yield from (p for p in d.iterdir() if p.name.endswith((SUFFIX, DERIVED_SUFFIX)))
    except OSError:
        return


def evict(limit: int, keep: Path | None = None) -> list[Path]:
    """Remove least recently used entries until the directory holds at most ``limit`` bytes.

    Stray temporary files older than an hour (a run killed mid-write) go too.
    """
    import time

    d = cache_dir()
    stats = []
    for p in _files(d):
        with contextlib.suppress(OSError):
            st = p.stat()
            if p.name.startswith(".tmp-"):
                if st.st_mtime < time.time() - 3600:
                    p.unlink()
                continue
            stats.append((st.st_mtime_ns, st.st_size, p))
    total = sum(s for _, s, _ in stats)
    removed: list[Path] = []
    for _, size, p in sorted(stats, key=lambda x: x[0]):
        if total <= limit:
            break
        if keep is not None and p == keep and total - size <= limit:
            continue
        with contextlib.suppress(OSError):
            p.unlink()
            total -= size
            removed.append(p)
    return removed


def entries() -> list[Entry]:
    """Every entry in the cache directory, most recently used first."""
    _settle()
    out: list[Entry] = []
    files = [p for p in _files(cache_dir()) if not p.name.startswith(".tmp-")]
    # An entry's size includes its derived tables (named after it).
    extra: dict[str, int] = {}
    for p in files:
        if p.name.endswith((DERIVED_SUFFIX, MEMORY_SUFFIX)):
            with contextlib.suppress(OSError):
                stem = p.name.split(".", 1)[0]
                extra[stem] = extra.get(stem, 0) + p.stat().st_size
    for p in files:
        if not p.name.endswith(SUFFIX) or p.name.endswith(MEMORY_SUFFIX):
            continue
        try:
            st = p.stat()
        except OSError:
            continue
        opened = _open(p)
        head = opened[1] if opened else {}
        out.append(Entry(p, st.st_size + extra.get(p.stem, 0), st.st_mtime_ns,
                         str(head.get("source", "")), int(head.get("rows", 0)),
                         opened is not None))
    return sorted(out, key=lambda e: -e.used_ns)


def clear() -> tuple[int, int]:
    """Remove every entry, its derived tables and stray temporary files; returns (entries,
    bytes) removed."""
    _settle()
    n = b = 0
    for p in _files(cache_dir()):
        with contextlib.suppress(OSError):
            size = p.stat().st_size
            p.unlink()
            n += (p.name.endswith(SUFFIX) and not p.name.startswith(".tmp-")
                  and not p.name.endswith(MEMORY_SUFFIX))
            b += size
    return n, b
