"""GPU idle gaps, each with a cause and the host activity that explains it.

A gap is a hole in the busy time of a device (union of its streams) or of one stream,
inside a step's GPU window (see :func:`traceforge.analyzers.launch.step_windows`). Causes,
checked in this order:

* ``sync``: a blocking host call (device/stream/event synchronize, a synchronous copy) or a
  GPU-side sync row covers at least half of the gap: the pipeline was drained on purpose.
  ``cudaStreamWaitEvent`` does not block the host, so it is not a host sync here.
* ``host_bound``: the launch call of the activity that ends the gap began after the gap
  began (the CPU was late) and the host was running traced work meanwhile.
* ``launch_latency``: the launch call was issued before the gap began, yet the activity
  started late (queue / launch overhead).
* ``other``: nothing on the host explains it: the launch is not in the trace, the gap runs
  to the end of the window, or the host ran no traced op (data loading, untraced Python).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from traceforge.analyzers import intervals as iv
from traceforge.analyzers.launch import (
    SYNC_APIS,
    busy_set,
    gpu_activity,
    next_activity,
    step_windows,
)
from traceforge.model import Trace

CAUSES: tuple[str, ...] = ("host_bound", "launch_latency", "sync", "other")

#: Upper edges (us) of the gap-length histogram bins; the last bin is open.
HIST_EDGES_US: tuple[float, ...] = (1, 10, 100, 1_000, 10_000)

GAP_COLUMNS = (
    "device",
    "stream",
    "step",
    "ts",
    "dur",
    "cause",
    "next_name",
    "launch_name",
    "launch_ts",
    "cpu_op",
    "annotation",
)


@dataclass(frozen=True)
class IdleReport:
    """:func:`idle_gaps`'s result (times in ns unless the column says us).

    ``gaps``: one row per gap (columns GAP_COLUMNS; ``stream`` -1 for device-level gaps).
    ``summary``: per device/stream and cause: gaps, idle_ns, pct of span (span = the
    step windows' total), plus a ``busy`` row so that the rows of one level sum to 100 %.
    ``histogram``: gaps and idle_ns per length bin, per level.
    """

    gaps: pd.DataFrame
    summary: pd.DataFrame
    histogram: pd.DataFrame
    span_ns: int


def idle_gaps(
    trace: Trace,
    *,
    min_gap_ns: int = 0,
    per_stream: bool = False,
    steps: Sequence[int] | None = None,
) -> IdleReport:
    """Idle gaps of each device (and each stream when ``per_stream``) inside the steps.

    Gaps shorter than ``min_gap_ns`` still count in ``summary`` and ``histogram`` (with
    their cause) but are left out of ``gaps``, and only listed gaps get an attribution.
    """
    acts = gpu_activity(trace)
    if acts.empty:
        return _empty()
    win = step_windows(trace, acts, steps)
    host = _HostView(trace)
    parts: list[pd.DataFrame] = []
    for dev, a in acts.groupby("device", sort=True):
        a = a.reset_index(drop=True)
        parts.append(_level_gaps(a, win, host, int(cast(int, dev)), -1))
        if per_stream:
            for s, b in a.groupby("stream", sort=True):
                parts.append(
                    _level_gaps(
                        b.reset_index(drop=True), win, host, int(cast(int, dev)), int(cast(int, s))
                    )
                )
    gaps = pd.concat(parts, ignore_index=True)
    span = int((win["end"] - win["ts"]).sum())
    summary = _summary(gaps, span)
    hist = _histogram(gaps)
    shown = gaps[gaps["dur"] >= min_gap_ns].reset_index(drop=True)
    tid, mid = shown.pop("_tid").to_numpy(), shown.pop("_mid").to_numpy()
    shown["cpu_op"] = _innermost(host.ops, tid, mid)
    shown["annotation"] = _innermost(host.ann, tid, mid)
    return IdleReport(shown[list(GAP_COLUMNS)], summary, hist, span)


class _HostView:
    """Host-side sets and stacks the causes and attributions are looked up in."""

    def __init__(self, trace: Trace) -> None:
        ev = trace.events
        names = ev["name"].astype(str)
        kind = ev["kind"]
        is_step = names.str.startswith("ProfilerStep#")
        host = ev[kind.isin(("runtime", "driver"))]
        blocking = SYNC_APIS - {"cudaStreamWaitEvent", "hipStreamWaitEvent"}
        sync_host = host[host["name"].astype(str).isin(blocking)]
        sync_gpu = ev[kind == "sync"]
        self.sync = iv.merge(
            np.concatenate([sync_host["ts"], sync_gpu["ts"]]),
            np.concatenate([sync_host["ts"] + sync_host["dur"], sync_gpu["ts"] + sync_gpu["dur"]]),
        )
        work = ev[kind.isin(("cpu_op", "runtime", "driver", "python")) & ~is_step]
        self.work = iv.merge(work["ts"].to_numpy(), (work["ts"] + work["dur"]).to_numpy())
        self.ops = ev[(kind == "cpu_op") & ~is_step]
        self.ann = ev[(kind == "user_annotation") & ~is_step]
        counts = self.ops["tid"].value_counts()
        self.main_tid = int(counts.index[0]) if len(counts) else -1


def _level_gaps(
    a: pd.DataFrame, win: pd.DataFrame, host: _HostView, dev: int, stream: int
) -> pd.DataFrame:
    busy = busy_set(a)
    rows = []
    for w in win.itertuples(index=False):
        h = iv.gaps(busy, int(cast(int, w.ts)), int(cast(int, w.end)))
        if len(h):
            rows.append(
                pd.DataFrame({"step": int(cast(int, w.step)), "ts": h[:, 0], "end": h[:, 1]})
            )
    if not rows:
        return cast("pd.DataFrame", pd.DataFrame({c: [] for c in (*GAP_COLUMNS, "_tid", "_mid")}))
    g = pd.concat(rows, ignore_index=True)
    lo, hi = g["ts"].to_numpy(), g["end"].to_numpy()
    nxt = next_activity(a, hi)
    has = nxt >= 0
    j = np.clip(nxt, 0, None)
    lts = np.where(has, a["launch_ts"].to_numpy()[j], -1)
    ltid = np.where(has & (lts >= 0), a["launch_tid"].to_numpy()[j], host.main_tid)
    synced = _covered(host.sync, lo, hi) * 2 >= hi - lo
    # "Traced work" on the host during the part of the gap before the launch call.
    until = np.where(lts >= lo, np.minimum(lts, hi), hi)
    worked = _covered(host.work, lo, until) * 2 >= np.maximum(until - lo, 1)
    cause = np.select(
        [synced, (lts >= lo) & worked, (lts >= 0) & (lts < lo)],
        ["sync", "host_bound", "launch_latency"],
        default="other",
    )
    mid = lo + (hi - lo) // 2
    out: pd.DataFrame = pd.DataFrame(
        {
            "device": dev,
            "stream": stream,
            "step": g["step"],
            "ts": lo,
            "dur": hi - lo,
            "cause": cause,
            "next_name": np.where(has, a["name"].to_numpy()[j], ""),
            "launch_name": np.where(has, a["launch_name"].to_numpy()[j], ""),
            "launch_ts": lts,
            "_tid": ltid,
            "_mid": mid,
        }
    )
    return out


def _covered(s: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Time of set ``s`` inside each ``[lo, hi)``, vectorized by prefix sums."""
    if len(s) == 0:
        return np.zeros(len(lo), dtype=np.int64)
    cum = np.concatenate([[0], np.cumsum(s[:, 1] - s[:, 0])])

    def upto(x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(s[:, 0], x, side="right")  # intervals starting at or before x
        inside = np.where(
            i > 0, np.minimum(x, s[np.clip(i - 1, 0, None), 1]) - s[np.clip(i - 1, 0, None), 0], 0
        )
        return np.asarray(cum[np.clip(i - 1, 0, None)] * (i > 0) + np.maximum(inside, 0))

    return cast("np.ndarray", np.maximum(upto(hi) - upto(lo), 0))


def _innermost(rows: pd.DataFrame, tids: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Name of the shortest row on thread ``tids[i]`` covering time ``t[i]`` ("" if none).

    Host ranges of one thread nest, so the shortest covering range is the innermost.
    """
    out = np.full(len(t), "", dtype=object)
    if rows.empty or len(t) == 0:
        return out
    for tid in np.unique(tids):
        q = np.flatnonzero(tids == tid)
        r = rows[rows["tid"] == tid]
        if r.empty:
            continue
        r = r.sort_values("ts", kind="stable")
        ts, end = r["ts"].to_numpy(), (r["ts"] + r["dur"]).to_numpy()
        names = r["name"].astype(str).to_numpy()
        dur = end - ts
        longest = int(dur.max())
        for qi in q:
            k = np.searchsorted(ts, t[qi], side="right")
            k0 = np.searchsorted(ts, t[qi] - longest, side="left")
            # Only ranges starting in [t - longest, t] can cover t.
            cand = k0 + np.flatnonzero(end[k0:k] > t[qi])
            if len(cand):
                out[qi] = names[cand[np.argmin(dur[cand])]]
    return out


def _summary(gaps: pd.DataFrame, span: int) -> pd.DataFrame:
    rows = []
    for (dev, stream), g in gaps.groupby(["device", "stream"], sort=True):
        idle = 0
        for c in CAUSES:
            x = g[g["cause"] == c]
            ns = int(x["dur"].sum())
            idle += ns
            rows.append(
                {
                    "device": int(cast(int, dev)),
                    "stream": int(cast(int, stream)),
                    "cause": c,
                    "gaps": len(x),
                    "idle_ns": ns,
                    "pct": 100.0 * ns / span if span else 0.0,
                }
            )
        rows.append(
            {
                "device": int(cast(int, dev)),
                "stream": int(cast(int, stream)),
                "cause": "busy",
                "gaps": 0,
                "idle_ns": span - idle,
                "pct": 100.0 * (span - idle) / span if span else 0.0,
            }
        )
    return cast(
        "pd.DataFrame",
        pd.DataFrame(rows, columns=["device", "stream", "cause", "gaps", "idle_ns", "pct"]),
    )


def _histogram(gaps: pd.DataFrame) -> pd.DataFrame:
    edges = np.array(HIST_EDGES_US) * 1e3
    labels = (
        [f"<{HIST_EDGES_US[0]:g}us"]
        + [f"{a:g}-{b:g}us" for a, b in zip(HIST_EDGES_US[:-1], HIST_EDGES_US[1:], strict=True)]
        + [f">={HIST_EDGES_US[-1]:g}us"]
    )
    rows = []
    for (dev, stream), g in gaps.groupby(["device", "stream"], sort=True):
        b = np.searchsorted(edges, g["dur"].to_numpy(), side="right")
        for i, lab in enumerate(labels):
            sel = b == i
            rows.append(
                {
                    "device": int(cast(int, dev)),
                    "stream": int(cast(int, stream)),
                    "bin": lab,
                    "gaps": int(sel.sum()),
                    "idle_ns": int(g["dur"].to_numpy()[sel].sum()),
                }
            )
    return cast(
        "pd.DataFrame", pd.DataFrame(rows, columns=["device", "stream", "bin", "gaps", "idle_ns"])
    )


def _empty() -> IdleReport:
    return IdleReport(
        pd.DataFrame({c: [] for c in GAP_COLUMNS}),
        _summary(pd.DataFrame({c: [] for c in GAP_COLUMNS}), 0),
        _histogram(pd.DataFrame({c: [] for c in GAP_COLUMNS})),
        0,
    )
