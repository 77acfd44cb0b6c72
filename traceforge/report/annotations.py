"""What ``traceforge annotate`` draws on a trace, gathered from the analyzers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np
import pandas as pd

from traceforge.analyzers.communication.table import comm
from traceforge.analyzers.costs.roofline import kernel_rates, roofline
from traceforge.analyzers.critical_path import PathTrack, critical_path, path_tracks
from traceforge.analyzers.memory import series
from traceforge.analyzers.names.kernel_names import classify
from traceforge.analyzers.timeline import intervals as iv
from traceforge.analyzers.timeline.core import Timeline, timeline
from traceforge.analyzers.timing.idle import idle_gaps
from traceforge.analyzers.timing.kernels import top_kernels
from traceforge.errors import TraceforgeError
from traceforge.forks import beside
from traceforge.model import Trace, distinct

#: Counter columns of a measured join's ``per_launch`` put on kernel args (as ``ncu_<col>``).
COUNTER_ARGS = ("launch", "duration_ns", "dram_bytes", "flop", "sm_pct", "dram_pct",
                "tensor_pct", "occupancy_pct")


@dataclass(frozen=True)
class Annotations:
    """What ``traceforge annotate`` draws on a trace (times in ns since the trace start).

    ``gaps``: idle gaps (device, stream, step, ts, dur, cause, ...). ``windows``: the steps'
    GPU windows (step, ts, end; empty without steps). ``top``: full names of the top-N
    kernels, heaviest first. ``overlap``: state changes of the rank's communication: ts,
    overlapped (comm running under compute, 0/1), exposed (comm running alone, 0/1).
    ``kernel_classes``: full kernel name -> (class, family, detail). ``step_source``:
    where the steps came from. ``rates``: per GPU activity (indexed by event row) its
    roofline rates (:func:`~traceforge.analyzers.costs.roofline.kernel_rates`: achieved TFLOP/s
    and TB/s, bound, % of bound), the numbers ``traceforge roofline --by kernel`` sums.
    ``path``: each step's critical path on this trace as the slices drawn (touching pieces
    merged), and the hops between its tracks
    (:func:`~traceforge.analyzers.critical_path.path_tracks`). ``memory``:
    allocated and reserved bytes over time per device
    (:func:`~traceforge.analyzers.memory.series`; empty without memory events).
    ``notes``: what could not be drawn, and why.
    """

    rank: int
    gaps: pd.DataFrame
    windows: pd.DataFrame
    top: tuple[str, ...]
    overlap: pd.DataFrame
    kernel_classes: dict[str, tuple[str, str, str]]
    step_source: str = ""
    rates: pd.DataFrame = field(default_factory=pd.DataFrame)
    path: tuple[PathTrack, ...] = ()
    memory: pd.DataFrame = field(default_factory=pd.DataFrame)
    notes: tuple[str, ...] = ()
    #: Per collective kernel (indexed by event row): kind, msg_bytes, algbw_gbps,
    #: busbw_gbps (nccl-tests, on the kernel's own time) and pct_of_ceiling.
    comm: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: ``annotate --counters FILE``: per matched kernel (indexed by event row) its profiled
    #: launch's counters (:data:`COUNTER_ARGS`' columns).
    counters: pd.DataFrame = field(default_factory=pd.DataFrame)


def _indicator(sets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(times, 0/1 values) of a merged interval set: 1 at each start, 0 at each end."""
    if len(sets) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    t = np.column_stack([sets[:, 0], sets[:, 1]]).ravel()
    v = np.tile(np.array([1, 0], dtype=np.int64), len(sets))
    return t, v


def overlap_series(trace: Trace) -> pd.DataFrame:
    """Communication overlapped with / exposed from compute, as 0/1 steps over time."""
    tl = timeline(trace)
    if tl.activity.empty:
        empty: pd.DataFrame = pd.DataFrame({"ts": [0], "overlapped": [0], "exposed": [0]})
        return empty
    s = tl.sets()
    both, alone = iv.intersect(s.comm, s.compute), iv.difference(s.comm, s.compute)
    tb, vb = _indicator(both)
    ta, va = _indicator(alone)
    t = distinct(np.concatenate(([0], tb, ta)))

    # The value of an indicator at time x is the value of its last change at or before x.
    def at(times: np.ndarray, vals: np.ndarray) -> np.ndarray:
        if len(times) == 0:
            return np.zeros(len(t), np.int64)
        k = np.searchsorted(times, t, side="right") - 1
        return np.where(k >= 0, vals[np.clip(k, 0, None)], 0)

    out: pd.DataFrame = pd.DataFrame({"ts": t, "overlapped": at(tb, vb), "exposed": at(ta, va)})
    return out


