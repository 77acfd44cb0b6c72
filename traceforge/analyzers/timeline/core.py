"""The analysis timeline of one trace, computed once and shared by every analysis.

:func:`timeline` returns a :class:`Timeline`: the GPU activity table (launch call, op,
annotation, graph replay and step of every kernel/copy/memset), the steps and their GPU
windows, the graph replays and which of them the profiler did not fully record, and the
busy time of each device. It is memoized on the trace, so a report that runs ten
analyses builds it once. Every verb takes its numbers from here; the definitions:

* **Busy** = the union of recorded GPU activity (kernels, copies, memsets) on a device,
  always all of it.
  A CUDA/HIP graph replay is never counted busy end to end: the holes between its nodes
  are GPU bubbles (the reason people fuse kernels or use programmatic dependent launch),
  idle with cause ``graph_internal``.
* **Incomplete replays** (:func:`_replays`, the one home): under continuous replay the
  profiler can drop a replay's kernels (TraceLens#728), and its window can cut a replay.
  A graph launch with no recorded activity is ``unrecorded``; a replay with fewer recorded
  activities than another replay of the same ``graph`` id is ``partial``; without graph
  ids, one launched from the same site (thread, op, annotation) that recorded fewer is
  ``cut`` when it is the device's last replay (the profiler window ended inside it), else
  only ``varies`` -- one site can launch different graphs (torch.compile launches graphs
  of 1, 2 and 8 kernels from one op), so the site is a hint, never a reason to drop data.
  An unrecorded/partial/cut replay's window (from the end of the GPU work before it to the
  start of the work after it) *less the recorded activity in it* counts as neither busy
  nor idle; ``missing_ns`` estimates its unrecorded kernel time (the median span of the
  complete replays of its graph less its own span). A heuristic never removes recorded
  work: busy is always the whole union of recorded activity.
* **Window** = the steps' GPU windows (see :mod:`traceforge.analyzers.timeline.steps`).
* **Busy %** = busy / (window - unrecorded), per device; idle = window - unrecorded - busy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

import numpy as np
import pandas as pd

from traceforge.analyzers.timeline import intervals as iv
from traceforge.analyzers.timeline import steps as st
from traceforge.analyzers.timeline.activity import GRAPH_LAUNCH_APIS, gpu_activity, launch_calls
from traceforge.errors import AnalysisError
from traceforge.model import GPU_KINDS, Trace, coded, empty_frame
from traceforge.step_time import outliers

#: Columns of :attr:`Timeline.replays`.
REPLAY_COLUMNS = ("device", "replay", "launch_ts", "ts", "end", "activities", "expected",
                  "status", "gap_ts", "gap_end", "missing_ns")
#: Replay statuses whose window counts as neither busy nor idle (less recorded activity).
INCOMPLETE = ("unrecorded", "partial", "cut")
#: Columns of :func:`busy_table`.
BUSY_COLUMNS = ("device", "window_ns", "unrecorded_ns", "busy_ns", "idle_ns", "busy_pct")


@dataclass(frozen=True)
class Sets:
    """Interval sets of one trace: compute (non-communication kernels), communication
    kernels, memory (copies and memsets), their union, and the unrecorded windows."""

    compute: np.ndarray
    comm: np.ndarray
    memory: np.ndarray
    busy: np.ndarray
    unrecorded: np.ndarray


@dataclass(frozen=True, eq=False)
class Timeline:
    """What every analysis of one trace starts from (times in ns since the trace start).

    ``activity``: :func:`traceforge.analyzers.timeline.activity.gpu_activity` plus ``step``
    (:func:`traceforge.analyzers.timeline.steps.membership`), sorted by start.
    ``windows``: step, host_ts, host_end, ts, end: the GPU window of every step.
    ``steps``: the host step ranges and their source label.
    ``replays``: one row per graph replay and device: its recorded activities, the most
    any replay of the same graph recorded (``expected``), ``status`` complete / varies /
    partial / cut / unrecorded (see the module docstring), ``gap_ts``/``gap_end``, the
    window of an incomplete replay (-1 for others; its recorded activity stays busy), and
    ``missing_ns``, the estimated unrecorded kernel time (0 where none is missing).
    """

    activity: pd.DataFrame
    windows: pd.DataFrame
    steps: st.Steps
    replays: pd.DataFrame
    path: str = ""
    notes: tuple[str, ...] = ()
    _sets: dict[tuple[str, int, int], np.ndarray] = field(default_factory=dict, repr=False)
    _classes: dict[str, Sets] = field(default_factory=dict, repr=False)

    @property
    def step_source(self) -> str:
        """Where the steps came from, as printed in table titles and stored in JSON."""
        return self.steps.source

    @property
    def devices(self) -> list[int]:
        """Devices with GPU activity, ascending."""
        return sorted(int(d) for d in pd.unique(self.activity["device"]))

    # -- interval sets (memoized) -----------------------------------------------------------
    def _memo(self, key: tuple[str, int, int], make: Callable[[], np.ndarray]) -> np.ndarray:
        got = self._sets.get(key)
        if got is None:
            got = make()
            self._sets[key] = got
        return got

    def _acts(self, device: int, stream: int = -1) -> pd.DataFrame:
        a = self.activity
        sel = a["device"].to_numpy() == device
        if stream >= 0:
            sel &= a["stream"].to_numpy() == stream
        return cast("pd.DataFrame", a[sel])

    def recorded(self, device: int, stream: int = -1) -> np.ndarray:
        """Union of the recorded activity of a device (or of one of its streams)."""
        def make() -> np.ndarray:
            a = self._acts(device, stream)
            return iv.merge(a["ts"].to_numpy(), a["end"].to_numpy())
        return self._memo(("recorded", device, stream), make)

    def unrecorded(self, device: int) -> np.ndarray:
        """Windows of the device's incompletely recorded replays less the device's recorded
        activity: neither busy nor idle (recorded work is always busy)."""
        def make() -> np.ndarray:
            r = self.replays
            r = r[(r["device"] == device) & r["status"].isin(INCOMPLETE)]
            gaps = iv.merge(r["gap_ts"].to_numpy(), r["gap_end"].to_numpy())
            return iv.difference(gaps, self.recorded(device)) if len(gaps) else gaps
        return self._memo(("unrecorded", device, -1), make)

    def busy(self, device: int, stream: int = -1) -> np.ndarray:
        """Busy time of a device (or stream): the union of its recorded activity, all of it
        (unrecorded windows never hold recorded activity)."""
        return self.recorded(device, stream)

    def in_graph(self, device: int, stream: int = -1) -> np.ndarray:
        """The extents of the completely recorded graph replays on a device (or stream):
        a gap inside one is ``graph_internal``."""
        def make() -> np.ndarray:
            a = self._acts(device, stream)
            a = a[a["replay"] >= 0]
            r = self.replays
            complete = r.loc[(r["device"] == device) & ~r["status"].isin(INCOMPLETE), "replay"]
            a = a[a["replay"].isin(set(complete.tolist()))]
            ext = a.groupby("replay")[["ts", "end"]].agg({"ts": "min", "end": "max"})
            return iv.merge(ext["ts"].to_numpy(), ext["end"].to_numpy())
        return self._memo(("in_graph", device, stream), make)

    def sets(self) -> Sets:
        """Compute, communication and memory time of the whole trace (all devices), each
        a union of recorded kernels -- never of replay extents, and never less than them."""
        got = self._classes.get("sets")
        if got is None:
            a = self.activity
            u = [self.unrecorded(d) for d in self.devices] or [iv.EMPTY]
            unrec = iv.merge(np.concatenate([x[:, 0] for x in u]),
                             np.concatenate([x[:, 1] for x in u]))
            is_mem = a["kind"].isin(("memcpy", "memset")).to_numpy()
            is_comm = (a["cls"] == "communication").to_numpy() & ~is_mem

            def union(sel: np.ndarray) -> np.ndarray:
                x = a[sel]
                return iv.merge(x["ts"].to_numpy(), x["end"].to_numpy())

            comp, comm, mem = union(~is_mem & ~is_comm), union(is_comm), union(is_mem)
            got = Sets(comp, comm, mem, iv.union(iv.union(comp, comm), mem), unrec)
            self._classes["sets"] = got
        return got

    # -- steps ------------------------------------------------------------------------------
    def select(self, steps: Sequence[int] | None) -> pd.DataFrame:
        """The windows of the given step numbers (all when None); a step the trace does
        not have is an AnalysisError naming the steps it has."""
        return select_windows(self.windows, steps, self.path, self.step_source)

    def window_set(self, steps: Sequence[int] | None = None) -> np.ndarray:
        """The selected steps' GPU windows as one interval set."""
        w = self.select(steps)
        return iv.merge(w["ts"].to_numpy(), w["end"].to_numpy())

    def in_steps(self, steps: Sequence[int] | None = None) -> pd.DataFrame:
        """Activity that belongs to the selected steps (by membership, see
        :func:`traceforge.analyzers.timeline.steps.membership`); all of it when the trace has no
        steps and none are asked for."""
        a = self.activity
        if self.steps.empty:
            self.select(steps)  # raises for a step the trace does not have
            return a
        wanted = self.select(steps)["step"].tolist()
        return cast("pd.DataFrame", a[a["step"].isin(wanted)])


