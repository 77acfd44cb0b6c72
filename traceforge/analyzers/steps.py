"""Restrict a trace to some of its profiler steps."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from traceforge.errors import AnalysisError
from traceforge.model import GPU_KINDS, Trace


def launch_times(trace: Trace) -> np.ndarray:
    """For every GPU row, the start of its launch call (found through ``corr``), else its own.

    Kernels run after the host has moved on: a step's last kernels often start after the
    step's host range ended, so a GPU row belongs to the step that *launched* it.
    """
    ev = trace.events
    launch = ev[ev["kind"].isin(("runtime", "driver")) & (ev["corr"] >= 0)]
    first = launch.groupby("corr")["ts"].min()
    gpu = trace.gpu()
    at = first.reindex(gpu["corr"].to_numpy()).to_numpy(dtype=float)
    out: np.ndarray = np.where(np.isnan(at), gpu["ts"].to_numpy(), at).astype(np.int64)
    return out


def select_steps(trace: Trace, steps: Sequence[int] | None = None) -> Trace:
    """``trace`` with only the rows of the given profiler steps (all steps when None).

    Host rows are kept when they start inside a selected step's host range; GPU rows when
    their launch call does (see :func:`launch_times`). Without ``ProfilerStep`` markers the
    trace is returned whole when ``steps`` is None, and an AnalysisError is raised otherwise.
    """
    st = trace.steps()
    if st.empty:
        if steps:
            raise AnalysisError(f"{trace.meta.path or 'trace'}: has no profiler steps to select")
        return trace
    if steps is not None:
        missing = sorted(set(steps) - set(st["step"].tolist()))
        if missing:
            have = ", ".join(str(s) for s in st["step"])
            raise AnalysisError(
                f"{trace.meta.path or 'trace'}: no step {missing[0]} (steps: {have})"
            )
        st = st[st["step"].isin(list(steps))]
    starts, ends = st["ts"].to_numpy(), st["end"].to_numpy()
    ev = trace.events
    is_gpu = ev["kind"].isin(GPU_KINDS).to_numpy()
    at = ev["ts"].to_numpy().copy()
    at[is_gpu] = launch_times(trace)
    k = np.searchsorted(starts, at, side="right") - 1
    inside = (k >= 0) & (at < ends[np.clip(k, 0, None)])
    return replace(trace, events=ev[inside])
