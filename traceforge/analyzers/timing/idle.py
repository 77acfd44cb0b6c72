"""GPU idle gaps, each with a cause and the host activity that explains it.

A gap is a hole in the busy time (:mod:`traceforge.analyzers.timeline.core`) of a device (union
of its streams) or of one stream, inside the steps' GPU windows, outside the windows of
replays the profiler did not record. Causes, checked in this order:

* ``graph_internal``: the gap lies inside a CUDA/HIP graph replay: the GPU waited between
  two nodes of one graph (dependency resolution, launch of the next node). Fusing
  kernels or programmatic dependent launch shrinks it; the host cannot.
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

from traceforge.analyzers.profiling.notes import step_notes
from traceforge.analyzers.timeline import intervals as iv
from traceforge.analyzers.timeline.activity import BLOCKING_SYNC_APIS, STEP_MARKER_PREFIX
from traceforge.analyzers.timeline.core import Timeline, timeline
from traceforge.analyzers.timeline.stacks import innermost
from traceforge.analyzers.timeline.steps import window_index
from traceforge.analyzers.timing.launch import next_start
from traceforge.model import Tables, Trace, coded, distinct, name_mask

CAUSES: tuple[str, ...] = ("graph_internal", "host_bound", "launch_latency", "sync", "other")

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
SUMMARY_COLUMNS = ("device", "stream", "cause", "gaps", "idle_ns", "pct")


@dataclass(frozen=True)
class IdleReport(Tables):
    """:func:`idle_gaps`'s result (times in ns).

    ``gaps``: one row per listed gap (GAP_COLUMNS; ``stream`` -1 for device-level gaps).
    ``summary``: per device/stream and cause: gaps, idle_ns and ``pct`` of the recorded
    window time (window minus unrecorded replays), plus a ``busy`` row, so that the rows
    of one level sum to 100 % and ``busy`` equals the timeline's busy %; an
    ``unrecorded`` row (pct empty) when some replays were not recorded.
    ``histogram``: gaps and idle_ns per length bin, per level.
    ``span_ns``: the windows' total; ``step_source``: where the steps came from.
    """

    gaps: pd.DataFrame
    summary: pd.DataFrame
    histogram: pd.DataFrame
    span_ns: int
    step_source: str = ""
    notes: tuple[str, ...] = ()


def idle_gaps(
    trace: Trace,
    *,
    min_gap_ns: int = 0,
    per_stream: bool = False,
    steps: Sequence[int] | None = None,
    limit: int = 0,
) -> IdleReport:
    """Idle gaps of each device (and each stream when ``per_stream``) inside the steps.

    Gaps shorter than ``min_gap_ns`` still count in ``summary`` and ``histogram`` (with
    their cause) but are left out of ``gaps``, and only listed gaps get an attribution.
    ``limit`` > 0 lists only that many of the longest (the first on equal lengths), still
    in time order: looking up the ops around 80k gaps costs more than finding them.
    """
    tl = timeline(trace)
    if tl.activity.empty:
        return _empty(tl)
    win = tl.select(steps)
    host = _HostView(trace)
    parts: list[pd.DataFrame] = []
    unrec: dict[tuple[int, int], int] = {}
    wset = iv.merge(win["ts"].to_numpy(), win["end"].to_numpy())
    for dev in tl.devices:
        levels = [-1]
        if per_stream:
            a = tl.activity
            levels += sorted(int(s) for s in pd.unique(a.loc[a["device"] == dev, "stream"]))
        for s in levels:
            parts.append(_level_gaps(tl, win, host, dev, s))
            unrec[(dev, s)] = iv.total(iv.intersect(tl.unrecorded(dev), wset))
    gaps = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
    span = iv.total(wset)
    summary = _summary(gaps, span, unrec)
    hist = _histogram(gaps)
    dur = gaps["dur"].to_numpy(dtype=np.int64)
    keep = np.flatnonzero(dur >= min_gap_ns)
    if 0 < limit < len(keep):
        longest = np.argsort(-dur[keep], kind="stable")[:limit]
        keep = keep[np.sort(longest)]
    shown = gaps.take(keep).reset_index(drop=True)
    del gaps
    act = shown.pop("_act").to_numpy(dtype=np.int64)
    has, at = act >= 0, np.clip(act, 0, None)
    for col, src in (("next_name", "name"), ("launch_name", "launch_name")):
        shown[col] = _names(np.where(has, tl.activity[src].iloc[at].to_numpy(), ""))
    tid, mid = shown.pop("_tid").to_numpy(), shown.pop("_mid").to_numpy()
    shown["cpu_op"] = _names(host.ops.name_at(tid, mid))
    shown["annotation"] = _names(host.ann.name_at(tid, mid))
    return IdleReport(shown[list(GAP_COLUMNS)], summary, hist, span, tl.step_source,
                      (*tl.notes, *step_notes(trace)))


def _names(values: np.ndarray) -> pd.Series:
    out: pd.Series = pd.Series(values, dtype=object)
    return out


@dataclass(frozen=True)
class _Ranges:
    """Host ranges of one kind as plain arrays: thread, start, end, and the name as a
    code into ``labels`` (names are made strings only for the gaps that get one)."""

    tid: np.ndarray
    ts: np.ndarray
    end: np.ndarray
    code: np.ndarray
    labels: np.ndarray

    def name_at(self, tids: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Name of the innermost range on thread ``tids[i]`` covering ``t[i]`` ("" if none)."""
        if len(self.ts) == 0 or len(t) == 0:
            return np.full(len(t), "", dtype=object)
        hit = innermost(self.tid, self.ts, self.end, tids, t)
        return np.asarray(self.labels[np.where(hit >= 0, self.code[np.clip(hit, 0, None)],
                                               -1)])


