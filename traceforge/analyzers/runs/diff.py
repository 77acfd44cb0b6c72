"""Diff of two runs of the same workload: what got faster, what vanished, what replaced it.

``diff(a, b)`` compares run A (the baseline: eager, before a change) with run B (compiled,
after). Both can come from any reader, so an nsys capture can be compared with a Kineto one.
Everything is read from each trace's shared timeline: the GPU work a run's steps launched
(:func:`traceforge.analyzers.timeline.steps.membership`), divided by its number of steps, so runs
that recorded different numbers of steps compare per step. Kernels are matched by full
name; classes and families by the shared classifier.

Kernel families are named after the library that made them (``sm90_xmma``, ``Cijk``), so an
NVIDIA and an AMD run of one model share no family row; ``by_neutral`` lines them up by the
vendor-neutral family of :mod:`traceforge.analyzers.runs.vendor` (``library_gemm``,
``fused_attention``, ``collectives``...), naming each side's library.

Three ratios, each named for what it divides (A over B, so above 1 means B is faster):
``step-time speedup`` (mean host step, :func:`traceforge.analyzers.timeline.core.step_time_ns`;
the run's unprofiled step time from capture summaries is the ``run step time`` row,
:func:`traceforge.step_time.run_step_time`),
``GPU-time speedup`` (GPU activity time per step) and ``span ratio`` (whole trace spans,
which include start-up and profiler warm-up and rarely mean anything on their own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import numpy as np
import pandas as pd

from traceforge.analyzers.communication.runs import comm_diff
from traceforge.analyzers.memory import run_peak_memory
from traceforge.analyzers.names.kernel_names import classify, fused_ops
from traceforge.analyzers.runs.vendor import NEUTRAL_CLASSES, neutral_columns, vendor_of
from traceforge.analyzers.timeline.core import (
    Timeline,
    busy_table,
    kernels_per_step,
    step_time_ns,
    timeline,
)
from traceforge.model import Tables, Trace
from traceforge.step_time import run_step_time, summary_of

#: Columns of :attr:`TraceDiff.summary`.
SUMMARY_COLUMNS = ("metric", "unit", "a", "b", "delta", "ratio")

#: Fused-op names that are views or metadata changes: they launch no kernel in eager mode,
#: so matching a Triton kernel to eager kernels through them would only add noise.
_VIEW_OPS = frozenset(
    {"view", "t", "transpose", "permute", "reshape", "unsqueeze", "squeeze", "expand",
     "split", "slice", "select", "as_strided", "_unsafe_view", "alias", "clone", "full"}
)


@dataclass(frozen=True)
class TraceDiff(Tables):
    """The tables of one A/B comparison (times in us unless a column says ms).

    ``summary``: metric, unit, a, b, delta (b - a), ratio (b / a).
    ``by_class`` / ``by_family``: key, a_us, b_us, delta_us, speedup (a / b), a_calls, b_calls.
    ``by_neutral``: the same per vendor-neutral class and family (``class``, ``family``),
    with the library each side ran it with (``a_library``, ``b_library``), so that an NVIDIA
    and an AMD run line up row by row; ordered by class, then by time.
    ``only_a`` / ``only_b``: kernels seen in one run only: name, class, family, calls, total_us.
    ``replacements``: B-only fused kernels, the ops they fuse and the A-only kernels that
    those ops launched in A (matched by op name, so an A kernel can feed several rows).
    ``ops``: operators present in both runs with their self GPU time change.
    ``step_sources``: where each side's steps came from.
    """

    summary: pd.DataFrame
    by_class: pd.DataFrame
    by_family: pd.DataFrame
    by_neutral: pd.DataFrame
    only_a: pd.DataFrame
    only_b: pd.DataFrame
    replacements: pd.DataFrame
    ops: pd.DataFrame
    notes: tuple[str, ...] = ()
    step_sources: tuple[str, str] = ("", "")
    #: Collective busbw per kind, A and B side by side
    #: (:func:`~traceforge.analyzers.communication.runs.comm_diff`).
    comm: pd.DataFrame = field(default_factory=pd.DataFrame)

    def metric(self, name: str) -> tuple[float, float]:
        """The (a, b) values of one summary metric."""
        row = self.summary[self.summary["metric"] == name]
        if row.empty:
            raise KeyError(name)
        return float(row["a"].iloc[0]), float(row["b"].iloc[0])

    def _ratio(self, name: str) -> float:
        a, b = self.metric(name)
        return a / b if b else float("nan")

    @property
    def step_time_speedup(self) -> float:
        """Step time of A over that of B (mean host step; GPU window without steps)."""
        return self._ratio("step time")

    @property
    def gpu_time_speedup(self) -> float:
        """GPU activity time per step of A over that of B."""
        return self._ratio("GPU time")

    @property
    def span_ratio(self) -> float:
        """Whole-trace span of A over that of B (start-up and warm-up included)."""
        return self._ratio("trace span")

    def headline(self) -> str:
        """One line with the three ratios, each saying what it divides."""
        return (f"step-time speedup {self.step_time_speedup:.2f}x (mean step A / B), "
                f"GPU-time speedup {self.gpu_time_speedup:.2f}x (GPU time per step A / B), "
                f"span ratio {self.span_ratio:.2f}x (trace span A / B)")


def _empty(cols: list[str]) -> pd.DataFrame:
    df: pd.DataFrame = pd.DataFrame({c: pd.Series([], dtype=object) for c in cols})
    return df


@dataclass(frozen=True)
class _Side:
    """One run's timeline, the activity its steps launched, and its number of steps."""

    trace: Trace
    tl: Timeline
    acts: pd.DataFrame
    n: int
    include_outliers: bool = False

    @classmethod
    def of(cls, t: Trace, include_outliers: bool = False) -> _Side:
        tl = timeline(t)
        return cls(t, tl, tl.in_steps(), max(1, len(tl.steps.ranges)), include_outliers)