def select_windows(windows: pd.DataFrame, steps: Sequence[int] | None, path: str,
                   step_source: str) -> pd.DataFrame:
    """:meth:`Timeline.select` on a trace's step ``windows`` (kept apart from the timeline
    where only they are needed: a rank's stored graph keeps its own)."""
    if steps is None:
        return windows
    have = windows["step"].tolist()
    missing = sorted(set(steps) - set(have))
    if missing:
        listed = ", ".join(str(s) for s in have if s >= 0) or "none"
        raise AnalysisError(f"{path or 'trace'}: no step {missing[0]} "
                            f"(steps: {listed}; from {step_source})")
    return cast("pd.DataFrame", windows[windows["step"].isin(list(steps))])


def timeline(trace: Trace) -> Timeline:
    """The trace's :class:`Timeline`, built on first use and kept on the trace (and with a
    cached trace's derived tables, for the next process: ``Trace.derived``)."""
    return trace.derived("timeline", lambda: _build(trace))


def _build(trace: Trace) -> Timeline:
    steps = st.host_steps(trace)
    acts = gpu_activity(trace)
    lts, ts, end = (acts[c].to_numpy() for c in ("launch_ts", "ts", "end"))
    win = st.windows(steps, lts, ts, end)
    acts["step"] = st.membership(steps, win, lts, ts)
    replays = _replays(trace, acts)
    notes = _notes(replays)
    return Timeline(acts, win, steps, replays, trace.meta.path, notes)


