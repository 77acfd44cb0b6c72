"""Draw traceforge's analysis onto a Chrome trace document, for Perfetto.

Adds, next to the trace's own tracks, one "traceforge" process per rank with a thread per
idle cause (each gap a slice named by its cause), a thread of step windows, a thread that
repeats the top-N kernels' slices, counter tracks of communication overlapped / exposed
and of allocated / reserved memory per device (from memory events),
and global instants at step starts; every kernel gets ``class``/``family`` args (and
``top_kernel`` when it is among the top N) and, where its work is known, its roofline
rates (``achieved_tflops_per_s``, ``achieved_tb_per_s``, ``bound``, ``pct_of_bound``);
every collective kernel its ``collective_kind``, ``msg_bytes``, ``algbw_gbps``,
``busbw_gbps`` and ``pct_of_ceiling`` (``traceforge comm`` on this one trace).
A "critical path" process per rank holds each step's critical path as a track, with flow
arrows where the path moves between threads and streams
(:mod:`traceforge.render.critical_path`). Everything is formatted from
:class:`~traceforge.report.annotations.Annotations`; nothing is measured here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from traceforge.model import Trace
from traceforge.render.critical_path import chrome_parts
from traceforge.render.slice_table import ArgColumn, SliceTable, column, labelled, objects, texts
from traceforge.report.annotations import COUNTER_ARGS, Annotations

if TYPE_CHECKING:
    from traceforge.render.chrome_json import ChromeSource

#: Chrome ``pid`` of the analysis tracks of rank 0 (+ rank for others): far above real pids
#: and device rows, and inside int32 for the protobuf writer.
ANALYSIS_PID = 1_900_000_000
CAUSE_TIDS = {"host_bound": 1, "launch_latency": 2, "sync": 3, "other": 4, "graph_internal": 5}
STEPS_TID = 10
TOP_TID = 11
CAT = "traceforge"


def _us(ns: int) -> float:
    return ns / 1000.0


def _meta(pid: int, tid: int | None, name: str, sort: int) -> list[dict[str, Any]]:
    if tid is None:
        return [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                 "args": {"name": name}},
                {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                 "args": {"sort_index": sort}}]
    return [{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}},
            {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
             "args": {"sort_index": sort}}]


def annotation_parts(trace: Trace, ann: Annotations
                     ) -> tuple[list[SliceTable], list[dict[str, Any]]]:
    """The extra Chrome events on their own process named for the rank: the slices (idle
    gaps, step windows, top-N kernel repeats) as tables, and the other events (names,
    step instants, overlap and memory counters) as dicts."""
    pid = ANALYSIS_PID + ann.rank
    ev: list[dict[str, Any]] = _meta(pid, None, f"traceforge analysis (rank {ann.rank})", -1)
    for cause, tid in CAUSE_TIDS.items():
        ev += _meta(pid, tid, f"idle: {cause}", tid)
    tables = [_gap_table(ann.gaps, pid)]
    ev += _meta(pid, STEPS_TID, "GPU step windows", STEPS_TID)
    w = ann.windows
    lo, hi, step = (w[c].to_numpy(np.int64) for c in ("ts", "end", "step"))
    codes, names = labelled([f"step {s}" for s in step.tolist()])
    tables.append(SliceTable(CAT, np.full(len(w), pid), np.full(len(w), STEPS_TID), lo, hi - lo,
                             codes, names, [column("step", step)]))
    for t0, s in zip(lo.tolist(), step.tolist(), strict=True):
        ev.append({"ph": "i", "s": "g", "cat": CAT, "name": f"step {s} begins (GPU)",
                   "pid": pid, "tid": STEPS_TID, "ts": _us(t0)})
    ev += _meta(pid, TOP_TID, f"top {len(ann.top)} kernels by GPU time", TOP_TID)
    tables.append(_top_table(trace, ann, pid))
    series = f"comm/compute overlap (rank {ann.rank})"
    for r in ann.overlap.to_dict("records"):
        ev.append({"ph": "C", "cat": CAT, "name": series, "pid": pid, "tid": 0,
                   "ts": _us(int(r["ts"])),
                   "args": {"overlapped": int(r["overlapped"]), "exposed": int(r["exposed"])}})
    for dev, mg in ann.memory.groupby("device", sort=True) if len(ann.memory) else ():
        # One counter track per device: allocated and reserved bytes (Perfetto: two series).
        name = f"memory {dev} (rank {ann.rank})"
        for ts, a, res in zip(mg["ts"].tolist(), mg["allocated_bytes"].tolist(),
                              mg["reserved_bytes"].tolist(), strict=True):
            args = {"allocated_bytes": int(a)}
            if res == res:  # NaN: not recorded
                args["reserved_bytes"] = int(res)
            ev.append({"ph": "C", "cat": CAT, "name": name, "pid": pid, "tid": 0,
                       "ts": _us(int(ts)), "args": args})
    return tables, ev


#: Gap columns written as args when set (a missing one is left out).
_GAP_TEXT = ("next_name", "launch_name", "cpu_op", "annotation")


def _gap_table(gaps: pd.DataFrame, pid: int) -> SliceTable:
    """Each idle gap a slice named by its cause on the cause's thread; args cause,
    ``gap_us``, device, step and the gap's names where known."""
    codes, names = labelled(texts(gaps["cause"].tolist()))
    other = CAUSE_TIDS["other"]
    tid = np.asarray([CAUSE_TIDS.get(c, other) for c in names], dtype=np.int64)[codes]
    dur, ts = gaps["dur"].to_numpy(np.int64), gaps["ts"].to_numpy(np.int64)
    args = [column("cause", texts(names)[codes]), column("gap_us", dur / 1e3)]
    for c in ("device", "step"):
        args.append(column(c, gaps[c].to_numpy(np.int64)))
    for c in _GAP_TEXT:
        if c in gaps.columns:
            v = gaps[c].tolist()
            args.append(column(c, texts(v), np.fromiter(map(bool, v), dtype=bool,
                                                        count=len(v))))
    return SliceTable(CAT, np.full(len(ts), pid), tid, ts, dur, codes, names, args)


