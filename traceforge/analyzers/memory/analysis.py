"""``traceforge memory TRACE`` / ``tf.memory(trace)``: the allocator's events, analysed.

Definitions (one place; the report, annotate and the run tables use these):

* *allocated* on a device is the allocator's ``Total Allocated`` after each event. Traces
  that record only ``Bytes`` (Kineto 2021, nsys, rocprofv3) get the running sum of
  ``Bytes`` instead, which is the *growth since the window began* (memory allocated before
  the profiler started is not in it): ``totals`` says which, and every peak is labelled.
* *peak allocated*: the largest allocated value, at its first event; *reserved at the
  peak* minus the peak is memory the caching allocator holds but no tensor uses then
  (cache and fragmentation).
* *per step* (host step ranges, :mod:`traceforge.analyzers.timeline.steps`): allocated just before
  the step starts, its peak inside the step, the value at its last event, and the growth
  (end - start). Growth in every step of three or more is noted as a possible leak.
* *an allocation's op*: the innermost ``cpu_op`` on the allocating thread at the time (the
  same rule that gives kernels their op). An allocation is *live at the peak* when it was
  made at or before the peak event and freed after it (or never, in the window); its free
  is the next free of the same address on the same device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd

from traceforge.analyzers.timeline.stacks import innermost
from traceforge.analyzers.timeline.steps import host_steps
from traceforge.model import Tables, Trace, coded, pair_codes, strings

RECORDED = "recorded"
GROWTH = "growth"  # since the window began: see the module docstring
#: The one line for a trace without memory events.
NO_MEMORY = ("no memory events in this trace: `traceforge capture --memory` records them "
             "(torch.profiler profile_memory=True; nsys: --cuda-memory-usage=true)")
#: How many ops get a call stack (their largest allocation's).
STACK_OPS = 10


@dataclass(frozen=True)
class MemoryReport(Tables):
    """Tables of :func:`memory`; ``*_bytes`` are bytes, ``*_at_ns`` ns since the trace start."""

    devices: pd.DataFrame  # one row per device: peaks and when, counts
    steps: pd.DataFrame  # device, step: start, peak, end, growth
    ops: pd.DataFrame  # device, op: allocations, bytes, live at the peak, stack
    live: pd.DataFrame  # allocations live at each device's peak, largest first
    oom: pd.DataFrame  # out-of-memory events with the allocated/reserved totals
    oom_live: pd.DataFrame  # per OOM event: live memory by op at that moment
    source: str
    steps_from: str
    notes: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return self.devices.empty


def _labels(m: pd.DataFrame) -> pd.Categorical:
    """``cuda:0``, ``hip:1``, ``cpu``: one string per distinct (type, device), not per row
    (categories in sorted order, as the per-device tables list them)."""
    if m.empty:
        return pd.Categorical([])
    kinds, labels = coded(m["device_type"])
    dev = m["device"].to_numpy()
    codes, _ = pair_codes(kinds, dev)
    first = np.unique(codes, return_index=True)[1]
    names = np.array([str(labels[kinds[i]]).lower() + ("" if dev[i] < 0 else f":{dev[i]}")
                      for i in first.tolist()], dtype=object)
    uniq, inverse = np.unique(names, return_inverse=True)
    out: pd.Categorical = pd.Categorical.from_codes(
        np.asarray(inverse, dtype=np.int64)[codes], categories=pd.Index(uniq.astype(str)))
    return out


@dataclass(frozen=True)
class Prepared:
    """The memory table in time order with what every analysis needs per row."""

    m: pd.DataFrame  # the table, plus: label, allocated, reserved, op, op_row, op_code
    totals: dict[str, str]  # device label -> RECORDED or GROWTH
    notes: tuple[str, ...]
    op_names: np.ndarray  # op_code -> op name ("": none)


def prepare(trace: Trace, ops: bool = True) -> Prepared:
    """Allocated/reserved series per device and (``ops``) each event's op (module doc)."""
    m = _with_ops(trace) if ops else trace.memory()
    m = m.reset_index(drop=True)
    notes = list(m.attrs.get("notes", []))
    m = m.assign(label=_labels(m))
    alloc = m["allocated_bytes"].to_numpy().astype(np.float64)
    resv = m["reserved_bytes"].to_numpy().astype(np.float64)
    delta = m["delta_bytes"].to_numpy()
    oom = (m["event"] == "oom").to_numpy()
    totals: dict[str, str] = {}
    for lab, idx in m.groupby("label", sort=True, observed=True).indices.items():
        rec = bool((alloc[idx] >= 0).all())
        totals[str(lab)] = RECORDED if rec else GROWTH
        if not rec:
            alloc[idx] = np.cumsum(np.where(oom[idx], 0, delta[idx]))
        if not (resv[idx] >= 0).all() or str(lab) == "cpu":
            resv[idx] = np.nan  # not recorded; host memory has no reserve
    m["allocated"] = alloc.astype(np.int64)
    m["reserved"] = resv
    # Each event's op as a code into a few names (groupbys on ints), and as an object
    # column (not pandas' inferred Arrow strings, slow to convert per row).
    code, names = coded(m["op"]) if ops else (np.full(len(m), -1, np.int64),
                                               np.array([""], dtype=object))
    m["op_code"] = np.where(code < 0, len(names) - 1, code)  # coded: -1 is the last, ""
    m["op"] = pd.Series(names[m["op_code"].to_numpy()], index=m.index, dtype=object)
    if not ops:
        m["op_row"] = np.full(len(m), -1, np.int64)
    return Prepared(m, totals, tuple(notes), names)


