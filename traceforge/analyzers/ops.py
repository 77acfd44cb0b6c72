"""Operator table: framework ops by the GPU time of the kernels they launched.

A kernel belongs to the innermost host op active at its launch: Kineto stamps the launch
call and the kernel with that op's ``External id`` (``ext``), so a join on ``ext`` gives
each op its *self* GPU time without walking the call stack. FLOPs come from
:mod:`traceforge.analyzers.flops`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceforge.analyzers.flops import FLOP_OPS, op_flops
from traceforge.model import Trace

OPS_COLUMNS = ("op", "self_gpu_us", "pct", "calls", "kernels", "gflops", "tflops_per_s")


def _empty() -> pd.DataFrame:
    result: pd.DataFrame = pd.DataFrame({c: pd.Series([], dtype=object) for c in OPS_COLUMNS})
    return result


def kernel_ops(trace: Trace) -> pd.Series:
    """For each GPU activity row (kernel/memcpy/memset), the name of its launching op.

    Index: event row labels of GPU rows; value: op name, or NaN when no op is known.
    cpu_op rows are preferred over user annotations that share an ``ext``.
    """
    ev = trace.events
    host = ev[ev["kind"].isin(("cpu_op", "user_annotation")) & (ev["ext"] >= 0)]
    # cpu_op first so that drop_duplicates keeps it when an annotation shares the id.
    host = host.assign(_pri=(host["kind"] != "cpu_op").astype(np.int8))
    host = host.sort_values(["ext", "_pri"]).drop_duplicates("ext")
    by_ext = pd.Series(host["name"].astype(str).to_numpy(), index=host["ext"].to_numpy())
    gpu = trace.gpu()
    ext = gpu["ext"].to_numpy()
    # Kernels replayed from a CUDA graph (torch.compile max-autotune / reduce-overhead)
    # carry no External id of their own; their correlation id is that of the
    # cudaGraphLaunch call, whose External id names the op that replayed the graph.
    launch = ev[ev["kind"].isin(("runtime", "driver")) & (ev["corr"] >= 0) & (ev["ext"] >= 0)]
    launch_ext = pd.Series(
        launch["ext"].to_numpy(), index=launch["corr"].to_numpy()
    ).groupby(level=0).first()
    via_corr = launch_ext.reindex(gpu["corr"].to_numpy()).to_numpy()
    ext = np.where(ext >= 0, ext, np.nan_to_num(via_corr, nan=-1)).astype(np.int64)
    names = by_ext.reindex(ext)
    result2: pd.Series = pd.Series(names.to_numpy(), index=gpu.index, dtype=object)
    return result2


def ops(trace: Trace, n: int | None = None, *, include_memory: bool = True) -> pd.DataFrame:
    """Operators by self GPU time: %, calls, kernels launched, GFLOPs and achieved TFLOP/s.

    ``self_gpu_us`` sums the kernels (and copies/memsets unless ``include_memory`` is
    False) whose launch the op made directly; ``pct`` is of all GPU time so attributed.
    ``gflops`` is the op's total over every call in the trace; ``tflops_per_s`` divides
    it by the self GPU time (empty when FLOPs are unknown).
    """
    gpu = trace.gpu() if include_memory else trace.kernels()
    if gpu.empty:
        return _empty()
    owner = kernel_ops(trace).reindex(gpu.index)
    df = pd.DataFrame({"op": owner.to_numpy(), "dur": gpu["dur"].to_numpy()})
    df = df[df["op"].notna()]
    if df.empty:
        return _empty()
    g = df.groupby("op", sort=False)["dur"].agg(["sum", "count"])
    cpu = trace.events[trace.events["kind"] == "cpu_op"]
    cpu_names = cpu["name"].astype(str)
    calls = cpu_names.value_counts()
    flops = _flops_by_op(trace, cpu, cpu_names, set(g.index))
    total = int(g["sum"].sum())
    out = pd.DataFrame(
        {
            "op": g.index.to_numpy(),
            "self_gpu_us": g["sum"].to_numpy() / 1e3,
            "pct": 100.0 * g["sum"].to_numpy() / total,
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
    totals: dict[str, float] = {}
    known: dict[str, bool] = {}
    for name, args in zip(sel["name"].astype(str), trace.args(sel.index.to_numpy()), strict=True):
        f = op_flops(name, args)
        if f is not None:
            totals[name] = totals.get(name, 0.0) + f
            known[name] = True
    return pd.Series({k: v for k, v in totals.items() if known.get(k)}, dtype=float)