class _HostView:
    """Host-side sets and stacks the causes and attributions are looked up in (numpy
    arrays taken once from the event columns, never whole-frame selections)."""

    def __init__(self, trace: Trace) -> None:
        ev = trace.events
        kind = ev["kind"]
        ts = ev["ts"].to_numpy()
        end = ts + ev["dur"].to_numpy()
        tid = ev["tid"].to_numpy()
        is_step = name_mask(ev["name"], "^" + STEP_MARKER_PREFIX)
        host = kind.isin(("runtime", "driver")).to_numpy()
        sync = (host & ev["name"].isin(BLOCKING_SYNC_APIS).to_numpy()) | \
            (kind == "sync").to_numpy()
        self.sync = iv.merge(ts[sync], end[sync])
        work = kind.isin(("cpu_op", "runtime", "driver", "python")).to_numpy() & ~is_step
        self.work = iv.merge(ts[work], end[work])
        code, labels = coded(ev["name"])

        def ranges(sel: np.ndarray) -> _Ranges:
            return _Ranges(tid[sel], ts[sel], end[sel], code[sel], labels)

        self.ops = ranges((kind == "cpu_op").to_numpy() & ~is_step)
        self.ann = ranges((kind == "user_annotation").to_numpy() & ~is_step)
        tids, counts = np.unique(self.ops.tid, return_counts=True)
        self.main_tid = int(tids[np.argmax(counts)]) if len(tids) else -1


#: Each cause once as an object: a gap's cause is a reference to it, not a string per gap.
_CAUSE_NAMES = np.array(CAUSES, dtype=object)
_CAUSE_CODE = {c: i for i, c in enumerate(CAUSES)}
#: What the summary, histogram and selection need of every gap; names are looked up only
#: for the gaps listed (``_act``: the row in the timeline's activity that ends the gap).
_LEAN_COLUMNS = ("device", "stream", "step", "ts", "dur", "cause", "launch_ts", "_tid",
                 "_mid", "_act")


