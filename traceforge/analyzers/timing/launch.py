"""Launch overhead: is this run launch-bound?

Reads the shared :func:`~traceforge.analyzers.timeline.core.timeline`. Per step, it counts the
kernels the step launched and the host calls that launched them, and measures the GPU
idle time spent waiting for the CPU: a hole in busy time whose next activity's launch
call began after the hole did (the GPU had nothing queued). Inside a CUDA/HIP graph
replay only the first activity has a launch delay; the rest ran from the one
``cudaGraphLaunch`` call, and the holes between them are the graph's own.

A launch delay (launch call start -> activity start) is two things, split here (the one
home of the split, :func:`delay_split`):

* **queue time**: the activity waited behind earlier GPU work on its stream: from the
  launch call to the end of the stream's previous activity (when that ended after the
  call began). The CPU ran ahead; this is a full queue, not a slow launch.
* **launch latency**: the rest, from the moment the stream was free (or the call, when
  the stream was already free) to the start: the GPU sat idle waiting for the launch to
  arrive. Only this counts toward "launch-bound" (through host wait).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from traceforge.analyzers.timeline import intervals as iv
from traceforge.analyzers.timeline.core import Timeline, timeline
from traceforge.analyzers.timeline.steps import window_index
from traceforge.model import Tables, Trace, distinct

#: Columns of :attr:`LaunchReport.steps`.
STEP_COLUMNS = (
    "step",
    "kernels",
    "launches",
    "graph_replays",
    "window_ns",
    "busy_ns",
    "busy_pct",
    "host_wait_ns",
    "host_wait_pct",
    "short_kernels",
    "short_pct",
    "median_queue_us",
    "median_launch_latency_us",
    "verdict",
)
#: Columns of :attr:`LaunchReport.kernels`.
KERNEL_COLUMNS = ("name", "kind", "stream", "ts", "dur", "launch_name", "launch_delay_ns",
                  "queue_ns", "launch_latency_ns", "launch_dur_ns", "replay", "op_name", "step")


@dataclass(frozen=True)
class LaunchReport(Tables):
    """:func:`launch_overhead`'s result.

    ``kernels``: per GPU activity: name, kind, stream, ts, dur, launch_name,
    launch_delay_ns (launch call start -> activity start; -1 inside a replay after its
    first node or without a launch call), queue_ns and launch_latency_ns (its two parts,
    :func:`delay_split`; -1 where the delay is), launch_dur_ns, replay, op_name, step.
    ``steps``: per step (STEP_COLUMNS); ``busy_pct`` is the timeline's busy % and
    ``host_wait_pct`` divides by the same recorded window time.
    ``step_source``: where the steps came from.
    """

    kernels: pd.DataFrame
    steps: pd.DataFrame
    step_source: str = ""


def launch_overhead(
    trace: Trace, *, steps: Sequence[int] | None = None, bound_pct: float = 50.0,
    store: bool = True,
) -> LaunchReport:
    """Launch delay and cost per activity, and per step whether the GPU waited on the CPU.

    A step is "launch-bound" when its host wait exceeds ``bound_pct`` % of its recorded
    window. A kernel is "short" when it ran for less time than its launch call took on the
    CPU: the host cannot keep a stream of such kernels fed.

    A derived table of the trace, kept with it (a later run on the cached trace with the
    same options reads it back); ``store=False`` makes it and keeps nothing (the report,
    which stores its own summary of it and frees this row-per-activity table at once).
    """
    if not store:
        return _launch_overhead(trace, steps, bound_pct)
    key = (f"launch|{None if steps is None else tuple(int(s) for s in steps)}"
           f"|{float(bound_pct)!r}")
    return trace.derived(key, lambda: _launch_overhead(trace, steps, bound_pct))


def _launch_overhead(trace: Trace, steps: Sequence[int] | None, bound_pct: float
                     ) -> LaunchReport:
    tl = timeline(trace)
    acts = tl.activity
    has = acts["launch_ts"].to_numpy() >= 0
    replay = acts["replay"].to_numpy()
    # The first activity of each (device, graph replay): the others of a replay were not
    # launched by a call of their own. (Looked for among replayed rows only: hashing
    # two columns of every activity cost seconds at 10M, none of them replayed.)
    first_in_replay = np.ones(len(acts), dtype=bool)
    rep = np.flatnonzero(replay >= 0)
    if len(rep):
        pairs = pd.DataFrame({"device": acts["device"].to_numpy()[rep], "replay": replay[rep]})
        first_in_replay[rep] = ~pairs.duplicated().to_numpy()
    delay = np.where(has & first_in_replay, acts["ts"] - acts["launch_ts"], -1)
    queue, latency = delay_split(acts)
    queue = np.where(delay >= 0, queue, -1)
    latency = np.where(delay >= 0, latency, -1)
    ldur = np.where(has, acts["launch_end"] - acts["launch_ts"], -1)
    kern = pd.DataFrame(
        {
            "name": acts["name"],
            "kind": acts["kind"],
            "stream": acts["stream"],
            "ts": acts["ts"],
            "dur": (acts["end"] - acts["ts"]).to_numpy(),
            "launch_name": acts["launch_name"],
            "launch_delay_ns": delay,
            "queue_ns": queue,
            "launch_latency_ns": latency,
            "launch_dur_ns": ldur,
            "replay": acts["replay"],
            "op_name": acts["op_name"],
            "step": acts["step"],
        },
        copy=False,  # (its new arrays as they are; the timeline's columns as Series)
    )
    win = tl.select(steps)
    out = _per_step(tl, kern, win, bound_pct)
    if steps is not None:
        kern = kern[kern["step"].isin(list(steps))]
    return LaunchReport(kern.reset_index(drop=True), out, tl.step_source)


def _per_step(tl: Timeline, kern: pd.DataFrame, win: pd.DataFrame, bound_pct: float
              ) -> pd.DataFrame:
    """STEP_COLUMNS for every window at once: counts by step membership, times by window."""
    acts = tl.activity
    lo, hi = win["ts"].to_numpy(), win["end"].to_numpy()
    step_no = win["step"].to_numpy()
    devs = tl.devices
    # Device time in each window, summed over devices (as busy_table's total row).
    busy = np.zeros(len(win), dtype=np.int64)
    unrec = np.zeros(len(win), dtype=np.int64)
    wait = np.zeros(len(win), dtype=np.int64)
    for d in devs:
        busy += iv.covered(tl.busy(d), lo, hi)
        unrec += iv.covered(tl.unrecorded(d), lo, hi)
        holes, late = host_wait_holes(tl, d, iv.merge(lo, hi))
        k = window_index(win, holes[:, 0])
        ok = late & (k >= 0)
        wait += np.bincount(k[ok], weights=holes[ok, 1] - holes[ok, 0],
                            minlength=len(win)).astype(np.int64)
    span = (hi - lo) * max(len(devs), 1)
    recorded = span - unrec
    # Counts: the activity each step launched (membership); with no steps, all of it.
    member = acts["step"].to_numpy() if not tl.steps.empty else np.full(len(acts), -1)
    g = pd.DataFrame({
        "step": member,
        "launch_row": np.where(acts["launch_row"].to_numpy() >= 0, acts["launch_row"], -1),
        "replay": np.where(acts["replay"].to_numpy() >= 0, acts["replay"], -1),
        "short": ((kern["launch_dur_ns"] > kern["dur"]) & (kern["replay"] < 0)).to_numpy(),
        "queue": np.where(kern["queue_ns"].to_numpy() >= 0, kern["queue_ns"].to_numpy(), np.nan),
        "latency": np.where(kern["launch_latency_ns"].to_numpy() >= 0,
                            kern["launch_latency_ns"].to_numpy(), np.nan),
        "is_kernel": (acts["kind"] == "kernel").to_numpy(),
    }).groupby("step")
    n = g.size().reindex(step_no, fill_value=0).to_numpy()
    # Kernels per step: the one definition (timeline.kernels_by_step), copies not counted.
    nk = g["is_kernel"].sum().reindex(step_no, fill_value=0).to_numpy().astype(np.int64)
    launches = g["launch_row"].agg(lambda x: x[x >= 0].nunique()).reindex(step_no, fill_value=0)
    replays = g["replay"].agg(lambda x: x[x >= 0].nunique()).reindex(step_no, fill_value=0)
    short = g["short"].sum().reindex(step_no, fill_value=0).to_numpy()
    queue = g["queue"].median().reindex(step_no).to_numpy(dtype=float) / 1e3
    latency = g["latency"].median().reindex(step_no).to_numpy(dtype=float) / 1e3
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(recorded > 0, 100.0 * wait / recorded, 0.0)
        busy_pct = np.where(recorded > 0, 100.0 * busy / recorded, 0.0)
        short_pct = np.where(n > 0, 100.0 * short / np.maximum(n, 1), 0.0)
    verdict = np.where(n == 0, "no GPU activity",
                       np.where(pct > bound_pct, "launch-bound", "gpu-bound"))
    out = pd.DataFrame({
        "step": step_no, "kernels": nk, "launches": launches.to_numpy().astype(np.int64),
        "graph_replays": replays.to_numpy().astype(np.int64), "window_ns": hi - lo,
        "busy_ns": busy, "busy_pct": busy_pct, "host_wait_ns": wait, "host_wait_pct": pct,
        "short_kernels": short.astype(np.int64), "short_pct": short_pct,
        "median_queue_us": queue,
        "median_launch_latency_us": latency, "verdict": pd.Series(verdict, dtype=object),
    })
    return cast("pd.DataFrame", out[list(STEP_COLUMNS)])


def delay_split(acts: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Queue time and launch latency (ns) of every activity (see the module docstring):
    queue = clip(min(previous end on its stream, start) - launch call start, 0), latency =
    start - launch call start - queue. Activities without a launch call get 0, 0."""
    n = len(acts)
    lts, ts = acts["launch_ts"].to_numpy(), acts["ts"].to_numpy()
    prev_end = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    if n:
        order = np.lexsort((ts, acts["stream"].to_numpy(), acts["device"].to_numpy()))
        key = (acts["device"].to_numpy()[order], acts["stream"].to_numpy()[order])
        ends = acts["end"].to_numpy()[order]
        # The latest end of the earlier activities on the same stream (running max).
        same = np.r_[False, (key[0][1:] == key[0][:-1]) & (key[1][1:] == key[1][:-1])]
        seg = np.cumsum(~same)
        shifted = np.r_[np.iinfo(np.int64).min, ends[:-1]]
        shifted[~same] = np.iinfo(np.int64).min
        run = pd.Series(shifted).groupby(seg).cummax().to_numpy()
        prev_end[order] = run
    has = lts >= 0
    free = np.minimum(np.maximum(prev_end, lts), ts)
    queue = np.where(has, np.clip(free - lts, 0, None), 0)
    latency = np.where(has, np.clip(ts - lts - queue, 0, None), 0)
    return queue.astype(np.int64), latency.astype(np.int64)