def _top_table(trace: Trace, ann: Annotations, pid: int) -> SliceTable:
    """The top-N kernels' slices repeated on their own thread, named ``#rank name``."""
    rank_of = {n: i + 1 for i, n in enumerate(ann.top)}
    kern = trace.kernels()
    kern = kern[kern["name"].astype(str).isin(rank_of)]
    codes, kernels = labelled(texts(kern["name"].tolist()))
    names = [f"#{rank_of[n]} {n if len(n) < 80 else n[:77] + '...'}" for n in kernels]
    rank = np.asarray([rank_of[n] for n in kernels], dtype=np.int64)[codes]
    return SliceTable(CAT, np.full(len(kern), pid), np.full(len(kern), TOP_TID),
                      kern["ts"].to_numpy(np.int64), kern["dur"].to_numpy(np.int64), codes,
                      names, [column("top_kernel", rank),
                              column("kernel", texts(kernels)[codes])])


#: Roofline columns of ``Annotations.rates`` -> the kernel arg they become, and its decimals.
RATE_ARGS: dict[str, tuple[str, int]] = {
    "tflops_per_s": ("achieved_tflops_per_s", 3), "tb_per_s": ("achieved_tb_per_s", 4),
    "intensity": ("flop_per_byte", 2), "pct_of_bound": ("pct_of_bound", 2),
}
#: Columns of ``Annotations.comm`` -> decimals of the arg (0: an integer).
COMM_ARGS = {"msg_bytes": 0, "algbw_gbps": 3, "busbw_gbps": 3, "pct_of_ceiling": 2}
#: Profiled counters written as integers (the others with two decimals).
_INT_COUNTERS = ("launch", "duration_ns", "dram_bytes", "flop")


@dataclass(frozen=True)
class _Tag:
    """One arg a table (rates, comm, counters) gives the kernels it has a row for: per
    table row, its value as the arg is written (``items``, Python values; ``values`` the
    same as an array) and whether the row gives it."""

    key: str
    values: np.ndarray
    present: np.ndarray

    @cached_property
    def items(self) -> list[Any]:
        return cast("list[Any]", self.values.tolist())


