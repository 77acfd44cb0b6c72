"""Steps: the iterations an analysis is cut into, from any source, on every format.

Where steps come from (``Trace.steps_from``), in this order when nothing is asked for:

1. ``ProfilerStep#N`` ranges (torch.profiler's schedule);
2. traceforge capture's own ``step N`` ranges (NVTX/roctx ranges pushed by
   ``traceforge capture --backend nsys|rocprof``);
3. otherwise none: the whole trace, from its first to its last GPU activity.

``steps_from="REGEX"`` takes the host ranges whose names match (user annotations, NVTX
ranges, ops; GPU-side annotations when no host range matches), e.g. ``policy_inference``
or ``train_step``: numbered by the regex's first group when it captures an integer, else
0, 1, ... in time order; a match nested in an earlier match is left out.
``steps_from="none"`` always analyses the whole trace.

A step is a *host* range, but GPU work runs behind the host, so each step also gets a
*GPU window* (:func:`windows`) and every GPU activity a step (:func:`membership`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceforge.errors import AnalysisError, UsageError
from traceforge.model import (
    UNFINISHED_STEP_MARK,
    WARMUP_STEP_MARK,
    Trace,
    empty_frame,
    name_mask,
)

#: ``Trace.steps_from`` value that turns steps off.
NO_STEPS = "none"

PROFILER_STEP = r"^ProfilerStep#(\d+)$"
#: The ranges ``traceforge capture`` pushes around each step for nsys and rocprof.
CAPTURE_STEP = r"^step (\d+)$"

_HOST_KINDS = ("user_annotation", "cpu_op")

#: Columns of :attr:`Steps.ranges` and of :func:`windows` (``ts``/``end`` are GPU-side).
RANGE_COLUMNS = ("step", "ts", "end")
WINDOW_COLUMNS = ("step", "host_ts", "host_end", "ts", "end")


@dataclass(frozen=True)
class Steps:
    """The host ranges of a trace's steps, and a label saying where they came from.

    ``ranges``: step, ts, end (host ns), sorted by ts; empty when there are no steps.
    ``source``: e.g. ``ProfilerStep#N``, ``NVTX 'step N' (traceforge capture)``,
    ``ranges matching 'policy_inference'``, ``none (whole trace)``.
    """

    ranges: pd.DataFrame
    source: str

    @property
    def empty(self) -> bool:
        return self.ranges.empty


def check_rule(steps_from: str | None) -> None:
    """Raise UsageError for a ``steps_from`` that is not ``none`` or a valid regex."""
    if steps_from is None or steps_from == NO_STEPS:
        return
    if not steps_from.strip():
        raise UsageError("--steps-from: give a regex of range names (or --steps none)")
    try:
        re.compile(steps_from)
    except re.error as e:
        raise UsageError(f"--steps-from {steps_from!r}: not a regex ({e})") from None


def host_steps(trace: Trace) -> Steps:
    """The trace's steps as host ranges, from the source ``trace.steps_from`` names."""
    rule = trace.steps_from
    check_rule(rule)
    if rule == NO_STEPS:
        return Steps(_empty(), "none (whole trace)")
    if rule is not None:
        ranges = _matching(trace, rule, _HOST_KINDS)
        if ranges.empty:
            ranges = _matching(trace, rule, ("gpu_annotation",))
        if ranges.empty:
            raise AnalysisError(
                f"{trace.meta.path or 'trace'}: no range matches --steps-from {rule!r}"
            )
        return Steps(ranges, f"ranges matching {rule!r}")
    ranges = _matching(trace, PROFILER_STEP, _HOST_KINDS)
    if not ranges.empty:
        return Steps(ranges, "ProfilerStep#N")
    ranges = _matching(trace, CAPTURE_STEP, ("user_annotation",))
    if not ranges.empty:
        return Steps(_finished(trace, ranges), "NVTX 'step N' (traceforge capture)")
    return Steps(_empty(), "none (no step markers: whole trace)")


