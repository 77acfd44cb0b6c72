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

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceforge.model import Trace
from traceforge.render.critical_path import chrome_events
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


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """``df.to_dict("records")`` (the same values), from column lists."""
    cols = [str(c) for c in df.columns]
    return [dict(zip(cols, row, strict=True))
            for row in zip(*(df[c].tolist() for c in df.columns), strict=True)]


def annotation_events(trace: Trace, ann: Annotations) -> list[dict[str, Any]]:
    """The extra Chrome events: idle-gap slices, step windows and instants, top-N kernel
    slices and overlap counters, on their own process named for the rank."""
    pid = ANALYSIS_PID + ann.rank
    ev: list[dict[str, Any]] = _meta(pid, None, f"traceforge analysis (rank {ann.rank})", -1)
    gaps = ann.gaps
    for cause, tid in CAUSE_TIDS.items():
        ev += _meta(pid, tid, f"idle: {cause}", tid)
    for g in _records(gaps):
        tid = CAUSE_TIDS.get(str(g["cause"]), CAUSE_TIDS["other"])
        args = {"cause": str(g["cause"]), "gap_us": int(g["dur"]) / 1e3, "device": int(g["device"]),
                "step": int(g["step"])}
        for k in ("next_name", "launch_name", "cpu_op", "annotation"):
            if g.get(k):
                args[k] = str(g[k])
        ev.append({"ph": "X", "cat": CAT, "name": str(g["cause"]), "pid": pid, "tid": tid,
                   "ts": _us(int(g["ts"])), "dur": _us(int(g["dur"])), "args": args})
    ev += _meta(pid, STEPS_TID, "GPU step windows", STEPS_TID)
    for w in ann.windows.to_dict("records"):
        lo, hi, step = int(w["ts"]), int(w["end"]), int(w["step"])
        ev.append({"ph": "X", "cat": CAT, "name": f"step {step}", "pid": pid, "tid": STEPS_TID,
                   "ts": _us(lo), "dur": _us(hi - lo), "args": {"step": step}})
        ev.append({"ph": "i", "s": "g", "cat": CAT, "name": f"step {step} begins (GPU)",
                   "pid": pid, "tid": STEPS_TID, "ts": _us(lo)})
    ev += _meta(pid, TOP_TID, f"top {len(ann.top)} kernels by GPU time", TOP_TID)
    rank_of = {n: i + 1 for i, n in enumerate(ann.top)}
    kern = trace.kernels()
    kern = kern[kern["name"].astype(str).isin(rank_of)]
    for name, ts, dur in zip(kern["name"].astype(str), kern["ts"].tolist(),
                             kern["dur"].tolist(), strict=True):
        short = name if len(name) < 80 else name[:77] + "..."
        ev.append({"ph": "X", "cat": CAT, "name": f"#{rank_of[name]} {short}", "pid": pid,
                   "tid": TOP_TID, "ts": _us(int(ts)), "dur": _us(int(dur)),
                   "args": {"top_kernel": rank_of[name], "kernel": name}})
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
    return ev


#: Roofline columns of ``Annotations.rates`` -> the kernel arg they become, and its decimals.
RATE_ARGS: dict[str, tuple[str, int]] = {
    "tflops_per_s": ("achieved_tflops_per_s", 3), "tb_per_s": ("achieved_tb_per_s", 4),
    "intensity": ("flop_per_byte", 2), "pct_of_bound": ("pct_of_bound", 2),
}
#: Columns of ``Annotations.comm`` -> decimals of the arg (0: an integer).
COMM_ARGS = {"msg_bytes": 0, "algbw_gbps": 3, "busbw_gbps": 3, "pct_of_ceiling": 2}
#: Profiled counters written as integers (the others with two decimals).
_INT_COUNTERS = ("launch", "duration_ns", "dram_bytes", "flop")


def _number(v: float, digits: int) -> int | float:
    return int(v) if digits == 0 else round(v, digits)


