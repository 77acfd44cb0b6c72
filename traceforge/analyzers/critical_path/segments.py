"""A path as named pieces of time: its edges, host edges split back into the ranges
they ran in, labelled with kind, name, category and track (:data:`SEGMENT_COLUMNS`).
"""

from __future__ import annotations

from collections.abc import Sequence
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
from traceforge.analyzers.critical_path.run_graph import RunGraph
from traceforge.analyzers.critical_path.step import StepGraph, edge_index
from traceforge.analyzers.timeline.activity import LAUNCH_APIS

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


def path_segments(run: RunGraph, sp: StepGraph, path: Sequence[int], ri_end: int) -> pd.DataFrame:
    """The path's edges as named pieces of time, from rank ``ri_end``'s window start."""
    e = edge_index(sp, path)
    e = e[e >= 0]
    e = e[sp.w[e] > 0]
    v, w, t, ref, erk = _expand(run, sp, e)
    vt = np.where(v >= 0, run.node_ts[np.clip(v, 0, None)], sp.w1[np.clip(-2 - v, 0, None)])
    # What lies before this rank's window start belongs to its previous step.
    start = np.maximum(vt - w, sp.w0[ri_end])
    keep = vt > start
    v, w, t, ref, erk, vt, start = (a[keep] for a in (v, w, t, ref, erk, vt, start))
    w = vt - start
    n = len(v)
    kind = np.full(n, "idle", dtype=object)
    name = np.full(n, "", dtype=object)
    cat = np.full(n, "idle", dtype=object)
    row = np.full(n, -1, dtype=np.int64)
    pid = np.full(n, -1, dtype=np.int64)
    tid = np.full(n, -1, dtype=np.int64)
    rank = np.zeros(n, dtype=np.int64)
    ts = np.zeros(n, dtype=np.int64)
    for ri, r in enumerate(run.ranks):
        m = np.flatnonzero(erk == ri)
        if not len(m):
            continue
        rank[m] = r.rank
        ts[m] = start[m] - run.offset[ri]
        h, a, nh = r.host, r.acts, r.n_host
        local = np.where(v[m] >= 0, v[m] - run.base[ri], -1)
        on_host = (local >= 0) & (local < 2 * nh)
        hv = np.clip(local // 2, 0, max(nh - 1, 0))
        av = np.clip((local - 2 * nh) // 2, 0, max(len(a) - 1, 0))
        # The track: the host thread of a host node, else the activity's stream.
        if nh:
            pid[m] = np.where(on_host, h["pid"].to_numpy()[hv], -1)
            tid[m] = np.where(on_host, h["tid"].to_numpy()[hv], -1)
        if len(a):
            on_gpu = local >= 2 * nh
            pid[m] = np.where(on_gpu, r.act_pid[av], pid[m])
            tid[m] = np.where(on_gpu, a["stream"].to_numpy()[av], tid[m])
        tm = t[m]
        host_edge = np.isin(tm, (HOST, SYNC_SPAN, SYNC_WAIT))
        if host_edge.any() and nh:
            k = m[host_edge]
            rf = np.where(tm[host_edge] == SYNC_WAIT, hv[host_edge], ref[k])
            has = rf >= 0
            hr = np.clip(rf, 0, nh - 1)
            hk, hn = h["kind"].to_numpy()[hr], h["name"].to_numpy()[hr]
            hs = h["sync"].to_numpy()[hr]
            api = np.isin(hk, ("runtime", "driver"))
            launch = api & np.isin(hn, list(LAUNCH_APIS))
            row[k] = np.where(has, h["row"].to_numpy()[hr], -1)
            kind[k] = np.select([~has, hs != "", api], ["idle", "sync", "runtime"], "cpu_op")
            name[k] = np.where(has, hn, "host idle")
            cat[k] = np.select([~has, hs != "", launch, api],
                               ["idle", "sync wait", "launch overhead", "runtime"], "cpu op")
        name[m[(tm == START) | (tm == END)]] = "nothing recorded"
        gpu = ~host_edge & (tm != START) & (tm != END)
        if not gpu.any() or not len(a):
            continue
        k = m[gpu]
        ar = np.clip(ref[k], 0, len(a) - 1)
        tk = tm[gpu]
        work = np.isin(tk, (WORK, COLLECTIVE))
        kind[k] = np.select([work, tk == LAUNCH, tk == EVENT],
                            [a["kind"].to_numpy()[ar], "runtime", "sync"], "idle")
        name[k] = np.select([work, tk == LAUNCH, tk == EVENT, tk == STREAM],
                            [a["name"].to_numpy()[ar], a["launch_name"].to_numpy()[ar],
                             "stream wait", "gpu idle"], "graph dependency")
        cat[k] = np.select([work, tk == LAUNCH, tk == EVENT],
                           [a["cls"].to_numpy()[ar], "launch overhead", "sync wait"], "idle")
        row[k] = np.select([work, tk == LAUNCH], [a["row"].to_numpy()[ar],
                                                  a["launch_row"].to_numpy()[ar]], -1)
        # A launch delay runs from the call, on the host thread, to the activity's start.
        lk = k[tk == LAUNCH]
        if len(lk) and nh:
            la = np.clip(ref[lk], 0, len(a) - 1)
            li = pd.Index(h["row"].to_numpy()).get_indexer(a["launch_row"].to_numpy()[la])
            pid[lk] = np.where(li >= 0, h["pid"].to_numpy()[np.clip(li, 0, None)], -1)
            tid[lk] = a["launch_tid"].to_numpy()[la]
    out = pd.DataFrame({"step": sp.step, "for_rank": run.ranks[ri_end].rank, "rank": rank,
                        "kind": kind, "name": name, "category": cat, "ts": ts, "dur": w,
                        "row": row, "pid": pid, "tid": tid})
    # Consecutive pieces of one thing (a parent op around its children's gaps) are one.
    if len(out) > 1:
        key = ["rank", "kind", "name", "category", "row", "pid", "tid"]
        same = np.ones(len(out), dtype=bool)
        same[0] = False
        for c in key:
            col = out[c].to_numpy()
            same[1:] &= col[1:] == col[:-1]
        same[1:] &= out["ts"].to_numpy()[1:] == (out["ts"] + out["dur"]).to_numpy()[:-1]
        agg: dict[str, str] = dict.fromkeys(["step", "for_rank", *key, "ts"], "first")
        agg["dur"] = "sum"
        out = out.groupby(np.cumsum(~same), sort=False).agg(agg)
    out = out.reset_index(drop=True)
    out["order"] = np.arange(len(out), dtype=np.int64)
    return cast("pd.DataFrame", out[list(SEGMENT_COLUMNS)])