def _replays(trace: Trace, acts: pd.DataFrame) -> pd.DataFrame:
    """Every graph replay per device, with how completely the profiler recorded it."""
    rep = acts[acts["replay"] >= 0]
    rows = pd.DataFrame(columns=list(REPLAY_COLUMNS))
    if not rep.empty:
        site_cols = ["launch_tid", "op_name", "annotation"]
        g = rep.groupby(["device", "replay"], sort=False)
        rows = g.agg(launch_ts=("launch_ts", "first"), ts=("ts", "min"), end=("end", "max"),
                     activities=("ts", "size"), graph=("graph", "max")).reset_index()
        site = g[site_cols].first().reset_index(drop=True)
        # Which replays are the same graph: its id when the trace has one, else the launch
        # site. Replays whose launch is not in the trace (profiling began mid-replay) are
        # compared with nothing: their missing kernels ran before the trace started.
        key = np.where(rows["graph"].to_numpy() >= 0,
                       "g" + rows["graph"].astype(str).to_numpy(),
                       "s" + site.astype(str).agg("|".join, axis=1).to_numpy())
        rows["key"] = key
        known = rows["launch_ts"].to_numpy() >= 0
        most = rows[known].groupby(["device", "key"])["activities"].max()
        exp = most.reindex(pd.MultiIndex.from_arrays([rows["device"], rows["key"]]))
        rows["expected"] = np.where(known, exp.fillna(0).to_numpy(), rows["activities"])
        fewer = rows["activities"].to_numpy() < rows["expected"].to_numpy()
        by_id = rows["graph"].to_numpy() >= 0
        # The device's last replay: the profiler window may have ended inside it.
        last = rows["end"].to_numpy() >= rows.groupby("device")["end"].transform("max").to_numpy()
        rows["status"] = np.select([fewer & by_id, fewer & last, fewer],
                                   ["partial", "cut", "varies"], "complete")
        span = (rows["end"] - rows["ts"]).where(rows["status"] == "complete")
        typical = span.groupby([rows["device"], rows["key"]]).transform("median")
        rows["missing_ns"] = np.where(rows["status"].isin(INCOMPLETE),
                                      (typical - (rows["end"] - rows["ts"])).clip(lower=0)
                                      .fillna(0).to_numpy(), 0)
        rows = rows.drop(columns=["graph", "key"])
    missing = _unreplayed(trace, acts)
    if len(missing):
        rows = pd.concat([rows, missing], ignore_index=True) if len(rows) else missing
    if rows.empty:
        return empty_frame({c: "object" if c == "status" else "int64" for c in REPLAY_COLUMNS})
    ints = ("device", "replay", "launch_ts", "ts", "end", "activities", "expected", "missing_ns")
    rows = rows.astype(dict.fromkeys(ints, np.int64))
    gap_ts, gap_end = _gaps_of_incomplete(acts, rows)
    rows["gap_ts"], rows["gap_end"] = gap_ts, gap_end
    out = rows[list(REPLAY_COLUMNS)].sort_values(["device", "ts"], kind="stable")
    return cast("pd.DataFrame", out.reset_index(drop=True))