def _rate_args(rates: pd.DataFrame) -> Callable[[int], dict[str, Any]]:
    """Row i of ``Annotations.rates`` -> its kernel's roofline args."""
    cols = {k: rates[k].to_numpy() for k in (*RATE_ARGS, "bound", "dtype")}

    def args(i: int) -> dict[str, Any]:
        out: dict[str, Any] = {key: round(v, digits) for col, (key, digits)
                               in RATE_ARGS.items() if not math.isnan(v := float(cols[col][i]))}
        if cols["bound"][i]:
            out["bound"] = str(cols["bound"][i])
            out["roofline_dtype"] = str(cols["dtype"][i])
        return out
    return args


def _comm_args(c: pd.DataFrame) -> Callable[[int], dict[str, Any]]:
    """Row i of ``Annotations.comm`` -> its collective's kind, bytes and bandwidths
    (GB/s, nccl-tests on its own kernel time) and % of the link ceiling."""
    kind = c["kind"].astype(str).to_numpy()
    cols = {k: c[k].to_numpy(dtype=float) for k in COMM_ARGS}

    def args(i: int) -> dict[str, Any]:
        out: dict[str, Any] = {"collective_kind": str(kind[i])}
        out.update((k, _number(v, d)) for k, d in COMM_ARGS.items()
                   if not math.isnan(v := float(cols[k][i])))
        return out
    return args


def _counter_args(c: pd.DataFrame) -> Callable[[int], dict[str, Any]]:
    """Row i of ``Annotations.counters`` -> its kernel's profiled counters (``ncu_*``)."""
    cols = {k: c[k].to_numpy(dtype=float) for k in COUNTER_ARGS if k in c.columns}

    def args(i: int) -> dict[str, Any]:
        return {f"ncu_{k}": _number(v, 0 if k in _INT_COUNTERS else 2)
                for k, arr in cols.items() if not math.isnan(v := float(arr[i]))}
    return args


class RowTags:
    """The args the analysis adds to the trace's own events (``tags`` of a
    :class:`~traceforge.render.chrome_json.ChromeSource`): every kernel's
    ``class``/``family``/``detail`` (and ``top_kernel`` when among the top N), then per
    row its roofline rates, its collective's bandwidths and its profiled counters."""

    def __init__(self, trace: Trace, ann: Annotations) -> None:
        self.classes = ann.kernel_classes
        self.rank_of = {n: i + 1 for i, n in enumerate(ann.top)}
        n = len(trace.events)
        # Per table: which of its rows tags each trace row (-1: none), and that row's args.
        self.parts: list[tuple[np.ndarray, Callable[[int], dict[str, Any]]]] = []
        for table, make in ((ann.rates, _rate_args), (ann.comm, _comm_args),
                            (ann.counters, _counter_args)):
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
        for at, make in self.parts:
            mine = at[rows]
            tagged = np.flatnonzero(mine >= 0)
            for k, i in zip(tagged.tolist(), mine[tagged].tolist(), strict=True):
                if got := make(i):
                    args[k].update(got)


def path_events(trace: Trace, ann: Annotations) -> list[dict[str, Any]]:
    """The critical-path tracks and flow arrows, with flow ids above the trace's own."""
    fl = trace.flows
    base = max([int(fl["id"].max()) if len(fl) else 0,
                int(trace.events["corr"].max()) if len(trace.events) else 0, 0]) + 1
    ev: list[dict[str, Any]] = []
    for track in ann.path:
        ev += chrome_events(track, flow_id_base=base)
        base += len(track.flows)
    return ev


def annotated_source(trace: Trace, ann: Annotations) -> ChromeSource:
    """The trace as a Chrome document with the analysis drawn on it, its rows' events built
    a batch at a time as they are written (``render.document.write_document``)."""
    from traceforge.render.chrome_json import ChromeSource

    return ChromeSource(trace, [*annotation_events(trace, ann), *path_events(trace, ann)],
                        tags=RowTags(trace, ann))


def annotated_document(trace: Trace, ann: Annotations) -> dict[str, Any]:
    """The trace as a Chrome document with the analysis drawn on it, as one dict."""
    return annotated_source(trace, ann).document()
