"""Work for kernels whose own launch recorded none: CUDA-graph replays and compiled regions.

A kernel replayed from a CUDA graph (``torch.compile(mode="reduce-overhead")``, cudagraph
trees, hand-made graphs) runs under one ``cudaGraphLaunch``: no operator, no shapes. An
inductor kernel carries no shapes either. The trace still records two things that can
stand for them, each used only where it holds:

* :func:`match_replays`: the **same kernel launched outside a graph** with known work (a
  warm-up step run eagerly, the ops recorded with shapes). A replayed kernel takes that
  work when its name, grid and block are those of the recorded launches and every such
  launch did the same work (FLOPs and bytes within :data:`SAME_WORK`, one dtype). A name
  met with another grid or block, recorded launches that disagree, or a name only ever
  replayed: the work stays unknown.
* :func:`flops_from`: an **eager trace of the same model** (``--flops-from``): its mean
  modelled FLOPs per step, less the FLOPs this trace's own ops model in the step, shared
  by the step's compiled and replayed kernels in proportion to their time (the rule an op
  call's kernels follow). Bytes stay unknown: a fused graph moves less than the eager ops
  did, so these kernels get achieved TFLOP/s but no intensity, bound or % of bound, and
  only the per-op table counts them (a per-kernel or per-class share of a step's FLOPs
  would be made up).

What neither covers says so: ``work unknown: graph replay, no shapes recorded``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from traceforge.frames import object_series
from traceforge.model import Trace, distinct

#: Why a replayed kernel has no work (shown in every roofline output).
REPLAY = "work unknown: graph replay, no shapes recorded"
#: Why a kernel of a compiled region has no work.
COMPILED = "work unknown: compiled region, inductor kernels carry no shapes"
#: The work of kernels given an eager trace's FLOPs (:func:`flops_from`).
FLOPS_FROM = "FLOPs from --flops-from (eager run, per step); bytes unknown"
#: Recorded launches of one kernel agree when their FLOPs and bytes differ by at most this.
SAME_WORK = 0.01


def _launch_keys(trace: Trace, rows: np.ndarray, names: np.ndarray) -> np.ndarray:
    """Per row: "name|grid|block" (grid and block as recorded; "?" when absent)."""
    codes, uniq = trace.distinct_args(rows, ("grid", "block"))
    cfg = [f"{a.get('grid', '?')}|{a.get('block', '?')}" for a in uniq]
    return np.array([f"{n}|{cfg[c]}" for n, c in zip(names.tolist(), codes.tolist(),
                                                      strict=True)], dtype=object)


def match_replays(trace: Trace, k: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``k`` (:func:`~traceforge.analyzers.costs.activity_work.activity_work` columns) with
    replayed kernels of unknown work given the work of the same kernel (name, grid,
    block) launched outside a graph with known work, where every such launch agrees."""
    kern = (k["kind"] == "kernel").to_numpy()
    replay = (k["replay"].to_numpy() >= 0) & kern
    modelled = k["modelled"].to_numpy(dtype=bool)
    want = np.flatnonzero(replay & ~modelled)
    ref = np.flatnonzero(~replay & kern & modelled)
    if not len(want) or not len(ref):
        return k, []
    rows = k["row"].to_numpy()
    names = k["name"].astype(str).to_numpy()
    pick = np.concatenate([want, ref])
    keys = _launch_keys(trace, rows[pick], names[pick])
    wkeys, rkeys = keys[: len(want)], keys[len(want):]
    refs = pd.DataFrame({"key": rkeys, "flops": k["flops"].to_numpy()[ref],
                         "bytes": k["bytes"].to_numpy()[ref],
                         "dtype": k["dtype"].to_numpy()[ref],
                         "family": k["family"].to_numpy()[ref]})
    g = refs.groupby("key", sort=False)
    agg = g.agg(fmin=("flops", "min"), fmax=("flops", "max"), bmin=("bytes", "min"),
                bmax=("bytes", "max"), dtypes=("dtype", "nunique"), dtype=("dtype", "first"),
                family=("family", "first"), n=("flops", "size"))

    def close(lo: pd.Series, hi: pd.Series) -> pd.Series:
        same: pd.Series = (hi - lo) <= SAME_WORK * hi.abs().where(hi.abs() > 0, 1.0)
        return same

    ok = agg[close(agg["fmin"], agg["fmax"]) & close(agg["bmin"], agg["bmax"])
             & (agg["dtypes"] <= 1)]
    hit = pd.Index(ok.index).get_indexer(wkeys)
    got = want[hit >= 0]
    if not len(got):
        return k, []
    src = ok.iloc[hit[hit >= 0]]
    out = k.copy()
    for col, val in (("flops", (src["fmin"] + src["fmax"]) / 2),
                     ("bytes", (src["bmin"] + src["bmax"]) / 2),
                     ("dtype", src["dtype"]), ("family", src["family"])):
        arr = out[col].to_numpy().copy()
        arr[got] = val.to_numpy()
        out[col] = object_series(arr, out.index) if arr.dtype == object else arr
    for col, val in (("modelled", True), ("reason", "")):
        arr = out[col].to_numpy().copy()
        arr[got] = val
        out[col] = object_series(arr, out.index) if arr.dtype == object else arr
    us = float(k["dur"].to_numpy()[got].sum()) / 1e3
    note = (f"{len(got):,} replayed kernels ({us:,.0f} us) take the work of the same kernel "
            f"(name, grid, block) launched outside a graph with shapes recorded "
            f"({len(ok.index.intersection(pd.Index(wkeys))):,} kernels matched).")
    return out, [note]