def _level_gaps(tl: Timeline, win: pd.DataFrame, host: _HostView, dev: int, stream: int
                ) -> pd.DataFrame:
    """Every gap of one device (``stream`` -1) or stream: _LEAN_COLUMNS, a row per gap.
    Works on the activity's columns at the level's rows, never a copy of its frame (23
    columns of every kernel, copied per level)."""
    a = tl.activity
    sel = a["device"].to_numpy() == dev
    if stream >= 0:
        sel &= a["stream"].to_numpy() == stream
    rows = np.flatnonzero(sel)
    wset = iv.merge(win["ts"].to_numpy(), win["end"].to_numpy())
    holes = iv.difference(iv.intersect(iv.gaps(tl.busy(dev, stream), int(wset[0, 0]),
                                               int(wset[-1, 1])), wset),
                          tl.unrecorded(dev)) if len(wset) else iv.EMPTY
    if len(holes) == 0:
        return cast("pd.DataFrame", pd.DataFrame({c: [] for c in _LEAN_COLUMNS}))
    # A hole spanning two windows is two gaps, one per step.
    bounds = distinct(np.concatenate([win["ts"].to_numpy(), win["end"].to_numpy()]))
    holes = iv.split_at(holes, bounds)
    lo, hi = holes[:, 0], holes[:, 1]
    k = window_index(win, lo)
    step = np.where(k >= 0, win["step"].to_numpy()[np.clip(k, 0, None)], -2)
    nxt = next_start(a["ts"].to_numpy()[rows], hi)
    has = nxt >= 0
    j = rows[np.clip(nxt, 0, None)]
    lts = np.where(has, a["launch_ts"].to_numpy()[j], -1)
    ltid = np.where(has & (lts >= 0), a["launch_tid"].to_numpy()[j], host.main_tid)
    inside_graph = iv.covered(tl.in_graph(dev, stream), lo, hi) >= hi - lo
    synced = iv.covered(host.sync, lo, hi) * 2 >= hi - lo
    # "Traced work" on the host during the part of the gap before the launch call.
    until = np.where(lts >= lo, np.minimum(lts, hi), hi)
    worked = iv.covered(host.work, lo, until) * 2 >= np.maximum(until - lo, 1)
    code = np.select(
        [inside_graph, synced, (lts >= lo) & worked, (lts >= 0) & (lts < lo)],
        [_CAUSE_CODE[c] for c in ("graph_internal", "sync", "host_bound", "launch_latency")],
        default=_CAUSE_CODE["other"],
    )
    return cast("pd.DataFrame", pd.DataFrame({
        "device": np.full(len(lo), dev, dtype=np.int64),
        "stream": np.full(len(lo), stream, dtype=np.int64),
        "step": step,
        "ts": lo,
        "dur": hi - lo,
        "cause": pd.Series(_CAUSE_NAMES[code], dtype=object),
        "launch_ts": lts,
        "_tid": ltid,
        "_mid": lo + (hi - lo) // 2,
        "_act": np.where(has, j, -1),
    }))


def _summary(gaps: pd.DataFrame, span: int, unrec: dict[tuple[int, int], int]
             ) -> pd.DataFrame:
    rows = []
    devs, streams = gaps["device"].to_numpy(), gaps["stream"].to_numpy()
    causes, durs = gaps["cause"].to_numpy(), gaps["dur"].to_numpy()
    for (dev, stream), u in unrec.items():
        at = (devs == dev) & (streams == stream)
        cause, dur = causes[at], durs[at]
        recorded = span - u
        idle = 0

        def pct(ns: int, recorded: int = recorded) -> float:
            return 100.0 * ns / recorded if recorded else 0.0

        for c in CAUSES:
            x = cause == c
            ns = int(dur[x].sum())
            idle += ns
            rows.append((dev, stream, c, int(x.sum()), ns, pct(ns)))
        rows.append((dev, stream, "busy", 0, recorded - idle, pct(recorded - idle)))
        if u:
            rows.append((dev, stream, "unrecorded", 0, u, float("nan")))
    return cast("pd.DataFrame", pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS)))


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
            rows.append((int(cast(int, dev)), int(cast(int, stream)), lab, int(sel.sum()),
                         int(g["dur"].to_numpy()[sel].sum())))
    return cast("pd.DataFrame",
                pd.DataFrame(rows, columns=["device", "stream", "bin", "gaps", "idle_ns"]))


def _empty(tl: Timeline) -> IdleReport:
    return IdleReport(
        pd.DataFrame({c: [] for c in GAP_COLUMNS}),
        pd.DataFrame({c: [] for c in SUMMARY_COLUMNS}),
        _histogram(pd.DataFrame({c: [] for c in GAP_COLUMNS})),
        0,
        tl.step_source,
        tl.notes,
    )
