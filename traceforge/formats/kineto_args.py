"""The ``args`` of a Kineto trace, decoded lazily from the source file.

Args are most of a Kineto file's bytes and analyses read few of them (launch configs, op
shapes), so the reader skips them and keeps each row's source event; this provider
re-reads the unchanged file when asked. The columnar cache stores the same source rows
(``cache_columns``) and where the file was read in chunks, the first event of each chunk
(``cache_header``), and rebuilds the provider with :func:`args_from_cache`.

Where those chunks are known, only the chunks that hold the rows asked for are decoded
(a kernel table's launch configs never decode the chunks of CPU ops; each part of a
``convert`` written on its own core decodes about its own half of the file).
"""

from __future__ import annotations

import mmap
import threading
from collections.abc import Callable, Mapping, Sequence
from itertools import count
from operator import attrgetter
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import numpy as np

from traceforge.args_provider import ArgShapes, factorize_args
from traceforge.errors import TraceFormatError
from traceforge.formats import kineto_chunks as chunks
from traceforge.formats.arg_shapes import Shapes
from traceforge.formats.kineto_schema import ArgsDoc, ArgsOnly
from traceforge.formats.source import NOT_UTF8, first_byte, not_utf8, paused_gc, view

T = TypeVar("T")


def args_from_cache(path: Path, columns: dict[str, np.ndarray],
                    header: Mapping[str, Any] | None = None) -> LazyArgs:
    """The args provider of a cached trace of ``path`` (the columns ``cache_columns`` gave,
    the header ``cache_header`` gave, where it gave one).

    Kineto args stay in the source file: storing them would more than double the cache
    (they are most of a trace's bytes) and slow the first load; they are re-read when
    asked for, exactly as a fresh parse does.
    """
    return LazyArgs(path, np.asarray(columns["src"], dtype=np.int64),
                    _chunk_starts((header or {}).get("chunk_starts")))


def _chunk_starts(value: Any) -> np.ndarray | None:
    """The chunk starts a cache header holds, where they are a list of ints that starts at
    0 and never decreases (else None: the file is then scanned whole)."""
    if not isinstance(value, list) or len(value) < 2 or \
            not all(type(v) is int for v in value):
        return None
    try:
        starts = np.asarray(value, dtype=np.int64)
    except OverflowError:
        return None
    ok = starts[0] == 0 and bool((np.diff(starts) >= 0).all())
    return starts if ok else None