def host_wait_holes(tl: Timeline, device: int, windows: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The device's idle stretches inside ``windows`` (cut at window edges, unrecorded
    replays left out) and which of them the GPU spent waiting for the CPU: those before
    an activity whose launch call began after the stretch did."""
    if len(windows) == 0:
        return iv.EMPTY, np.zeros(0, dtype=bool)
    holes = iv.gaps(tl.busy(device), int(windows[0, 0]), int(windows[-1, 1]))
    holes = iv.difference(iv.intersect(holes, windows), tl.unrecorded(device))
    holes = iv.split_at(holes, distinct(windows.ravel()))
    if len(holes) == 0:
        return holes, np.zeros(0, dtype=bool)
    a = tl.activity[tl.activity["device"].to_numpy() == device]
    nxt = next_activity(a, holes[:, 1])
    lts = np.where(nxt >= 0, a["launch_ts"].to_numpy()[np.clip(nxt, 0, None)], -1)
    return holes, (nxt >= 0) & (lts >= holes[:, 0])


def next_activity(acts: pd.DataFrame, t: np.ndarray) -> np.ndarray:
    """Index (into ``acts``, sorted by ts) of the activity that starts at ``t`` -- the one
    that ends a gap at ``t`` -- or -1 when none does."""
    return next_start(acts["ts"].to_numpy(), t)


def next_start(starts: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Index into the sorted ``starts`` of the one equal to ``t``, or -1 when none is."""
    i = np.searchsorted(starts, t, side="left")
    ok = i < len(starts)
    ok[ok] &= starts[i[ok]] == t[ok]
    return np.where(ok, i, -1)
