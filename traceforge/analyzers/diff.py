"""Diff of two runs of the same workload: what got faster, what vanished, what replaced it.

``diff(a, b)`` compares run A (the baseline: eager, before a change) with run B (compiled,
after). Both can come from any reader, so an nsys capture can be compared with a Kineto one.
Kernels are matched by their full name; classes and families by the shared classifier, so
two vendors' runs still line up per class (gemm, attention, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from traceforge.analyzers.kernel_names import fused_ops
from traceforge.analyzers.kernels import kernel_table, top_kernels
from traceforge.analyzers.steps import launch_times
from traceforge.analyzers.summary import busy_ns
from traceforge.model import GPU_KINDS, Trace

#: Columns of :attr:`TraceDiff.summary`.
SUMMARY_COLUMNS = ("metric", "unit", "a", "b", "delta", "ratio")

#: Fused-op names that are views or metadata changes: they launch no kernel in eager mode,
#: so matching a Triton kernel to eager kernels through them would only add noise.
_VIEW_OPS = frozenset(
    {"view", "t", "transpose", "permute", "reshape", "unsqueeze", "squeeze", "expand",
     "split", "slice", "select", "as_strided", "_unsafe_view", "alias", "clone", "full"}
)


@dataclass(frozen=True)
class TraceDiff:
    """The tables of one A/B comparison (times in us unless a column says ms).

    ``summary``: metric, unit, a, b, delta (b - a), ratio (b / a).
    ``by_class`` / ``by_family``: key, a_us, b_us, delta_us, speedup (a / b), a_calls, b_calls.
    ``only_a`` / ``only_b``: kernels seen in one run only: name, class, family, calls, total_us.
    ``replacements``: B-only fused kernels, the ops they fuse and the A-only kernels that
    those ops launched in A (matched by op name, so an A kernel can feed several rows).
    ``ops``: operators present in both runs with their self GPU time change.
    """

    summary: pd.DataFrame
    by_class: pd.DataFrame
    by_family: pd.DataFrame
    only_a: pd.DataFrame
    only_b: pd.DataFrame
    replacements: pd.DataFrame
    ops: pd.DataFrame
    notes: tuple[str, ...] = ()

    def metric(self, name: str) -> tuple[float, float]:
        """The (a, b) values of one summary metric."""
        row = self.summary[self.summary["metric"] == name]
        if row.empty:
            raise KeyError(name)
        return float(row["a"].iloc[0]), float(row["b"].iloc[0])

    @property
    def span_speedup(self) -> float:
        """Span of A over span of B (per step when both runs have profiler steps)."""
        a, b = self.metric("step time" if "step time" in set(self.summary["metric"]) else "span")
        return a / b if b else float("nan")

    @property
    def gpu_speedup(self) -> float:
        """Total GPU time of A over that of B (per step when both have steps)."""
        a, b = self.metric("GPU time")
        return a / b if b else float("nan")


def _empty(cols: list[str]) -> pd.DataFrame:
    df: pd.DataFrame = pd.DataFrame({c: pd.Series([], dtype=object) for c in cols})
    return df


def in_steps(t: Trace) -> tuple[Trace, int]:
    """``t`` with only the GPU rows launched inside a profiler step, and the step count.

    A GPU row belongs to the step whose host range holds its launch call (found through
    ``corr``), not its own start: kernels run after the host has moved on, and a step's
    last kernels often start after the step's host range ended. Rows with no launch call
    use their own start. Without steps the whole trace counts as one step.
    """
    steps = t.steps()
    if steps.empty:
        return t, 1
    ev = t.events
    is_gpu = ev["kind"].isin(GPU_KINDS).to_numpy()
    at = launch_times(t)
    starts, ends = steps["ts"].to_numpy(), steps["end"].to_numpy()
    k = np.searchsorted(starts, at, side="right") - 1
    inside = (k >= 0) & (at < ends[np.clip(k, 0, None)])
    keep = ~is_gpu
    keep[np.flatnonzero(is_gpu)[inside]] = True
    return replace(t, events=ev[keep]), len(steps)


def _facts(t: Trace) -> dict[str, float]:
    scoped, nsteps = in_steps(t)
    gpu = scoped.gpu()
    kern = gpu[gpu["kind"] == "kernel"]
    steps = t.steps()
    per = float(nsteps)
    window = int((gpu["ts"] + gpu["dur"]).max() - gpu["ts"].min()) if not gpu.empty else 0
    busy = busy_ns(gpu["ts"].to_numpy(), gpu["dur"].to_numpy())
    return {
        "span": t.span_ns / 1e6,
        "steps": float(len(steps)),
        "step time": float(steps["dur"].mean()) / 1e6 if len(steps) else float("nan"),
        "GPU time": float(gpu["dur"].sum()) / 1e6 / per,
        "kernel time": float(kern["dur"].sum()) / 1e6 / per,
        "GPU busy": busy / 1e6 / per,
        # Idle inside the window the GPU was in use: gaps between the steps' GPU work.
        "GPU idle": (window - busy) / 1e6 / per,
        "kernels": len(kern) / per,
        "copies": float((gpu["kind"] == "memcpy").sum()) / per,
        "distinct kernels": float(kern["name"].nunique()),
        **_launch_facts(t),
    }


def _launch_facts(t: Trace) -> dict[str, float]:
    """Launch overhead per step: GPU time spent waiting on the CPU, and launch delay."""
    from traceforge.analyzers.launch import launch_overhead

    # A trace with no GPU activity has no launch overhead (and launch_overhead would fail).
    st = launch_overhead(t).steps if len(t.gpu()) else pd.DataFrame()
    if st.empty:
        return {"host wait": float("nan"), "launch delay (median)": float("nan"),
                "launch-bound steps": 0.0}
    return {
        "host wait": float(st["host_wait_ns"].mean()) / 1e6,
        "launch delay (median)": float(st["median_launch_delay_us"].median()),
        "launch-bound steps": float((st["verdict"] == "launch-bound").sum()),
    }


_UNITS = {
    "span": "ms", "steps": "", "step time": "ms", "GPU time": "ms/step",
    "kernel time": "ms/step", "GPU busy": "ms/step", "GPU idle": "ms/step",
    "kernels": "per step", "copies": "per step", "distinct kernels": "",
    "host wait": "ms/step", "launch delay (median)": "us", "launch-bound steps": "",
}


def _summary(a: Trace, b: Trace) -> pd.DataFrame:
    fa, fb = _facts(a), _facts(b)
    rows = []
    for m in fa:
        va, vb = fa[m], fb[m]
        if m == "step time" and (np.isnan(va) or np.isnan(vb)):
            continue
        ratio = vb / va if va else float("nan")
        rows.append((m, _UNITS[m], va, vb, vb - va, ratio))
    res: pd.DataFrame = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    return res


def _grouped(a: Trace, b: Trace, by: str, na: int, nb: int) -> pd.DataFrame:
    ta = top_kernels(a, by=by, include_memory=True)
    tb = top_kernels(b, by=by, include_memory=True)
    ka = ta.set_index(ta[by].astype(str))[["total_us", "calls"]]
    kb = tb.set_index(tb[by].astype(str))[["total_us", "calls"]]
    j = ka.join(kb, how="outer", lsuffix="_a", rsuffix="_b")
    out = pd.DataFrame(
        {
            by: j.index.to_numpy(),
            "a_us": j["total_us_a"].fillna(0.0).to_numpy(dtype=float) / na,
            "b_us": j["total_us_b"].fillna(0.0).to_numpy(dtype=float) / nb,
            "a_calls": j["calls_a"].fillna(0).to_numpy(dtype=float) / na,
            "b_calls": j["calls_b"].fillna(0).to_numpy(dtype=float) / nb,
        }
    )
    out["delta_us"] = out["b_us"] - out["a_us"]
    out["speedup"] = _speedup(out["a_us"].to_numpy(), out["b_us"].to_numpy())
    out = out[[by, "a_us", "b_us", "delta_us", "speedup", "a_calls", "b_calls"]]
    order = np.lexsort((out[by].to_numpy(), -np.maximum(out["a_us"], out["b_us"]).to_numpy()))
    res: pd.DataFrame = out.iloc[order].reset_index(drop=True)
    return res


def _speedup(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b where both ran; NaN when either side has none (no speedup to speak of)."""
    ok = (a > 0) & (b > 0)
    return np.where(ok, a / np.where(ok, b, 1.0), np.nan)