def _mark_pattern(template: str) -> str:
    return "^" + re.escape(template).replace(r"\{n\}", r"(\d+)") + "$"


#: The marks capture leaves in ranges that are no step (see traceforge.model).
_UNFINISHED = _mark_pattern(UNFINISHED_STEP_MARK)
_WARMUP = _mark_pattern(WARMUP_STEP_MARK)


def _marked(trace: Trace, pattern: str) -> set[int]:
    ev = trace.events
    names = ev.loc[name_mask(ev["name"], pattern), "name"]
    return {int(m.group(1)) for m in (re.match(pattern, str(x)) for x in names) if m}


def _finished(trace: Trace, ranges: pd.DataFrame) -> pd.DataFrame:
    """``ranges`` without the ranges capture marked as no step: the program's tail after
    its last ``step()`` (exit, teardown) and, when steps remain, the schedule's warm-up
    steps (first calls: compilation, cuDNN/cuBLAS set-up, NCCL init), as the torch backend
    leaves them out of its trace. Traces captured before the marks existed keep them."""
    kept = ranges[~ranges["step"].isin(_marked(trace, _UNFINISHED))]
    warm = kept[~kept["step"].isin(_marked(trace, _WARMUP))]
    out: pd.DataFrame = (warm if len(warm) else kept).reset_index(drop=True)
    return out


def _empty() -> pd.DataFrame:
    return empty_frame(dict.fromkeys(RANGE_COLUMNS, "int64"))


def _matching(trace: Trace, pattern: str, kinds: Sequence[str]) -> pd.DataFrame:
    ev = trace.events
    sel = ev[ev["kind"].isin(kinds).to_numpy() & name_mask(ev["name"], pattern)]
    if sel.empty:
        return _empty()
    if sel["rank"].nunique() > 1:
        # One process's steps: a multi-process file is split per rank before analysis
        # (load_run); a caller that did not split gets the lowest rank's steps.
        sel = sel[sel["rank"] == sel["rank"].min()]
    sel = sel.sort_values(["ts", "dur"], ascending=[True, False], kind="stable")
    ts, end = sel["ts"].to_numpy(), (sel["ts"] + sel["dur"]).to_numpy()
    # Drop matches that start inside an earlier kept match (nested or repeated ranges:
    # a step can appear both as a cpu_op and as a user annotation).
    reach = np.maximum.accumulate(end)
    keep = np.ones(len(ts), dtype=bool)
    keep[1:] = ts[1:] >= reach[:-1]
    names = sel["name"].astype(str).to_numpy()[keep]
    ts, end = ts[keep], end[keep]
    rx = re.compile(pattern)
    nums = []
    for n in names:
        m = rx.search(n)
        g = m.group(1) if m is not None and m.groups() else None
        nums.append(int(g) if g is not None and g.isdigit() else None)
    if None in nums or len(set(nums)) < len(nums):
        step = np.arange(len(ts), dtype=np.int64)
    else:
        step = np.array(nums, dtype=np.int64)
    out: pd.DataFrame = pd.DataFrame({"step": step, "ts": ts.astype(np.int64),
                                      "end": end.astype(np.int64)})
    return out


