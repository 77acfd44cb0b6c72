"""Collective bandwidth per kind across runs, for ``compare`` and ``diff``.

One row per run and collective kind (:data:`RUN_COLUMNS`), from
:func:`~traceforge.analyzers.communication.table.comm` over each run's ranks: the kinds
are vendor-neutral (NCCL's and RCCL's all-reduce are one ``all_reduce`` row, ``library``
says which ran), so an H100 run and an MI300X run line up. ``busbw_gbps`` is the kind's
aggregate bus bandwidth, sum of bytes x nccl-tests factor over the sum of the times
(synchronized where the run's ranks were matched, else kernel time);
``busbw_median_gbps`` the median instance's; ``ceiling_pct`` the aggregate over the run's
link ceiling; ``wait_pct`` the share of the kind's kernel time spent waiting for the
slowest rank.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from traceforge.analyzers.communication.sizes import KINDS
from traceforge.analyzers.communication.table import comm
from traceforge.model import Trace

#: Columns of :func:`comm_by_run`.
RUN_COLUMNS = ("kind", "run", "library", "collectives", "total_bytes", "time_ms",
               "busbw_gbps", "busbw_median_gbps", "ceiling_pct", "wait_pct")
#: Columns of :func:`comm_diff`.
DIFF_COLUMNS = ("kind", "a_collectives", "b_collectives", "a_busbw_gbps", "b_busbw_gbps",
                "busbw_ratio", "a_ceiling_pct", "b_ceiling_pct")


def _library(traces: Sequence[Trace]) -> str:
    vendors = {d.vendor for t in traces for d in t.meta.devices}
    return "RCCL" if "amd" in vendors else "NCCL" if "nvidia" in vendors else ""


def comm_by_run(runs: Sequence[tuple[str, Sequence[Trace]]]) -> pd.DataFrame:
    """One row per run and kind with collectives (see the module docstring)."""
    rows = []
    order = {k: i for i, k in enumerate(KINDS)}
    for label, traces in runs:
        inst = comm(list(traces)).run.instances
        if inst.empty:
            continue
        lib = _library(traces)
        t = np.where(inst["basis"] == "sync", inst["sync_ns"], inst["kernel_ns"]).astype(float)
        inst = inst.assign(_t=t, _moved=inst["busbw_gbps"].to_numpy(dtype=float) * t)
        for kind, g in inst.groupby("kind", sort=False):
            ok = np.isfinite(g["_moved"].to_numpy()) & (g["_t"].to_numpy() > 0)
            bw = float(g["_moved"][ok].sum() / g["_t"][ok].sum()) if ok.any() else math.nan
            ceil = g["ceiling_gbps"].dropna()
            k = float(g["kernel_ns"].sum())
            w = g["wait_ns"].sum() if g["wait_ns"].notna().any() else math.nan
            rows.append({
                "kind": kind, "run": label, "library": lib, "collectives": len(g),
                "total_bytes": float(g["bytes"].sum(min_count=1)), "time_ms": k / 1e6,
                "busbw_gbps": bw, "busbw_median_gbps": float(g["busbw_gbps"].median()),
                "ceiling_pct": 100 * bw / float(ceil.iloc[0]) if len(ceil) else math.nan,
                "wait_pct": 100 * float(w) / k if k > 0 and not math.isnan(w) else math.nan,
                "_k": order.get(str(kind), len(order))})
    if not rows:
        empty: pd.DataFrame = pd.DataFrame(columns=list(RUN_COLUMNS))
        return empty
    out = pd.DataFrame(rows).sort_values("_k", kind="stable")
    df: pd.DataFrame = out[list(RUN_COLUMNS)].reset_index(drop=True)
    return df


def comm_diff(a: Trace, b: Trace) -> pd.DataFrame:
    """Per kind, A's and B's collectives and busbw side by side; ``busbw_ratio`` = B / A
    (above 1: B's collectives ran faster)."""
    long = comm_by_run([("a", [a]), ("b", [b])])
    if long.empty:
        none: pd.DataFrame = pd.DataFrame(columns=list(DIFF_COLUMNS))
        return none
    w = long.pivot_table(index="kind", columns="run",
                         values=["collectives", "busbw_gbps", "ceiling_pct"],
                         aggfunc="first", sort=False)
    out = pd.DataFrame({"kind": w.index.to_numpy()})
    for side in ("a", "b"):
        for col in ("collectives", "busbw_gbps", "ceiling_pct"):
            v = w[(col, side)].to_numpy() if (col, side) in w.columns else np.full(len(w),
                                                                                 np.nan)
            out[f"{side}_{col}"] = v
    out["a_collectives"] = out["a_collectives"].fillna(0).astype(np.int64)
    out["b_collectives"] = out["b_collectives"].fillna(0).astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        a_bw = out["a_busbw_gbps"].to_numpy(dtype=float)
        out["busbw_ratio"] = np.where(a_bw > 0, out["b_busbw_gbps"].to_numpy(dtype=float)
                                      / a_bw, np.nan)
    df: pd.DataFrame = out[list(DIFF_COLUMNS)]
    return df
