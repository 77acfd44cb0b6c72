"""A path as named pieces of time: its edges, host edges split back into the ranges
they ran in, labelled with kind, name, category and track (:data:`SEGMENT_COLUMNS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from traceforge.analyzers.critical_path.edges import (
    COLLECTIVE,
    END,
    EVENT,
    HOST,
    LAUNCH,
    START,
    STREAM,
    SYNC_SPAN,
    SYNC_WAIT,
    WORK,
)
from traceforge.analyzers.critical_path.labels import Labels, run_labels
from traceforge.analyzers.critical_path.run_graph import RunGraph
from traceforge.analyzers.critical_path.step import StepGraph, edge_index

#: Kinds of path segments.
SEGMENT_KINDS = ("cpu_op", "runtime", "kernel", "memcpy", "memset", "sync", "idle")
#: Columns of :attr:`CriticalPath.segments` (ts/dur: ns in the segment's rank's clock).
SEGMENT_COLUMNS = ("step", "for_rank", "order", "rank", "kind", "name", "category", "ts",
                   "dur", "row", "pid", "tid")
#: Categories besides the kernel classes of :mod:`traceforge.analyzers.names.kernel_names`.
HOST_CATEGORIES = ("cpu op", "runtime", "launch overhead", "sync wait", "idle")


def _expand(run: RunGraph, sp: StepGraph, e: np.ndarray) -> tuple[np.ndarray, ...]:
    """The path's edges ``e`` with each host edge split back into its chain pieces, each
    with the range its time belongs to: v, w, type, ref, rank index."""
    v, w, t, ref, ref2, erk = (a[e] for a in (sp.v, sp.w, sp.t, sp.ref, sp.ref2, sp.erank))
    host = t == HOST
    n = np.where(host, ref2 - ref, 1)
    pos = np.repeat(np.arange(len(e)), n)
    k = np.arange(len(pos)) - np.repeat(np.cumsum(n) - n, n)
    v, w, t, ref, erk = v[pos], w[pos], t[pos], ref[pos], erk[pos]
    piece = ref + k
    for ri, r in enumerate(run.ranks):
        m = np.flatnonzero((t == HOST) & (erk == ri))
        if len(m):
            p = piece[m]
            v[m] = r.chain.v[p] + run.base[ri]
            ref[m] = r.chain.ref[p]
            # Whole pieces: those before the window start are cut off by the caller.
            w[m] = r.chain.w[p]
    return v, w, t, ref, erk


@dataclass(eq=False)
class Pieces:
    """A path's pieces as arrays: labels as codes into :attr:`Labels.values` (what a
    worker hands back; :func:`pieces_frame` makes the table)."""

    step: int
    for_rank: int
    rank: np.ndarray
    kind: np.ndarray
    name: np.ndarray
    category: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    row: np.ndarray
    pid: np.ndarray
    tid: np.ndarray


#: Path edges labelled at a time: a batch's work arrays are some 40 of its length each,
#: so a 10M-edge path is labelled in bounded memory (the pieces it ends as are all kept).
BATCH = 1 << 20


def path_pieces(run: RunGraph, lab: Labels, sp: StepGraph, path: Sequence[int] | np.ndarray,
                ri_end: int) -> Pieces:
    """The path's edges as named pieces of time, from rank ``ri_end``'s window start."""
    return edge_pieces(run, lab, sp, path_edges(sp, path), ri_end)


def path_edges(sp: StepGraph, path: Sequence[int] | np.ndarray) -> np.ndarray:
    """The rows in the step's edge arrays of a path's edges that take time, in order."""
    e = edge_index(sp, path)
    e = e[e >= 0]
    return np.asarray(e[sp.w[e] > 0])


def edge_pieces(run: RunGraph, lab: Labels, sp: StepGraph, e: np.ndarray,
                ri_end: int) -> Pieces:
    """:func:`path_pieces` of a path's edges (:func:`path_edges`): labelled a batch at a
    time, reading only the step's edge arrays (not its order or edge lookup)."""
    parts = [_merged(_labelled(run, lab, sp, e[i:i + BATCH], ri_end), lab)
             for i in range(0, max(len(e), 1), BATCH)]
    return Pieces(sp.step, run.ranks[ri_end].rank, *_joined(parts, lab))