def _facts(s: _Side) -> dict[str, float]:
    acts, per = s.acts, float(s.n)
    dur = (acts["end"] - acts["ts"]).to_numpy()
    kern = (acts["kind"] == "kernel").to_numpy()
    b = busy_table(s.tl)
    st = step_time_ns(s.tl, s.include_outliers)
    run = run_step_time(summary_of(s.trace.meta.extra), s.include_outliers)
    busy = float(b["busy_ns"].iloc[-1]) if len(b) else 0.0
    idle = float(b["idle_ns"].iloc[-1]) if len(b) else 0.0
    return {
        "trace span": s.trace.span_ns / 1e6,
        "steps": float(len(s.tl.steps.ranges)),
        "step time": st / 1e6 if st is not None else float("nan"),
        # The run's step time from the capture summary (traceforge.step_time).
        "run step time": run.ms if run else float("nan"),
        "samples/s": (run.samples_per_s or float("nan")) if run else float("nan"),
        "tokens/s": (run.tokens_per_s or float("nan")) if run else float("nan"),
        "GPU time": float(dur.sum()) / 1e6 / per,
        "kernel time": float(dur[kern].sum()) / 1e6 / per,
        "GPU busy": busy / 1e6 / per,
        "GPU idle": idle / 1e6 / per,
        "GPU busy %": float(b["busy_pct"].iloc[-1]) if len(b) else float("nan"),
        "kernels": float(kernels_per_step(s.tl, s.include_outliers)),
        "copies": float((acts["kind"] == "memcpy").sum()) / per,
        "distinct kernels": float(acts.loc[kern, "name"].nunique()),
        **_launch_facts(s.trace),
        "peak memory": _peak_mib(s.trace),
    }


def _peak_mib(t: Trace) -> float:
    """The trace's peak allocated GPU memory (:func:`~traceforge.analyzers.memory.
    run_peak_memory`), MiB; NaN without memory events."""
    peak = run_peak_memory([t])[0]
    return float("nan") if peak is None else peak / 2**20