def _with_ops(trace: Trace) -> pd.DataFrame:
    """The memory table with each event's op (``op``, ``op_row`` in the whole trace's row
    numbering). Computed once on the whole trace and kept with the memory table beside
    the cache entry (:meth:`~traceforge.formats.memory.MemorySource.extend`), so a warm
    run reads them instead of every op range; a trace without that source gets them
    from its own rows."""
    m = trace.memory()
    if "op" in m.columns and "op_row" in m.columns:
        return m
    # The reader's provider (formats.memory.MemorySource) keeps them; others have none.
    extend = getattr(trace.memory_provider, "extend", None)
    m = cast(pd.DataFrame, extend(_ops) if callable(extend) else m.assign(**_ops(trace, m)))
    trace.memo["memory"] = m
    return m


def _ops(trace: Trace, m: pd.DataFrame) -> dict[str, Any]:
    """The innermost cpu_op on each event's thread at its time ("" / -1: none)."""
    ops = trace.of_kind("cpu_op")
    names = np.full(len(m), "", dtype=object)
    rows = np.full(len(m), -1, dtype=np.int64)
    if not ops.empty and not m.empty:
        tc, qc = pair_codes(ops["pid"].to_numpy(), ops["tid"].to_numpy(),
                            m["pid"].to_numpy(), m["tid"].to_numpy())
        start = ops["ts"].to_numpy()
        hit = innermost(tc, start, start + ops["dur"].to_numpy(), qc, m["ts"].to_numpy())
        ok = hit >= 0
        cats = np.asarray(ops["name"].cat.categories.astype(str), dtype=object)
        names[ok] = cats[ops["name"].cat.codes.to_numpy()[hit[ok]]]
        rows[ok] = ops.index.to_numpy()[hit[ok]]
    op = pd.Categorical(names)  # a small dictionary in the file
    return {"op": op, "op_row": rows}


def free_positions(label: np.ndarray, addr: np.ndarray, event: np.ndarray) -> np.ndarray:
    """For each row (time order), the position of the free that ends it when it is an
    allocation: the next event at the same address on the same device, when that is a
    free; -1 when it is never freed in the window (and for rows that are no allocation)."""
    n = len(addr)
    out = np.full(n, -1, dtype=np.int64)
    if n < 2:
        return out
    lab_codes = pd.factorize(label)[0]
    order = np.lexsort((addr, lab_codes))  # stable: time order within an address
    a, b = order[:-1], order[1:]
    same = (lab_codes[a] == lab_codes[b]) & (addr[a] == addr[b]) & (addr[a] >= 0)
    pair = same & (event == "alloc")[a] & (event == "free")[b]
    out[a[pair]] = b[pair]
    return out


