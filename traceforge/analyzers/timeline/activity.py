"""GPU activity: every kernel, copy and memset with who launched it.

:func:`gpu_activity` is the one place that answers, for each piece of GPU work, which host
call launched it, which framework operator and which user annotation issued it, and which
CUDA/HIP graph replay it ran in. The rules, used by every verb:

* **Launch call**: the runtime/driver call with the same correlation id in the same rank
  (ids are per process). When a runtime call and the driver call beneath it share an id,
  a known launch API wins, then the earliest call.
* **Operator**: the innermost ``cpu_op`` on the launch call's thread whose range covers the
  launch call's start (:func:`traceforge.analyzers.timeline.stacks.innermost`). Kernels
  replayed from a graph share the corr of their ``cudaGraphLaunch``/``hipGraphLaunch``, so
  they get the op around that call. Works on every format that records host ranges; no
  External-id join.
* **Annotation**: the innermost user annotation (``record_function``, NVTX/roctx range) on
  that thread around the launch, profiler step markers excluded.
* **Replay**: the corr of the graph launch that replayed the activity, or -1. A corr shared
  by several activities, a graph launch API or a ``graph`` id marks a replay (the h200-graphs
  trace has no graph id arg at all).

Timeline analyses read this table through :func:`traceforge.analyzers.timeline.core.timeline`,
which computes it once per trace.
"""

from __future__ import annotations

import re
from typing import cast

import numpy as np
import pandas as pd

from traceforge.analyzers.names.kernel_names import classify
from traceforge.analyzers.timeline.stacks import innermost
from traceforge.frames import object_frame
from traceforge.model import (
    GPU_KINDS,
    Trace,
    coded,
    first_rows,
    name_mask,
    pair_codes,
    pair_rows,
    strings,
)

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
#: Host calls that order the host or a stream behind GPU work. The synchronous copies are
#: listed because a DtoH ``cudaMemcpy`` waits for all prior work.
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
#: The sync calls that block the host thread (a stream wait only orders two streams).
BLOCKING_SYNC_APIS = SYNC_APIS - {"cudaStreamWaitEvent", "hipStreamWaitEvent"}

#: Names of profiler step markers, which are steps, not annotations of the work in them.
STEP_MARKER_PREFIX = "ProfilerStep#"

#: Columns of :func:`gpu_activity` (``step`` is filled by the timeline).
ACTIVITY_COLUMNS = (
    "row",
    "name",
    "kind",
    "cls",
    "family",
    "device",
    "stream",
    "rank",
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
    "annotation",
)


def gpu_activity(trace: Trace) -> pd.DataFrame:
    """One row per kernel/memcpy/memset, sorted by start, with launch call, op and replay.

    ``cls``/``family`` are the kernel class and family ("memcpy"/"memset" for copies).
    ``launch_*`` are -1/"" when the launch call is not in the trace (e.g. it happened
    before profiling began); ``op_row``/``annotation`` likewise when nothing covers it.
    Prefer :func:`traceforge.analyzers.timeline.core.timeline`, which memoizes this.
    """
    ev = trace.events
    g = ev[ev["kind"].isin(GPU_KINDS)]
    code, labels = coded(g["name"])
    names = labels[code]
    kind = strings(g["kind"])
    # Classify each distinct name once, then spread through the name codes.
    uniq, inv = np.unique(code, return_inverse=True)
    info = [classify(str(labels[c])) for c in uniq]
    is_kernel = kind == "kernel"
    cls = np.where(is_kernel, np.array([k.cls for k in info], dtype=object)[inv], kind)
    fam = np.where(is_kernel, np.array([k.family for k in info], dtype=object)[inv], kind)
    out = object_frame(
        {
            "row": g.index.to_numpy(),
            "name": names,
            "kind": kind,
            "cls": cls,
            "family": fam,
            "device": g["device"].to_numpy(),
            "stream": g["stream"].to_numpy(),
            "rank": g["rank"].to_numpy(),
            "ts": g["ts"].to_numpy(),
            "end": (g["ts"] + g["dur"]).to_numpy(),
            "corr": g["corr"].to_numpy(),
            "ext": g["ext"].to_numpy(),
            "graph": g["graph"].to_numpy(),
        }
    )
    _with_launch(ev, out)
    out["replay"] = _replays(out)
    _with_host_ranges(ev, out)
    out = out.sort_values(["ts", "end"], kind="stable").reset_index(drop=True)
    return cast("pd.DataFrame", out[list(ACTIVITY_COLUMNS)])


