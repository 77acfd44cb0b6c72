"""Kineto / Chrome trace JSON reader (``.json``, ``.json.gz``, ``*.pt.trace.json(.gz)``).

Speed comes from a typed ``msgspec`` decode: only the fields every analysis needs are
decoded (into slotted structs, no dicts), the rest of ``args`` is skipped and decoded again
lazily, per row, when an analysis asks for it (``Trace.args``). Columns are built once,
column-wise. Odd files that do not fit the typed schema (a ``null`` name, a string
correlation id, ...) go through a slower, lenient path that yields the same table.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from traceforge.errors import TraceFormatError
from traceforge.forks import ForkError, taking_map
from traceforge.formats import kineto_chunks as chunks
from traceforge.formats import prefetch
from traceforge.formats.kineto_args import LazyArgs
from traceforge.formats.kineto_columns import (
    EVENT_CODES,
    ON_DEVICE,
    Codes,
    Columns,
    codes_of,
    columns,
    join,
    kind_codes,
    split_ids,
)
from traceforge.formats.kineto_meta import FORMAT, build_meta, content_notes, metadata_event
from traceforge.formats.kineto_schema import (
    FLOW_PHASES,
    PH_CODE,
    PH_LETTERS,
    SCHEMAS,
    Doc,
    loose,
)
from traceforge.formats.kineto_schema import sniff as kineto_sniff
from traceforge.formats.source import NOT_UTF8, content, first_byte, not_utf8, paused_gc
from traceforge.formats.symbols import demangle_names
from traceforge.model import (
    FLOW_COLUMNS,
    KINDS,
    Trace,
    empty_frame,
    normalize_events,
)

NAME = FORMAT
#: Largest |ts| or dur in us: 2**62 ns, so that differences of two times fit in int64.
MAX_US = float(2**62) / 1000.0
#: read() takes ``kinds`` and builds columns for those rows only.
ACCEPTS_KINDS = True
SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")


def sniff(path: Path, head: bytes) -> bool:
    """A JSON object with ``traceEvents``, or a bare JSON list of events
    (:func:`traceforge.formats.kineto_schema.sniff`, which the prefetch uses too)."""
    return kineto_sniff(head)


def _decode_error(path: Path, raw: bytes, e: Exception) -> TraceFormatError:
    msg = str(e)
    if "truncated" in msg.lower() or "unexpected end" in msg.lower():
        return TraceFormatError(path, "truncated JSON (the file ends mid-document)")
    if not_utf8(e):
        return TraceFormatError(path, NOT_UTF8)
    return TraceFormatError(path, f"not valid JSON ({msg})")


def _decode(path: Path, raw: Any) -> tuple[list[Any], Doc, bool]:
    """Typed decode; on a schema mismatch, a lenient decode. Returns (events, doc, typed).

    ``raw`` is bytes or a read-only map of the file; nothing returned references it.
    """
    first = first_byte(raw)
    if not first:
        raise TraceFormatError(path, "empty file")
    is_list = first == b"["
    for list_type, doc_type in SCHEMAS:
        try:
            if is_list:
                return msgspec.json.decode(raw, type=list_type), Doc(), True
            doc = msgspec.json.decode(raw, type=doc_type)
            if doc.traceEvents is None:
                raise TraceFormatError(path, "JSON but not a trace (no traceEvents list)")
            return doc.traceEvents, doc, True
        except msgspec.ValidationError:
            continue
        except msgspec.DecodeError as e:
            raise _decode_error(path, raw, e) from None
        except UnicodeDecodeError:
            raise TraceFormatError(path, NOT_UTF8) from None
    # Lenient path: plain objects, coerced field by field below.
    try:
        obj = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError) as e:
        raise _decode_error(path, raw, e) from None
    if isinstance(obj, list):
        return [loose(e) for e in obj if isinstance(e, dict)], Doc(), False
    if not isinstance(obj, dict) or not isinstance(obj.get("traceEvents"), list):
        raise TraceFormatError(path, "JSON but not a trace (no traceEvents list)")
    meta = {k: v for k, v in obj.items() if k != "traceEvents"}
    try:
        doc = msgspec.convert(meta, type=Doc, strict=False)
    except msgspec.ValidationError:
        doc = Doc()
    return [loose(e) for e in obj["traceEvents"] if isinstance(e, dict)], doc, False


def us_to_ns(us: np.ndarray) -> np.ndarray:
    """Float microseconds -> int64 nanoseconds, exact for Kineto's 3-decimal timestamps.

    Kineto writes ``ts`` as microseconds with three decimals, i.e. whole nanoseconds. Near
    2**42 us (relative timestamps of ~51 days, as in torch 2.x traces) one float64 ulp is
    ~1 ns, so ``round(us * 1000)`` can land one ns off. The true value k is the integer
    whose correctly rounded ``k / 1000`` is the float we decoded: try the neighbours.
    HTA instead rounds to whole us and loses ~28% of kernel time on H100 traces.
    """
    ns = np.rint(us * 1000.0)
    off = np.flatnonzero(ns / 1000.0 != us)  # few: the neighbours are tried for these only
    if len(off):
        got, want = ns[off], us[off]
        ok = np.zeros(len(off), dtype=bool)
        for d in (-1.0, 1.0):
            cand = got + d
            fix = ~ok & (cand / 1000.0 == want)
            got = np.where(fix, cand, got)
            ok |= fix
        ns[off] = got
    return ns.astype(np.int64)


def _floats(path: Path, values: list[Any], what: str) -> np.ndarray:
    """float64 array; None becomes NaN (the caller reports it), numeric strings are parsed."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        bad = next(i for i, v in enumerate(values) if not _is_number(v))
        raise TraceFormatError(path, f"event {bad} has a non-numeric {what}") from None