def memory(trace: Trace, *, top: int = 20) -> MemoryReport:
    """Where the memory goes in ``trace`` (see the module docstring); ``top`` rows of the
    op and live tables per device. A derived table of the trace: a later run on the
    cached trace reads it back instead of working it out again."""
    return trace.derived(f"memory|top={top}", lambda: _memory(trace, top))


def _memory(trace: Trace, top: int) -> MemoryReport:
    p = prepare(trace)
    m = p.m
    st = host_steps(trace)
    if m.empty:
        e = pd.DataFrame()
        return MemoryReport(e, e, e, e, e, e, "", st.source, (NO_MEMORY, *p.notes))
    label = m["label"].cat.codes.to_numpy()
    event = strings(m["event"])
    free_at = free_positions(label, m["addr"].to_numpy(), event)
    notes = list(p.notes)
    dev_rows, step_rows, op_frames, live_frames = [], [], [], []
    for lab, where in m.groupby("label", sort=True, observed=True).indices.items():
        idx = np.asarray(where, dtype=np.int64)
        d = m if len(idx) == len(m) else m.iloc[idx]  # one device: no copy
        dev_rows.append(_device_row(str(lab), d, event[idx], p.totals[str(lab)]))
        step_rows += _step_rows(str(lab), d, st.ranges)
        peak_pos = int(idx[int(np.argmax(d["allocated"].to_numpy()))])
        live = _live_at(m, idx, peak_pos, free_at, event)
        ops, lv = _op_table(trace, str(lab), d, live, top, p.op_names)
        op_frames.append(ops)
        live_frames.append(lv.head(top))
    steps = pd.DataFrame(step_rows)
    notes += _leak_notes(steps)
    for lab, how in p.totals.items():
        if how == GROWTH:
            notes.append(f"{lab}: the trace records allocation sizes but no totals: "
                         "'allocated' (totals: growth) is the growth since the window began")
    oom, oom_live = _oom(m, label, free_at, event)
    return MemoryReport(
        devices=pd.DataFrame(dev_rows), steps=steps,
        ops=pd.concat(op_frames, ignore_index=True) if op_frames else pd.DataFrame(),
        live=pd.concat(live_frames, ignore_index=True) if live_frames else pd.DataFrame(),
        oom=oom, oom_live=oom_live, source=str(m.attrs.get("source", "")),
        steps_from=st.source, notes=tuple(notes))


def _device_row(lab: str, d: pd.DataFrame, ev: np.ndarray, totals: str) -> dict[str, object]:
    alloc = d["allocated"].to_numpy()
    resv = d["reserved"].to_numpy()
    ts = d["ts"].to_numpy()
    i = int(np.argmax(alloc))
    has_resv = not np.isnan(resv).all()
    j = int(np.nanargmax(resv)) if has_resv else -1
    delta = d["delta_bytes"].to_numpy()
    at_peak = int(resv[i]) if has_resv and not np.isnan(resv[i]) else None
    return {
        "device": lab, "totals": totals,
        "peak_allocated_bytes": int(alloc[i]), "peak_allocated_at_ns": int(ts[i]),
        "reserved_at_peak_bytes": at_peak,
        "unused_at_peak_bytes": None if at_peak is None else at_peak - int(alloc[i]),
        "peak_reserved_bytes": int(resv[j]) if has_resv else None,
        "peak_reserved_at_ns": int(ts[j]) if has_resv else None,
        "allocs": int((ev == "alloc").sum()), "alloc_bytes": int(delta[ev == "alloc"].sum()),
        "frees": int((ev == "free").sum()), "ooms": int((ev == "oom").sum()),
        "end_allocated_bytes": int(alloc[-1]),
    }


