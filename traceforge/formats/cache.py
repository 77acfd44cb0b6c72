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

This module is the cache's one surface (reading, writing, and the names below). Behind
it: :mod:`~traceforge.formats.cache_settings` (directory, on/off, size cap),
:mod:`~traceforge.formats.cache_files` (an entry's key, layout and file),
:mod:`~traceforge.formats.cache_housekeeping` (listing, eviction, clearing).

A trace read from (or just written to) the cache carries a
:class:`~traceforge.formats.derived.DiskStore`: analyses keep their derived tables (the
timeline, the critical-path graph) beside the entry, and housekeeping here treats those
files as part of it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np
import pandas as pd

from traceforge import background, model
from traceforge.args_provider import no_args
from traceforge.formats import arrow_frames, cache_meta
from traceforge.formats.cache_args import ARGS_PREFIX, CachedArgs, Provider, Rebuild
from traceforge.formats.cache_files import (
    CACHE_FORMAT,
    FLOWS_KEY,
    SUFFIX,
    entry_table,
    key,
    key_of,
    open_entry,
    publish,
)
from traceforge.formats.cache_housekeeping import Entry, clear, entries, evict
from traceforge.formats.cache_settings import (
    DEFAULT_MAX_BYTES,
    cache_dir,
    enabled,
    log,
    max_bytes,
    note_once,
    parse_size,
)
from traceforge.formats.derived import DiskStore
from traceforge.model import EVENT_COLUMNS, FLOW_COLUMNS, KINDS, Trace, TraceMeta, empty_frame

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "CACHE_FORMAT", "DEFAULT_MAX_BYTES", "SUFFIX", "Entry", "cache_dir", "clear", "enabled",
    "entries", "evict", "key", "key_of", "kind_names", "max_bytes", "parse_size", "read",
    "select", "store_for", "write", "writing",
]


# -- read ----------------------------------------------------------------------------------
def read(path: Path, kinds: Collection[str] | None, accepts_kinds: Callable[[str], bool],
         k: tuple[Path, str] | None = None) -> Trace | None:
    """The cached trace of ``path`` (only rows of ``kinds``), or None on a miss. ``k``: its
    entry and key when the caller has them (:func:`key_of`), else taken here."""
    k = k or key(path)
    opened = _current(k)
    if k is None or opened is None:
        return None
    entry, entry_key = k
    t, head = opened
    try:
        trace = _trace(t, head, path, kinds, accepts_kinds(head.get("reader", "")))
    except (KeyError, ValueError, TypeError, IndexError, AttributeError, ImportError,
            msgspec.DecodeError) as e:
        note_once(f"bad:{entry}", f"ignoring damaged cache entry {entry} ({e})")
        return None
    with contextlib.suppress(OSError):
        os.utime(entry)  # the entry's mtime is its last use, for LRU eviction
    return trace.with_store(DiskStore(entry, entry_key, kinds))


def kind_names(path: Path, kinds: Collection[str]) -> list[str] | None:
    """The distinct names of the rows of ``kinds`` in the current cache entry of ``path``,
    read from its columns (no table of those rows is built); None where there is no such
    entry (or the cache is off): the caller then reads the rows to know."""
    import pyarrow as pa
    import pyarrow.compute as pc

    opened = _current(key(path)) if enabled() else None
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
    background.settle()  # an entry this process is writing beside its command
    if k is None or not k[0].exists():
        return None
    opened = open_entry(k[0])
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
    flows_b = (t.schema.metadata or {}).get(FLOWS_KEY)
    flows = (arrow_frames.table_frame(arrow_frames.read_ipc(flows_b)) if flows_b
             else empty_frame(model.FLOW_COLUMNS))
    for c, dt in FLOW_COLUMNS.items():
        if c in flows and dt == "category" and not isinstance(flows[c].dtype, pd.CategoricalDtype):
            flows[c] = flows[c].astype("category")
    arg_cols = {c: t.column(c) for c in t.column_names if c.startswith(ARGS_PREFIX)}
    provider: Callable[[np.ndarray], list[dict[str, Any]]] = no_args
    if arg_cols:
        source = Path(str(head.get("source", path)))
        header = head.get("args_header")
        rebuild = Rebuild(head.get("args"), source, arg_cols,
                          header if isinstance(header, dict) else None)
        provider = CachedArgs(rebuild, rows if reindex else None)
    return Trace(ev, meta, flows, provider)


# -- write ---------------------------------------------------------------------------------
def store_for(k: tuple[Path, str], kinds: Collection[str] | None = None) -> DiskStore:
    """The derived-table store of the table stored under ``k`` (:func:`key`), or of its
    rows of ``kinds``."""
    return DiskStore(k[0], k[1], kinds)


def write(path: Path, trace: Trace, reader: str, k: tuple[Path, str] | None = None) -> bool:
    """Store ``trace`` (the full table a reader produced for ``path``); never raises.

    Inside a CLI command (:func:`traceforge.background.settling`) the file is written on a
    thread beside it (:func:`writing` says so); elsewhere before this returns. Returns
    whether the entry is now in place (or being written).
    """
    k = k or key(path)
    if k is None:
        return False
    entry, entry_key = k
    ev = trace.events
    if not isinstance(ev.index, pd.RangeIndex) or ev.index.start != 0 or ev.index.step != 1:
        return False  # only whole tables as a reader made them
    try:
        table = entry_table(trace, entry_key, reader, path)
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError) as e:
        log.debug("not caching %s: %s", path, e)
        return False
    d = entry.parent
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        _unwritable(d, e)
        return False
    background.settle()  # an earlier entry of this command being written: one at a time
    work = partial(_store, d, entry, table)
    return True if background.later(work, tag=entry) else work()


def writing(entry: Path) -> bool:
    """Whether ``entry`` is being written beside the command that stored it: the caller
    then selects rows from the table it holds, as a cache hit on the entry would."""
    return background.pending(entry)


def _store(d: Path, entry: Path, table: pa.Table) -> bool:
    """Write the entry, then keep the cache within its size; never raises (it may run on
    a thread of its own, where an error would end in a traceback): an unwritable
    directory is noted once, anything else leaves the entry unwritten."""
    try:
        publish(d, entry, table)
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
    note_once("dir", f"cache directory {d} is not writable ({e.strerror or e}); "
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