class LazyArgs:
    """Decode ``args`` of chosen rows on demand by re-reading the (unchanged) file.

    Each event's args are first decoded as raw JSON slices (one fast pass over the file,
    or over the chunks that hold the rows asked for, where ``starts`` says where the
    reader cut it: the first event of each chunk, then the number of events); each
    requested row's slice is then decoded into a dict. Nothing is kept until asked for.
    """

    def __init__(self, path: Path, src_index: np.ndarray,
                 starts: np.ndarray | None = None) -> None:
        self.path = path
        self.src_index = src_index
        self.starts = starts
        #: Every event's args slice once the file is decoded whole; while chunks are
        #: decoded as asked for, None where a chunk is not decoded yet.
        self._raws: list[msgspec.Raw] | None = None
        self._scan: ChunkScan | None = None  # chunks decoded as asked for
        self._shapes: Shapes | None = None
        # A report may ask from two threads at once (where it cannot fork, its critical
        # path is worked out on a thread): the file is decoded once, the other waits.
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        # The raw slices reference a map of the file: another process re-reads it.
        return {**self.__dict__, "_raws": None, "_scan": None, "_lock": None,
                "_shapes": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def cache_header(self) -> dict[str, Any] | None:
        """What the columnar cache stores beside the columns: where the reader cut the
        file (None where it read it in one piece)."""
        return None if self.starts is None else {"chunk_starts": self.starts.tolist()}

    def _texts(self, src: np.ndarray) -> list[msgspec.Raw]:
        """The args slices of source events ``src`` (decoding what they need first)."""
        raws = self._raws
        if raws is None or self._scan is not None:
            with self._lock:
                raws = self._for(src)
        return list(map(raws.__getitem__, src.tolist()))

    def _for(self, src: np.ndarray) -> list[msgspec.Raw]:
        """Every event's slices, at least those of ``src`` decoded (under the lock)."""
        if self.starts is not None and (self._raws is None or self._scan is not None):
            try:
                return self._chunks_for(src)
            except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError,
                    OSError, ValueError, IndexError):
                # Not cut as the reader cut it (a file read in one piece by another
                # version, a gzip): the file is decoded whole below.
                self.starts, self._scan, self._raws = None, None, None
        return self._load_once()

    def _chunks_for(self, src: np.ndarray) -> list[msgspec.Raw]:
        """Decode the chunks that hold ``src`` and are not decoded yet."""
        starts = self.starts
        assert starts is not None
        if self._scan is None:
            scan = ChunkScan.open(self.path)
            if scan is None or scan.chunks != len(starts) - 1:
                raise ValueError("the file is not cut as the reader cut it")
            self._scan, self._raws = scan, _Scanned([None] * int(starts[-1]))
            self._raws.source_map = scan.map
        scan, raws = self._scan, self._raws
        assert raws is not None
        if len(src) and (int(src.min()) < 0 or int(src.max()) >= len(raws)):
            raise IndexError("a source row past the file's events")
        for k in np.unique(np.searchsorted(starts, src, side="right") - 1).tolist():
            if not scan.done[k]:
                lo, hi = int(starts[k]), int(starts[k + 1])
                items = scan.decode(k)
                if len(items) != hi - lo:
                    raise ValueError("a chunk holds other events than the reader's")
                raws[lo:hi] = items
        if all(scan.done):
            self._scan = None  # (the slices keep the map: raws.source_map)
        return raws

    def _load_once(self) -> list[msgspec.Raw]:
        if self._raws is None:
            try:
                self._raws = _scan_in_chunks(self.path)
            except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError,
                    OSError, ValueError):
                self._raws = None  # read whole below: the lenient path names no error here
            if self._raws is not None:
                return self._raws
            # A map, not a copy: the Raw slices keep referencing it (closed when freed).
            raw = view(self.path)
            try:
                if first_byte(raw) == b"[":
                    items = msgspec.json.decode(raw, type=list[ArgsOnly])
                else:
                    items = msgspec.json.decode(raw, type=ArgsDoc).traceEvents
                self._raws = [it.args for it in items]
            except msgspec.ValidationError:
                # Files that needed the lenient reader: re-encode each event's args.
                obj = msgspec.json.decode(raw)
                evs = obj if isinstance(obj, list) else obj.get("traceEvents", [])
                enc = msgspec.json.encode
                self._raws = [
                    msgspec.Raw(enc(e.get("args") or {})) if isinstance(e, dict) else msgspec.Raw()
                    for e in evs
                ]
        return self._raws

    def cache_columns(self) -> dict[str, np.ndarray]:
        """What the columnar cache stores to rebuild this provider: each row's source event."""
        return {"src": self.src_index}

    def distinct(self, rows: np.ndarray, keys: Sequence[str]
                 ) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """:func:`traceforge.args_provider.distinct_args` without decoding every row: the rows'
        slices are decoded once into a struct holding each key as raw JSON, rows are
        grouped by those bytes, and one row per group is decoded (~10x faster than
        :meth:`__call__` on a model's op calls)."""
        src = self.src_index[np.asarray(rows, dtype=np.int64)]
        if not len(src):  # (before the file is scanned: no row asks for it)
            return np.empty(0, dtype=np.int64), []
        fields = [f"k{i}" for i in range(len(keys))]
        struct: Any = msgspec.defstruct(
            "Keys", [(f, msgspec.Raw, msgspec.field(name=k, default=msgspec.Raw()))
                     for f, k in zip(fields, keys, strict=True)], gc=False)
        parts = self._texts(src)
        try:
            vals = msgspec.json.decode(b"[" + b",".join(p or b"{}" for p in parts) + b"]",
                                       type=list[struct])
        except msgspec.ValidationError:  # an args value that is not an object
            return factorize_args(self, rows, keys)
        # One bytes key per row: the keys' raw JSON joined by 0x1f, a control character
        # that JSON text never holds unescaped, so equal keys mean equal values.
        get = attrgetter(*fields) if len(fields) > 1 else (lambda v: (getattr(v, fields[0]),))
        first: dict[bytes, int] = {}
        codes = np.fromiter(map(first.setdefault, map(b"\x1f".join, map(get, vals)), count()),
                            dtype=np.int64, count=len(vals))
        # setdefault files each key under its first row: renumber densely, in that order.
        pos = np.fromiter(first.values(), dtype=np.int64, count=len(first))
        dense = np.empty(len(vals), dtype=np.int64)
        dense[pos] = np.arange(len(pos))
        # Equal values written differently (spacing) are merged after decoding.
        canon: dict[bytes, int] = {}
        merged = np.empty(len(pos), dtype=np.int64)
        uniques: list[dict[str, Any]] = []
        for j, p in enumerate(pos.tolist()):
            try:
                d = {k: msgspec.json.decode(r) for k, r in zip(keys, get(vals[p]), strict=True)
                     if len(r)}
            except msgspec.MsgspecError as e:
                raise TraceFormatError(self.path, _unreadable(e)) from None
            merged[j] = canon.setdefault(msgspec.json.encode(d), len(uniques))
            if merged[j] == len(uniques):
                uniques.append(d)
        return merged[dense[codes]], uniques

    def raw(self, rows: np.ndarray) -> list[dict[str, msgspec.Raw]] | None:
        """The args of ``rows`` with each value left as its JSON text (None where one is
        not an object): for a writer that encodes the values it meets again only once."""
        text = self._array(rows)
        try:
            with paused_gc():
                got: list[dict[str, msgspec.Raw]] = msgspec.json.decode(
                    text, type=list[dict[str, msgspec.Raw]])
        except (msgspec.ValidationError, UnicodeDecodeError):  # decoded whole, it says why
            return None
        return got

    def shapes(self, rows: np.ndarray) -> ArgShapes | None:
        """The args of ``rows`` as shapes (:mod:`traceforge.formats.arg_shapes`): for a
        writer that encodes each shape once and the ids that differ per row as columns.
        None where the texts cannot be masked (they hold a control byte)."""
        if self._shapes is None:
            self._shapes = Shapes()
        shapes = self._shapes
        return self._with_texts(rows, lambda texts: shapes.of(texts) if texts else None)

    def _array(self, rows: np.ndarray) -> bytes:
        """The rows' args JSON as one JSON array, copied out of the file (its map's pages
        handed back); a row without args is ``{}``."""
        return self._with_texts(rows, lambda texts: b"[" + b",".join(texts) + b"]")

    def _with_texts(self, rows: np.ndarray, use: Callable[[list[Any]], T]) -> T:
        """``use`` of the rows' args texts (slices of the file's map; a row without args
        is ``{}``), the map's pages the slices touched handed back after; the file is
        not scanned for no row."""
        src = self.src_index[np.asarray(rows, dtype=np.int64)]
        if not len(src):
            return use([])
        got = use([rw if len(rw) else b"{}" for rw in self._texts(src)])
        _drop_pages(self._raws)
        return got

    def __call__(self, rows: np.ndarray) -> list[dict[str, Any]]:
        # One decode of all requested slices as a JSON array: per-row decode calls cost
        # more than the decoding itself when an analysis asks for ~100k rows.
        text = self._array(rows)
        try:
            with paused_gc():
                vals = msgspec.json.decode(text)
        except (msgspec.MsgspecError, UnicodeDecodeError) as e:  # the reader skips args
            raise TraceFormatError(self.path, _unreadable(e)) from None
        return [v if isinstance(v, dict) else {} for v in vals]