def _step_rows(lab: str, d: pd.DataFrame, ranges: pd.DataFrame) -> list[dict[str, object]]:
    ts = d["ts"].to_numpy()
    alloc = d["allocated"].to_numpy()
    first = int(alloc[0] - (0 if d["event"].iloc[0] == "oom" else d["delta_bytes"].iloc[0]))
    a, b = ranges["ts"].to_numpy(np.int64), ranges["end"].to_numpy(np.int64)
    lo, hi = np.searchsorted(ts, a, side="left"), np.searchsorted(ts, b, side="left")
    n = np.maximum(hi - lo, 0)
    start = np.where(lo > 0, alloc[np.maximum(lo - 1, 0)], first)
    end = np.where(hi > 0, alloc[np.maximum(hi - 1, 0)], first)
    # Each step's largest value inside it and its first position, all steps at once.
    top = np.full(len(a), np.iinfo(np.int64).min, dtype=np.int64)
    at_pos = np.full(len(a), -1, dtype=np.int64)
    if n.sum():
        steps = np.repeat(np.arange(len(a)), n)
        offsets = np.cumsum(n) - n
        pos = np.arange(int(n.sum())) - np.repeat(offsets, n) + np.repeat(lo, n)
        vals = alloc[pos]
        has = np.flatnonzero(n)
        top[has] = np.maximum.reduceat(vals, offsets[has])
        hit = vals == top[steps]
        got, where = np.unique(steps[hit], return_index=True)
        at_pos[got] = pos[hit][where]
    grows = (n > 0) & (top > start)
    peak = np.where(grows, top, start)
    at = np.where(grows, ts[np.maximum(at_pos, 0)], a)
    return [{"device": lab, "step": int(st), "start_bytes": int(s0), "peak_bytes": int(pk),
             "peak_at_ns": int(t), "end_bytes": int(e), "growth_bytes": int(e - s0),
             "events": int(k)}
            for st, s0, pk, t, e, k in zip(ranges["step"].tolist(), start.tolist(),
                                            peak.tolist(), at.tolist(), end.tolist(),
                                            n.tolist(), strict=True)]


def _leak_notes(steps: pd.DataFrame) -> list[str]:
    out: list[str] = []
    if steps.empty:
        return out
    for lab, g in steps.groupby("device", sort=True):
        grow = g["growth_bytes"].to_numpy()
        if len(grow) >= 3 and (grow > 0).all():
            out.append(f"{lab}: allocated memory grows in every step ({len(grow)} steps, "
                       f"+{int(grow.mean()):,} bytes per step on average): a leak, or "
                       "tensors kept across steps")
    return out


def _live_at(m: pd.DataFrame, idx: np.ndarray, pos: int, free_at: np.ndarray,
             event: np.ndarray) -> pd.DataFrame:
    """Allocations of one device (rows ``idx``) live at row ``pos``."""
    rows = idx[(idx <= pos) & (event[idx] == "alloc")]
    f = free_at[rows]
    rows = rows[(f < 0) | (f > pos)]
    return cast(pd.DataFrame, m.iloc[rows])


def _stacks(trace: Trace, d: pd.DataFrame) -> list[str]:
    """The Python frames around each row's time on its thread, outermost first ("" where
    none were recorded); else the ``Call stack`` arg of its op (older traces)."""
    py = trace.of_kind("python")
    out = []
    legacy = bool(d.attrs.get("call_stacks")) or bool(
        trace.memory().attrs.get("call_stacks"))
    pp, pt, ps = (py[c].to_numpy() for c in ("pid", "tid", "ts"))
    pe = ps + py["dur"].to_numpy()
    for pid, tid, ts, op_row in zip(d["pid"].tolist(), d["tid"].tolist(), d["ts"].tolist(),
                                    d["op_row"].tolist(), strict=True):
        text = ""
        if len(pp):
            sel = np.flatnonzero((pp == pid) & (pt == tid) & (ps <= ts) & (pe > ts))
            sel = sel[np.argsort(ps[sel], kind="stable")]
            text = " > ".join(_frames([str(x) for x in py["name"].to_numpy()[sel]]))
        if not text and legacy and op_row >= 0:  # op_row: the whole trace's numbering
            cs = _whole(trace).args([int(op_row)])[0].get("Call stack", "")
            text = " > ".join(_frames(str(cs).split(";")[::-1])) if cs else ""
        out.append(text)
    return out


