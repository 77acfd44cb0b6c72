"""Operator table: framework ops by the GPU time of the kernels they launched.

Each GPU activity belongs to the innermost ``cpu_op`` around its launch call (the
timeline's one rule, :mod:`traceforge.analyzers.timeline.activity`), so summing per op gives its
*self* GPU time. FLOPs come from :mod:`traceforge.analyzers.costs.flops`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np
import pandas as pd

from traceforge.analyzers.costs.flops import FLOP_OPS, op_flops
from traceforge.analyzers.costs.op_calls import op_calls
from traceforge.analyzers.timeline.core import host_in_steps, timeline
from traceforge.model import Trace

OPS_COLUMNS = ("op", "self_gpu_us", "pct", "calls", "kernels", "gflops", "tflops_per_s")


def _empty() -> pd.DataFrame:
    result: pd.DataFrame = pd.DataFrame({c: pd.Series([], dtype=object) for c in OPS_COLUMNS})
    return result


def ops(trace: Trace, n: int | None = None, *, include_memory: bool = True,
        steps: Sequence[int] | None = None) -> pd.DataFrame:
    """Operators by self GPU time: %, calls, kernels launched, GFLOPs and achieved TFLOP/s.

    ``self_gpu_us`` sums the kernels (and copies/memsets unless ``include_memory`` is
    False) the op launched directly; ``pct`` is of all GPU time so attributed. ``calls``
    and ``gflops`` count the op's calls (those starting inside the selected steps);
    ``tflops_per_s`` divides the FLOPs by the self GPU time (empty when FLOPs are unknown).
    ``steps`` keeps the activity those steps launched and the calls inside them.
    A derived table of the trace (a later run on the cached trace reads it back).
    """
    key = f"ops|{n!r}|{include_memory!r}|{None if steps is None else tuple(map(int, steps))!r}"
    got: pd.DataFrame = trace.derived(key, lambda: _ops(trace, n, include_memory, steps))
    return cast("pd.DataFrame", got.copy())


def _ops(trace: Trace, n: int | None, include_memory: bool, steps: Sequence[int] | None
         ) -> pd.DataFrame:
    tl = timeline(trace)
    a = tl.in_steps(steps)
    if not include_memory:
        a = a[a["kind"] == "kernel"]
    a = a[a["op_row"] >= 0]
    if a.empty:
        return _empty()
    g = pd.DataFrame({"op": a["op_name"].to_numpy(), "dur": (a["end"] - a["ts"]).to_numpy()}
                     ).groupby("op", sort=False)["dur"].agg(["sum", "count"])
    ev = trace.events
    cpu = ev[(ev["kind"] == "cpu_op").to_numpy() & host_in_steps(trace, steps)]
    cpu_names = cpu["name"].astype(str)
    calls = cpu_names.value_counts()
    flops = _flops_by_op(trace, cpu, cpu_names, set(g.index))
    total = int(g["sum"].sum())
    out = pd.DataFrame(
        {
            "op": g.index.to_numpy(),
            "self_gpu_us": g["sum"].to_numpy() / 1e3,
            "pct": 100.0 * g["sum"].to_numpy() / total if total else 0.0,
            "calls": calls.reindex(g.index).fillna(0).astype(np.int64).to_numpy(),
            "kernels": g["count"].to_numpy().astype(np.int64),
        }
    )
    fl = flops.reindex(g.index).to_numpy(dtype=float)
    out["gflops"] = fl / 1e9
    self_ns = g["sum"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        out["tflops_per_s"] = np.where(self_ns > 0, fl / self_ns / 1e3, np.nan)
    out = out.sort_values(["self_gpu_us", "op"], ascending=[False, True], kind="stable")
    out = out.reset_index(drop=True)
    result3: pd.DataFrame = out if n is None else out.head(n)
    return result3


def _flops_by_op(
    trace: Trace, cpu: pd.DataFrame, cpu_names: pd.Series, wanted: set[str]
) -> pd.Series:
    """Total FLOPs per op name over all its calls, for ops with a formula or a flops arg."""
    names = [n for n in wanted if n in FLOP_OPS]
    sel = cpu[cpu_names.isin(names)]
    if sel.empty:
        return pd.Series(dtype=float)
    rows, flops = trace.derived("ops.call_flops", lambda: _call_flops(trace))
    f = flops[pd.Index(rows).get_indexer(sel.index.to_numpy())]
    known = ~np.isnan(f)
    by = pd.Series(f[known]).groupby(cpu_names[sel.index].to_numpy()[known], sort=False).sum()
    return pd.Series({str(k): float(v) for k, v in by.items()}, dtype=float)


def _call_flops(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Row labels of every call of an op in :data:`FLOP_OPS` and its FLOPs (NaN: unknown),
    worked out once per distinct call."""
    ev = trace.events
    pos = np.flatnonzero((ev["kind"] == "cpu_op").to_numpy()
                         & ev["name"].isin(list(FLOP_OPS)).to_numpy())
    rows = ev.index.to_numpy()[pos]
    calls = op_calls(trace, rows)
    found = [op_flops(nm, a) for nm, a in zip(calls.names, calls.args, strict=True)]
    per_call = np.array([np.nan if x is None else float(x) for x in found], dtype=float)
    return rows, per_call[calls.codes]


def why_no_ops(trace: Trace) -> str:
    """Why :func:`ops` of ``trace`` is empty, in one sentence for people."""
    ev = trace.events
    if not ev["kind"].isin(("kernel", "memcpy", "memset")).any():
        return "No GPU activity in this trace, so no GPU time to attribute to operators."
    if (ev["kind"] == "cpu_op").any():
        return ("No GPU time could be attributed to host operators (no cpu_op range "
                "around the launch calls of these kernels).")
    if trace.meta.format.startswith("nsys"):
        return ("An Nsight Systems export records CUDA calls, kernels and NVTX ranges, not "
                "framework operators or their shapes: no ops to attribute kernels to. "
                "`top-kernels` lists the kernels; the PyTorch profiler (traceforge capture) "
                "records ops with shapes.")
    return (f"This {trace.meta.format} trace records no framework operators (no cpu_op "
            "events, so no op names or shapes): `top-kernels` lists the kernels.")
