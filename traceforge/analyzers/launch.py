"""Launch correlation and launch overhead.

:func:`gpu_activity` maps every GPU activity (kernel, memcpy, memset) to the host call that
launched it (runtime/driver row with the same ``corr``) and to the framework op that issued
it (``ext``), and groups CUDA/HIP graph replays. :func:`step_windows` turns host-side
profiler steps into GPU-side windows. Every timeline analyzer starts from these two.
:func:`launch_overhead` answers "is this run launch-bound?".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from traceforge.analyzers import intervals as iv
from traceforge.analyzers.kernel_names import classify
from traceforge.model import GPU_KINDS, Trace

GRAPH_LAUNCH_APIS = frozenset({"cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"})
LAUNCH_APIS = GRAPH_LAUNCH_APIS | {
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cudaLaunchCooperativeKernel",
    "cudaLaunchCooperativeKernelMultiDevice",
    "hipLaunchKernel",
    "hipExtLaunchKernel",
    "hipModuleLaunchKernel",
    "hipExtModuleLaunchKernel",
    "hipLaunchCooperativeKernel",
    "cudaMemcpyAsync",
    "cudaMemsetAsync",
    "cudaMemcpy2DAsync",
    "cuMemcpyAsync",
    "cuMemsetD8Async",
    "cuMemsetD32Async",
    "hipMemcpyAsync",
    "hipMemsetAsync",
    "hipMemcpyWithStream",
}
#: Host calls that block the CPU until the GPU (or a stream/event) catches up. The
#: synchronous copies are listed because a DtoH ``cudaMemcpy`` waits for all prior work.
SYNC_APIS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaStreamWaitEvent",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
        "hipDeviceSynchronize",
        "hipStreamSynchronize",
        "hipEventSynchronize",
        "hipStreamWaitEvent",
        "cudaMemcpy",
        "hipMemcpy",
        "cudaMemcpy2D",
        "cuMemcpyDtoH",
        "cuMemcpyDtoH_v2",
    }
)

#: Columns of :func:`gpu_activity`.
ACTIVITY_COLUMNS = (
    "row",
    "name",
    "kind",
    "cls",
    "device",
    "stream",
    "ts",
    "end",
    "corr",
    "ext",
    "graph",
    "replay",
    "launch_row",
    "launch_name",
    "launch_ts",
    "launch_end",
    "launch_tid",
    "op_row",
    "op_name",
)


def gpu_activity(trace: Trace) -> pd.DataFrame:
    """One row per kernel/memcpy/memset, sorted by start, with launch call and issuing op.

    ``cls`` is the kernel class ("communication", "gemm", ...) or "memcpy"/"memset".
    ``replay`` is the correlation id of the graph launch that replayed the activity, or -1:
    graph-replayed kernels all carry the corr of one ``cudaGraphLaunch`` (the trace in
    h200-graphs has no ``graph id`` arg at all), so a corr shared by several activities,
    a graph launch API or a ``graph`` id marks a replay. ``launch_*`` are -1/"" when the
    launch call is not in the trace (e.g. launched before profiling began).
    """
    ev = trace.events
    g = ev[ev["kind"].isin(GPU_KINDS)]
    names = g["name"].astype(str).to_numpy()
    kind = g["kind"].astype(str).to_numpy()
    cls_of = {n: classify(n).cls for n in pd.unique(names)}
    cls = np.where(kind == "kernel", np.array([cls_of[n] for n in names], dtype=object), kind)
    out = pd.DataFrame(
        {
            "row": g.index.to_numpy(),
            "name": names,
            "kind": kind,
            "cls": cls,
            "device": g["device"].to_numpy(),
            "stream": g["stream"].to_numpy(),
            "ts": g["ts"].to_numpy(),
            "end": (g["ts"] + g["dur"]).to_numpy(),
            "corr": g["corr"].to_numpy(),
            "ext": g["ext"].to_numpy(),
            "graph": g["graph"].to_numpy(),
        }
    )
    host = ev[ev["kind"].isin(("runtime", "driver")) & (ev["corr"] >= 0)]
    if not host.empty:
        hname = host["name"].astype(str)
        # One corr can appear on a runtime call and the driver call beneath it; the known
        # launch API wins, then the outermost (earliest) call.
        h = pd.DataFrame(
            {
                "corr": host["corr"].to_numpy(),
                "launch_row": host.index.to_numpy(),
                "launch_name": hname.to_numpy(),
                "launch_ts": host["ts"].to_numpy(),
                "launch_end": (host["ts"] + host["dur"]).to_numpy(),
                "launch_tid": host["tid"].to_numpy(),
                "launch_ext": host["ext"].to_numpy(),
                "known": hname.isin(LAUNCH_APIS).to_numpy(),
            }
        ).sort_values(["known", "launch_ts"], ascending=[False, True], kind="stable")
        h = h.drop_duplicates("corr").drop(columns="known")
        out = out.merge(h, on="corr", how="left")
    else:
        out = out.assign(
            launch_row=np.nan,
            launch_name=None,
            launch_ts=np.nan,
            launch_end=np.nan,
            launch_tid=np.nan,
            launch_ext=np.nan,
        )
    for c in ("launch_row", "launch_ts", "launch_end", "launch_tid", "launch_ext"):
        out[c] = out[c].fillna(-1).astype(np.int64)
    out["launch_name"] = out["launch_name"].fillna("").astype(str)
    # Kineto kernels carry the issuing op's External id themselves; older traces only on
    # the runtime call.
    ext = np.where(out["ext"].to_numpy() >= 0, out["ext"].to_numpy(), out["launch_ext"])
    out = out.drop(columns="launch_ext")
    ops = ev[(ev["kind"] == "cpu_op") & (ev["ext"] >= 0)]
    # Several ops can share an ext (a wrapper and its inner op); the shortest is innermost.
    ops = ops.assign(_d=ops["dur"]).sort_values("_d", kind="stable").drop_duplicates("ext")
    op_row = pd.Series(ops.index.to_numpy(), index=ops["ext"].to_numpy())
    op_name = pd.Series(ops["name"].astype(str).to_numpy(), index=ops["ext"].to_numpy())
    out["op_row"] = op_row.reindex(ext).fillna(-1).astype(np.int64).to_numpy()
    out["op_name"] = op_name.reindex(ext).fillna("").astype(str).to_numpy()
    out["replay"] = _replays(out)
    out = out.sort_values(["ts", "end"], kind="stable").reset_index(drop=True)
    return cast("pd.DataFrame", out[list(ACTIVITY_COLUMNS)])


def _replays(a: pd.DataFrame) -> np.ndarray:
    corr = a["corr"].to_numpy()
    shared = pd.Series(corr).map(pd.Series(corr).value_counts()).to_numpy() > 1
    is_graph = (
        a["launch_name"].isin(GRAPH_LAUNCH_APIS).to_numpy()
        | (a["graph"].to_numpy() >= 0)
        | (shared & (corr >= 0))
    )
    return np.where(is_graph & (corr >= 0), corr, -1)


def busy_set(acts: pd.DataFrame) -> np.ndarray:
    """Time the activities occupy, with each graph replay counted busy end to end.

    The holes between nodes of one replay are the graph executor's own scheduling, not
    time the GPU waits for the host (TraceLens#728 reports them as idle).
    """
    rep = acts[acts["replay"] >= 0]
    ext = rep.groupby(["device", "replay"])[["ts", "end"]].agg({"ts": "min", "end": "max"})
    s = np.concatenate([acts["ts"].to_numpy(), ext["ts"].to_numpy()])
    e = np.concatenate([acts["end"].to_numpy(), ext["end"].to_numpy()])
    return iv.merge(s, e)


def step_windows(
    trace: Trace, acts: pd.DataFrame, steps: Sequence[int] | None = None
) -> pd.DataFrame:
    """GPU-side windows of the profiler steps: ``step, host_ts, host_end, ts, end``.

    Steps are host ranges, but the GPU runs behind the host, so a step's GPU window starts
    at the first activity launched (by corr) from inside the host step, or at the host
    start when none can be mapped. Window k ends where window k+1 starts, so windows tile
    the GPU timeline without double counting; the idle time between two steps (data
    loading, optimizer on the CPU) belongs to the step before. The last step ends with its
    last activity. With no steps the one window (step -1) is the GPU activity's extent.
    ``steps`` keeps only those step numbers (after the tiling).
    """
    st = trace.steps()
    if st.empty:
        lo = int(acts["ts"].min()) if len(acts) else 0
        hi = int(acts["end"].max()) if len(acts) else 0
        one: pd.DataFrame = pd.DataFrame(
            {"step": [-1], "host_ts": [lo], "host_end": [hi], "ts": [lo], "end": [hi]}
        )
        return one
    hts, hend = st["ts"].to_numpy(), st["end"].to_numpy()
    lts = acts["launch_ts"].to_numpy()
    mapped = lts >= 0
    k = np.searchsorted(hts, lts, side="right") - 1
    inside = mapped & (k >= 0) & (lts < hend[np.clip(k, 0, len(hts) - 1)])
    first = pd.Series(acts["ts"].to_numpy()[inside]).groupby(k[inside]).min()
    last = pd.Series(acts["end"].to_numpy()[inside]).groupby(k[inside]).max()
    gstart = first.reindex(range(len(st))).fillna(pd.Series(hts)).to_numpy().astype(np.int64)
    gstart = np.maximum.accumulate(gstart)
    gend = np.append(gstart[1:], int(last.get(len(st) - 1, hend[-1])))
    gend = np.maximum(gend, gstart)
    out = pd.DataFrame(
        {"step": st["step"].to_numpy(), "host_ts": hts, "host_end": hend, "ts": gstart, "end": gend}
    )
    if steps is not None:
        out = out[out["step"].isin(list(steps))]
    return cast("pd.DataFrame", out.reset_index(drop=True))


def assign_step(windows: pd.DataFrame, t: np.ndarray) -> np.ndarray:
    """The step whose GPU window holds each time in ``t``, or -2 outside every window."""
    lo, hi = windows["ts"].to_numpy(), windows["end"].to_numpy()
    k = np.searchsorted(lo, t, side="right") - 1
    kk = np.clip(k, 0, max(len(lo) - 1, 0))
    ok = (k >= 0) & (len(lo) > 0) & (t < hi[kk]) if len(lo) else np.zeros(len(t), bool)
    return np.where(ok, windows["step"].to_numpy()[kk] if len(lo) else -2, -2)


@dataclass(frozen=True)
class LaunchReport:
    """:func:`launch_overhead`'s result.

    ``kernels``: per activity name, kind, stream, ts, dur, launch_name, launch_delay_ns
    (launch call start -> activity start), launch_dur_ns, replay, op_name, step.
    ``steps``: per step kernels, launches, graph_replays, window_ns, busy_ns, host_wait_ns,
    host_wait_pct, short_kernels, short_pct, median_launch_delay_us, verdict.
    """

    kernels: pd.DataFrame
    steps: pd.DataFrame


def launch_overhead(
    trace: Trace, *, steps: Sequence[int] | None = None, bound_pct: float = 50.0
) -> LaunchReport:
    """Launch delay and cost per kernel, and per step whether the GPU waited on the CPU.

    ``host_wait_ns`` is GPU idle time in the step whose next activity's launch call began
    after the GPU went idle (the GPU was waiting for the CPU to issue work). A step is
    "launch-bound" when that exceeds ``bound_pct`` % of its window. A kernel is "short"
    when it runs for less time than its launch call took on the CPU: the host cannot keep
    such a stream of kernels fed. Inside a graph replay only the first activity has a
    launch delay; the rest ran from the one ``cudaGraphLaunch`` call.
    """
    acts = gpu_activity(trace)
    win = step_windows(trace, acts, steps)
    has = acts["launch_ts"].to_numpy() >= 0
    first_in_replay = ~acts.duplicated("replay") | (acts["replay"].to_numpy() < 0)
    delay = np.where(has & first_in_replay, acts["ts"] - acts["launch_ts"], -1)
    ldur = np.where(has, acts["launch_end"] - acts["launch_ts"], -1)
    dur = (acts["end"] - acts["ts"]).to_numpy()
    kern = pd.DataFrame(
        {
            "name": acts["name"],
            "kind": acts["kind"],
            "stream": acts["stream"],
            "ts": acts["ts"],
            "dur": dur,
            "launch_name": acts["launch_name"],
            "launch_delay_ns": delay,
            "launch_dur_ns": ldur,
            "replay": acts["replay"],
            "op_name": acts["op_name"],
            "step": assign_step(win, acts["ts"].to_numpy()),
        }
    )
    rows = []
    for w in win.itertuples(index=False):
        lo, hi = int(cast(int, w.ts)), int(cast(int, w.end))
        sel = (acts["ts"] >= lo).to_numpy() & (acts["ts"] < hi).to_numpy()
        a = acts[sel]
        busy = iv.clip(busy_set(a), lo, hi)
        wait = host_wait(acts, busy, lo, hi)
        k = kern[sel]
        short = int(((k["launch_dur_ns"] > k["dur"]) & (k["replay"] < 0)).sum())
        d = k["launch_delay_ns"][k["launch_delay_ns"] >= 0]
        span = hi - lo
        pct = 100.0 * wait / span if span else 0.0
        rows.append(
            {
                "step": int(cast(int, w.step)),
                "kernels": len(a),
                "launches": int(a.loc[a["launch_row"] >= 0, "launch_row"].nunique()),
                "graph_replays": int(a.loc[a["replay"] >= 0, "replay"].nunique()),
                "window_ns": span,
                "busy_ns": iv.total(busy),
                "host_wait_ns": wait,
                "host_wait_pct": pct,
                "short_kernels": short,
                "short_pct": 100.0 * short / len(a) if len(a) else 0.0,
                "median_launch_delay_us": float(d.median()) / 1e3 if len(d) else float("nan"),
                "verdict": (
                    "no GPU activity" if not len(a)
                    else "launch-bound" if pct > bound_pct else "gpu-bound"
                ),
            }
        )
    return LaunchReport(kern, pd.DataFrame(rows, columns=list(_STEP_COLUMNS)))


_STEP_COLUMNS = (
    "step",
    "kernels",
    "launches",
    "graph_replays",
    "window_ns",
    "busy_ns",
    "host_wait_ns",
    "host_wait_pct",
    "short_kernels",
    "short_pct",
    "median_launch_delay_us",
    "verdict",
)


def host_wait(acts: pd.DataFrame, busy: np.ndarray, lo: int, hi: int) -> int:
    """Idle ns in ``[lo, hi)`` before activities whose launch call began after the gap did."""
    holes = iv.gaps(busy, lo, hi)
    if len(holes) == 0 or acts.empty:
        return 0  # no GPU activity: no launch to wait for
    nxt = next_activity(acts, holes[:, 1])
    lts = np.where(nxt >= 0, acts["launch_ts"].to_numpy()[np.clip(nxt, 0, None)], -1)
    late = (nxt >= 0) & (lts >= holes[:, 0])
    return int((holes[late, 1] - holes[late, 0]).sum())


def next_activity(acts: pd.DataFrame, t: np.ndarray) -> np.ndarray:
    """Index (into ``acts``, sorted by ts) of the first activity starting at or after ``t``
    and at most there (the one that ends a gap at ``t``); -1 when none starts at ``t``.

    A graph replay's extent ends a gap at its first node, which is its first activity.
    """
    starts = acts["ts"].to_numpy()
    i = np.searchsorted(starts, t, side="left")
    ok = i < len(starts)
    ok[ok] &= starts[i[ok]] == t[ok]
    return np.where(ok, i, -1)
