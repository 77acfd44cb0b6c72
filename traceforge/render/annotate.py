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
from typing import Any

from traceforge.model import Trace
from traceforge.render.critical_path import chrome_events
from traceforge.report.annotations import COUNTER_ARGS, Annotations

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


def annotation_events(trace: Trace, ann: Annotations) -> list[dict[str, Any]]:
    """The extra Chrome events: idle-gap slices, step windows and instants, top-N kernel
    slices and overlap counters, on their own process named for the rank."""
    pid = ANALYSIS_PID + ann.rank
    ev: list[dict[str, Any]] = _meta(pid, None, f"traceforge analysis (rank {ann.rank})", -1)
    gaps = ann.gaps
    for cause, tid in CAUSE_TIDS.items():
        ev += _meta(pid, tid, f"idle: {cause}", tid)
    for g in gaps.to_dict("records"):
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


def tag_kernels(doc: dict[str, Any], ann: Annotations) -> None:
    """Add ``class``/``family``/``detail`` (and ``top_kernel``) args to every kernel event
    of ``doc`` in place; ``doc`` is the fresh document this module is building."""
    rank_of = {n: i + 1 for i, n in enumerate(ann.top)}
    for e in doc.get("traceEvents", []):
        if e.get("ph") != "X" or str(e.get("cat", "")).lower() != "kernel":
            continue
        info = ann.kernel_classes.get(str(e.get("name")))
        if info is None:
            continue
        args = e.setdefault("args", {})
        args["class"], args["family"] = info[0], info[1]
        if info[2]:
            args["detail"] = info[2]
        if e["name"] in rank_of:
            args["top_kernel"] = rank_of[e["name"]]


#: Roofline columns of ``Annotations.rates`` -> the kernel arg they become, and its decimals.
RATE_ARGS: dict[str, tuple[str, int]] = {
    "tflops_per_s": ("achieved_tflops_per_s", 3), "tb_per_s": ("achieved_tb_per_s", 4),
    "intensity": ("flop_per_byte", 2), "pct_of_bound": ("pct_of_bound", 2),
}


def tag_rates(doc: dict[str, Any], trace: Trace, ann: Annotations) -> None:
    """Add each GPU activity's roofline rates to its event of ``doc`` (built by
    ``trace_to_chrome``, whose first events are the trace's rows in order), in place."""
    rates = ann.rates
    if rates.empty:
        return
    events = doc.get("traceEvents", [])
    pos = trace.events.index.get_indexer(rates.index)
    names = trace.events["name"].astype(str).to_numpy()
    cols = {k: rates[k].to_numpy() for k in (*RATE_ARGS, "bound", "dtype")}
    for i, p in enumerate(pos.tolist()):
        if p < 0 or p >= len(events) or events[p].get("name") != names[p]:
            continue
        args: dict[str, Any] = {}
        for col, (key, digits) in RATE_ARGS.items():
            v = float(cols[col][i])
            if not math.isnan(v):
                args[key] = round(v, digits)
        if cols["bound"][i]:
            args["bound"] = str(cols["bound"][i])
            args["roofline_dtype"] = str(cols["dtype"][i])
        if args:
            events[p].setdefault("args", {}).update(args)


def tag_comm(doc: dict[str, Any], trace: Trace, ann: Annotations) -> None:
    """Add each collective kernel's kind, message bytes, algbw/busbw (GB/s, nccl-tests on
    its own kernel time) and % of the link ceiling to its event of ``doc``, in place."""
    c = ann.comm
    if c.empty:
        return
    events = doc.get("traceEvents", [])
    pos = trace.events.index.get_indexer(c.index)
    names = trace.events["name"].astype(str).to_numpy()
    for rec, p in zip(c.to_dict("records"), pos.tolist(), strict=True):
        if p < 0 or p >= len(events) or events[p].get("name") != names[p]:
            continue
        args: dict[str, Any] = {"collective_kind": str(rec["kind"])}
        for key, digits in (("msg_bytes", 0), ("algbw_gbps", 3), ("busbw_gbps", 3),
                            ("pct_of_ceiling", 2)):
            v = float(rec[key])
            if not math.isnan(v):
                args[key] = int(v) if digits == 0 else round(v, digits)
        events[p].setdefault("args", {}).update(args)


def tag_counters(doc: dict[str, Any], trace: Trace, ann: Annotations) -> None:
    """Add each matched kernel's profiled counters (``ncu_sm_pct``, ``ncu_dram_bytes``,
    ...) to its event of ``doc`` (rows in trace order, as in :func:`tag_rates`), in place."""
    c = ann.counters
    if c.empty:
        return
    events = doc.get("traceEvents", [])
    pos = trace.events.index.get_indexer(c.index)
    names = trace.events["name"].astype(str).to_numpy()
    cols = {k: c[k].to_numpy(dtype=float) for k in COUNTER_ARGS if k in c.columns}
    for i, p in enumerate(pos.tolist()):
        if p < 0 or p >= len(events) or events[p].get("name") != names[p]:
            continue
        args: dict[str, Any] = {}
        for k, arr in cols.items():
            v = float(arr[i])
            if not math.isnan(v):
                args[f"ncu_{k}"] = int(v) if k in ("launch", "duration_ns", "dram_bytes",
                                                   "flop") else round(v, 2)
        events[p].setdefault("args", {}).update(args)


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


def annotated_document(trace: Trace, ann: Annotations) -> dict[str, Any]:
    """The trace as a Chrome document with the analysis drawn on it."""
    from traceforge.render.chrome_json import trace_to_chrome

    doc = trace_to_chrome(trace, [*annotation_events(trace, ann), *path_events(trace, ann)])
    tag_kernels(doc, ann)
    tag_rates(doc, trace, ann)
    tag_comm(doc, trace, ann)
    tag_counters(doc, trace, ann)
    return doc