def _number(v: np.ndarray, digits: int) -> np.ndarray:
    """Each value as the arg writes it: ``int(v)`` for 0 digits, else ``round(v,
    digits)`` as Python rounds (correctly: numpy's round may differ in the last bit);
    NaN stays NaN (0 for an int: its row does not give the arg)."""
    if digits:
        return np.fromiter((round(x, digits) for x in v.tolist()), dtype=np.float64,
                           count=len(v))
    finite = np.isfinite(v)
    if (np.abs(v[finite]) < 2.0**63).all():
        return np.where(finite, v, 0).astype(np.int64)
    return objects([int(x) if f else 0 for x, f in zip(v.tolist(), finite.tolist(),
                                                       strict=True)])


def _numbers(key: str, v: np.ndarray, digits: int) -> _Tag:
    return _Tag(key, _number(v, digits), ~np.isnan(v))


def _rate_tags(rates: pd.DataFrame) -> list[_Tag]:
    """A kernel's roofline args from its row of ``Annotations.rates``."""
    out = [_numbers(key, rates[col].to_numpy(dtype=float), digits)
           for col, (key, digits) in RATE_ARGS.items()]
    bound = rates["bound"].tolist()
    has = np.fromiter(map(bool, bound), dtype=bool, count=len(bound))
    out.append(_Tag("bound", texts(bound), has))
    out.append(_Tag("roofline_dtype", texts(rates["dtype"].tolist()), has))
    return out


def _comm_tags(c: pd.DataFrame) -> list[_Tag]:
    """A collective's kind, bytes and bandwidths (GB/s, nccl-tests on its own kernel
    time) and % of the link ceiling, from its row of ``Annotations.comm``."""
    kind = texts(c["kind"].astype(str).tolist())
    return [_Tag("collective_kind", kind, np.ones(len(kind), dtype=bool)),
            *(_numbers(k, c[k].to_numpy(dtype=float), d) for k, d in COMM_ARGS.items())]


def _counter_tags(c: pd.DataFrame) -> list[_Tag]:
    """A kernel's profiled counters (``ncu_*``) from its row of ``Annotations.counters``."""
    return [_numbers(f"ncu_{k}", c[k].to_numpy(dtype=float), 0 if k in _INT_COUNTERS else 2)
            for k in COUNTER_ARGS if k in c.columns]


def _tags_something(table: pd.DataFrame) -> np.ndarray:
    """Which rows of a roofline or counters table give a kernel any arg: a value that is
    not NaN among the columns :func:`_rate_tags` / :func:`_counter_tags` write, or a true
    ``bound``. (Every row of the comm table does: its ``collective_kind``.)"""
    cols = [c for c in (*RATE_ARGS, *COUNTER_ARGS) if c in table.columns]
    some = np.zeros(len(table), dtype=bool)
    for c in cols:
        some |= ~np.isnan(table[c].to_numpy(dtype=float))
    if "bound" in table.columns:
        b = table["bound"].tolist()
        some |= np.fromiter(map(bool, b), dtype=bool, count=len(b))
    return some


