"""The host side of a rank's graph: the host ranges that become nodes (ops, runtime and
driver calls, annotations, python frames, less the step ranges), each thread's chain of
range boundaries in nesting order, and that chain contracted into host edges.

Kept apart from the GPU side because the chain is also what a path's host time is split
back into when it is labelled (:mod:`.segments` reads :class:`Chain`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from traceforge.analyzers.critical_path.edges import HOST, SYNC_SPAN, Edges
from traceforge.analyzers.critical_path.sync import (
    BLOCKING_COPY,
    DEVICE_SYNC,
    EVENT_SYNC,
    STREAM_SYNC,
)
from traceforge.analyzers.timeline import steps as st
from traceforge.analyzers.timeline.stacks import innermost
from traceforge.model import Trace, distinct, lex_order, name_mask, pair_codes

HOST_KINDS = ("cpu_op", "runtime", "driver", "user_annotation", "python")


def _step_ranges(trace: Trace) -> np.ndarray:
    """Rows that are step ranges (ProfilerStep#N, capture's 'step N', a --steps-from
    match): they hold the step, they are not work in it."""
    ev = trace.events
    pat = f"{st.PROFILER_STEP}|{st.CAPTURE_STEP}"
    rule = trace.steps_from
    if rule is not None and rule != st.NO_STEPS:
        pat += f"|{rule}"
    kinds = ev["kind"].isin(("cpu_op", "user_annotation")).to_numpy()
    return np.asarray(kinds & name_mask(ev["name"], pat))


#: Ranges the autograd engine runs on its device threads (one per GPU).
AUTOGRAD = "autograd::engine::evaluate_function"


def _sorted_categories(col: pd.Series) -> pd.Categorical:
    """A categorical column's values with only the categories in use, sorted."""
    c = pd.Categorical(col).remove_unused_categories()
    out: pd.Categorical = c.reorder_categories(sorted(c.categories, key=str))
    return out


def _merge_backward(code: np.ndarray, pid: np.ndarray, tid: np.ndarray,
                    autograd: np.ndarray, is_op: np.ndarray, notes: list[str]) -> np.ndarray:
    """Serialize the autograd device threads with their process's main thread.

    ``loss.backward()`` hands the backward pass to an autograd thread and blocks until it
    is done, a dependency no profiler records: without it the main thread would look idle
    for the whole backward pass. As HTA does (PR#270), the backward thread's ranges join
    the main thread's chain (the thread whose tid is the pid, else the one with most ops).
    """
    if not np.any(autograd):
        return code
    out = code.copy()
    for p in distinct(pid[autograd]):
        in_p = pid == p
        if np.any(in_p & (tid == p)):
            main_tid = int(p)
        else:
            ops = in_p & is_op & ~np.isin(code, code[in_p & autograd])
            if not ops.any():
                continue
            main_tid = int(pd.Series(tid[ops]).value_counts().index[0])
        main = int(code[in_p & (tid == main_tid)][0])
        bw = in_p & np.isin(code, code[in_p & autograd]) & (code != main)
        if not bw.any():
            continue
        moved = sorted({int(t) for t in tid[bw]})
        out[bw] = main
        notes.append(f"backward thread(s) {moved} of process {int(p)} serialized with its "
                     f"main thread {main_tid}, which waits for the backward pass")
    return np.asarray(out)