def _unreplayed(trace: Trace, acts: pd.DataFrame) -> pd.DataFrame:
    """Graph launches whose replay left no activity in the trace (status unrecorded)."""
    if not np.isin(coded(trace.events["name"])[1], list(GRAPH_LAUNCH_APIS)).any():
        return cast("pd.DataFrame", pd.DataFrame(columns=list(REPLAY_COLUMNS)))  # no launches
    calls = launch_calls(trace.events)
    calls = calls[calls["launch_name"].isin(GRAPH_LAUNCH_APIS)]
    if calls.empty or acts.empty:
        return cast("pd.DataFrame", pd.DataFrame(columns=list(REPLAY_COLUMNS)))
    seen = pd.MultiIndex.from_arrays([acts["rank"], acts["corr"]])
    have = pd.MultiIndex.from_arrays([calls["rank"], calls["corr"]]).isin(seen)
    calls = calls[~have]
    if calls.empty:
        return cast("pd.DataFrame", pd.DataFrame(columns=list(REPLAY_COLUMNS)))
    # The device that ran it: that of the next activity the same thread launched.
    launched = acts[acts["launch_ts"] >= 0].sort_values("launch_ts", kind="stable")
    dev = np.full(len(calls), int(acts["device"].mode().iloc[0]), dtype=np.int64)
    if len(launched):
        i = np.searchsorted(launched["launch_ts"].to_numpy(), calls["launch_ts"].to_numpy())
        ok = i < len(launched)
        dev[ok] = launched["device"].to_numpy()[i[ok]]
    lts = calls["launch_ts"].to_numpy()
    out: pd.DataFrame = pd.DataFrame({"device": dev, "replay": calls["corr"].to_numpy(),
                                      "launch_ts": lts, "ts": lts, "end": lts, "activities": 0,
                                      "expected": 0, "status": "unrecorded", "missing_ns": 0})
    return out