def _labelled(run: RunGraph, lab: Labels, sp: StepGraph, e: np.ndarray, ri_end: int
              ) -> list[np.ndarray]:
    """Path edges ``e`` (in path order) as pieces: rank, kind, name, category, ts, dur,
    row, pid, tid."""
    v, w, t, ref, erk = _expand(run, sp, e)
    vt = np.where(v >= 0, run.node_ts[np.clip(v, 0, None)], sp.w1[np.clip(-2 - v, 0, None)])
    # What lies before this rank's window start belongs to its previous step.
    start = np.maximum(vt - w, sp.w0[ri_end])
    keep = vt > start
    v, w, t, ref, erk, vt, start = (a[keep] for a in (v, w, t, ref, erk, vt, start))
    w = vt - start
    n = len(v)
    fx = lab.fixed
    kind = np.full(n, fx["idle"], dtype=np.int64)
    name = np.full(n, fx[""], dtype=np.int64)
    cat = np.full(n, fx["idle"], dtype=np.int64)
    row = np.full(n, -1, dtype=np.int64)
    pid = np.full(n, -1, dtype=np.int64)
    tid = np.full(n, -1, dtype=np.int64)
    rank = np.zeros(n, dtype=np.int64)
    ts = np.zeros(n, dtype=np.int64)
    for ri, r in enumerate(run.ranks):
        m = np.flatnonzero(erk == ri)
        if not len(m):
            continue
        lb = lab.ranks[ri]
        rank[m] = r.rank
        ts[m] = start[m] - run.offset[ri]
        nh, na = r.n_host, len(r.acts)
        local = np.where(v[m] >= 0, v[m] - run.base[ri], -1)
        on_host = (local >= 0) & (local < 2 * nh)
        hv = np.clip(local // 2, 0, max(nh - 1, 0))
        av = np.clip((local - 2 * nh) // 2, 0, max(na - 1, 0))
        # The track: the host thread of a host node, else the activity's stream.
        if nh:
            pid[m] = np.where(on_host, lb.h_pid[hv], -1)
            tid[m] = np.where(on_host, lb.h_tid[hv], -1)
        if na:
            on_gpu = local >= 2 * nh
            pid[m] = np.where(on_gpu, r.act_pid[av], pid[m])
            tid[m] = np.where(on_gpu, lb.a_stream[av], tid[m])
        tm = t[m]
        host_edge = np.isin(tm, (HOST, SYNC_SPAN, SYNC_WAIT))
        if host_edge.any() and nh:
            k = m[host_edge]
            rf = np.where(tm[host_edge] == SYNC_WAIT, hv[host_edge], ref[k])
            has = rf >= 0
            hr = np.clip(rf, 0, nh - 1)
            hs, api = lb.h_sync[hr], lb.h_api[hr]
            row[k] = np.where(has, lb.h_row[hr], -1)
            kind[k] = np.select([~has, hs, api], [fx["idle"], fx["sync"], fx["runtime"]],
                                fx["cpu_op"])
            name[k] = np.where(has, lb.h_name[hr], fx["host idle"])
            cat[k] = np.select([~has, hs, lb.h_launch[hr], api],
                               [fx["idle"], fx["sync wait"], fx["launch overhead"],
                                fx["runtime"]], fx["cpu op"])
        name[m[(tm == START) | (tm == END)]] = fx["nothing recorded"]
        gpu = ~host_edge & (tm != START) & (tm != END)
        if not gpu.any() or not na:
            continue
        k = m[gpu]
        ar = np.clip(ref[k], 0, na - 1)
        tk = tm[gpu]
        work = np.isin(tk, (WORK, COLLECTIVE))
        kind[k] = np.select([work, tk == LAUNCH, tk == EVENT],
                            [lb.a_kind[ar], fx["runtime"], fx["sync"]], fx["idle"])
        name[k] = np.select([work, tk == LAUNCH, tk == EVENT, tk == STREAM],
                            [lb.a_name[ar], lb.a_lname[ar], fx["stream wait"],
                             fx["gpu idle"]], fx["graph dependency"])
        cat[k] = np.select([work, tk == LAUNCH, tk == EVENT],
                           [lb.a_cls[ar], fx["launch overhead"], fx["sync wait"]], fx["idle"])
        row[k] = np.select([work, tk == LAUNCH], [lb.a_row[ar], lb.a_lrow[ar]], -1)
        # A launch delay runs from the call, on the host thread, to the activity's start.
        lk = k[tk == LAUNCH]
        if len(lk) and nh:
            la = np.clip(ref[lk], 0, na - 1)
            pid[lk] = lb.a_lpid[la]
            tid[lk] = lb.a_ltid[la]
    return [rank, kind, name, cat, ts, w, row, pid, tid]


def _merged(cols: list[np.ndarray], lab: Labels) -> list[np.ndarray]:
    """Consecutive pieces of one thing (a parent op around its children's gaps) as one."""
    rank, kind, name, cat, ts, w, row, pid, tid = cols
    n = len(ts)
    if n < 2:
        return cols
    same = np.ones(n, dtype=bool)
    same[0] = False
    for c in (rank, row, pid, tid):
        same[1:] &= c[1:] == c[:-1]
    for c in (kind, name, cat):
        same[1:] &= (c[1:] == c[:-1]) & ~lab.never_equal[c[1:]]
    same[1:] &= ts[1:] == (ts + w)[:-1]
    first = np.flatnonzero(~same)
    dur = np.add.reduceat(w, first)
    return [c[first] for c in cols[:5]] + [dur] + [c[first] for c in cols[6:]]


def _joined(parts: list[list[np.ndarray]], lab: Labels) -> list[np.ndarray]:
    """Batches of merged pieces as one, merged across the batches' seams as within them:
    a batch's first piece that continues the last piece before it is added to it."""
    last: list[np.ndarray] | None = None
    for k, p in enumerate(parts):
        if not len(p[4]):
            continue
        if last is not None and _continues(last, p, lab):
            last[5][-1] += p[5][0]
            parts[k] = p = [c[1:] for c in p]
        if len(p[4]):
            last = p
    out = []
    for i in range(len(parts[0])):  # a column at a time: never two copies of all of them
        out.append(np.concatenate([p[i] for p in parts]))
        for p in parts:
            p[i] = np.zeros(0, dtype=p[i].dtype)  # (an empty view would keep the column)
    return out


def _continues(a: list[np.ndarray], b: list[np.ndarray], lab: Labels) -> bool:
    """Whether ``b``'s first piece continues ``a``'s last (:func:`_merged`'s rule)."""
    ends = [int(c[-1]) for c in a]
    starts = [int(c[0]) for c in b]
    return (all(ends[i] == starts[i] for i in (0, 6, 7, 8))
            and all(ends[i] == starts[i] and not lab.never_equal[starts[i]] for i in (1, 2, 3))
            and starts[4] == ends[4] + ends[5])


def pieces_frame(p: Pieces, lab: Labels) -> pd.DataFrame:
    """The path's pieces as a table (SEGMENT_COLUMNS), in path order."""
    out = pd.DataFrame({"step": p.step, "for_rank": p.for_rank, "rank": p.rank,
                        "kind": lab.values[p.kind], "name": lab.values[p.name],
                        "category": lab.values[p.category], "ts": p.ts, "dur": p.dur,
                        "row": p.row, "pid": p.pid, "tid": p.tid})
    out["order"] = np.arange(len(out), dtype=np.int64)
    return cast("pd.DataFrame", out[list(SEGMENT_COLUMNS)])


def path_segments(run: RunGraph, sp: StepGraph, path: Sequence[int] | np.ndarray, ri_end: int,
                  lab: Labels | None = None) -> pd.DataFrame:
    """The path's edges as named pieces of time, from rank ``ri_end``'s window start."""
    lab = lab if lab is not None else run_labels(run)
    return pieces_frame(path_pieces(run, lab, sp, path, ri_end), lab)