def host_table(trace: Trace, acts: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    ev = trace.events
    sel = ev["kind"].isin(HOST_KINDS).to_numpy() & (ev["dur"].to_numpy() > 0)
    sel &= ~_step_ranges(trace)
    # Column arrays at the selected rows, not a selection of the whole frame (~600k rows
    # of a large trace): only these columns are needed.
    rows = np.flatnonzero(sel)
    index = ev.index.to_numpy()[rows]
    # Names and kinds stay categorical (sorted categories, as the labels want them): tests
    # run on the few categories, not on ~1M strings per trace.
    name = _sorted_categories(ev["name"].iloc[rows])
    kind = _sorted_categories(ev["kind"].iloc[rows])
    api = kind.isin(["runtime", "driver"])
    sync = np.full(len(rows), "", dtype=object)
    sync[api & name.isin(list(DEVICE_SYNC))] = "device"
    sync[api & name.isin(list(STREAM_SYNC))] = "stream"
    sync[api & name.isin(list(EVENT_SYNC))] = "event"
    # A copy call blocks when it is a synchronous API, or when it returned only after its
    # copy ended (cudaMemcpyAsync to pageable memory).
    copies = acts[acts["kind"].isin(("memcpy", "memset")) & (acts["launch_row"] >= 0)]
    blocked = copies.loc[(copies["launch_end"] >= copies["end"])
                         | copies["launch_name"].isin(BLOCKING_COPY), "launch_row"]
    sync[api & np.isin(index, blocked.to_numpy()) & (sync == "")] = "copy"
    pid, tid = ev["pid"].to_numpy()[rows], ev["tid"].to_numpy()[rows]
    # One code per (pid, tid), numbered in order of appearance.
    code, _ = pair_codes(pid, tid)
    autograd = name_mask(pd.Series(name), "^" + re.escape(AUTOGRAD))
    code = _merge_backward(code, pid, tid, autograd, kind.isin(["cpu_op"]), notes)
    ts = ev["ts"].to_numpy()[rows]
    out = pd.DataFrame({"row": index, "name": name, "kind": kind, "pid": pid,
                        "tid": tid, "ts": ts, "end": ts + ev["dur"].to_numpy()[rows],
                        "code": code, "sync": sync, "corr": ev["corr"].to_numpy()[rows]})
    return cast("pd.DataFrame", out)


@dataclass
class Chain:
    """Each thread's range boundaries in nesting order: piece i runs from node ``u[i]`` to
    node ``v[i]`` (the next boundary) and its time belongs to range ``ref[i]`` (the
    innermost around it; -1: none). ``span``: the piece is a blocking call's whole span."""

    u: np.ndarray
    v: np.ndarray
    w: np.ndarray
    ref: np.ndarray
    span: np.ndarray


def host_chain(h: pd.DataFrame) -> tuple[Chain, np.ndarray]:
    """Host pieces: each thread's range boundaries in nesting order, one piece to the next.
    Ranges nested in a blocking sync call are left out (the driver calls beneath it), so
    the call is one piece, its span. Also returns which ranges kept their start boundary."""
    n = len(h)
    if n == 0:
        z = np.zeros(0, dtype=np.int64)
        return Chain(z, z, z, z, z.astype(bool)), np.zeros(0, dtype=bool)
    idx = np.arange(n, dtype=np.int64)
    ts, end, code = h["ts"].to_numpy(), h["end"].to_numpy(), h["code"].to_numpy()
    is_sync = (h["sync"].to_numpy() != "").astype(np.int64)
    node = np.concatenate([2 * idx, 2 * idx + 1])
    t = np.concatenate([ts, end])
    c = np.concatenate([code, code])
    start = np.concatenate([np.ones(n, np.int64), np.zeros(n, np.int64)])
    # Equal times: ends before starts; a parent starts before its child (longer first),
    # and a child ends before its parent (the later starter first).
    tie = np.concatenate([ts - end, -ts])
    order = lex_order((node, tie, start, t, c))
    node, t, c, start = node[order], t[order], c[order], start[order]
    delta = np.where(start == 1, 1, -1) * np.concatenate([is_sync, is_sync])[order]
    after = np.cumsum(delta)
    before = after - delta
    keep = np.where(delta > 0, before, after) == 0
    node, t, c = node[keep], t[keep], c[keep]
    kept_start = np.zeros(n, dtype=bool)
    kept_start[node[node % 2 == 0] // 2] = True
    same = c[1:] == c[:-1]
    u, v = node[:-1][same], node[1:][same]
    w = (t[1:] - t[:-1])[same]
    # Each segment's time belongs to the innermost kept range around its start.
    r = np.flatnonzero(kept_start)
    hit = innermost(code[r], ts[r], end[r], c[:-1][same], t[:-1][same])
    ref = np.where(hit >= 0, r[np.clip(hit, 0, None)], -1)
    span = (u % 2 == 0) & (v == u + 1) & (is_sync[u // 2] == 1)
    return Chain(u, v, w, ref, span), kept_start


def contract(ch: Chain, anchor: np.ndarray, ed: Edges) -> None:
    """Host edges: the chain pieces, with runs between boundaries that nothing else
    connects to (most op boundaries) merged into one edge; ``ref``/``ref2`` give the run
    of pieces, which label the path's time. The longest path is unchanged, and the graph
    is a third of the size. Spans of blocking calls stay single edges (ref: the call).
    ``anchor``: per node id, whether an edge other than the chain's touches it."""
    keep = ~ch.span
    pu, pv, pw = ch.u[keep], ch.v[keep], ch.w[keep]
    piece = np.flatnonzero(keep)
    n = len(pu)
    if n:
        new = np.ones(n, dtype=bool)
        new[1:] = (pu[1:] != pv[:-1]) | anchor[pu[1:]]
        first = np.flatnonzero(new)
        last = np.append(first[1:] - 1, n - 1)
        ed.add(pu[first], pv[last], np.add.reduceat(pw, first), HOST, piece[first],
               piece[last] + 1)
    sp = np.flatnonzero(ch.span)
    ed.add(ch.u[sp], ch.v[sp], ch.w[sp], SYNC_SPAN, ch.u[sp] // 2)
