"""Every analyzer run over one run (one or more ranks), gathered for reports and findings.

``analyze(traces)`` is pure: it calls the analyzers and keeps their tables; the report
renderers format them and :mod:`traceforge.analyzers.findings` turns them into advice.
Per-kernel tables, idle gaps, launch overhead and the timeline come from the first rank;
breakdown and overlap cover every rank.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from traceforge.analyzers.kernel_names import classify
from traceforge.errors import TraceforgeError
from traceforge.model import Trace

#: Most GPU activities drawn in the one-step timeline strip (the HTML stays small).
TIMELINE_MAX = 4000

_COPY_PAT = r"HtoD|DtoH|Host|Pageable|Pinned"

T = TypeVar("T")


@dataclass(frozen=True)
class RunAnalysis:
    """The tables of one run. Frames are empty (and the name is in ``unavailable`` with
    the reason) when an analysis could not run on this input."""

    label: str
    paths: tuple[str, ...]
    overview: pd.DataFrame  # field, value
    devices: pd.DataFrame
    by_class: pd.DataFrame
    top_kernels: pd.DataFrame
    ops: pd.DataFrame
    idle_summary: pd.DataFrame
    idle_gaps: pd.DataFrame  # the longest gaps
    idle_histogram: pd.DataFrame
    breakdown: pd.DataFrame
    overlap: pd.DataFrame
    skew: pd.DataFrame  # per rank: how often its collectives started last (several ranks)
    launch: pd.DataFrame  # per step
    copies: pd.DataFrame  # host<->device copies inside steps
    syncs: pd.DataFrame  # synchronizing API calls inside steps
    gemm: pd.DataFrame  # GEMM ops with achieved TFLOP/s (peak % is the findings' job)
    timeline: pd.DataFrame  # one step's GPU activity: ts (ns from window start), dur, ...
    timeline_step: int
    device_name: str
    facts: dict[str, float] = field(default_factory=dict)
    run_info: dict[str, Any] = field(default_factory=dict)  # latency, memory from capture
    unavailable: dict[str, str] = field(default_factory=dict)


def _empty(cols: Sequence[str]) -> pd.DataFrame:
    df: pd.DataFrame = pd.DataFrame({c: pd.Series([], dtype=object) for c in cols})
    return df


def _try(name: str, fn: Callable[[], T], default: T, missing: dict[str, str]) -> T:
    """Run one analysis; an input it cannot handle leaves its section empty, with why."""
    try:
        return fn()
    except (TraceforgeError, ImportError) as e:
        missing[name] = str(e)
        return default


def _label(traces: Sequence[Trace]) -> str:
    tf = traces[0].meta.extra.get("traceforge")
    if isinstance(tf, dict):
        mode = tf.get("mode")
        if isinstance(mode, dict) and mode.get("mode"):
            return str(mode["mode"])
    name = traces[0].meta.path.rsplit("/", 1)[-1] or "trace"
    for suffix in (".gz", ".json", ".trace", ".pt", ".sqlite", ".csv"):
        name = name.removesuffix(suffix)
    return name


def _run_info(traces: Sequence[Trace]) -> dict[str, Any]:
    """Latency and memory measured by ``traceforge capture`` (outside the profiler)."""
    tf = traces[0].meta.extra.get("traceforge")
    info: dict[str, Any] = {}
    if not isinstance(tf, dict):
        return info
    steps = tf.get("steps") or {}
    wall = [float(x) for x in steps.get("wall_s") or [] if x]
    if wall:
        info["latency_ms"] = float(np.median(wall)) * 1e3
    peak = [int(x) for x in steps.get("peak_memory_bytes") or [] if x]
    if peak:
        info["memory_gib"] = max(peak) / 2**30
    return info


def _timeline(trace: Trace, acts: pd.DataFrame, windows: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    cols = ["ts", "dur", "stream", "cls", "name"]
    if acts.empty or windows.empty:
        return _empty(cols), -1
    w = windows.iloc[-1]  # the last step: warm-up effects are most likely gone
    lo, hi = int(w["ts"]), int(w["end"])
    a = acts[(acts["ts"] >= lo) & (acts["ts"] < hi)]
    if len(a) > TIMELINE_MAX:
        a = a.nlargest(TIMELINE_MAX, "end").sort_values("ts")
    out = pd.DataFrame({
        "ts": a["ts"].to_numpy() - lo, "dur": (a["end"] - a["ts"]).to_numpy(),
        "stream": a["stream"].to_numpy(), "cls": a["cls"].astype(str).to_numpy(),
        "name": [classify(n).short for n in a["name"]],
    })
    out.attrs["window_ns"] = hi - lo
    return out, int(w["step"])


def _copies(acts: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    from traceforge.analyzers.launch import assign_step

    cols = ["step", "name", "count", "total_us"]
    if acts.empty:
        return _empty(cols)
    m = acts[(acts["kind"] == "memcpy") & acts["name"].str.contains(_COPY_PAT, regex=True)]
    m = m.assign(step=assign_step(windows, m["ts"].to_numpy()))
    m = m[m["step"] != -2]
    if m.empty:
        return _empty(cols)
    g = m.assign(d=m["end"] - m["ts"]).groupby(["step", "name"], sort=True)["d"]
    out: pd.DataFrame = g.agg(["size", "sum"]).reset_index()
    out.columns = ["step", "name", "count", "total_us"]
    out["total_us"] = out["total_us"] / 1e3
    return out


def _syncs(trace: Trace) -> pd.DataFrame:
    from traceforge.analyzers.launch import SYNC_APIS

    cols = ["name", "calls", "total_us", "max_us"]
    ev = trace.events
    steps = trace.steps()
    s = ev[ev["kind"].isin(("runtime", "driver", "sync")) & ev["name"].isin(SYNC_APIS)]
    if len(steps):
        k = np.searchsorted(steps["ts"].to_numpy(), s["ts"].to_numpy(), side="right") - 1
        ends = steps["end"].to_numpy()[np.clip(k, 0, None)]
        s = s[(k >= 0) & (s["ts"].to_numpy() < ends)]
    if s.empty:
        return _empty(cols)
    g = s.groupby(s["name"].astype(str))["dur"]
    out = g.agg(["size", "sum", "max"]).reset_index()
    out.columns = cols
    out["total_us"] = out["total_us"] / 1e3
    out["max_us"] = out["max_us"] / 1e3
    res: pd.DataFrame = out.sort_values("total_us", ascending=False).reset_index(drop=True)
    return res


_GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul",
             "aten::linear", "aten::_scaled_mm", "aten::addbmm")


def _gemm(op_table: pd.DataFrame) -> pd.DataFrame:
    if op_table.empty or "tflops_per_s" not in op_table:
        return _empty(["op", "self_gpu_us", "calls", "tflops_per_s"])
    g = op_table[op_table["op"].isin(_GEMM_OPS) & op_table["tflops_per_s"].notna()]
    res: pd.DataFrame = g[["op", "self_gpu_us", "calls", "tflops_per_s"]].reset_index(drop=True)
    return res


def analyze(traces: Trace | Sequence[Trace], *, label: str | None = None, top: int = 15
            ) -> RunAnalysis:
    """Run every analyzer over one run (its ranks' traces) and keep the tables."""
    from traceforge.analyzers.breakdown import breakdown
    from traceforge.analyzers.idle import idle_gaps
    from traceforge.analyzers.kernels import top_kernels
    from traceforge.analyzers.launch import gpu_activity, launch_overhead, step_windows
    from traceforge.analyzers.ops import ops
    from traceforge.analyzers.overlap import overlap
    from traceforge.analyzers.summary import summary

    ts = [traces] if isinstance(traces, Trace) else list(traces)
    t = ts[0]
    miss: dict[str, str] = {}
    summ = summary(t)
    acts = _try("launch", lambda: gpu_activity(t), _empty(["ts", "end"]), miss)
    windows = _try("launch", lambda: step_windows(t, acts), _empty(["step", "ts", "end"]), miss)
    idle = _try("idle", lambda: idle_gaps(t, min_gap_ns=1000), None, miss)
    bd = _try("breakdown", lambda: breakdown(ts), _empty(["rank", "step"]), miss)
    ovr = _try("overlap", lambda: overlap(ts), None, miss)
    ov = ovr.ranks if ovr is not None else _empty(["rank"])
    lo = _empty(["step", "verdict"])
    if len(acts):  # CPU-only traces: no launches to judge
        lo = _try("launch", lambda: launch_overhead(t).steps, lo, miss)
    op_table = _try("ops", lambda: ops(t), _empty(["op"]), miss)
    timeline, tstep = _timeline(t, acts, windows)
    devices = summ.devices
    dev_name = str(devices["name"].iloc[0]) if len(devices) else ""
    facts: dict[str, float] = {"span_ms": t.span_ns / 1e6, "ranks": float(len(ts)),
                               "kernels": float(len(t.kernels()))}
    steps = t.steps()
    if len(steps):
        facts["step_ms"] = float(steps["dur"].mean()) / 1e6
        facts["steps"] = float(len(steps))
    total = bd[bd["step"] == -1] if len(bd) and (bd["step"] == -1).any() else bd
    if len(total) and "idle_pct" in total:
        facts["busy_pct"] = float(100.0 - total["idle_pct"].astype(float).mean())
        facts["exposed_comm_pct"] = float(total["exposed_comm_pct"].astype(float).max())
    elif t.span_ns and len(acts):
        from traceforge.analyzers.summary import busy_ns

        facts["busy_pct"] = 100.0 * busy_ns(acts["ts"].to_numpy(),
                                            (acts["end"] - acts["ts"]).to_numpy()) / t.span_ns
    gaps = idle.gaps.nlargest(top, "dur") if idle is not None else _empty(["dur"])
    return RunAnalysis(
        label=label or _label(ts),
        paths=tuple(x.meta.path for x in ts),
        overview=summ.facts,
        devices=devices,
        by_class=top_kernels(t, by="class", include_memory=True),
        top_kernels=top_kernels(t, top),
        ops=op_table.head(top),
        idle_summary=idle.summary if idle is not None else _empty(["cause"]),
        idle_gaps=gaps,
        idle_histogram=idle.histogram if idle is not None else _empty(["bin"]),
        breakdown=bd,
        overlap=ov,
        skew=ovr.skew if ovr is not None else _empty(["rank"]),
        launch=lo,
        copies=_copies(acts, windows),
        syncs=_syncs(t),
        gemm=_gemm(op_table),
        timeline=timeline,
        timeline_step=tstep,
        device_name=dev_name,
        facts=facts,
        run_info=_run_info(ts),
        unavailable=miss,
    )


def group_runs(traces: Sequence[Trace]) -> list[list[Trace]]:
    """Split traces into runs: the ranks of one distributed run (same world size, distinct
    ranks) form one run; otherwise every trace is a run of its own (eager vs compiled)."""
    ranks = [t.meta.rank for t in traces]
    worlds = {t.meta.world_size for t in traces}
    if (len(traces) > 1 and None not in ranks and len(set(ranks)) == len(ranks)
            and len(worlds) == 1 and (next(iter(worlds)) or 0) > 1):
        return [sorted(traces, key=lambda t: int(t.meta.rank or 0))]
    return [[t] for t in traces]


def compare_runs(runs: Sequence[RunAnalysis]) -> pd.DataFrame:
    """One row per run: latency, throughput, memory, GPU busy, kernels and speedup.

    Latency is the capture's wall time per step (outside the profiler) when the trace
    carries it, else the mean profiled step (the profiler slows the host, so that column
    says which). Speedup is against the first run.
    """
    rows = []
    for r in runs:
        lat = r.run_info.get("latency_ms", r.facts.get("step_ms"))
        src = r.run_info.get("source", "capture") if "latency_ms" in r.run_info else "profiled step"
        steps = r.facts.get("steps", 1.0)
        rows.append({
            "run": r.label, "device": r.device_name, "ranks": int(r.facts.get("ranks", 1)),
            "latency_ms": lat, "latency_from": src if lat is not None else "",
            "throughput_per_s": 1e3 / lat if lat else None,
            "memory_gib": r.run_info.get("memory_gib"),
            "gpu_busy_pct": r.facts.get("busy_pct"),
            "kernels_per_step": r.facts.get("kernels", 0.0) / steps,
        })
    out: pd.DataFrame = pd.DataFrame(rows)
    if len(out):
        base = out["latency_ms"].iloc[0]
        out["speedup"] = [base / x if base and x else None for x in out["latency_ms"]]
        if out["memory_gib"].isna().all():
            out = out.drop(columns="memory_gib")
    return out


@dataclass(frozen=True)
class Annotations:
    """What ``traceforge annotate`` draws on a trace (times in ns since the trace start).

    ``gaps``: idle gaps (device, stream, step, ts, dur, cause, ...). ``windows``: the steps'
    GPU windows (step, ts, end). ``top``: full names of the top-N kernels, heaviest first.
    ``overlap``: state changes of the rank's communication: ts, overlapped (comm running
    under compute, 0/1), exposed (comm running alone, 0/1). ``kernel_classes``: full kernel
    name -> (class, family, detail).
    """

    rank: int
    gaps: pd.DataFrame
    windows: pd.DataFrame
    top: tuple[str, ...]
    overlap: pd.DataFrame
    kernel_classes: dict[str, tuple[str, str, str]]


def _indicator(sets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(times, 0/1 values) of a merged interval set: 1 at each start, 0 at each end."""
    if len(sets) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    t = np.column_stack([sets[:, 0], sets[:, 1]]).ravel()
    v = np.tile(np.array([1, 0], dtype=np.int64), len(sets))
    return t, v


def overlap_series(trace: Trace) -> pd.DataFrame:
    """Communication overlapped with / exposed from compute, as 0/1 steps over time."""
    from traceforge.analyzers import intervals as iv
    from traceforge.analyzers.breakdown import activity_sets
    from traceforge.analyzers.launch import gpu_activity

    acts = gpu_activity(trace)
    if acts.empty:
        empty: pd.DataFrame = pd.DataFrame({"ts": [0], "overlapped": [0], "exposed": [0]})
        return empty
    s = activity_sets(acts)
    both, alone = iv.intersect(s.comm, s.compute), iv.difference(s.comm, s.compute)
    tb, vb = _indicator(both)
    ta, va = _indicator(alone)
    t = np.unique(np.concatenate(([0], tb, ta)))
    # The value of an indicator at time x is the value of its last change at or before x.
    def at(times: np.ndarray, vals: np.ndarray) -> np.ndarray:
        if len(times) == 0:
            return np.zeros(len(t), np.int64)
        k = np.searchsorted(times, t, side="right") - 1
        return np.where(k >= 0, vals[np.clip(k, 0, None)], 0)

    out: pd.DataFrame = pd.DataFrame({"ts": t, "overlapped": at(tb, vb), "exposed": at(ta, va)})
    return out


def annotation_data(trace: Trace, *, top_n: int = 10, min_gap_ns: int = 1000) -> Annotations:
    """Everything ``annotate`` draws: idle gaps, step windows, top kernels, overlap."""
    from traceforge.analyzers.idle import idle_gaps
    from traceforge.analyzers.kernels import top_kernels
    from traceforge.analyzers.launch import gpu_activity, step_windows

    acts = gpu_activity(trace)
    windows = step_windows(trace, acts) if len(acts) else _empty(["step", "ts", "end"])
    if len(windows) and int(windows["step"].iloc[0]) == -1:
        windows = windows.iloc[0:0]  # no profiler steps: nothing to mark
    gaps = idle_gaps(trace, min_gap_ns=min_gap_ns).gaps
    tk = top_kernels(trace, top_n)
    names = trace.kernels()["name"].astype(str).unique()
    classes = {n: (k.cls, k.family, k.detail) for n in names for k in (classify(n),)}
    return Annotations(
        rank=0 if trace.meta.rank is None else int(trace.meta.rank),
        gaps=gaps.reset_index(drop=True),
        windows=windows[["step", "ts", "end"]].reset_index(drop=True),
        top=tuple(str(x) for x in tk.get("full_name", pd.Series([], dtype=object))),
        overlap=overlap_series(trace),
        kernel_classes=classes,
    )