def _whole(trace: Trace) -> Trace:
    """The trace with every row (``op_row`` numbers rows there): the memory source's,
    which reads it again when this one kept only some kinds; else the trace itself."""
    whole = getattr(trace.memory_provider, "whole", None)
    return cast(Trace, whole()) if callable(whole) else trace


def _frames(names: list[str], n: int = 3) -> list[str]:
    """The innermost ``n`` frames that say where: module names and source lines, without
    ``nn.Module.__call__`` plumbing and builtins."""
    keep = [x for x in names if "torch/nn/modules/module.py" not in x
            and not x.startswith("<built-in")]
    # A source frame "path/file.py(12): fn" keeps its file name.
    return [x.rsplit("/", 1)[-1] if x.find("(") > x.rfind("/") >= 0 else x for x in keep[-n:]]


def _per_code(code: np.ndarray, values: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct code (ascending): the code, count, sum and largest of ``values``, and
    the position of its largest (the earliest of equals)."""
    n = len(code)
    order = np.lexsort((np.arange(n), -values, code))
    sc = code[order]
    starts = np.flatnonzero(np.r_[True, sc[1:] != sc[:-1]]) if n else np.zeros(0, np.int64)
    sv = values[order]
    total = np.add.reduceat(sv, starts) if n else np.zeros(0, np.int64)
    return sc[starts], np.diff(np.r_[starts, n]), total, sv[starts], order[starts]


def _op_table(trace: Trace, lab: str, d: pd.DataFrame, live: pd.DataFrame, top: int,
              names: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame]:
    allocs = d.loc[(d["event"] == "alloc").to_numpy(),
                   ["op_code", "delta_bytes", "ts", "pid", "tid", "op_row"]]
    used, count, total, largest, first = _per_code(allocs["op_code"].to_numpy(),
                                                   allocs["delta_bytes"].to_numpy())
    lv_code, lv_count, lv_total, _, _ = _per_code(live["op_code"].to_numpy(),
                                                  live["delta_bytes"].to_numpy())
    live_n = np.zeros(len(names), np.int64)
    live_b = np.zeros(len(names), np.int64)
    live_n[lv_code], live_b[lv_code] = lv_count, lv_total
    ops = pd.DataFrame({"device": lab, "op": names[used].astype(str), "allocs": count,
                        "alloc_bytes": total, "largest_bytes": largest,
                        "live_at_peak_allocs": live_n[used],
                        "live_at_peak_bytes": live_b[used], "code": used, "first": first})
    ops = ops.sort_values(["alloc_bytes", "op"], ascending=[False, True],
                          kind="stable").head(top).reset_index(drop=True)
    # The stack of each top op's largest allocation.
    head = ops.head(STACK_OPS)
    sel = allocs.iloc[head["first"].to_numpy()].reset_index(drop=True)
    stack = dict(zip(head["op"], _stacks(trace, sel), strict=True))
    ops["stack"] = ops["op"].map(stack).fillna("")
    ops = ops.drop(columns=["code", "first"])
    ops.loc[ops["op"] == "", "op"] = "(no op)"
    shown = np.where(names == "", "(no op)", names).astype(object)
    live_tab = pd.DataFrame({
        "device": lab, "size_bytes": live["delta_bytes"].to_numpy(),
        "alloc_at_ns": live["ts"].to_numpy(),
        "op": shown[live["op_code"].to_numpy()], "addr": live["addr"].to_numpy()})
    live_tab = live_tab.sort_values(["size_bytes", "alloc_at_ns"], ascending=[False, True],
                                    kind="stable").reset_index(drop=True)
    return ops, live_tab


def _oom(m: pd.DataFrame, label: np.ndarray, free_at: np.ndarray, event: np.ndarray
         ) -> tuple[pd.DataFrame, pd.DataFrame]:
    pos = np.flatnonzero(event == "oom")
    rows, live_rows = [], []
    for k, p in enumerate(pos.tolist()):
        r = m.iloc[p]
        rows.append({"oom": k, "device": str(r["label"]), "at_ns": int(r["ts"]),
                     "request_bytes": int(r["delta_bytes"]),
                     "allocated_bytes": int(r["allocated_bytes"]),
                     "reserved_bytes": int(r["reserved_bytes"]), "op": r["op"] or "(no op)"})
        idx = np.flatnonzero(label == label[p])
        live = _live_at(m, idx, p, free_at, event)
        for op, g in live.groupby("op", sort=False)["delta_bytes"]:
            live_rows.append({"oom": k, "op": str(op) or "(no op)", "allocs": len(g),
                              "live_bytes": int(g.sum())})
    oom_live = pd.DataFrame(live_rows)
    if not oom_live.empty:
        oom_live = oom_live.sort_values(["oom", "live_bytes"], ascending=[True, False],
                                        kind="stable").reset_index(drop=True)
    return pd.DataFrame(rows), cast(pd.DataFrame, oom_live)


def series(trace: Trace, max_points: int = 4000) -> pd.DataFrame:
    """Allocated and reserved over time per device (``device, ts, allocated_bytes,
    reserved_bytes``; reserved NaN where not recorded), for charts and counter tracks.
    Longer series keep each stretch's largest value, so the peak is always drawn."""
    p = prepare(trace, ops=False)
    m = p.m
    parts = []
    for lab, idx in m.groupby("label", sort=True, observed=True).indices.items():
        d = m.iloc[idx]
        keep = np.arange(len(d))
        if len(d) > max_points:
            width = -(-len(d) // max_points)
            a = d["allocated"].to_numpy()
            keep = np.array([i + int(np.argmax(a[i:i + width]))
                             for i in range(0, len(d), width)], dtype=np.int64)
        s = d.iloc[keep]
        parts.append(pd.DataFrame({"device": str(lab), "totals": p.totals[str(lab)],
                                   "ts": s["ts"].to_numpy(),
                                   "allocated_bytes": s["allocated"].to_numpy(),
                                   "reserved_bytes": s["reserved"].to_numpy()}))
    cols = ["device", "totals", "ts", "allocated_bytes", "reserved_bytes"]
    return cast(pd.DataFrame, pd.concat(parts, ignore_index=True) if parts
                else pd.DataFrame(columns=cols))


#: Columns a run table shows beside its step time (:func:`peak_columns`).
PEAK_COLUMNS = ("peak_memory_bytes", "peak_memory_from")


def peak_columns(traces: Sequence[Trace], summary_peak_bytes: float | None = None
                 ) -> dict[str, object]:
    """:func:`run_peak_memory` as the two columns of :data:`PEAK_COLUMNS` (NaN, "" when
    unknown): the one place diff, compare, scaling and the capture table take it from."""
    peak, source = run_peak_memory(traces, summary_peak_bytes)
    return {"peak_memory_bytes": float("nan") if peak is None else peak,
            "peak_memory_from": source}


def run_peak_memory(traces: Sequence[Trace], summary_peak_bytes: float | None = None
                    ) -> tuple[float | None, str]:
    """A run's peak memory and where it comes from, for the run tables (diff, compare,
    scaling, capture): the largest peak allocated on any GPU of its traces' memory
    events, else the capture summary's ``torch.cuda.max_memory_allocated`` peak, else
    unknown. Returns ``(bytes or None, source)``; source is ``trace``, ``trace (growth)``
    (totals not recorded), ``capture summary`` or ``""``."""
    best: float | None = None
    growth = False
    for t in traces:
        p = prepare(t, ops=False)
        gpu = p.m[p.m["device"] >= 0]
        for lab, g in gpu.groupby("label", sort=True, observed=True):
            v = float(g["allocated"].max())
            if best is None or v > best:
                best, growth = v, p.totals[str(lab)] == GROWTH
    if best is not None:
        return best, "trace (growth)" if growth else "trace"
    if summary_peak_bytes is not None:
        return float(summary_peak_bytes), "capture summary"
    return None, ""