def _unreadable(e: Exception) -> str:
    """The problem of args msgspec cannot decode (without its place in our batch); text
    that is not UTF-8 said as the reader says it of a document, whichever error found it
    (:func:`~traceforge.formats.source.not_utf8`)."""
    problem = NOT_UTF8 if not_utf8(e) else str(e).split(" - at ")[0]
    return f"an event's args cannot be read ({problem})"


class _Scanned(list):  # type: ignore[type-arg]
    """The Raw slices of a scan in chunks, and the private map they reference."""

    source_map: mmap.mmap | None = None


class ChunkScan:
    """A file's events array cut where the chunked reader cuts it, each chunk's args
    decoded as Raw slices of a private (copy-on-write) map of the file when asked for
    (:meth:`decode`, in any order), its pages handed back as soon as it is decoded: the
    slices reference the map, not copies, and this process holds only the pages being
    read, not the whole file (a mapped page counts in its memory as long as it is
    mapped)."""

    def __init__(self, raw: mmap.mmap, plan: chunks.Plan) -> None:
        self.map, self.plan = raw, plan
        self.done = [False] * plan.chunks
        self._mv = memoryview(raw)  # (the slices reference it: it lives as long as they do)

    @property
    def chunks(self) -> int:
        return self.plan.chunks

    @classmethod
    def open(cls, path: Path) -> ChunkScan | None:
        """None where the file is no plain file or too small to cut: decode it whole."""
        if not hasattr(mmap, "MADV_DONTNEED"):
            return None
        with path.open("rb") as f:
            if f.read(2) == b"\x1f\x8b" or f.seek(0, 2) == 0:
                return None
            raw = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        plan = chunks.plan(raw, 1)
        return None if plan is None else cls(raw, plan)

    def decode(self, i: int) -> list[msgspec.Raw]:
        """Chunk ``i``'s args slices, one per event."""
        raw, mv, plan = self.map, self._mv, self.plan
        last = len(plan.cuts)
        begin = plan.start - 1 if i == 0 else plan.cuts[i - 1]  # "[" or the comma before
        if i < last:
            end = plan.cuts[i] + 1
            # Brackets over the commas around the chunk (this process's copy of the two
            # pages; no args text is there, so no slice of a chunk decoded before sees
            # them): the chunk decodes as a list where it lies.
            raw[begin] = ord("[")
            raw[end - 1] = ord("]")
            items = msgspec.json.decode(mv[begin:end], type=list[ArgsOnly])
        else:
            # The last chunk holds the document's end: decoded from a copy (its opening
            # would go over the args of the chunk before).
            end = len(raw)
            with mv[begin + 1:end] as body:
                head = b'{"traceEvents":[' if plan.head is not None else b"["
                text_copy = head + bytes(body)
            items = (msgspec.json.decode(text_copy, type=ArgsDoc).traceEvents
                     if plan.head is not None else
                     msgspec.json.decode(text_copy, type=list[ArgsOnly]))
        got = [it.args for it in items]
        del items
        page = mmap.PAGESIZE
        lo, hi = begin // page * page, end // page * page
        if hi > lo:
            raw.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
        self.done[i] = True
        return got


def _scan_in_chunks(path: Path) -> list[msgspec.Raw] | None:
    """Every event's args as a Raw slice (:class:`ChunkScan`, every chunk in order); None
    where the file is no plain file or too small to cut: decode it whole."""
    scan = ChunkScan.open(path)
    if scan is None:
        return None
    out = _Scanned()
    out.source_map = scan.map
    for i in range(scan.chunks):
        out.extend(scan.decode(i))
    return out


def _drop_pages(raws: list[msgspec.Raw] | None) -> None:
    """Hand back the map pages the slices just read touched (they are copied out)."""
    m = getattr(raws, "source_map", None)
    if m is not None:
        m.madvise(mmap.MADV_DONTNEED)