def _launch_facts(t: Trace) -> dict[str, float]:
    """Launch overhead per step: GPU time spent waiting on the CPU, and launch delay."""
    from traceforge.analyzers.timing.launch import launch_overhead

    st = launch_overhead(t).steps if not timeline(t).activity.empty else pd.DataFrame()
    if st.empty:
        return {"host wait": float("nan"), "queue time (median)": float("nan"),
                "launch latency (median)": float("nan"), "launch-bound steps": 0.0}
    return {
        "host wait": float(st["host_wait_ns"].mean()) / 1e6,
        # Its two parts (traceforge.analyzers.timing.launch.delay_split): waiting behind earlier
        # GPU work, and the GPU idle until the launch arrived.
        "queue time (median)": float(st["median_queue_us"].median()),
        "launch latency (median)": float(st["median_launch_latency_us"].median()),
        "launch-bound steps": float((st["verdict"] == "launch-bound").sum()),
    }


_UNITS = {
    "trace span": "ms", "steps": "", "step time": "ms", "run step time": "ms",
    "samples/s": "/s", "tokens/s": "/s", "GPU time": "ms/step",
    "kernel time": "ms/step", "GPU busy": "ms/step", "GPU idle": "ms/step", "GPU busy %": "%",
    "kernels": "per step", "copies": "per step", "distinct kernels": "",
    "host wait": "ms/step", "queue time (median)": "us",
    "launch latency (median)": "us", "launch-bound steps": "",
    "peak memory": "MiB",
}


#: Metrics shown only where a run has them (capture summaries).
_OPTIONAL = frozenset({"run step time", "samples/s", "tokens/s"})


def _summary(a: _Side, b: _Side) -> pd.DataFrame:
    fa, fb = _facts(a), _facts(b)
    rows = []
    for m in fa:
        va, vb = fa[m], fb[m]
        if (m in _OPTIONAL or m == "peak memory") and va != va and vb != vb:
            continue  # neither run has a capture summary (or memory events) that says it
        ratio = vb / va if va else float("nan")
        rows.append((m, _UNITS[m], va, vb, vb - va, ratio))
    res: pd.DataFrame = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    return res


def _grouped(a: _Side, b: _Side, by: str) -> pd.DataFrame:
    col = "cls" if by == "class" else by

    def per(s: _Side) -> pd.DataFrame:
        x = pd.DataFrame({by: s.acts[col].astype(str).to_numpy(),
                          "d": (s.acts["end"] - s.acts["ts"]).to_numpy()})
        return cast("pd.DataFrame", x.groupby(by)["d"].agg(["sum", "size"]))

    j = per(a).merge(per(b), how="outer", left_index=True, right_index=True,
                     suffixes=("_a", "_b")).fillna(0)
    out = pd.DataFrame({by: j.index.astype(str).to_numpy(), **_per_step(j, a, b)})
    out = out[[by, "a_us", "b_us", "delta_us", "speedup", "a_calls", "b_calls"]]
    order = np.lexsort((out[by].to_numpy(), -np.maximum(out["a_us"], out["b_us"]).to_numpy()))
    res: pd.DataFrame = out.iloc[order].reset_index(drop=True)
    return res


def _per_step(j: pd.DataFrame, a: _Side, b: _Side) -> dict[str, np.ndarray]:
    """From a join of both sides' ``sum``/``size`` (suffixes _a, _b): time (us) and calls
    per step on each side, their delta and the speedup (a / b)."""
    cols = {"a_us": j["sum_a"].to_numpy(dtype=float) / 1e3 / a.n,
            "b_us": j["sum_b"].to_numpy(dtype=float) / 1e3 / b.n,
            "a_calls": j["size_a"].to_numpy(dtype=float) / a.n,
            "b_calls": j["size_b"].to_numpy(dtype=float) / b.n}
    cols["delta_us"] = cols["b_us"] - cols["a_us"]
    cols["speedup"] = _speedup(cols["a_us"], cols["b_us"])
    return cols