def launch_calls(ev: pd.DataFrame) -> pd.DataFrame:
    """One host call per (rank, corr): the call that launched that correlation id's work.

    Columns: rank, corr, launch_row, launch_name, launch_ts, launch_end, launch_tid,
    launch_pid. A known launch API wins over other calls with the same id (a runtime call
    and the driver call beneath it), then the earliest.
    """
    # Column arrays at the selected rows, and names matched per distinct name: a trace has
    # ~100k host calls but a few hundred call names.
    rows = np.flatnonzero(ev["kind"].isin(("runtime", "driver")).to_numpy()
                          & (ev["corr"].to_numpy() >= 0))
    code, labels = coded(ev["name"])
    code = code[rows]
    ts = ev["ts"].to_numpy()[rows]
    known = np.isin(labels, list(LAUNCH_APIS))[code]
    rank, corr = ev["rank"].to_numpy()[rows], ev["corr"].to_numpy()[rows]
    # Known launch APIs first, then by start (stable); the first call of each (rank, corr).
    order = np.lexsort((ts, ~known))
    pick = order[first_rows(rank[order], corr[order])]
    sel = rows[pick]
    h = object_frame(
        {
            "rank": rank[pick],
            "corr": corr[pick],
            "launch_row": ev.index.to_numpy()[sel],
            "launch_name": labels[code[pick]],
            "launch_ts": ts[pick],
            "launch_end": ts[pick] + ev["dur"].to_numpy()[sel],
            "launch_tid": ev["tid"].to_numpy()[sel],
            "launch_pid": ev["pid"].to_numpy()[sel],
        }
    )
    h.index = pd.Index(pick)  # each call labelled by its place among the trace's host calls
    return h


def _with_launch(ev: pd.DataFrame, out: pd.DataFrame) -> None:
    """Fill launch_*: the launch call of each activity's (rank, corr), -1/"" if none."""
    h = launch_calls(ev)  # one row per (rank, corr)
    at = pair_rows(h["rank"].to_numpy(), h["corr"].to_numpy(),
                   out["rank"].to_numpy(), out["corr"].to_numpy())
    found, row = at >= 0, np.clip(at, 0, None)
    for c in ("launch_row", "launch_name", "launch_ts", "launch_end", "launch_tid",
              "launch_pid"):
        col = h[c].to_numpy()
        if c == "launch_name":
            out[c] = pd.Series(np.where(found, col[row] if len(h) else "", ""), dtype=object)
        else:
            out[c] = np.where(found, col[row] if len(h) else -1, -1).astype(np.int64)


def _replays(a: pd.DataFrame) -> np.ndarray:
    corr = a["corr"].to_numpy()
    codes, _ = pair_codes(a["rank"].to_numpy(), corr)
    shared = np.bincount(codes)[codes] > 1 if len(codes) else np.zeros(0, dtype=bool)
    is_graph = (
        a["launch_name"].isin(GRAPH_LAUNCH_APIS).to_numpy()
        | (a["graph"].to_numpy() >= 0)
        | shared
    )
    return np.where(is_graph & (corr >= 0), corr, -1)


def _with_host_ranges(ev: pd.DataFrame, out: pd.DataFrame) -> None:
    """Fill op_row/op_name/annotation: innermost range around each launch call."""
    has = out["launch_ts"].to_numpy() >= 0
    qpid, qtid = out["launch_pid"].to_numpy(), out["launch_tid"].to_numpy()
    qts = out["launch_ts"].to_numpy()
    marker = name_mask(ev["name"], "^" + re.escape(STEP_MARKER_PREFIX))
    # Column arrays, not frame selections: the ops are most of a trace's rows.
    name_code, labels = coded(ev["name"])
    pid, tid, ts = ev["pid"].to_numpy(), ev["tid"].to_numpy(), ev["ts"].to_numpy()
    end = ts + ev["dur"].to_numpy()
    for col, kind in (("op", "cpu_op"), ("annotation", "user_annotation")):
        r = np.flatnonzero((ev["kind"] == kind).to_numpy() & ~marker)
        hit = np.full(len(out), -1, dtype=np.int64)
        if len(r) and has.any():
            codes, qcodes = pair_codes(pid[r], tid[r], qpid, qtid)
            found = innermost(codes, ts[r], end[r], qcodes, qts)
            hit = np.where(has & (qcodes >= 0), found, -1)
        pos = np.where(hit >= 0, r[np.clip(hit, 0, None)] if len(r) else -1, -1)
        ok, at = pos >= 0, np.clip(pos, 0, None)
        label = pd.Series(labels[np.where(ok, name_code[at] if len(ev) else -1, -1)],
                          dtype=object)
        if col == "op":
            out["op_row"] = np.where(ok, ev.index.to_numpy()[at] if len(ev) else -1, -1)
            out["op_name"] = label
        else:
            out["annotation"] = label
