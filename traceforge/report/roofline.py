"""What a report shows of the roofline and of FLOPs utilization, for every rank of a run.

Each number is the one ``traceforge roofline`` and ``traceforge mfu`` print for the same
trace with their default options (all steps, the trace's own device, target 80% of the
bound): the tables here are :func:`traceforge.analyzers.costs.roofline.roofline` and
:func:`traceforge.analyzers.costs.mfu.mfu` results with a ``rank`` column, never recomputed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from traceforge.analyzers.costs.mfu import mfu
from traceforge.analyzers.costs.roofline import (
    TARGET_PCT,
    below_bound,
    chart_data,
    regroup,
    roofline,
)
from traceforge.analyzers.timing.breakdown import rank_of
from traceforge.model import Trace

#: Ops listed as furthest below their bound, per rank.
BELOW_N = 5
#: Columns of the per-op roofline table a report shows (``traceforge roofline``'s, less
#: those about measured peaks, which a report has none of).
OP_COLUMNS = ("rank", "op", "calls", "time_us", "modelled_pct", "gflops", "gbytes",
              "intensity", "tflops_per_s", "tb_per_s", "dtype", "bound", "pct_of_bound",
              "saved_us", "work")
#: The same for the per-class table.
CLASS_COLUMNS = ("rank", "class", "kernels", "time_us", "modelled_pct", "gflops", "gbytes",
                 "intensity", "tflops_per_s", "tb_per_s", "dtype", "bound", "pct_of_bound",
                 "saved_us", "work")
#: Columns of the FLOPs-utilization table (``traceforge mfu`` without model FLOPs or peaks
#: files: hardware FLOPs utilization only).
MFU_COLUMNS = ("rank", "step", "time_ms", "gflops", "modelled_pct", "dtype", "peak_tflops",
               "achieved_tflops", "hfu_pct")


def _empty(cols: Sequence[str]) -> pd.DataFrame:
    out: pd.DataFrame = pd.DataFrame({c: pd.Series([], dtype=object) for c in cols})
    return out


@dataclass(frozen=True)
class RooflineTables:
    """One run's roofline and FLOPs utilization, every frame with a ``rank`` column.

    ``by_op`` / ``by_class``: the roofline tables (all rows, by GPU time). ``below``: per
    rank the :data:`BELOW_N` ops with the most time at stake (``saved_us``: what running at
    ``target_pct`` % of their bound would save). ``totals``: per rank, GPU time, modelled
    and unmodelled time and the time saved at ``target_pct`` of every bound (us).
    ``mfu``: per rank and step, hardware FLOPs utilization = FLOPs of the step's ops /
    (step GPU window x the dense peak of the step's dominant dtype). ``chart``: what the
    roofline chart of the first rank plots (:func:`~traceforge.analyzers.costs.roofline.
    chart_data`). ``device``: the ceilings' device, "" when unknown.
    """

    by_op: pd.DataFrame = field(default_factory=lambda: _empty(OP_COLUMNS))
    by_class: pd.DataFrame = field(default_factory=lambda: _empty(CLASS_COLUMNS))
    below: pd.DataFrame = field(default_factory=lambda: _empty(["rank", "op"]))
    totals: pd.DataFrame = field(default_factory=lambda: _empty(["rank"]))
    mfu: pd.DataFrame = field(default_factory=lambda: _empty(MFU_COLUMNS))
    chart: dict[str, Any] = field(default_factory=dict)
    chart_rank: int = 0
    device: str = ""
    device_source: str = ""
    target_pct: float = TARGET_PCT
    notes: tuple[str, ...] = ()
    #: ``report --counters FILE``: the measured roofline chart of the first rank (same
    #: shape as ``chart``; :func:`traceforge.analyzers.counters.measured.chart_data`) and
    #: what the join said.
    measured_chart: dict[str, Any] = field(default_factory=dict)
    measured_notes: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return self.by_op.empty

    def hfu_range(self) -> tuple[float, float] | None:
        """The lowest and highest per-step HFU % over steps and ranks (None: none known)."""
        v = self.mfu["hfu_pct"].astype(float).dropna() if len(self.mfu) else pd.Series([])
        return (float(v.min()), float(v.max())) if len(v) else None

    def peaks(self) -> str:
        """The peaks HFU divides by, as "bf16 989.5 TFLOP/s" (several when steps differ)."""
        if self.mfu.empty:
            return ""
        m = self.mfu.dropna(subset=["peak_tflops"])
        pairs = dict.fromkeys(zip(m["dtype"].astype(str), m["peak_tflops"].astype(float),
                                  strict=True))
        return ", ".join(f"{d} {p:,.1f} TFLOP/s" for d, p in pairs)


def _ranked(parts: Sequence[tuple[int, pd.DataFrame]], cols: Sequence[str]) -> pd.DataFrame:
    frames = [f.assign(rank=r) for r, f in parts if len(f)]
    if not frames:
        return _empty(cols)
    out = pd.concat(frames, ignore_index=True)
    keep = [c for c in cols if c in out.columns]
    return cast("pd.DataFrame", out[keep])


def gather(traces: Sequence[Trace], *, flops_from: Trace | None = None) -> RooflineTables:
    """Roofline and FLOPs utilization of each rank's trace (ranks in the given order);
    ``flops_from``: as ``traceforge mfu --flops-from`` and ``roofline --flops-from``, for
    traces whose own ops model no FLOPs (compiled, CUDA-graph replays)."""
    ops, classes, below, totals, steps = [], [], [], [], []
    notes: list[str] = []
    chart: dict[str, Any] = {}
    chart_rank = 0
    device = source = ""
    for i, t in enumerate(traces):
        rank = rank_of(t, i)
        m = mfu(t)
        # Only a run whose own ops model no FLOPs (compiled) takes an eager trace's: a
        # report of eager and compiled runs keeps the eager run's own.
        eager = (flops_from if flops_from is not None
                 and m.steps["gflops"].fillna(0).eq(0).all() else None)
        r = roofline(t, flops_from=eager)
        if eager is not None:
            m = mfu(t, flops_from=eager)
        if i == 0:
            chart, chart_rank = chart_data(r), rank
            if r.device is not None:
                device = f"{r.device.name} (key {r.device.key})"
                source = r.device.sources.get("hbm_tb_s", "").split(" <")[0]
        ops.append((rank, r.table))
        classes.append((rank, regroup(r, "class")))
        below.append((rank, below_bound(r, BELOW_N)))
        tot = r.totals
        totals.append((rank, pd.DataFrame([{
            "time_us": tot["time_ns"] / 1e3, "modelled_us": tot["modelled_ns"] / 1e3,
            "unmodelled_us": tot["unmodelled_ns"] / 1e3, "saved_us": tot["saved_ns"] / 1e3,
        }])))
        steps.append((rank, m.steps))
        for n in (*r.notes, *m.notes):
            if n not in notes:
                notes.append(n)
    total_cols = ["rank", "time_us", "modelled_us", "unmodelled_us", "saved_us"]
    return RooflineTables(
        by_op=_ranked(ops, OP_COLUMNS), by_class=_ranked(classes, CLASS_COLUMNS),
        below=_ranked(below, ["rank", "op", "time_us", "pct_of_bound", "bound", "dtype",
                              "tflops_per_s", "tb_per_s", "saved_us", "work"]),
        totals=_ranked(totals, total_cols), mfu=_ranked(steps, MFU_COLUMNS),
        chart=chart, chart_rank=chart_rank, device=device, device_source=source,
        notes=tuple(notes))


def gemm_rows(tables: RooflineTables, ops: Sequence[str]) -> pd.DataFrame:
    """The roofline rows of the matrix-product ops ``ops`` with known FLOPs."""
    cols = ["rank", "op", "calls", "time_us", "tflops_per_s", "dtype", "bound",
            "pct_of_bound"]
    t = tables.by_op
    if t.empty:
        return _empty(cols)
    g = t[t["op"].isin(list(ops)) & (t["gflops"].astype(float) > 0)]
    return cast("pd.DataFrame", g[cols].reset_index(drop=True))


def at_stake_pct(tables: RooflineTables, n: int = BELOW_N) -> pd.Series:
    """Per rank, the time at stake of its first ``n`` ops below their bound, % of its GPU
    time."""
    if tables.below.empty or tables.totals.empty:
        return pd.Series(dtype=float)
    saved = tables.below.groupby("rank").head(n).groupby("rank")["saved_us"].sum()
    total = tables.totals.set_index("rank")["time_us"].astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return cast("pd.Series", (100.0 * saved / total.reindex(saved.index)).dropna())