def _neutral(a: _Side, b: _Side) -> pd.DataFrame:
    """GPU time per step by vendor-neutral (class, family), each side's libraries named."""
    keys = ["class", "family"]

    def per(s: _Side) -> tuple[pd.DataFrame, pd.Series]:
        nc = neutral_columns(s.acts, vendor_of(s.trace))
        x = pd.DataFrame({"class": nc["ncls"].to_numpy(), "family": nc["nfamily"].to_numpy(),
                          "library": nc["library"].to_numpy(),
                          "d": (s.acts["end"] - s.acts["ts"]).to_numpy(dtype=float)})
        g = cast("pd.DataFrame", x.groupby(keys)["d"].agg(["sum", "size"]))
        # The libraries of a family, most time first ("" for PyTorch's own kernels' none).
        lib = x.groupby([*keys, "library"])["d"].sum().reset_index().sort_values(
            ["d", "library"], ascending=[False, True], kind="stable")
        libs = lib.groupby(keys, sort=False)["library"].agg(
            lambda v: ", ".join(n for n in dict.fromkeys(v) if n))
        return g, libs

    (ga, la), (gb, lb) = per(a), per(b)
    j = ga.merge(gb, how="outer", left_index=True, right_index=True,
                 suffixes=("_a", "_b")).fillna(0)
    idx = j.index
    out = pd.DataFrame({
        "class": idx.get_level_values(0).astype(str), "family": idx.get_level_values(1).astype(str),
        "a_library": la.reindex(idx).fillna("").to_numpy(),
        "b_library": lb.reindex(idx).fillna("").to_numpy(),
        **_per_step(j, a, b),
    })
    rank = {c: i for i, c in enumerate(NEUTRAL_CLASSES)}
    order = np.lexsort((out["family"].to_numpy(),
                        -np.maximum(out["a_us"], out["b_us"]).to_numpy(),
                        [rank.get(c, len(rank)) for c in out["class"]]))
    cols = ["class", "family", "a_library", "b_library", "a_us", "b_us", "delta_us", "speedup",
            "a_calls", "b_calls"]
    return cast("pd.DataFrame", out.iloc[order][cols].reset_index(drop=True))


