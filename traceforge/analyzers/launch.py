"""Launch overhead: is this run launch-bound?

Reads the shared :func:`~traceforge.analyzers.timeline.timeline`. Per step, it counts the
kernels the step launched and the host calls that launched them, and measures the GPU
idle time spent waiting for the CPU: a hole in busy time whose next activity's launch
call began after the hole did (the GPU had nothing queued). Inside a CUDA/HIP graph
replay only the first activity has a launch delay; the rest ran from the one
``cudaGraphLaunch`` call, and the holes between them are the graph's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from traceforge.analyzers import intervals as iv
from traceforge.analyzers.timeline import Timeline, busy_table, timeline
from traceforge.model import Trace

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
    "median_launch_delay_us",
    "verdict",
)
#: Columns of :attr:`LaunchReport.kernels`.
KERNEL_COLUMNS = ("name", "kind", "stream", "ts", "dur", "launch_name", "launch_delay_ns",
                  "launch_dur_ns", "replay", "op_name", "step")


@dataclass(frozen=True)
class LaunchReport:
    """:func:`launch_overhead`'s result.

    ``kernels``: per GPU activity: name, kind, stream, ts, dur, launch_name,
    launch_delay_ns (launch call start -> activity start; -1 inside a replay after its
    first node or without a launch call), launch_dur_ns, replay, op_name, step.
    ``steps``: per step (STEP_COLUMNS); ``busy_pct`` is the timeline's busy % and
    ``host_wait_pct`` divides by the same recorded window time.
    ``step_source``: where the steps came from.
    """

    kernels: pd.DataFrame
    steps: pd.DataFrame
    step_source: str = ""


def launch_overhead(
    trace: Trace, *, steps: Sequence[int] | None = None, bound_pct: float = 50.0
) -> LaunchReport:
    """Launch delay and cost per activity, and per step whether the GPU waited on the CPU.

    A step is "launch-bound" when its host wait exceeds ``bound_pct`` % of its recorded
    window. A kernel is "short" when it ran for less time than its launch call took on the
    CPU: the host cannot keep a stream of such kernels fed.
    """
    tl = timeline(trace)
    acts = tl.activity
    has = acts["launch_ts"].to_numpy() >= 0
    replay = acts["replay"].to_numpy()
    first_in_replay = ~acts.duplicated(["device", "replay"]).to_numpy() | (replay < 0)
    delay = np.where(has & first_in_replay, acts["ts"] - acts["launch_ts"], -1)
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
            "launch_dur_ns": ldur,
            "replay": replay,
            "op_name": acts["op_name"],
            "step": acts["step"],
        }
    )
    rows = [_step_row(tl, kern, int(cast(int, w.step)), bound_pct)
            for w in tl.select(steps).itertuples(index=False)]
    out = pd.DataFrame(rows, columns=list(STEP_COLUMNS))
    if steps is not None:
        kern = kern[kern["step"].isin(list(steps))]
    return LaunchReport(kern.reset_index(drop=True), out, tl.step_source)


def _step_row(tl: Timeline, kern: pd.DataFrame, step: int, bound_pct: float
              ) -> dict[str, object]:
    acts = tl.activity
    mine = (acts["step"].to_numpy() == step) if not tl.steps.empty else np.ones(len(acts), bool)
    a, k = acts[mine], kern[mine]
    sel = None if tl.steps.empty else [step]
    b = busy_table(tl, sel)
    w = tl.select(sel)
    lo, hi = int(w["ts"].iloc[0]), int(w["end"].iloc[-1])
    wait = sum(host_wait(tl, d, lo, hi) for d in tl.devices)
    window = int(b["window_ns"].iloc[-1]) if len(b) else hi - lo
    recorded = window - (int(b["unrecorded_ns"].iloc[-1]) if len(b) else 0)
    short = int(((k["launch_dur_ns"] > k["dur"]) & (k["replay"] < 0)).sum())
    d = k["launch_delay_ns"][k["launch_delay_ns"] >= 0]
    pct = 100.0 * wait / recorded if recorded else 0.0
    return {
        "step": step,
        "kernels": len(a),
        "launches": int(a.loc[a["launch_row"] >= 0, "launch_row"].nunique()),
        "graph_replays": int(a.loc[a["replay"] >= 0, "replay"].nunique()),
        "window_ns": window,
        "busy_ns": int(b["busy_ns"].iloc[-1]) if len(b) else 0,
        "busy_pct": float(b["busy_pct"].iloc[-1]) if len(b) else 0.0,
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


def host_wait(tl: Timeline, device: int, lo: int, hi: int) -> int:
    """Idle ns of ``device`` in ``[lo, hi)`` before activities whose launch call began
    after the idle stretch did: time the GPU waited for the CPU to issue work."""
    holes = iv.difference(iv.gaps(tl.busy(device), lo, hi), tl.unrecorded(device))
    if len(holes) == 0:
        return 0
    a = tl.activity[tl.activity["device"].to_numpy() == device]
    nxt = next_activity(a, holes[:, 1])
    lts = np.where(nxt >= 0, a["launch_ts"].to_numpy()[np.clip(nxt, 0, None)], -1)
    late = (nxt >= 0) & (lts >= holes[:, 0])
    return int((holes[late, 1] - holes[late, 0]).sum())


def next_activity(acts: pd.DataFrame, t: np.ndarray) -> np.ndarray:
    """Index (into ``acts``, sorted by ts) of the activity that starts at ``t`` -- the one
    that ends a gap at ``t`` -- or -1 when none does."""
    starts = acts["ts"].to_numpy()
    i = np.searchsorted(starts, t, side="left")
    ok = i < len(starts)
    ok[ok] &= starts[i[ok]] == t[ok]
    return np.where(ok, i, -1)