def step_flops(k: pd.DataFrame) -> pd.DataFrame:
    """Per step (``step`` >= 0) of activities ``k``: flops modelled, and the dtype
    carrying the most of them ("" when none)."""
    m = k[k["modelled"].to_numpy(dtype=bool) & (k["step"] >= 0)]
    rows = []
    for step, g in m.groupby("step", sort=True):
        f = g[g["flops"] > 0]
        rows.append({"step": int(step), "flops": float(f["flops"].sum()),
                     "dtype": str(f.groupby("dtype")["flops"].sum().idxmax()) if len(f) else ""})
    out: pd.DataFrame = pd.DataFrame(rows, columns=["step", "flops", "dtype"])
    return out


def flops_from(k: pd.DataFrame, eager: pd.DataFrame, label: str,
               steps: Sequence[int] | None = None) -> tuple[pd.DataFrame, list[str]]:
    """``k`` with a ``flops_only`` column: the compiled and replayed kernels of unknown work
    of each step take, in proportion to their time, the eager run's mean FLOPs per step
    (``eager``: :func:`step_flops` of the eager trace) less what the step's own modelled
    ops did. ``label`` names the eager trace in notes and reasons."""
    out = k.assign(flops_only=False)
    src = eager[eager["flops"] > 0]
    if src.empty:
        return out, [f"--flops-from {label}: no modelled FLOPs in it; compiled work unknown."]
    mean = float(src["flops"].mean())
    reason = out["reason"].to_numpy()
    cand = ((out["kind"] == "kernel").to_numpy() & ~out["modelled"].to_numpy(dtype=bool)
            & np.isin(reason, [REPLAY, COMPILED]) & (out["step"].to_numpy() >= 0))
    if steps:
        cand &= out["step"].isin(list(steps)).to_numpy()
    if not cand.any():
        return out, []
    own = step_flops(out).set_index("step")["flops"]
    dur = out["dur"].to_numpy().astype(float)
    step = out["step"].to_numpy()
    flops = out["flops"].to_numpy().copy()
    why = reason.copy()
    short = 0
    for s in distinct(step[cand]):
        at = cand & (step == s)
        target = mean - float(own.get(int(s), 0.0))
        if target <= 0:
            short += 1
            continue
        tot = dur[at].sum()
        flops[at] = target * (dur[at] / tot if tot > 0 else 1.0 / at.sum())
        why[at] = FLOPS_FROM
    done = cand & (why != reason)
    out["flops"], out["reason"] = flops, why
    fo = out["flops_only"].to_numpy().copy()
    fo[done] = True
    out["flops_only"] = fo
    dtype = out["dtype"].to_numpy().copy()
    dtype[done] = str(src.groupby("dtype")["flops"].sum().idxmax())
    out["dtype"] = dtype
    notes = [f"--flops-from {label}: {mean / 1e9:,.2f} GFLOP per step (mean of {len(src)} "
             f"steps), less each step's own modelled ops, shared by the compiled and "
             f"replayed kernels by time; their bytes stay unknown (no intensity or bound), "
             f"and only the per-op table counts them."]
    if short:
        notes.append(f"--flops-from: in {short} step(s) this trace's own ops already model "
                     f"as many FLOPs as the eager step; nothing added there.")
    return out, notes


__all__ = ["COMPILED", "FLOPS_FROM", "REPLAY", "SAME_WORK", "flops_from", "match_replays",
           "step_flops"]