def _is_number(v: Any) -> bool:
    if v is None:
        return True
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


class _Ids:
    """Map pid/tid values to int64; non-numeric strings get stable negative ids, numbered
    in order of first appearance (metadata events first)."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}

    def column(self, values: list[Any]) -> np.ndarray:
        """``values`` as ids; OverflowError past 64 bits."""
        ints, at, odd = split_ids(values)
        ints[at] = self.numbers(odd)
        return ints

    def numbers(self, odd: Codes) -> np.ndarray:
        """The id of each position of ``odd`` (values that are not ints)."""
        numbered = np.array([self.one(v) for v in odd.values], dtype=np.int64)
        at_positions: np.ndarray = numbered[odd.codes]
        return at_positions

    def one(self, v: Any) -> int:
        if isinstance(v, int):
            return v
        s = str(v)
        if s.lstrip("-").isdigit() and len(s) < 19:  # fits in int64
            return int(s)
        return self.names.setdefault(s, -2 - len(self.names))


def _categorical(c: Codes) -> pd.Categorical:
    """A categorical from first-appearance codes; None (lenient decode only) is missing,
    as ``pd.factorize`` would have it."""
    values, codes = c.values, c.codes
    if None in values:
        k = values.index(None)
        renumber = np.arange(len(values), dtype=np.int32)
        renumber[k] = -1
        renumber[k + 1:] -= 1
        values, codes = values[:k] + values[k + 1:], renumber[codes]
    cats = pd.Index(np.array(values, dtype=object))
    result: pd.Categorical = pd.Categorical.from_codes(codes, categories=cats)
    return result


def _take(getter: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    return list(map(getter, items))


class _OnePiece(Exception):
    """Chunked decoding cannot finish (or cannot name a bad event): read in one piece."""


def read(path: str | Path, kinds: Collection[str] | None = None) -> Trace:
    """Read a Kineto / Chrome-trace JSON file into a Trace.

    ``kinds`` keeps only events of those kinds (e.g. the GPU kinds for a kernel table):
    everything is still decoded, but the columns are built for the kept rows only. Large
    files are decoded in chunks on several cores (:mod:`traceforge.formats.kineto_chunks`).
    """
    with paused_gc():  # (it halves the load time of large traces)
        p = Path(path)
        wanted = None if kinds is None else frozenset(kinds)
        decoded = None
        with content(p, private=True) as raw:  # opened (and gunzipped) once
            try:
                chunked = _read_chunks(p, raw, wanted)
            except _OnePiece:
                chunked = None  # the first chunk was decoded in place: decode afresh below
            else:
                if chunked is None:
                    decoded = _decode(p, raw)
        if chunked is not None:
            return chunked
        return _read(p, wanted) if decoded is None else _from_events(p, decoded, wanted)


def _read_chunks(p: Path, raw: Any, kinds: frozenset[str] | None) -> Trace | None:
    n = chunks.workers()
    plan = chunks.plan(raw, n)
    if plan is None:
        return None

    def one(i: int) -> tuple[Columns, Doc | None]:
        events, tail = chunks.decode(raw, plan, i)  # one chunk's structs alive at a time
        return columns(events, kinds), tail

    def taking(work: Callable[[int], tuple[Columns, Doc | None]], count: int
               ) -> list[tuple[Columns, Doc | None]]:
        return taking_map(work, count, plan.workers)

    early = prefetch.claim(p)
    try:
        if early is None:
            parts = taking(one, plan.chunks)
        elif kinds is not None:
            early.close()  # it decodes every kind of row
            parts = taking(one, plan.chunks)
        else:
            # Children forked before the command's imports took chunks already.
            parts = early.take(one, plan.chunks, (plan.start, plan.cuts), taking)
    except (chunks.ChunkError, ForkError, OverflowError, OSError):
        # OSError: no fork or in-memory file here (process limit, sandbox, memory).
        raise _OnePiece from None
    doc = chunks.document(plan, parts[-1][1])
    # Where each chunk's events begin: the args provider decodes only the chunks of the
    # rows it is asked for.
    starts = np.cumsum([0] + [c.n for c, _ in parts], dtype=np.int64)
    return _table(p, join([c for c, _ in parts]), doc, True, kinds, None, starts)


def _read(p: Path, kinds: frozenset[str] | None) -> Trace:
    with content(p) as raw:
        decoded = _decode(p, raw)
    return _from_events(p, decoded, kinds)


def _from_events(p: Path, decoded: tuple[list[Any], Doc, bool], kinds: frozenset[str] | None
                 ) -> Trace:
    events, doc, typed = decoded
    if not isinstance(events, list):
        raise TraceFormatError(p, "JSON but not a trace (no traceEvents list)")
    try:
        cols = columns(events, kinds)
    except OverflowError as e:
        raise TraceFormatError(p, str(e)) from None
    return _table(p, cols, doc, typed, kinds, events)


def _table(p: Path, cols: Columns, doc: Doc, typed: bool, kinds: frozenset[str] | None,
           events: list[Any] | None, chunk_starts: np.ndarray | None = None) -> Trace:
    """The Trace from the joined columns; ``events`` (None when decoded in chunks) is
    needed only to parse odd ts/dur values and to name a bad event; ``chunk_starts``: the
    first event of each chunk, then the number of events (decoded in chunks)."""
    if not cols.has_phase:
        what = "a JSON list without trace events" if doc.traceEvents is None else "no events"
        raise TraceFormatError(p, f"not a trace ({what})")
    ph_code = cols.ph
    is_event = np.isin(ph_code, EVENT_CODES)
    ids = _Ids()
    process_names: dict[int, str] = {}
    thread_names: dict[tuple[int, int], str] = {}
    for e in cols.meta:
        metadata_event(e, ids.one, process_names, thread_names)

    ts_us, dur_us = cols.ts_us, cols.dur_us
    if ts_us is None or dur_us is None:
        if events is None:
            raise _OnePiece
        # None (missing) becomes NaN, numeric strings are parsed; checked just below.
        ts_us = _floats(p, _take(attrgetter("ts"), events), "ts")
        dur_us = _floats(p, _take(attrgetter("dur"), events), "dur")
    # Beyond +-2**62 ns a time cannot be made relative in int64 (inf, 1e308, damage).
    with np.errstate(invalid="ignore"):
        far = (~np.isnan(ts_us) & ~(np.abs(ts_us) <= MAX_US)) | \
            (~np.isnan(dur_us) & ~(dur_us <= MAX_US))
    for what, bad_mask in (
        ("has no ts", is_event & np.isnan(ts_us)),
        ("has no dur", (ph_code == PH_CODE["X"]) & np.isnan(dur_us)),
        ("has a negative duration", is_event & (dur_us < 0)),
        ("has a ts or dur out of range", is_event & far),
    ):
        if bad_mask.any():
            if events is None:
                raise _OnePiece  # the message names the event: read it whole
            bad = int(np.flatnonzero(bad_mask)[0])
            raise TraceFormatError(p, f"event {bad} ({events[bad].name!r}) {what}")
    cat_all = _categorical(cols.cat)
    # kind is built from the category codes, never from per-row strings.
    kind_all = kind_codes(list(cat_all.categories))[cat_all.codes]
    notes = content_notes(cat_all[is_event], kind_all[is_event])
    # The trace start is the first event of any kind, also when only some kinds are kept,
    # so that times agree between loads with different ``kinds``.
    starts = is_event & (ph_code != PH_CODE["E"])
    has_events = bool(starts.any())
    # us_to_ns is monotonic: the first start converted is the converted first start.
    t0 = int(us_to_ns(ts_us[starts].min(keepdims=True))[0]) if has_events else 0
    idx_ev = cols.kept
    ph_ev = ph_code[idx_ev]
    ts_ns = us_to_ns(ts_us[idx_ev])
    dur_ns = us_to_ns(np.nan_to_num(dur_us[idx_ev], nan=0.0))
    kind_ev = kind_all[idx_ev]
    cat_cat = cat_all[idx_ev]
    n = len(idx_ev)
    name_cat = _categorical(cols.name)
    pidtid = cols.pidtid
    pidtid[cols.odd_col, cols.odd_row] = ids.numbers(cols.odd)
    pid, tid = pidtid
    ext, corr, stream, device, graph = cols.ints

    is_gpu = np.isin(kind_ev, ON_DEVICE)
    # GPU rows: Kineto puts the device in pid and the stream in tid; args say it too when
    # present (legacy traces only in args). Host rows carry no device/stream.
    device = np.where(is_gpu, np.where(device >= 0, device, pid), -1)
    stream = np.where(is_gpu, np.where(stream >= 0, stream, tid), -1)

    # B/E pairs (rare in Kineto, used by other Chrome-trace writers) become complete events.
    keep = np.ones(n, dtype=bool)
    if np.isin(ph_ev, [PH_CODE["B"], PH_CODE["E"]]).any():
        keep = _pair_begin_end(PH_LETTERS[ph_ev], pid, tid, ts_ns, dur_ns)

    base = doc.baseTimeNanoseconds
    flows = _flows(cols.flows, ph_code[cols.flow_at], ids, p)
    if not flows.empty:
        t0 = min(t0, int(flows["ts"].min())) if has_events else int(flows["ts"].min())
        flows["ts"] -= t0
    # Since torch 2.4 Kineto writes ts relative to baseTimeNanoseconds; older traces (and
    # ones without the key) hold absolute epoch microseconds. displayTimeUnit ("ms"/"ns")
    # only changes how a viewer displays times, never the unit of ts (perfetto#274).
    base_ns = t0 + (base if base is not None and t0 < 10**17 else 0)

    meta = build_meta(p, doc, process_names, thread_names, base_ns, typed, notes)
    rank = -1 if meta.rank is None else meta.rank
    frame = pd.DataFrame(
        {
            "name": name_cat,
            "kind": pd.Categorical.from_codes(kind_ev, categories=pd.Index(list(KINDS))),
            "cat": cat_cat,
            "ts": ts_ns - t0,
            "dur": dur_ns,
            "pid": pid,
            "tid": tid,
            "device": device,
            "stream": stream,
            "corr": corr,
            "ext": ext,
            "graph": graph,
            "rank": np.full(n, rank, dtype=np.int64),
        },
        # Each column keeps its own array: stacking 13 columns into 2-D blocks costs
        # ~0.1 s per 1M rows and buys nothing, as analyses read column by column.
        copy=False,
    )
    src_index = idx_ev
    if not keep.all():
        frame = frame[keep]
        src_index = src_index[keep]
        frame = frame.reset_index(drop=True)
        for col in ("name", "cat"):
            frame[col] = frame[col].cat.remove_unused_categories()
    # Columns are built in their final dtypes; normalize_events only checks and orders.
    args = LazyArgs(p, src_index, chunk_starts)
    return demangle_names(Trace(normalize_events(frame), meta, flows, args))


def _pair_begin_end(
    ph: np.ndarray, pid: np.ndarray, tid: np.ndarray, ts: np.ndarray, dur: np.ndarray
) -> np.ndarray:
    """Turn B/E pairs into one complete event at the B row; E rows are dropped."""
    keep = ph != "E"
    stacks: dict[tuple[int, int], list[int]] = {}
    order = np.argsort(ts, kind="stable")
    for i in order:
        if ph[i] == "B":
            stacks.setdefault((int(pid[i]), int(tid[i])), []).append(int(i))
        elif ph[i] == "E":
            st = stacks.get((int(pid[i]), int(tid[i])))
            if st:
                b = st.pop()
                dur[b] = max(0, int(ts[i]) - int(ts[b]))
    return np.asarray(keep, dtype=bool)


def _flows(fl: list[Any], ph: np.ndarray, ids: _Ids, p: Path) -> pd.DataFrame:
    """The table of flow events ``fl`` (ac2g ones already left out), phases ``ph``."""
    if not fl:
        return empty_frame(FLOW_COLUMNS)
    ts = _floats(p, _take(attrgetter("ts"), fl), "flow ts")
    with np.errstate(invalid="ignore"):
        if (np.abs(ts) > MAX_US).any():
            raise TraceFormatError(p, "a flow event has a ts out of range")
    try:
        fid = ids.column([-1 if v is None else v for v in _take(attrgetter("id"), fl)])
        fpid = ids.column(_take(attrgetter("pid"), fl))
        ftid = ids.column(_take(attrgetter("tid"), fl))
    except OverflowError:
        raise TraceFormatError(p, "a flow event's id, pid or tid does not fit in 64 bits"
                               ) from None
    result4: pd.DataFrame = pd.DataFrame(
        {
            "id": fid,
            "cat": _categorical(codes_of(map(attrgetter("cat"), fl), len(fl))),
            "ph": pd.Categorical(PH_LETTERS[ph].astype(object),
                                 categories=list(FLOW_PHASES)),
            "ts": us_to_ns(np.where(np.isnan(ts), 0.0, ts)),
            "pid": fpid,
            "tid": ftid,
        }
    )
    return result4