class RowTags:
    """The args the analysis adds to the trace's own events (``tags`` of a
    :class:`~traceforge.render.chrome_json.ChromeSource`): every kernel's
    ``class``/``family``/``detail`` (and ``top_kernel`` when among the top N), then per
    row its roofline rates, its collective's bandwidths and its profiled counters. As
    dicts (:meth:`__call__`), or as columns in the same order (:meth:`columns`: for a
    writer that encodes args a column at a time)."""

    def __init__(self, trace: Trace, ann: Annotations) -> None:
        self.classes = ann.kernel_classes
        self.rank_of = {n: i + 1 for i, n in enumerate(ann.top)}
        n = len(trace.events)
        # Per table: which of its rows tags each trace row (-1: none), and its rows' args.
        self.parts: list[tuple[np.ndarray, list[_Tag]]] = []
        for table, make, may_tag_nothing in ((ann.rates, _rate_tags, True),
                                             (ann.comm, _comm_tags, False),
                                             (ann.counters, _counter_tags, True)):
            if table.empty:
                continue
            if may_tag_nothing:
                # Rows whose args would be empty (a kernel of unknown work) tag nothing,
                # and are not kept.
                table = table[_tags_something(table)]
                if table.empty:
                    continue
            pos = trace.events.index.get_indexer(table.index)
            at = np.full(n, -1, dtype=np.int64)
            ok = pos >= 0
            at[pos[ok]] = np.flatnonzero(ok)
            self.parts.append((at, make(table)))

    def __call__(self, rows: np.ndarray, names: list[str], cats: list[str],
                 args: list[dict[str, Any]]) -> None:
        """Add the tags of ``rows`` (positions) to their ``args`` in place."""
        classes, rank_of = self.classes, self.rank_of
        for name, cat, a in zip(names, cats, args, strict=True):
            if cat.lower() != "kernel":
                continue
            info = classes.get(name)
            if info is None:
                continue
            a["class"], a["family"] = info[0], info[1]
            if info[2]:
                a["detail"] = info[2]
            if name in rank_of:
                a["top_kernel"] = rank_of[name]
        for at, tags in self.parts:
            mine = at[rows]
            tagged = np.flatnonzero(mine >= 0)
            for k, i in zip(tagged.tolist(), mine[tagged].tolist(), strict=True):
                a = args[k]
                for tag in tags:
                    if tag.present[i]:
                        a[tag.key] = tag.items[i]

    def columns(self, rows: np.ndarray, names: list[str], cats: list[str]
                ) -> list[ArgColumn]:
        """The tags of ``rows`` (positions) as columns over them, in the order
        :meth:`__call__` adds them to a row's dict (a row without a column's value has
        no such key)."""
        name_at, uniq = pd.factorize(objects(names))
        cat_at, cat_uniq = pd.factorize(objects(cats))
        kernel = np.asarray([str(c).lower() == "kernel" for c in cat_uniq.tolist()]
                            + [False], dtype=bool)[cat_at]  # (-1: a missing cat)
        info = [self.classes.get(u) for u in uniq.tolist()]
        known = np.asarray([i is not None for i in info] + [False], dtype=bool)
        k = kernel & known[name_at]
        got = [i if i is not None else ("", "", "") for i in info] + [("", "", "")]
        top = np.asarray([self.rank_of.get(u, 0) for u in uniq.tolist()] + [0],
                         dtype=np.int64)[name_at]
        detail = np.asarray([bool(i[2]) for i in got], dtype=bool)[name_at]
        out = [column("class", objects([i[0] for i in got])[name_at], k),
               column("family", objects([i[1] for i in got])[name_at], k),
               column("detail", objects([i[2] for i in got])[name_at], k & detail),
               column("top_kernel", top, k & (top > 0))]
        for at, tags in self.parts:
            mine = at[rows]
            has = mine >= 0
            i = np.where(has, mine, 0)
            out += [column(t.key, t.values[i], has & t.present[i]) for t in tags]
        return out


def path_parts(trace: Trace, ann: Annotations
               ) -> tuple[list[SliceTable], list[dict[str, Any]]]:
    """The critical-path tracks (tables) and their names and flow arrows (dicts), with
    flow ids above the trace's own."""
    fl = trace.flows
    base = max([int(fl["id"].max()) if len(fl) else 0,
                int(trace.events["corr"].max()) if len(trace.events) else 0, 0]) + 1
    tables: list[SliceTable] = []
    ev: list[dict[str, Any]] = []
    for track in ann.path:
        table, events = chrome_parts(track, flow_id_base=base)
        tables.append(table)
        ev += events
        base += len(track.flows)
    return tables, ev


def annotated_source(trace: Trace, ann: Annotations, drawn: ChromeSource | None = None
                     ) -> ChromeSource:
    """The trace as a Chrome document with the analysis drawn on it, its rows' events (and
    the analysis's slices, held as columns) built a batch at a time as they are written
    (``render.document.write_document``). ``drawn``: :func:`source_but_path` of the same
    analysis, made before its path was known; the path is added to it."""
    if drawn is None:
        drawn = source_but_path(trace, ann)
    drawn.add(*path_parts(trace, ann))
    return drawn


def source_but_path(trace: Trace, ann: Annotations) -> ChromeSource:
    """:func:`annotated_source` but for the critical path (``ann.path`` is not read): what
    ``annotate`` builds while the path is worked out on another core."""
    from traceforge.render.chrome_json import ChromeSource

    tables, ev = annotation_parts(trace, ann)
    return ChromeSource(trace, ev, tags=RowTags(trace, ann), tables=tables)


def annotated_document(trace: Trace, ann: Annotations) -> dict[str, Any]:
    """The trace as a Chrome document with the analysis drawn on it, as one dict."""
    return annotated_source(trace, ann).document()