def windows(steps: Steps, launch_ts: np.ndarray, ts: np.ndarray, end: np.ndarray
            ) -> pd.DataFrame:
    """GPU-side windows of the steps: ``step, host_ts, host_end, ts, end``.

    ``launch_ts``, ``ts``, ``end`` are the GPU activities' launch times (-1: unknown),
    starts and ends. A step's GPU window starts at the first activity launched from inside
    its host range (or at the host start when none is), and ends where the next window
    starts, so windows tile the GPU timeline without double counting: idle time between
    two steps (data loading, an optimizer on the CPU) belongs to the step before. The last
    window ends with the last activity launched in it. Without steps the one window (step
    -1) runs from the first activity to the last.
    """
    if steps.empty:
        lo = int(ts.min()) if len(ts) else 0
        hi = int(end.max()) if len(end) else 0
        one: pd.DataFrame = pd.DataFrame({"step": [-1], "host_ts": [lo], "host_end": [hi],
                                          "ts": [lo], "end": [hi]}).astype(np.int64)
        return one
    st = steps.ranges
    hts, hend = st["ts"].to_numpy(), st["end"].to_numpy()
    k = _host_step_index(hts, hend, launch_ts)
    inside = k >= 0
    first = pd.Series(ts[inside]).groupby(k[inside]).min()
    last = pd.Series(end[inside]).groupby(k[inside]).max()
    gstart = first.reindex(range(len(st))).fillna(pd.Series(hts)).to_numpy().astype(np.int64)
    gstart = np.maximum.accumulate(gstart)
    gend = np.append(gstart[1:], int(last.get(len(st) - 1, hend[-1])))
    gend = np.maximum(gend, gstart)
    out: pd.DataFrame = pd.DataFrame({"step": st["step"].to_numpy(), "host_ts": hts,
                                      "host_end": hend, "ts": gstart, "end": gend})
    return out


def _host_step_index(hts: np.ndarray, hend: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Index of the host step range holding each time in ``t`` (-1: none; t < 0: none)."""
    if len(hts) == 0:
        return np.full(len(t), -1, dtype=np.int64)
    k = np.searchsorted(hts, t, side="right") - 1
    kk = np.clip(k, 0, len(hts) - 1)
    ok = (t >= 0) & (k >= 0) & (t < hend[kk])
    return np.where(ok, k, -1)


def membership(steps: Steps, win: pd.DataFrame, launch_ts: np.ndarray, ts: np.ndarray
               ) -> np.ndarray:
    """The step each GPU activity belongs to: the step whose host range holds its launch
    call; with no launch call in the trace, the step whose host range, else whose GPU
    window, holds its own start; -2 when outside every step, -1 for all when the trace
    has no steps.

    A step's kernels often start after the host left the step; they still count in the
    step that launched them (for tables of kernels and ops per step). Time-based
    quantities (busy, idle) use the GPU windows instead.
    """
    if steps.empty:
        return np.full(len(ts), -1, dtype=np.int64)
    st = steps.ranges
    step_no = st["step"].to_numpy()
    unknown = launch_ts < 0
    k = _host_step_index(st["ts"].to_numpy(), st["end"].to_numpy(),
                         np.where(unknown, ts, launch_ts))
    out = np.where(k >= 0, step_no[np.clip(k, 0, None)], -2)
    by_window = window_index(win, ts)
    wstep = win["step"].to_numpy()
    late = unknown & (k < 0) & (by_window >= 0)
    out = np.where(late, wstep[np.clip(by_window, 0, None)], out)
    return out.astype(np.int64)


def window_index(win: pd.DataFrame, t: np.ndarray) -> np.ndarray:
    """Index (row of ``win``) of the GPU window holding each time in ``t``, -1 if none."""
    lo, hi = win["ts"].to_numpy(), win["end"].to_numpy()
    if len(lo) == 0:
        return np.full(len(t), -1, dtype=np.int64)
    k = np.searchsorted(lo, t, side="right") - 1
    kk = np.clip(k, 0, len(lo) - 1)
    return np.where((k >= 0) & (t < hi[kk]), k, -1)


def parse_spec(text: str) -> list[int] | None:
    """``--steps`` values: ``none`` -> None (whole trace); ``3``, ``2-4``, ``2,5`` -> steps."""
    if text.strip().lower() == NO_STEPS:
        return None
    out: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            raise UsageError(f"--steps wants none, N, N-M or N,M; got {text!r}")
        lo = int(m.group(1))
        hi = int(m.group(2) or lo)
        if hi < lo:
            raise UsageError(f"--steps {text!r}: {lo}-{hi} is an empty range")
        out += range(lo, hi + 1)
    return out