def _per_name(t: Trace, n: int) -> pd.DataFrame:
    kt = kernel_table(t)
    if kt.empty:
        cols = ["name", "short", "class", "family", "calls", "total_us"]
        return _empty(cols)
    g = kt.groupby("name", sort=False)
    out = g.agg(
        short=("short", "first"), cls=("class", "first"), family=("family", "first"),
        calls=("dur", "size"), total_ns=("dur", "sum"),
    ).reset_index()
    out["calls"] = out["calls"] / n
    out["total_us"] = out["total_ns"] / 1e3 / n
    res: pd.DataFrame = out.rename(columns={"cls": "class"}).drop(columns="total_ns")
    return res


def _only(mine: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    sel = mine[~mine["name"].isin(set(other["name"]))]
    sel = sel.sort_values(["total_us", "name"], ascending=[False, True])
    out = sel[["short", "class", "family", "calls", "total_us"]].rename(columns={"short": "name"})
    res: pd.DataFrame = out.reset_index(drop=True)
    return res


def _replacements(
    a: Trace, na: int, only_a: pd.DataFrame, only_b: pd.DataFrame
) -> pd.DataFrame:
    """B-only fused kernels with the A-only kernels launched by the ops they fuse."""
    cols = ["fused_kernel", "fused_ops", "b_calls", "b_us", "replaces", "a_kernels", "a_calls",
            "a_us"]
    fused = only_b[only_b["name"].map(lambda n: bool(fused_ops(n)))]
    if fused.empty:
        return _empty(cols)
    from traceforge.analyzers.ops import kernel_ops

    kt = kernel_table(a)
    op_of = kernel_ops(a)
    kt["op"] = op_of.reindex(kt["row"].to_numpy()).to_numpy()
    a_only_names = set(only_a["name"])
    kt = kt[kt["short"].isin(a_only_names) & kt["op"].notna()]
    kt["op"] = kt["op"].astype(str).str.replace(r"^aten::", "", regex=True)
    rows = []
    for r in fused.itertuples(index=False):
        ops = [o for o in fused_ops(str(r.name)) if o not in _VIEW_OPS]
        hit = kt[kt["op"].isin(ops)]
        per = hit.groupby("short")["dur"].sum().sort_values(ascending=False)
        rows.append(
            (r.name, "+".join(fused_ops(str(r.name))), float(r.calls), float(r.total_us),
             ", ".join(per.index[:3].astype(str)) + (" ..." if len(per) > 3 else ""),
             int(len(per)), len(hit) / na, float(hit["dur"].sum()) / 1e3 / na)
        )
    out = pd.DataFrame(rows, columns=cols)
    out = out.sort_values(["b_us", "fused_kernel"], ascending=[False, True])
    res: pd.DataFrame = out.reset_index(drop=True)
    return res


def _ops(a: Trace, b: Trace, na: int, nb: int) -> pd.DataFrame:
    from traceforge.analyzers.ops import ops

    oa, ob = ops(a), ops(b)
    cols = ["op", "a_us", "b_us", "delta_us", "speedup", "a_calls", "b_calls"]
    if oa.empty or ob.empty:
        return _empty(cols)
    j = oa.set_index("op")[["self_gpu_us", "calls"]].join(
        ob.set_index("op")[["self_gpu_us", "calls"]], how="inner", lsuffix="_a", rsuffix="_b"
    )
    out = pd.DataFrame(
        {
            "op": j.index.astype(str),
            "a_us": j["self_gpu_us_a"].astype(float).to_numpy() / na,
            "b_us": j["self_gpu_us_b"].astype(float).to_numpy() / nb,
            "a_calls": j["calls_a"].astype(float).to_numpy() / na,
            "b_calls": j["calls_b"].astype(float).to_numpy() / nb,
        }
    )
    out["delta_us"] = out["b_us"] - out["a_us"]
    out["speedup"] = _speedup(out["a_us"].to_numpy(), out["b_us"].to_numpy())
    out = out[cols]
    out = out.sort_values(["a_us", "op"], ascending=[False, True])
    res: pd.DataFrame = out.reset_index(drop=True)
    return res


def diff(a: Trace, b: Trace) -> TraceDiff:
    """Compare run ``a`` (baseline) with run ``b``: time, counts, classes, kernels, ops.

    Every time and count is per profiler step when a run has steps (runs often record
    different numbers of steps): GPU work launched inside the steps, divided by their
    number. Without steps the whole trace is one step.
    """
    sa, na = in_steps(a)
    sb, nb = in_steps(b)
    pa, pb = _per_name(sa, na), _per_name(sb, nb)
    only_a, only_b = _only(pa, pb), _only(pb, pa)
    # _replacements reads the fused op list from full names, so it gets B's full rows.
    only_b_full = pb[~pb["name"].isin(set(pa["name"]))]
    notes: tuple[str, ...] = ()
    if a.steps().empty != b.steps().empty:
        side = "A" if a.steps().empty else "B"
        notes = (f"{side} has no profiler steps: its numbers cover the whole trace, the "
                 "other side's one step; compare with care or trim both to one iteration.",)
    return TraceDiff(
        notes=notes,
        summary=_summary(a, b),
        by_class=_grouped(sa, sb, "class", na, nb),
        by_family=_grouped(sa, sb, "family", na, nb),
        only_a=only_a,
        only_b=only_b,
        replacements=_replacements(sa, na, only_a, only_b_full),
        ops=_ops(sa, sb, na, nb),
    )


__all__ = ["TraceDiff", "diff", "in_steps"]