def _speedup(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b where both ran; NaN when either side has none (no speedup to speak of)."""
    ok = (a > 0) & (b > 0)
    return np.where(ok, a / np.where(ok, b, 1.0), np.nan)


def _kernels(s: _Side) -> pd.DataFrame:
    """The side's kernels (no copies) with short name and op, per row."""
    k = s.acts[s.acts["kind"] == "kernel"]
    return cast("pd.DataFrame", pd.DataFrame({"name": k["name"].to_numpy(),
                         "short": [classify(n).short for n in k["name"]],
                         "class": k["cls"].to_numpy(), "family": k["family"].to_numpy(),
                         "dur": (k["end"] - k["ts"]).to_numpy(),
                         "op": k["op_name"].to_numpy()}))


def _per_name(s: _Side) -> pd.DataFrame:
    kt = _kernels(s)
    if kt.empty:
        return _empty(["name", "short", "class", "family", "calls", "total_us"])
    g = kt.groupby("name", sort=False)
    out = g.agg(
        short=("short", "first"), cls=("class", "first"), family=("family", "first"),
        calls=("dur", "size"), total_ns=("dur", "sum"),
    ).reset_index()
    out["calls"] = out["calls"] / s.n
    out["total_us"] = out["total_ns"] / 1e3 / s.n
    res: pd.DataFrame = out.rename(columns={"cls": "class"}).drop(columns="total_ns")
    return res


def _only(mine: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    sel = mine[~mine["name"].isin(set(other["name"]))]
    sel = sel.sort_values(["total_us", "name"], ascending=[False, True])
    out = sel[["short", "class", "family", "calls", "total_us"]].rename(columns={"short": "name"})
    res: pd.DataFrame = out.reset_index(drop=True)
    return res


def _replacements(a: _Side, only_a: pd.DataFrame, only_b: pd.DataFrame) -> pd.DataFrame:
    """B-only fused kernels with the A-only kernels launched by the ops they fuse."""
    cols = ["fused_kernel", "fused_ops", "b_calls", "b_us", "replaces", "a_kernels", "a_calls",
            "a_us"]
    fused = only_b[only_b["name"].map(lambda n: bool(fused_ops(n)))]
    if fused.empty:
        return _empty(cols)
    kt = _kernels(a)
    kt = kt[kt["short"].isin(set(only_a["name"])) & (kt["op"] != "")]
    kt = kt.assign(op=kt["op"].str.replace(r"^aten::", "", regex=True))
    rows = []
    for r in fused.itertuples(index=False):
        ops = [o for o in fused_ops(str(r.name)) if o not in _VIEW_OPS]
        hit = kt[kt["op"].isin(ops)]
        per = hit.groupby("short")["dur"].sum().sort_values(ascending=False)
        rows.append(
            (r.name, "+".join(fused_ops(str(r.name))), float(r.calls), float(r.total_us),
             ", ".join(per.index[:3].astype(str)) + (" ..." if len(per) > 3 else ""),
             int(len(per)), len(hit) / a.n, float(hit["dur"].sum()) / 1e3 / a.n)
        )
    out = pd.DataFrame(rows, columns=cols)
    out = out.sort_values(["b_us", "fused_kernel"], ascending=[False, True])
    res: pd.DataFrame = out.reset_index(drop=True)
    return res


def _ops(a: _Side, b: _Side) -> pd.DataFrame:
    from traceforge.analyzers.timing.ops import ops

    oa, ob = ops(a.trace), ops(b.trace)
    cols = ["op", "a_us", "b_us", "delta_us", "speedup", "a_calls", "b_calls"]
    if oa.empty or ob.empty:
        return _empty(cols)
    j = oa.set_index("op")[["self_gpu_us", "calls"]].merge(
        ob.set_index("op")[["self_gpu_us", "calls"]], how="inner", left_index=True,
        right_index=True, suffixes=("_a", "_b"))
    out = pd.DataFrame(
        {
            "op": j.index.astype(str),
            "a_us": j["self_gpu_us_a"].astype(float).to_numpy() / a.n,
            "b_us": j["self_gpu_us_b"].astype(float).to_numpy() / b.n,
            "a_calls": j["calls_a"].astype(float).to_numpy() / a.n,
            "b_calls": j["calls_b"].astype(float).to_numpy() / b.n,
        }
    )
    out["delta_us"] = out["b_us"] - out["a_us"]
    out["speedup"] = _speedup(out["a_us"].to_numpy(), out["b_us"].to_numpy())
    out = out[cols]
    out = out.sort_values(["a_us", "op"], ascending=[False, True])
    res: pd.DataFrame = out.reset_index(drop=True)
    return res


def diff(a: Trace, b: Trace, *, include_outliers: bool = False) -> TraceDiff:
    """Compare run ``a`` (baseline) with run ``b``: time, counts, classes, kernels, ops.

    Every time and count is per step when a run has steps: GPU work its steps launched,
    divided by their number. Without steps the whole trace is one step. The step time
    and kernels per step leave outlier steps out unless ``include_outliers``.
    """
    sa, sb = _Side.of(a, include_outliers), _Side.of(b, include_outliers)
    pa, pb = _per_name(sa), _per_name(sb)
    only_a, only_b = _only(pa, pb), _only(pb, pa)
    # _replacements reads the fused op list from full names, so it gets B's full rows.
    only_b_full = pb[~pb["name"].isin(set(pa["name"]))]
    notes: tuple[str, ...] = ()
    if sa.tl.steps.empty != sb.tl.steps.empty:
        side = "A" if sa.tl.steps.empty else "B"
        notes = (f"{side} has no steps: its numbers cover the whole trace, the other "
                 "side's one step; give both the same --steps-from, or trim both to one "
                 "iteration.",)
    return TraceDiff(
        notes=notes + tuple(sa.tl.notes) + tuple(sb.tl.notes),
        summary=_summary(sa, sb),
        by_class=_grouped(sa, sb, "class"),
        by_family=_grouped(sa, sb, "family"),
        by_neutral=_neutral(sa, sb),
        only_a=only_a,
        only_b=only_b,
        replacements=_replacements(sa, only_a, only_b_full),
        ops=_ops(sa, sb),
        step_sources=(sa.tl.step_source, sb.tl.step_source),
        comm=comm_diff(a, b),
    )


__all__ = ["TraceDiff", "diff"]