def _gaps_of_incomplete(acts: pd.DataFrame, rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The window each incomplete replay is taken out of busy and idle time.

    From the end of the other GPU work before it (never before its launch call) to the
    start of the other work after it: the stretch in which its unrecorded kernels ran.
    Complete replays (and ``varies`` ones) get -1, -1.
    """
    gap_ts = np.full(len(rows), -1, dtype=np.int64)
    gap_end = np.full(len(rows), -1, dtype=np.int64)
    bad = np.flatnonzero(rows["status"].isin(INCOMPLETE).to_numpy())
    for i in bad:
        r = rows.iloc[i]
        d, rep = int(r["device"]), int(r["replay"])
        a = acts[(acts["device"].to_numpy() == d) & (acts["replay"].to_numpy() != rep)]
        other = iv.merge(a["ts"].to_numpy(), a["end"].to_numpy())
        lo, hi, lts = int(r["ts"]), int(r["end"]), int(r["launch_ts"])
        if len(other):
            # The other work's interval holding lo (the GPU was busy: the replay waited).
            k = np.searchsorted(other[:, 0], lo, side="right") - 1
            if k >= 0 and other[k, 1] > lo and r["status"] == "unrecorded":
                lo = hi = int(other[k, 1])
            before = other[other[:, 1] <= lo]
            start = int(before[-1, 1]) if len(before) else lo
            after = other[other[:, 0] >= hi]
            stop = int(after[0, 0]) if len(after) else hi
        else:
            start, stop = lo, hi
        if lts >= 0:
            start = max(start, min(lts, lo))
        gap_ts[i], gap_end[i] = start, max(stop, start)
    return gap_ts, gap_end


def _notes(replays: pd.DataFrame) -> tuple[str, ...]:
    out = []
    bad = replays[replays["status"].isin(INCOMPLETE)]
    if not bad.empty:
        ms = float((bad["gap_end"] - bad["gap_ts"]).sum()) / 1e6
        none = int((bad["status"] == "unrecorded").sum())
        cut = int((bad["status"] == "cut").sum())
        part = len(bad) - none - cut
        est = float(bad["missing_ns"].sum()) / 1e6
        out.append(f"{len(bad)} of {len(replays)} graph replays were not recorded in full "
                   f"({none} with no kernels, {part} with fewer than other replays of the "
                   f"same graph, {cut} cut by the end of the trace): their recorded kernels "
                   f"count as busy; the rest of their windows (at most {ms:,.3f} ms, "
                   f"about {est:,.3f} ms of kernels by the graph's complete replays) counts "
                   "as neither busy nor idle")
    varies = int((replays["status"] == "varies").sum())
    if varies:
        out.append(f"{varies} of {len(replays)} graph replays recorded fewer kernels than "
                   "others launched from the same site; without graph ids these may be "
                   "different graphs: all their kernels count, nothing is excluded")
    return tuple(out)


def busy_table(tl: Timeline, steps: Sequence[int] | None = None) -> pd.DataFrame:
    """Busy and idle time per device inside the selected steps' windows: the one busy %.

    ``busy_pct`` = busy / (window - unrecorded); a last row ``device == -1`` sums every
    device (its busy % divides the summed busy time by the summed windows).
    """
    win = tl.window_set(steps)
    w = iv.total(win)
    rows: list[tuple[int, ...]] = []
    for d in tl.devices:
        unrec = iv.total(iv.intersect(tl.unrecorded(d), win))
        busy = iv.total(iv.intersect(tl.busy(d), win))
        rows.append((d, w, unrec, busy))
    if len(rows) > 1:
        rows.append((-1, *(sum(r[k] for r in rows) for k in (1, 2, 3))))
    out = pd.DataFrame(rows, columns=["device", "window_ns", "unrecorded_ns", "busy_ns"])
    out["idle_ns"] = out["window_ns"] - out["unrecorded_ns"] - out["busy_ns"]
    denom = (out["window_ns"] - out["unrecorded_ns"]).to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out["busy_pct"] = np.where(denom > 0, 100.0 * out["busy_ns"] / denom, 0.0)
    return cast("pd.DataFrame", out[list(BUSY_COLUMNS)])


def busy_pct(tl: Timeline, steps: Sequence[int] | None = None) -> float | None:
    """The trace's GPU busy % (all devices), or None without GPU activity."""
    b = busy_table(tl, steps)
    if b.empty:
        return None
    return float(b["busy_pct"].iloc[-1])


def outlier_steps(tl: Timeline) -> list[int]:
    """The step numbers whose host step duration is an outlier among the trace's steps
    (:func:`traceforge.step_time.outliers`: more than k scaled MADs and 10 % from the
    median; the first recorded step, inflated by profiler start-up, is the usual one)."""
    r = tl.steps.ranges
    if len(r) < 3:
        return []
    flags = outliers((r["end"] - r["ts"]).astype(float).tolist())
    return [int(s) for s, bad in zip(r["step"], flags, strict=True) if bad]


def step_time_ns(tl: Timeline, include_outliers: bool = False) -> float | None:
    """The trace's step time: the mean duration of its host step ranges (wall time per
    iteration as the host saw it, profiled), outlier steps (:func:`outlier_steps`) left
    out unless ``include_outliers``; without steps, the GPU window from the first activity
    to the last. None without steps and without GPU activity."""
    r = tl.steps.ranges
    if len(r):
        if not include_outliers:
            bad = outlier_steps(tl)
            if bad and len(bad) < len(r):
                r = r[~r["step"].isin(bad)]
        return float((r["end"] - r["ts"]).mean())
    if tl.activity.empty:
        return None
    w = tl.windows
    return float((w["end"] - w["ts"]).sum())


def kernels_by_step(tl: Timeline) -> pd.Series:
    """Kernels (not copies or memsets) each step launched, graph-replayed kernels
    included where the profiler recorded them (step membership:
    :func:`traceforge.analyzers.timeline.steps.membership`), indexed by step; without steps, one
    entry (-1) for the whole trace."""
    a = tl.activity
    kern = a[a["kind"].to_numpy() == "kernel"]
    if tl.steps.empty:
        return pd.Series([len(kern)], index=[-1], dtype=np.int64)
    steps = tl.windows["step"].to_numpy()
    counts: pd.Series = kern.groupby("step").size().reindex(steps, fill_value=0)
    return counts.astype(np.int64)


def kernels_per_step(tl: Timeline, include_outliers: bool = False) -> int:
    """The run's kernels per step -- the one definition every verb shows: the median over
    its steps (outlier steps left out unless ``include_outliers``) of the kernels each
    step launched (:func:`kernels_by_step`), rounded to a whole kernel."""
    k = kernels_by_step(tl)
    if not include_outliers:
        bad = outlier_steps(tl)
        if bad and len(bad) < len(k):
            k = k[~k.index.isin(bad)]
    return int(round(float(k.median()))) if len(k) else 0


def kernels_per_step_of(trace: Trace, include_outliers: bool = False) -> int:
    """:func:`kernels_per_step` of a trace (``tf.kernels_per_step``)."""
    return kernels_per_step(timeline(trace), include_outliers)


def host_in_steps(trace: Trace, steps: Sequence[int] | None = None) -> np.ndarray:
    """Which event rows start inside a selected step's host range (all rows when the
    trace has no steps). The host half of :func:`select_steps`."""
    tl = timeline(trace)
    win = tl.select(steps)
    t = trace.events["ts"].to_numpy()
    if tl.steps.empty:
        return np.ones(len(t), dtype=bool)
    r = tl.steps.ranges
    r = r[r["step"].isin(win["step"].tolist())]
    if r.empty:
        return np.zeros(len(t), dtype=bool)
    k = np.searchsorted(r["ts"].to_numpy(), t, side="right") - 1
    return np.asarray((k >= 0) & (t < r["end"].to_numpy()[np.clip(k, 0, None)]))


def select_steps(trace: Trace, steps: Sequence[int] | None = None) -> Trace:
    """``trace`` with only the rows of the given steps (all steps when None).

    Host rows are kept when they start inside a selected step's host range; GPU rows
    when they belong to a selected step (:func:`traceforge.analyzers.timeline.steps.membership`:
    the step that launched them). A trace without steps is returned whole when ``steps``
    is None; asking it for a step is an AnalysisError.
    """
    tl = timeline(trace)
    if tl.steps.empty:
        tl.select(steps)
        return trace
    ev = trace.events
    keep = host_in_steps(trace, steps) & ~ev["kind"].isin(GPU_KINDS).to_numpy()
    # Activity rows are event labels, which stay those of the loaded file after a cut.
    keep[ev.index.get_indexer(pd.Index(tl.in_steps(steps)["row"]))] = True
    return replace(trace, events=ev[keep])