def comm_args(trace: Trace) -> pd.DataFrame:
    """Each collective kernel's size and bandwidth on its own kernel time (one trace: no
    other rank to synchronize with), the numbers ``traceforge comm`` shows for one rank."""
    r = comm(trace)
    if r.run.instances.empty:
        none: pd.DataFrame = pd.DataFrame()
        return none
    inst = r.run.instances.set_index("instance")
    m = r.run.members
    i = inst.loc[m["instance"]]
    with np.errstate(divide="ignore", invalid="ignore"):
        algbw = np.where(m["kernel_ns"] > 0, i["bytes"].to_numpy() / m["kernel_ns"], np.nan)
        pct = 100 * m["busbw_kernel_gbps"].to_numpy() / i["ceiling_gbps"].to_numpy()
    out: pd.DataFrame = pd.DataFrame({
        "kind": i["kind"].to_numpy(), "msg_bytes": i["bytes"].to_numpy(),
        "algbw_gbps": algbw, "busbw_gbps": m["busbw_kernel_gbps"].to_numpy(),
        "pct_of_ceiling": pct}, index=m["row"].to_numpy())
    return out


def annotation_data(trace: Trace, *, top_n: int = 10, min_gap_ns: int = 1000,
                    meanwhile: Callable[[Annotations], object] | None = None) -> Annotations:
    """Everything ``annotate`` draws: idle gaps, step windows, top kernels, overlap, the
    kernels' roofline rates and every step's critical path (worked out beside the rest,
    on another core: :func:`traceforge.forks.beside`). ``meanwhile``: called with all but
    the path (``path`` empty, its note not yet among ``notes``) before the path is waited
    for, so that work needing no path (``annotate`` builds what it draws) runs while it is
    worked out."""
    tl = timeline(trace)
    if tl.activity.empty:
        return _annotations(trace, tl, top_n, min_gap_ns, lambda: (), meanwhile)
    with beside(partial(_path_of, trace), (TraceforgeError,)) as path_of:
        return _annotations(trace, tl, top_n, min_gap_ns, path_of, meanwhile)


def _path_of(trace: Trace) -> tuple[PathTrack, ...]:
    return tuple(path_tracks(critical_path(trace)))


def _annotations(trace: Trace, tl: Timeline, top_n: int, min_gap_ns: int,
                 path_of: Callable[[], tuple[PathTrack, ...]],
                 meanwhile: Callable[[Annotations], object] | None) -> Annotations:
    windows = tl.windows if not tl.steps.empty else tl.windows.iloc[0:0]
    gaps = idle_gaps(trace, min_gap_ns=min_gap_ns).gaps
    tk = top_kernels(trace, top_n)
    names = trace.kernels()["name"].astype(str).unique()
    classes = {n: (k.cls, k.family, k.detail) for n in names for k in (classify(n),)}
    notes: list[str] = []
    rates = pd.DataFrame()
    if not tl.activity.empty:
        try:
            rates = kernel_rates(roofline(trace))
        except TraceforgeError as e:
            notes.append(f"roofline rates not drawn: {e}")
    comm_of = comm_args(trace)
    overlap = overlap_series(trace)
    memory = series(trace)
    ann = Annotations(
        comm=comm_of,
        rank=0 if trace.meta.rank is None else int(trace.meta.rank),
        gaps=gaps.reset_index(drop=True),
        windows=windows[["step", "ts", "end"]].reset_index(drop=True),
        top=tuple(str(x) for x in tk.get("full_name", pd.Series([], dtype=object))),
        overlap=overlap,
        kernel_classes=classes,
        step_source=tl.step_source,
        rates=rates,
        memory=memory,
        notes=tuple(notes),
    )
    if meanwhile is not None:
        meanwhile(ann)
    try:
        return replace(ann, path=path_of())
    except TraceforgeError as e:
        return replace(ann, notes=(*notes, f"critical path not drawn: {e}"))
